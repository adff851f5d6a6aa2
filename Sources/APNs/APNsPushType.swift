import Glibc
import PushCore
import Transport

/// `apns-push-type` values and their rules (SEND).
public enum APNsPushType: String, Sendable, CaseIterable {
    case alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets, controls

    /// From the header's bytes, without making a String or walking `allCases` (which allocates).
    public init?(bytes: ArraySlice<UInt8>) {
        guard let found = bytes.withUnsafeBytes({ APNsPushType(raw: $0) }) else { return nil }
        self = found
    }

    /// The same, from bytes where they lie.
    public init?(raw: UnsafeRawBufferPointer) {
        let found: APNsPushType? = {
            func named(_ s: StaticString) -> Bool {
                raw.count == s.utf8CodeUnitCount && sameBytes(raw.baseAddress!, s.utf8Start, raw.count)
            }
            switch raw.count {
            case 3: return named("mdm") ? .mdm : nil
            case 4: return named("voip") ? .voip : nil
            case 5: return named("alert") ? .alert : nil
            case 7: return named("widgets") ? .widgets : nil
            case 8: return named("location") ? .location : (named("controls") ? .controls : nil)
            case 10: return named("background") ? .background : (named("pushtotalk") ? .pushtotalk : nil)
            case 12:
                return named("complication")
                    ? .complication : (named("fileprovider") ? .fileprovider : (named("liveactivity") ? .liveactivity : nil))
            default: return nil
            }
        }()
        guard let found else { return nil }
        self = found
    }

    /// Every non-empty topic suffix (computed once).
    static let suffixes: [StaticString] = allCases.compactMap(\.staticSuffix).filter { $0.utf8CodeUnitCount > 0 }

    /// What `apns-topic` must end with, as bytes that need no String (nil: any topic).
    var staticSuffix: StaticString? {
        switch self {
        case .alert, .background: ""
        case .location: ".location-query"
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .mdm: nil
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// What `apns-topic` must end with: `<bundleId><suffix>` (nil: any topic, as for mdm).
    public var topicSuffix: String? { staticSuffix.map { $0.description } }

    /// Largest body: 5120 bytes for VoIP, 4096 otherwise.
    var maxPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// Only token-based connections may send these.
    var requiresTokenAuth: Bool { self == .liveactivity || self == .location }

    /// Length of the bundle id in `topic` (`<bundleId><suffix>`) for this push type, or nil when
    /// the topic lacks the suffix or its bundle part carries another type's suffix (so
    /// ".voip-ptt" is never read as ".voip" + "-ptt"). Bytes only: this runs per request.
    func bundleLength(ofTopic topic: ArraySlice<UInt8>) -> Int? {
        guard let suffix = staticSuffix else { return topic.count }
        return topic.withUnsafeBytes { raw -> Int? in
            // Whether the first `n` bytes end with `s` (and have something before it).
            func endsWith(_ n: Int, _ s: StaticString) -> Bool {
                let k = s.utf8CodeUnitCount
                return k > 0 && k < n && sameBytes(raw.baseAddress! + (n - k), s.utf8Start, k)
            }
            var n = raw.count
            if suffix.utf8CodeUnitCount > 0 {
                guard endsWith(n, suffix) else { return nil }
                n -= suffix.utf8CodeUnitCount
            }
            for s in APNsPushType.suffixes where endsWith(n, s) { return nil }
            return n
        }
    }

    /// The bundle id of a topic for this push type (see `bundleLength(ofTopic:)`).
    public func bundleID(fromTopic topic: String) -> String? {
        let bytes = ArraySlice(topic.utf8)
        return bundleLength(ofTopic: bytes).map { String(decoding: bytes.prefix($0), as: UTF8.self) }
    }
}

public enum APNsEnvironment: String, Sendable {
    case sandbox, production

    /// The environment a host name (optionally with ":port") stands for, or nil for other hosts.
    static func forHost(_ host: ArraySlice<UInt8>) -> APNsEnvironment? {
        host.withUnsafeBytes(forHost(raw:))
    }

    /// The same, from the host's bytes where they lie.
    static func forHost(raw: UnsafeRawBufferPointer) -> APNsEnvironment? {
        var n = raw.count
        // Drop a ":port" suffix (digits only, so a bracketed IPv6 literal is left alone).
        var i = n - 1
        while i >= 0 && raw[i] >= 0x30 && raw[i] <= 0x39 { i -= 1 }
        if i >= 0 && i < n - 1 && raw[i] == UInt8(ascii: ":") { n = i }
        while n > 0 && raw[n - 1] == UInt8(ascii: ".") { n -= 1 }
        let h = UnsafeRawBufferPointer(rebasing: raw[0..<n])
        // By length first: one comparison at most (an IP or localhost costs none).
        switch n {
        case 18: return h.equalsIgnoringCase("api.push.apple.com") ? .production : nil
        case 26: return h.equalsIgnoringCase("api.sandbox.push.apple.com") ? .sandbox : nil
        case 30: return h.equalsIgnoringCase("api.development.push.apple.com") ? .sandbox : nil
        case 28: return h.equalsIgnoringCase("api-broadcast.push.apple.com") ? .production : nil
        case 36: return h.equalsIgnoringCase("api-broadcast.sandbox.push.apple.com") ? .sandbox : nil
        case 35: return h.equalsIgnoringCase("api-manage-broadcast.push.apple.com") ? .production : nil
        case 43: return h.equalsIgnoringCase("api-manage-broadcast.sandbox.push.apple.com") ? .sandbox : nil
        default: return nil
        }
    }

    static func forHost(_ host: String) -> APNsEnvironment? { forHost(ArraySlice(host.utf8)) }

    /// Every APNs host name `forHost` knows (what the proxy intercepts).
    public static let hostNames = [
        "api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com", "api-broadcast.push.apple.com",
        "api-broadcast.sandbox.push.apple.com", "api-manage-broadcast.push.apple.com", "api-manage-broadcast.sandbox.push.apple.com",
    ]
}

public struct APNsConfiguration: Sendable {
    public enum AuthMode: String, Sendable { case lenient, strict }

    /// For hosts that name no environment (localhost, an IP, h2c).
    public var defaultEnvironment: APNsEnvironment = .sandbox
    /// lenient: a JWT whose `kid` is unknown is accepted unverified; strict: InvalidProviderToken.
    public var authMode: AuthMode = .lenient
    /// Payload problems become 400 BadPayload instead of warnings.
    public var strictPayload = false
    /// `--apns-broadcast-apps`: the apps with the Broadcast capability (nil: every app); the
    /// broadcast and channel APIs answer FeatureNotEnabled for the others.
    public var broadcastApps: Set<String>?
    /// `--apns-manage-ports`: the channel-management listeners and the environment each serves
    /// (2195 sandbox, 2196 production by default).
    public var managePorts: [Int: APNsEnvironment] = [:]
    /// Accepted device token lengths in hex characters.
    public var tokenLength: ClosedRange<Int> = 64...200
    /// SETTINGS_MAX_CONCURRENT_STREAMS before a valid token (token connections) and after.
    var streamsBeforeAuth: UInt32 = 1
    public var streamsAfterAuth: UInt32 = 1000
    /// Spelling of the wrong-environment key reason.
    public var badEnvironmentReason = "BadEnvironmentKeyIdInToken"
    /// Error budget per connection (BadDeviceToken weighs 5, other 4xx 1, 410 0); past it, GOAWAY.
    public var maxConnectionErrors = 500
    /// JWT rules (TOK).
    var tokenMaxAge: Int64 = 3600
    var tokenUpdateInterval: Int64 = 20 * 60
    /// Tolerated clock skew for an `iat` in the future.
    var clockSkew: Int64 = 60
    /// Serve HTTP/1.1 requests (`--apns-http1`, for poking with curl); else they get what Apple's
    /// servers give them: an HTTP/2 GOAWAY, and the connection closed.
    public var allowHTTP1 = false

    public init() {}

    public func reasonString(_ r: APNsReason) -> String {
        r == .badEnvironmentKeyIdInToken ? badEnvironmentReason : r.rawValue
    }
}
