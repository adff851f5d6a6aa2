import PushCore

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
    /// Only pushes sent with this APNs team's credentials (`scope=team:`).
    public var team: String?
    /// Only events of devices this says yes to (`scope=label:`: the token's device has the label).
    public var device: (@Sendable (UnsafeRawBufferPointer) -> Bool)?

    public init() {}

    static let allKinds: UInt8 = EmulatorEvent.Kind.allCases.reduce(0) { $0 | $1.bit }

    /// Adds `kind` to an explicit list (the first call replaces "all").
    public mutating func take(_ kind: EmulatorEvent.Kind, first: Bool) {
        kinds = (first ? 0 : kinds) | kind.bit
    }

    /// No condition but the kinds.
    var filtersOnlyKinds: Bool {
        provider == nil && token == nil && topic == nil && status == nil && environments.isEmpty && reasons.isEmpty && apps.isEmpty
            && team == nil && device == nil
    }

    /// Every event, of every kind: a reader takes the ring's frames as one span.
    var takesEverything: Bool { kinds == EventSelector.allKinds && filtersOnlyKinds }

    /// Whether the stream takes `e` (a publisher asks before it writes the event).
    @inline(__always)
    public func matches(_ e: EmulatorEvent) -> Bool {
        guard kinds & e.kind.bit != 0 else { return false }
        if filtersOnlyKinds { return true }
        var token = e.token
        var topic = e.topic
        var environment = e.environment
        var reason = e.reason
        var team = e.team
        return token.withUTF8 { tokenBytes in
            topic.withUTF8 { topicBytes in
                environment.withUTF8 { environmentBytes in
                    reason.withUTF8 { reasonBytes in
                        team.withUTF8 { teamBytes in
                            matches(
                                kindBit: e.kind.bit, provider: e.provider?.storedByte ?? 0xFF, status: e.status,
                                token: UnsafeRawBufferPointer(tokenBytes), topic: UnsafeRawBufferPointer(topicBytes),
                                environment: UnsafeRawBufferPointer(environmentBytes), reason: UnsafeRawBufferPointer(reasonBytes),
                                team: UnsafeRawBufferPointer(teamBytes))
                        }
                    }
                }
            }
        }
    }

    /// The same test on an event's fields as the ring keeps them (bytes; 0xFF: no provider).
    func matches(
        kindBit: UInt8, provider stored: UInt8, status code: Int, token t: UnsafeRawBufferPointer, topic tp: UnsafeRawBufferPointer,
        environment env: UnsafeRawBufferPointer, reason r: UnsafeRawBufferPointer, team tm: UnsafeRawBufferPointer
    ) -> Bool {
        guard kinds & kindBit != 0 else { return false }
        if let provider, provider.storedByte != stored { return false }
        if let token, !token.utf8.elementsEqual(t) { return false }
        if let topic, !topic.utf8.elementsEqual(tp) { return false }
        if let status, code != status { return false }
        if !environments.isEmpty, !environments.contains(where: { $0.utf8.elementsEqual(env) }) { return false }
        if !reasons.isEmpty, !reasons.contains(where: { $0.utf8.elementsEqual(r) }) { return false }
        if let team, !team.utf8.elementsEqual(tm) { return false }
        if let device, !device(t) { return false }
        if !apps.isEmpty {
            let app = AppTopic.bundle(ofTopic: tp)
            if !apps.contains(where: { $0.utf8.elementsEqual(app) }) { return false }
        }
        return true
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
