import PushCore
import State

/// Fleet members' FCM topic subscriptions (`FleetTopics`): the shares a fleet's definition draws,
/// and the Instance ID API's changes to members the FCM registry holds no record of, kept as
/// member sets and logged as `memberTopics` records (one per fleet per call, its members'
/// indexes packed), never a record per member.
extension DeviceStore: FleetTopicDirectory {
    public func setMemberTopic(_ tokens: [String], topic: String, project: String?, subscribed: Bool, nowMs: Int64)
        -> [MemberTopicChange?]
    {
        var changed: [Int: [Int]] = [:]
        let out = tokens.map { token -> MemberTopicChange? in
            let bytes = Array(token.utf8)[...]
            guard let (ref, i) = member(bytes, platform: .android) else { return nil }
            if case .uninstalled = status(token: bytes, platform: .android) { return .notFound }
            if let project, let own = ref.spec.environment, own != project { return .senderMismatch }
            if ref.topics.set(topic, i, subscribed: subscribed) { changed[ref.spec.number, default: []].append(i) }
            return .ok
        }
        if changes.isLogging {
            for (fleet, indexes) in changed {
                changes.emit(
                    kind: Kind.memberTopics, atMs: nowMs,
                    DeviceStore.record(memberTopics: indexes.sorted(), fleet: fleet, topic: topic, subscribed: subscribed))
            }
        }
        return out
    }

    public func memberTopics(token: String) -> (project: String?, topics: [String], uninstalled: Bool)? {
        let bytes = Array(token.utf8)[...]
        guard let (ref, i) = member(bytes, platform: .android) else { return nil }
        var uninstalled = false
        if case .uninstalled = status(token: bytes, platform: .android) { uninstalled = true }
        return (ref.spec.environment, ref.topics.topics(of: i), uninstalled)
    }

    public func forEachSubscriber(
        topics wanted: Set<String>, project: String, matches: ((String) -> Bool) -> Bool, _ body: (String) -> Bool
    ) {
        applyAllDeferred() // every member's record looked up below: at once, not one lock each
        for ref in fleets.withLock({ $0.list }) where ref.spec.platform == .android {
            let f = ref.spec
            if let own = f.environment, own != project { continue }
            let names = ref.topics.topicNames
            // A condition true of no subscription at all (a negation) may select members of any
            // fleet with topics; otherwise only fleets that have one of its topics.
            guard !names.isEmpty, !names.isDisjoint(with: wanted) || matches({ _ in false }) else { continue }
            // The changes read once: members are then tested without a lock.
            let changed = ref.topics.changed
            let shares = names.sorted().map { ($0, ref.topics.shares[$0], changed.added[$0], changed.removed[$0]) }
            for i in 0..<f.count {
                let subscribedTo: (String) -> Bool = { topic in
                    guard let s = shares.first(where: { $0.0 == topic }) else { return false }
                    return FleetTopics.subscribed(topic, i, share: s.1, added: s.2, removed: s.3, seed: f.seed)
                }
                // As FCM: a device is a candidate when it holds at least one subscription.
                guard matches(subscribedTo), shares.contains(where: { subscribedTo($0.0) }), !f.startsUninstalled(i) else { continue }
                let token = codec.token(.android, fleet: f.tag, secret: f.secret, index: i)
                // A record (a deviation) says whether it is installed; without one the member is
                // as its fleet made it, and the delivery that follows is told so (no token check).
                let k = TokenKey(token)
                let sh = shard(k)
                if let record = sh.map.withLock({ m in m.index(forKey: k).map { m.values[$0].uninstalledAtMs != nil } }) {
                    if record { continue }
                } else {
                    sh.verified.withLock { $0 = Verified(key: k, ref: ref, index: i) }
                }
                guard body(token) else { return }
            }
        }
    }

    // MARK: state records

    /// A `memberTopics` record: members `indexes` (sorted) of fleet `fleet` subscribed to (or
    /// unsubscribed from) `topic`, packed as varint gaps.
    static func record(memberTopics indexes: [Int], fleet: Int, topic: String, subscribed: Bool) -> [UInt8] {
        var w = StateWriter(capacity: 48 + topic.utf8.count + indexes.count * 2)
        w.uint(1, UInt64(fleet))
        w.string(2, topic)
        w.bool(3, subscribed)
        w.packed(4, zip(indexes, [-1] + indexes).map { UInt64($0 - $1 - 1) })
        return w.bytes
    }

    func applyMemberTopics(_ body: UnsafeRawBufferPointer) throws {
        var r = StateReader(body)
        var fleet = 0
        var topic = ""
        var subscribed = true
        var packed: [UInt64] = []
        while let f = try r.next() {
            switch f {
            case 1: fleet = try r.int(in: 1...DeviceStore.maxFleets, unsigned: true)
            case 2: topic = try r.string()
            case 3: subscribed = try r.bool()
            case 4: packed = try r.packed()
            default: try r.skip()
            }
        }
        guard let ref = fleetRef(fleet), !topic.isEmpty else { throw StateFormatError("a memberTopics record names no fleet that exists") }
        var last = -1
        for gap in packed {
            guard gap < UInt64(ref.spec.count), last + 1 + Int(gap) < ref.spec.count else {
                throw StateFormatError("a memberTopics record names a member past its fleet")
            }
            last += 1 + Int(gap)
            _ = ref.topics.set(topic, last, subscribed: subscribed)
        }
    }

    /// Every fleet's subscription changes, a record per topic and kind per 65,536 members.
    func snapshotMemberTopics(_ emit: (ChangeRecord) -> Void) {
        for ref in fleets.withLock({ $0.list }) {
            let c = ref.topics.changed
            for (sets, subscribed) in [(c.added, true), (c.removed, false)] {
                for topic in sets.keys.sorted() {
                    var chunk: [Int] = []
                    func flush() {
                        guard !chunk.isEmpty else { return }
                        emit(
                            ChangeRecord(
                                store: stateName, kind: Kind.memberTopics,
                                body: DeviceStore.record(memberTopics: chunk, fleet: ref.spec.number, topic: topic, subscribed: subscribed))
                        )
                        chunk.removeAll(keepingCapacity: true)
                    }
                    sets[topic]!.forEachMember { i in
                        chunk.append(i)
                        if chunk.count == 65_536 { flush() }
                    }
                    flush()
                }
            }
        }
    }
}
