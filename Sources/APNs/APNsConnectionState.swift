import PushCore
import Transport

/// Everything APNs remembers about one connection. Lives in the connection's storage and is
/// touched only by the loop that owns the connection, so it needs no lock.
public final class APNsConnectionState {
    /// What a token was worth when it was checked (kept as plain fields so the per-request
    /// read copies nothing).
    struct TokenVerdict {
        var reason: APNsReason? // nil: valid
        var teamID = ""
        var keyID = ""
        var issuedAt: Int64 = 0
        var keyEnvironment: APNsEnvironment?
        var topics: [String]?
    }

    // Fast path: the last token fully accepted for an environment, and until when it stays good.
    var fastValid = false
    var fastEnvironment: APNsEnvironment = .sandbox
    var fastValidUntil: Int64 = 0
    var fastTopics: [String]?

    // Provider-token cache: the last authorization value seen and what it was worth.
    var tokenBytes: [UInt8] = []
    var verdict: TokenVerdict?
    /// The token the connection currently uses (a valid one), and since when.
    var adoptedToken: [UInt8] = []
    var adoptedAt: Int64 = 0
    var adoptedIssuedAt: Int64 = 0

    // Bindings made by the first authenticated push.
    var boundTeam: String?
    var boundKeyID: String?
    var boundTopicKey: Bool?
    var boundKeyEnvironment: APNsEnvironment?

    // Certificate auth, decided once per connection.
    var certificateChecked = false
    var certificate: CertificateInfo?

    /// Streams were raised after the first valid token.
    public internal(set) var authenticated = false
    var errorBudgetUsed = 0
    var wentAway = false

    public var rng = FastRandom()
    /// Scratch space for the payload scan, reused across requests: after an accepted push's
    /// decision it holds that payload's tokens (until the connection's next request).
    public let tokens = JSONTokenBuffer(capacity: 64)
    /// The last bundle id pushed to on this connection and its registry key.
    var lastBundle: [UInt8] = []
    var lastBundleKey = TokenKey([UInt8]())

    /// Response headers, reused across requests.
    var responseHeaders = HTTPFields()
    /// `apns-id` + `apns-unique-id`, rewritten in place for each sandbox success.
    var sandboxSuccessHeaders = HTTPFields()

    public init() {
        responseHeaders.reserveCapacity(bytes: 160, fields: 4)
    }

    struct CertificateInfo {
        let environments: Set<APNsEnvironment>
        let topics: [String]
        let multiTopic: Bool
        let usable: Bool
    }
}
