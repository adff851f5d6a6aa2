import PushCore
import Runtime

/// The rules in force as one loop reads them: immutable, rebuilt when the rules change (at most
/// as often as `FaultEngine.snapshot` allows) or when a rule's time window is about to open.
/// Each rule sits in one bucket of its provider's `FaultIndex`, under the most selective field
/// it matches on, so a request tests only the rules that can match it: rules aimed at other
/// tokens, topics, header values, paths, projects, fleets or labels cost one lookup per field
/// in use, whatever their number.
final class FaultSnapshot: Sendable {
    let rules: [FaultRule]
    /// One index per provider, at `PushProvider.index`.
    let index: [FaultIndex]
    /// Some request rule is in force now or will be (a window not yet open).
    let hasRules: Bool
    /// Rules acting on TLS handshakes, not requests.
    let handshake: [FaultRule]
    /// Valid until then: a rule whose window opens later is left out until a rebuild at most
    /// `windowHorizonMs` before it opens (`.max`: no window pending).
    let validUntilMs: Int64
    /// When it was built and what that took (the engine spaces rebuilds by their cost).
    let builtAtMs: Int64
    let buildNs: UInt64

    /// A rule whose window opens within this long of a build is indexed by it.
    static let windowHorizonMs: Int64 = 1000

    init(_ r: [FaultRule], nowMs: Int64) {
        let started = Clock.monotonicNanoseconds()
        rules = r
        handshake = r.filter { $0.effect.dropHandshake }
        var pending = false
        var nextOpen = Int64.max
        let idx = (0..<PushProvider.capacity).map { _ in FaultIndex() }
        for (i, rule) in r.enumerated() where !rule.effect.dropHandshake {
            // A window that has closed never opens again; one that opens later waits.
            if let closes = rule.windowClosesAtMs, closes <= nowMs { continue }
            pending = true
            if let opens = rule.windowOpensAtMs, opens > nowMs + FaultSnapshot.windowHorizonMs {
                nextOpen = min(nextOpen, opens - FaultSnapshot.windowHorizonMs)
                continue
            }
            for p in 0..<PushProvider.capacity where rule.provider == nil || rule.provider?.index == p { idx[p].add(rule, i) }
        }
        for i in idx { i.finish() }
        index = idx
        hasRules = pending
        validUntilMs = nextOpen == .max ? .max : max(nextOpen, nowMs + FaultSnapshot.windowHorizonMs)
        builtAtMs = nowMs
        buildNs = Clock.monotonicNanoseconds() &- started
    }
}

/// One provider's rules by the field each is found under.
final class FaultIndex: @unchecked Sendable { // written only while its snapshot is built
    /// Rules with none of the fields below: tested on every request of the provider.
    private(set) var general: [Int] = []
    private(set) var byToken = KeyTable()
    private(set) var byTopic = KeyTable()
    /// Rules keyed by their first header condition: name -> (value -> rules).
    private(set) var byHeader: [(name: [UInt8], values: KeyTable)] = []
    private(set) var byPath = PrefixIndex()
    private(set) var byProject = KeyTable()
    private(set) var byFleet = KeyTable()
    private(set) var byLabel = KeyTable()

    var needsDevice: Bool { !byFleet.isEmpty || !byLabel.isEmpty }

    func add(_ rule: FaultRule, _ i: Int) {
        if let tokens = rule.match.tokens {
            for t in tokens { byToken.add(TokenKey(t), i) }
        } else if let topic = rule.topicBytes {
            byTopic.add(TokenKey(topic), i)
        } else if let (name, value) = rule.headerBytes.first {
            if let h = byHeader.firstIndex(where: { $0.name == name }) {
                byHeader[h].values.add(TokenKey(value), i)
            } else {
                var t = KeyTable()
                t.add(TokenKey(value), i)
                byHeader.append((name, t))
            }
        } else if let path = rule.pathBytes {
            byPath.add(path, i)
        } else if let project = rule.project {
            byProject.add(TokenKey(project), i)
        } else if let fleet = rule.fleet {
            byFleet.add(TokenKey(fleet), i)
        } else if let label = rule.label {
            byLabel.add(TokenKey(label), i)
        } else {
            general.append(i)
        }
    }

    func finish() {
        byPath.finish()
        byToken.seal()
        byTopic.seal()
        for h in byHeader.indices { byHeader[h].values.seal() }
        byProject.seal()
        byFleet.seal()
        byLabel.seal()
    }

    /// Every list of rule indices (each ascending) that may hold rules matching `c`.
    func candidates(_ c: FaultContext, device: inout (fleet: String?, labels: [String])?, _ body: (ArraySlice<Int>) -> Void) {
        if !general.isEmpty { body(general[...]) }
        if !byToken.isEmpty, let list = byToken.find(TokenKey(c.token)) { body(list[...]) }
        if !byTopic.isEmpty, let t = c.topic, let list = byTopic.find(TokenKey(t)) { body(list[...]) }
        for h in 0..<byHeader.count {
            if let v = c.headers.first(bytes: byHeader[h].name), let list = byHeader[h].values.find(TokenKey(v)) { body(list[...]) }
        }
        if !byPath.isEmpty { byPath.forEachPrefix(of: c.path) { body($0[...]) } }
        if !byProject.isEmpty, let p = c.project, let list = byProject.find(TokenKey(p)) { body(list[...]) }
        if needsDevice {
            if device == nil { device = c.device(c.token) }
            if !byFleet.isEmpty, let f = device?.fleet, let list = byFleet.find(TokenKey(f)) { body(list[...]) }
            if !byLabel.isEmpty, let labels = device?.labels {
                for l in labels { if let list = byLabel.find(TokenKey(l)) { body(list[...]) } }
            }
        }
    }
}

/// Path prefixes and their rules: the prefixes of a request path that are in the set. With
/// few distinct prefix lengths (the usual case: `/3/device/` and a token), one hash lookup per
/// length. With many, a sorted list: the largest entry not above the path is either a prefix
/// of it (a match; the next candidates are its own shorter prefixes) or shares a shorter
/// common prefix with it (the search goes on from that), so each step shortens what is
/// searched for and a request costs a few binary searches whatever the number of rules.
struct PrefixIndex: Sendable {
    /// Past this many distinct lengths, the sorted list is used.
    static let maxHashedLengths = 8
    /// The prefixes added, in rule order, until `finish` indexes them (no hashing of byte
    /// arrays while a snapshot is built: 100,000 path rules index in milliseconds).
    private var building: [(prefix: [UInt8], rule: Int)] = []
    private var byLength: [(length: Int, table: KeyTable)] = []
    private var prefixes: [[UInt8]] = []
    private var lists: [[Int]] = []

    var isEmpty: Bool { byLength.isEmpty && prefixes.isEmpty && building.isEmpty }

    mutating func add(_ prefix: [UInt8], _ i: Int) { building.append((prefix, i)) }

    mutating func finish() {
        var perLength: [Int: Int] = [:]
        for b in building { perLength[b.prefix.count, default: 0] += 1 }
        if perLength.count <= PrefixIndex.maxHashedLengths {
            // One table per length, longest first; each prefix's rules in the order added.
            let lengths = perLength.keys.sorted(by: >)
            var tables = lengths.map { KeyTable(capacity: perLength[$0]!) }
            for b in building {
                let t = lengths.firstIndex(of: b.prefix.count)!
                tables[t].add(TokenKey(b.prefix), b.rule)
            }
            for t in tables.indices { tables[t].seal() }
            byLength = Array(zip(lengths, tables))
        } else {
            // Sorted by prefix, then by rule: equal prefixes are neighbours, their rules ascending.
            let sorted = building.sorted { x, y in
                x.prefix == y.prefix ? x.rule < y.rule : PrefixIndex.less(x.prefix[...], y.prefix[...])
            }
            for b in sorted {
                if let last = prefixes.last, last == b.prefix {
                    lists[lists.count - 1].append(b.rule)
                } else {
                    prefixes.append(b.prefix)
                    lists.append([b.rule])
                }
            }
        }
        building = []
    }

    /// Calls `body` with the rules of each prefix of `path` in the set, longest first (hashed
    /// by length, a case-folded key: the rule's own test compares the bytes).
    func forEachPrefix(of path: ArraySlice<UInt8>, _ body: ([Int]) -> Void) {
        if !byLength.isEmpty {
            for (length, table) in byLength where length <= path.count {
                if let list = table.find(TokenKey(path.prefix(length))) { body(list) }
            }
            return
        }
        var q = path
        while true {
            // The largest entry <= q.
            var lo = 0
            var hi = prefixes.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if PrefixIndex.less(q, prefixes[mid][...]) { hi = mid } else { lo = mid + 1 }
            }
            guard lo > 0 else { return }
            let e = prefixes[lo - 1]
            var common = 0
            let limit = min(e.count, q.count)
            while common < limit, e[common] == q[q.startIndex + common] { common += 1 }
            if common == e.count {
                body(lists[lo - 1])
                guard common > 0 else { return }
                q = q.prefix(common - 1)
            } else {
                q = q.prefix(common)
            }
        }
    }

    /// Byte-wise lexicographic order (a prefix sorts before what extends it).
    static func less(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
        let n = min(a.count, b.count)
        var i = 0
        while i < n {
            let x = a[a.startIndex + i]
            let y = b[b.startIndex + i]
            if x != y { return x < y }
            i += 1
        }
        return a.count < b.count
    }
}

/// An open-addressing table from a 128-bit key to rule indices. The key is already a hash, so
/// a lookup is a mask and a compare (no general-purpose hasher on the request path).
struct KeyTable: Sendable {
    private var keys: [TokenKey?]
    private var values: [[Int]]
    private(set) var count = 0
    var isEmpty: Bool { count == 0 }
    /// Past `filteredFrom` keys, a Bloom filter of them (two bits a key, 16 bits of filter a
    /// key, about 1.4% false positives) that fits a core's cache where the table does not: a
    /// request matching none of 100,000 rules costs a cache hit, not a miss to memory.
    private var filter: [UInt64] = []
    private var filterMask = 0
    static let filteredFrom = 1024

    /// A table with room for `capacity` keys before it grows.
    init(capacity: Int = 4) {
        var slots = 8
        while slots < capacity * 2 { slots *= 2 }
        keys = Array(repeating: nil, count: slots)
        values = Array(repeating: [], count: slots)
    }

    mutating func add(_ k: TokenKey, _ v: Int) {
        if (count + 1) * 2 > keys.count { grow() }
        var i = Int(truncatingIfNeeded: k.a) & (keys.count - 1)
        while let existing = keys[i] {
            if existing.a == k.a && existing.b == k.b {
                values[i].append(v)
                return
            }
            i = (i + 1) & (keys.count - 1)
        }
        keys[i] = k
        values[i] = [v]
        count += 1
    }

    /// Makes the filter (a table is sealed once its keys are all in; `add` after it is wrong).
    mutating func seal() {
        guard count >= KeyTable.filteredFrom else { return }
        var bits = 64
        while bits < count * 16 { bits *= 2 }
        filter = Array(repeating: 0, count: bits / 64)
        filterMask = bits - 1
        for k in keys { if let k { setBits(k) } }
    }

    /// The filter's two bits for `k`.
    @inline(__always) private func bits(_ k: TokenKey) -> (Int, Int) {
        (Int(truncatingIfNeeded: k.b) & filterMask, Int(truncatingIfNeeded: k.b >> 32 ^ k.a >> 40) & filterMask)
    }

    private mutating func setBits(_ k: TokenKey) {
        let (x, y) = bits(k)
        filter[x >> 6] |= 1 << UInt64(x & 63)
        filter[y >> 6] |= 1 << UInt64(y & 63)
    }

    func find(_ k: TokenKey) -> [Int]? {
        if filterMask != 0 {
            let (x, y) = bits(k)
            guard filter[x >> 6] & (1 << UInt64(x & 63)) != 0, filter[y >> 6] & (1 << UInt64(y & 63)) != 0 else { return nil }
        }
        var i = Int(truncatingIfNeeded: k.a) & (keys.count - 1)
        while let existing = keys[i] {
            if existing.a == k.a && existing.b == k.b { return values[i] }
            i = (i + 1) & (keys.count - 1)
        }
        return nil
    }

    private mutating func grow() {
        let old = zip(keys, values).compactMap { k, v in k.map { ($0, v) } }
        keys = Array(repeating: nil, count: keys.count * 2)
        values = Array(repeating: [], count: keys.count)
        count = 0
        for (k, vs) in old { for v in vs { add(k, v) } }
    }
}

/// Up to eight candidate lists without allocating (more spill to an array), read in rule order
/// by a merge: the first rule that matches and fires ends the walk.
struct CandidateLists {
    private var inline: (ArraySlice<Int>, ArraySlice<Int>, ArraySlice<Int>, ArraySlice<Int>) = ([], [], [], [])
    private var inlineCount = 0
    private var spill: [ArraySlice<Int>] = []

    var isEmpty: Bool { inlineCount == 0 }

    mutating func append(_ list: ArraySlice<Int>) {
        guard !list.isEmpty else { return }
        switch inlineCount {
        case 0: inline.0 = list
        case 1: inline.1 = list
        case 2: inline.2 = list
        case 3: inline.3 = list
        default: spill.append(list)
        }
        inlineCount += 1
    }

    /// Calls `body` with each rule index in ascending order (an index in two lists, once)
    /// until it returns true.
    mutating func walk(_ body: (Int) -> Bool) {
        if inlineCount == 1 {
            for i in inline.0 where body(i) { return }
            return
        }
        var lists = [inline.0, inline.1, inline.2, inline.3].prefix(min(inlineCount, 4)) + spill
        var last = -1
        while true {
            var best = -1
            var bestValue = Int.max
            for k in lists.indices {
                if let v = lists[k].first, v < bestValue {
                    bestValue = v
                    best = k
                }
            }
            guard best >= 0 else { return }
            lists[best] = lists[best].dropFirst()
            if bestValue == last { continue }
            last = bestValue
            if body(bestValue) { return }
        }
    }
}
