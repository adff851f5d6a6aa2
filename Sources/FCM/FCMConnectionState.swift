import PushCore

/// What FCM remembers about one connection: validator scratch space and the last bearer token
/// checked. Owned by the connection's loop; no lock.
package final class FCMConnectionState {
    package let scratch = FCMScratch()
    var bearer: [UInt8] = []
    var bearerVerdict: FCMAccessTokens.Verdict = .foreign
    package var rng = FastRandom()
    package init() {}
}
