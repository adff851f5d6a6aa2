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
    /// `boundTeam` as a push's subject carries it.
    var boundTeamID: TeamID?
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
    /// The payload scan, with its token buffer: after an accepted push's decision `scanner.tokens`
    /// holds that payload's tokens (until the connection's next request).
    public let scanner = APNsPayloadScanner()
    /// The last bundle id pushed to on this connection and its registry key.
    var lastBundle: [UInt8] = []
    var lastBundleKey = TokenKey([UInt8]())

    /// Whether `bundle` is `lastBundle`, compared where the array lies (reading the property
    /// into a caller retained it for the compare).
    @inline(__always)
    func isLastBundle(_ bundle: borrowing ArraySlice<UInt8>) -> Bool {
        lastBundle.withUnsafeBytes { last in bundle.withUnsafeBytes { sameBytes($0, last) } }
    }
    /// The last device token pushed to on this connection and its key.
    var tokenKeys = TokenKeyMemo()

    /// Response headers, reused across requests.
    var responseHeaders = HTTPFields()
    /// `apns-id` + `apns-unique-id` blocks, rewritten in place for each sandbox success. A ring:
    /// an answer that waits for its journal record (strict durability, until its loop's flush
    /// barrier) still holds its block, and rewriting that block would copy it (callgrind: one
    /// array copy, allocation and free per strict request). `sandboxSlot` picks the block.
    var sandboxSuccessHeaders: [HTTPFields] = []
    private var sandboxStamps: [Int64] = []
    private var sandboxLast = 0
    static let sandboxRingLimit = 32

    /// The ring slot for a sandbox success answered at `nowMs` (the loop's clock): the last one
    /// used, unless it was already taken in this millisecond (its answer may not have left);
    /// then the next one, growing the ring (up to `sandboxRingLimit`) when that one was too.
    /// A block still held elsewhere is only copied when rewritten, so the choice never matters
    /// for what is sent.
    func sandboxSlot(nowMs: Int64) -> Int {
        if sandboxSuccessHeaders.isEmpty {
            sandboxSuccessHeaders.append(HTTPFields())
            sandboxStamps.append(nowMs)
            return 0
        }
        var i = sandboxLast
        if sandboxStamps[i] == nowMs {
            i = (i + 1) % sandboxSuccessHeaders.count
            if sandboxStamps[i] == nowMs && sandboxSuccessHeaders.count < Self.sandboxRingLimit {
                sandboxSuccessHeaders.append(HTTPFields())
                sandboxStamps.append(nowMs)
                i = sandboxSuccessHeaders.count - 1
            }
        }
        sandboxLast = i
        sandboxStamps[i] = nowMs
        return i
    }

    public init() {
        responseHeaders.reserveCapacity(bytes: 160, fields: 4)
    }

    struct CertificateInfo {
        let environments: Set<APNsEnvironment>
        let topics: [String]
        let multiTopic: Bool
        let usable: Bool
        /// The subject's organisational unit: Apple puts the team id there.
        let team: TeamID?
    }
}
