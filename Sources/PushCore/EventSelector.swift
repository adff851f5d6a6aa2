/// Which events a stream takes: all of its conditions must hold. Matching reads only the
/// event's fields, kinds first (one bit), so a stream that wants none of a push's events
/// costs the push path almost nothing (`EventBus.wants`).
public struct EventSelector: Sendable {
    /// One bit per `EmulatorEvent.Kind` (all by default).
    public var kinds: UInt8 = EventSelector.allKinds
    public var provider: PushProvider?
    public var token: String?
    public var topic: String?
    public var environments: [String] = []
    /// Apps as `apns-topic`s name them (`com.example.app.voip` is `com.example.app`'s).
    public var apps: [String] = []
    public var status: Int?
    public var reasons: [String] = []

    public init() {}

    public static let allKinds: UInt8 = EmulatorEvent.Kind.allCases.reduce(0) { $0 | $1.bit }

    /// Adds `kind` to an explicit list (the first call replaces "all").
    public mutating func take(_ kind: EmulatorEvent.Kind, first: Bool) {
        kinds = (first ? 0 : kinds) | kind.bit
    }

    @inline(__always)
    public func matches(_ e: EmulatorEvent) -> Bool {
        guard kinds & e.kind.bit != 0 else { return false }
        if let provider, e.provider != provider { return false }
        if let token, e.token != token { return false }
        if let topic, e.topic != topic { return false }
        if let status, e.status != status { return false }
        if !environments.isEmpty, !environments.contains(e.environment) { return false }
        if !reasons.isEmpty, !reasons.contains(e.reason) { return false }
        if !apps.isEmpty, !apps.contains(EventSelector.bundle(ofTopic: e.topic)) { return false }
        return true
    }

    /// The suffixes of an app's other `apns-topic`s.
    public static let topicSuffixes = [".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity", ".location-query"]

    /// The app an `apns-topic` names.
    public static func bundle(ofTopic topic: String) -> String {
        for s in topicSuffixes where topic.hasSuffix(s) { return String(topic.dropLast(s.count)) }
        return topic
    }
}

extension EmulatorEvent.Kind {
    @inline(__always)
    public var bit: UInt8 {
        switch self {
        case .accepted: 1
        case .rejected: 2
        case .delivered: 4
        case .tracking: 8
        case .fault: 16
        case .device: 32
        }
    }
}
