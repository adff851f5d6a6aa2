import PushCore

/// What FCM remembers about one connection: validator scratch space and the last bearer token
/// checked. Owned by the connection's loop; no lock.
public final class FCMConnectionState {
    public let scratch = FCMScratch()
    var bearer: [UInt8] = []
    var bearerVerdict: FCMAccessTokens.Verdict = .foreign
    public var rng = FastRandom()
    /// This connection's share of its project's send quota (no lock shared across loops per send).
    let quotaLease = FCMQuota.Lease()
    /// The last registration token sent to on this connection and its key.
    var tokenKeys = TokenKeyMemo()
    public init() {}
}
