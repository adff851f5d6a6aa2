/// `apns-push-type` values and their rules (SEND).
public enum APNsPushType: String, Sendable, CaseIterable {
    case alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets, controls

    public init?<C: Collection>(bytes: C) where C.Element == UInt8 {
        self.init(rawValue: String(decoding: bytes, as: UTF8.self))
    }

    /// What `apns-topic` must end with: `<bundleId><suffix>` (nil: any topic, as for mdm).
    public var topicSuffix: String? {
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

    /// Largest body: 5120 bytes for VoIP, 4096 otherwise.
    public var maxPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// Only token-based connections may send these.
    public var requiresTokenAuth: Bool { self == .liveactivity || self == .location }

    /// The bundle id of a topic for this push type, or nil when the topic lacks the suffix
    /// or carries another type's suffix.
    public func bundleID(fromTopic topic: String) -> String? {
        guard let suffix = topicSuffix else { return topic }
        if suffix.isEmpty {
            for other in APNsPushType.allCases {
                if let s = other.topicSuffix, !s.isEmpty, topic.hasSuffix(s) { return nil }
            }
            return topic
        }
        guard topic.hasSuffix(suffix), topic.count > suffix.count else { return nil }
        let base = String(topic.dropLast(suffix.count))
        // ".voip-ptt" must not be read as ".voip" + "-ptt" and so on: the base carries no other suffix.
        for other in APNsPushType.allCases {
            if let s = other.topicSuffix, !s.isEmpty, base.hasSuffix(s) { return nil }
        }
        return base
    }
}

public enum APNsEnvironment: String, Sendable {
    case sandbox, production

    /// The environment a host name stands for, or nil for other hosts.
    public static func forHost<C: Collection>(_ host: C) -> APNsEnvironment? where C.Element == UInt8 {
        var h = Array(host)
        // Drop a ":port" suffix (not the colons of a bracketed IPv6 literal).
        if let colon = h.lastIndex(of: UInt8(ascii: ":")), !h[colon...].contains(UInt8(ascii: "]")),
           h[(colon + 1)...].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            h = Array(h[..<colon])
        }
        while h.last == UInt8(ascii: ".") { h.removeLast() }
        let s = String(decoding: h, as: UTF8.self).lowercased()
        switch s {
        case "api.sandbox.push.apple.com", "api.development.push.apple.com": return .sandbox
        case "api.push.apple.com": return .production
        default: return nil
        }
    }
}

public struct APNsConfiguration: Sendable {
    public enum AuthMode: String, Sendable { case lenient, strict }

    /// For hosts that name no environment (localhost, an IP, h2c).
    public var defaultEnvironment: APNsEnvironment = .sandbox
    /// lenient: a JWT whose `kid` is unknown is accepted unverified; strict: InvalidProviderToken.
    public var authMode: AuthMode = .lenient
    /// Payload problems become 400 BadPayload instead of warnings.
    public var strictPayload = false
    /// Accepted device token lengths in hex characters.
    public var tokenLength: ClosedRange<Int> = 64...200
    /// SETTINGS_MAX_CONCURRENT_STREAMS before a valid token (token connections) and after.
    public var streamsBeforeAuth: UInt32 = 1
    public var streamsAfterAuth: UInt32 = 1000
    /// Spelling of the wrong-environment key reason.
    public var badEnvironmentReason = "BadEnvironmentKeyIdInToken"
    /// Error budget per connection (BadDeviceToken weighs 5, other 4xx 1, 410 0); past it, GOAWAY.
    public var maxConnectionErrors = 500
    /// JWT rules (TOK).
    public var tokenMaxAge: Int64 = 3600
    public var tokenUpdateInterval: Int64 = 20 * 60
    /// Tolerated clock skew for an `iat` in the future.
    public var clockSkew: Int64 = 60

    public init() {}

    public func reasonString(_ r: APNsReason) -> String {
        r == .badEnvironmentKeyIdInToken ? badEnvironmentReason : r.rawValue
    }
}
