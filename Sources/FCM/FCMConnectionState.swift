import PushCore

/// What FCM remembers about one connection: validator scratch space and the last bearer token
/// checked. Owned by the connection's loop; no lock.
public final class FCMConnectionState {
    public let scratch = FCMScratch()
    var bearer: [UInt8] = []
    var bearerVerdict: FCMAccessTokens.Verdict = .foreign
    /// The `authorization` header last allowed (`authorization`), the project it was allowed for
    /// (`bearerProject`) and until when (ms; 0: none was): a token valid with the messaging scope
    /// until it expires, a foreign one under `--fcm-auth lenient` for good. The next request's
    /// header is compared with it before it is parsed and the verdict copied (which retained its
    /// two strings).
    var bearerGoodUntilMs: Int64 = 0
    var bearerProject = ""
    var authorization: [UInt8] = []
    /// The last send path's project segment (kept only when it is a project id, not a number,
    /// which names its project through the accounts) and the project it names.
    var projectSegment: [UInt8] = []
    var project = ""
    public var rng = FastRandom()
    /// This connection's share of its project's send quota (no lock shared across loops per send).
    let quotaLease = FCMQuota.Lease()
    /// The last registration token sent to on this connection and its key.
    var tokenKeys = TokenKeyMemo()
    public init() {}

    /// Remembers that `header` is allowed for `project` until `untilMs`.
    func allow(_ header: ArraySlice<UInt8>, project: String, untilMs: Int64) {
        authorization.removeAll(keepingCapacity: true)
        authorization.append(contentsOf: header)
        bearerProject = project
        bearerGoodUntilMs = untilMs
    }
}
