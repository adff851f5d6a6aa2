import PushCore
import Runtime

/// Member indexes of one fleet, in pages of 16,384: a page holds its members' offsets sorted,
/// two bytes each, until a bitset (2 KiB, a bit a member) is smaller.
struct MemberSet: Sendable {
    static let pageBits = 14
    static let pageSize = 1 << pageBits
    /// Past this many offsets a page is a bitset.
    static let sparseLimit = pageSize / 16

    enum Page: Sendable {
        case sparse([UInt16])
        case dense([UInt64])
    }

    private(set) var pages: [Int: Page] = [:]
    private(set) var count = 0

    func contains(_ i: Int) -> Bool {
        guard let page = pages[i >> MemberSet.pageBits] else { return false }
        let o = i & (MemberSet.pageSize - 1)
        switch page {
        case .sparse(let list): return MemberSet.find(list, UInt16(o)).found
        case .dense(let words): return words[o >> 6] & (1 << UInt64(o & 63)) != 0
        }
    }

    static func find(_ list: [UInt16], _ v: UInt16) -> (found: Bool, at: Int) {
        var lo = 0
        var hi = list.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if list[mid] < v { lo = mid + 1 } else { hi = mid }
        }
        return (lo < list.count && list[lo] == v, lo)
    }

    /// Adds `i`; false when it was there.
    @discardableResult
    mutating func insert(_ i: Int) -> Bool {
        let p = i >> MemberSet.pageBits
        let o = i & (MemberSet.pageSize - 1)
        switch pages[p] {
        case nil:
            pages[p] = .sparse([UInt16(o)])
        case .sparse(var list):
            let (found, at) = MemberSet.find(list, UInt16(o))
            if found { return false }
            if list.count < MemberSet.sparseLimit {
                pages[p] = nil // unshared: the insert does not copy the list
                list.insert(UInt16(o), at: at)
                pages[p] = .sparse(list)
            } else {
                var words = [UInt64](repeating: 0, count: MemberSet.pageSize / 64)
                for v in list + [UInt16(o)] { words[Int(v) >> 6] |= 1 << UInt64(v & 63) }
                pages[p] = .dense(words)
            }
        case .dense(var words):
            if words[o >> 6] & (1 << UInt64(o & 63)) != 0 { return false }
            pages[p] = nil
            words[o >> 6] |= 1 << UInt64(o & 63)
            pages[p] = .dense(words)
        }
        count += 1
        return true
    }

    /// Removes `i`; false when it was not there.
    @discardableResult
    mutating func remove(_ i: Int) -> Bool {
        let p = i >> MemberSet.pageBits
        let o = i & (MemberSet.pageSize - 1)
        switch pages[p] {
        case nil: return false
        case .sparse(var list):
            let (found, at) = MemberSet.find(list, UInt16(o))
            guard found else { return false }
            pages[p] = nil
            list.remove(at: at)
            if !list.isEmpty { pages[p] = .sparse(list) }
        case .dense(var words):
            guard words[o >> 6] & (1 << UInt64(o & 63)) != 0 else { return false }
            pages[p] = nil
            words[o >> 6] &= ~(1 << UInt64(o & 63))
            pages[p] = .dense(words)
        }
        count -= 1
        return true
    }

    /// Each member, in index order.
    func forEachMember(_ body: (Int) -> Void) {
        for p in pages.keys.sorted() {
            let base = p << MemberSet.pageBits
            switch pages[p]! {
            case .sparse(let list): for o in list { body(base + Int(o)) }
            case .dense(let words):
                for (w, word) in words.enumerated() where word != 0 {
                    var bits = word
                    while bits != 0 {
                        body(base + w * 64 + bits.trailingZeroBitCount)
                        bits &= bits - 1
                    }
                }
            }
        }
    }

}

/// A fleet's FCM topic subscriptions, with no record per member: the shares its definition
/// draws from its seed (`"topics": {"news": 1.0, "sports": 0.3}`: every member of the first,
/// about three in ten of the second, the same ones in every run), and the members the Instance
/// ID API subscribed or unsubscribed since (`MemberSet`s). Thread-safety: its own lock.
final class FleetTopics: Sendable {
    /// The fleet definition's shares.
    let shares: [String: Double]
    let seed: UInt64
    private let changes = FutexLock(Changes())

    struct Changes {
        var added: [String: MemberSet] = [:]
        var removed: [String: MemberSet] = [:]
    }

    init(shares: [String: Double], seed: UInt64) {
        self.shares = shares
        self.seed = seed
    }

    /// The share's draw for member `index` (the same in every process).
    static func draws(_ share: Double, topic: String, seed: UInt64, index: Int) -> Bool {
        if share >= 1 { return true }
        if share <= 0 { return false }
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in topic.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        let x = FleetTokens.mix(seed ^ FleetTokens.mix(h) ^ FleetTokens.mix(UInt64(index) &+ 0x7470_6963))
        return Double(x >> 11) * (1.0 / 9_007_199_254_740_992.0) < share
    }

    /// Whether member `index` is subscribed to `topic`: added by the Instance ID API, or drawn
    /// by its share (`share`, nil: none) and not removed since.
    static func subscribed(
        _ topic: String, _ index: Int, share: Double?, added: MemberSet?, removed: MemberSet?, seed: UInt64
    ) -> Bool {
        if added?.contains(index) == true { return true }
        guard let share, draws(share, topic: topic, seed: seed, index: index) else { return false }
        return removed?.contains(index) != true
    }

    /// Subscribes (or unsubscribes) member `index`; false when it already was (or was not).
    func set(_ topic: String, _ index: Int, subscribed: Bool) -> Bool {
        let drawn = shares[topic].map { FleetTopics.draws($0, topic: topic, seed: seed, index: index) } ?? false
        return changes.withLock { c in
            let was = FleetTopics.subscribed(
                topic, index, share: shares[topic], added: c.added[topic], removed: c.removed[topic], seed: seed)
            guard was != subscribed else { return false }
            if subscribed {
                if drawn { c.removed[topic]?.remove(index) } else { c.added[topic, default: MemberSet()].insert(index) }
            } else {
                if drawn { c.removed[topic, default: MemberSet()].insert(index) } else { c.added[topic]?.remove(index) }
            }
            if c.added[topic]?.count == 0 { c.added[topic] = nil }
            if c.removed[topic]?.count == 0 { c.removed[topic] = nil }
            return true
        }
    }

    /// The topics member `index` is subscribed to, sorted.
    func topics(of index: Int) -> [String] {
        let c = changes.withLock { $0 }
        return Set(shares.keys).union(c.added.keys).filter {
            FleetTopics.subscribed($0, index, share: shares[$0], added: c.added[$0], removed: c.removed[$0], seed: seed)
        }.sorted()
    }

    /// Every topic some member may be subscribed to.
    var topicNames: Set<String> { changes.withLock { Set(shares.keys).union($0.added.keys) } }

    /// The subscriptions the Instance ID API changed: per topic, those added and removed.
    var changed: Changes { changes.withLock { $0 } }
}
