import Synchronization

/// The most recent accepted notifications, kept where tests can read them.
///
/// Sharded per event loop: a loop appends only to its own shard, whose lock is otherwise taken
/// only by readers (the admin API), so the request path never contends with another loop.
public final class NotificationLog: Sendable {
    public struct Filter: Sendable {
        public var provider: PushProvider?
        public var token: String?
        public var topic: String?
        public var limit: Int = 100
        public init() {}
    }

    private struct Ring {
        var items: [PushNotification?]
        var next = 0
        var sequence: UInt64 = 0
        var evicted: UInt64 = 0
    }

    private final class Shard: Sendable {
        let ring = Mutex(Ring(items: []))
    }

    private let shards: [Shard]
    private let perShard: Int

    public init(shards: Int, capacity: Int) {
        let n = max(1, shards)
        perShard = max(1, capacity / n)
        self.shards = (0..<n).map { _ in Shard() }
    }

    /// Appends on the caller's shard (its event loop index).
    public func append(_ n: PushNotification, shard: Int) {
        shards[shard % shards.count].ring.withLock { r in
            var n = n
            r.sequence &+= 1
            n.sequence = r.sequence
            if r.items.count < perShard {
                r.items.append(n)
            } else {
                if r.items[r.next] != nil { r.evicted &+= 1 }
                r.items[r.next] = n
                r.next = (r.next + 1) % perShard
            }
        }
    }

    /// Matching notifications, oldest first, at most `filter.limit` (the newest ones).
    public func query(_ filter: Filter) -> [PushNotification] {
        var out: [(Int, PushNotification)] = []
        for (i, s) in shards.enumerated() {
            s.ring.withLock { r in
                for case let n? in r.items where NotificationLog.matches(n, filter) { out.append((i, n)) }
            }
        }
        out.sort { ($0.1.receivedAtMs, $0.1.sequence, $0.0) < ($1.1.receivedAtMs, $1.1.sequence, $1.0) }
        return out.suffix(max(0, filter.limit)).map(\.1)
    }

    public var count: Int { shards.reduce(0) { acc, s in acc + s.ring.withLock { $0.items.count } } }
    public var evicted: UInt64 { shards.reduce(0) { acc, s in acc + s.ring.withLock { $0.evicted } } }

    public func removeAll() {
        for s in shards { s.ring.withLock { $0 = Ring(items: []) } }
    }

    static func matches(_ n: PushNotification, _ f: Filter) -> Bool {
        if let p = f.provider, n.provider != p { return false }
        if let t = f.token, !n.token.elementsEqual(t.utf8) { return false }
        if let t = f.topic {
            guard let topic = n.topic, topic.elementsEqual(t.utf8) else { return false }
        }
        return true
    }
}
