import PushCore
import State
import Synchronization
import Transport

/// The fault rules in force, read on every request without a shared lock: each event loop keeps
/// its own snapshot of the (immutable) rule list and refreshes it only when the version moves.
public final class FaultEngine: PersistentStore, @unchecked Sendable {
    /// The rules in force, indexed per provider: rules bound to specific tokens or a topic are
    /// found with one hash lookup each, so rules aimed at other devices cost nothing; the rest
    /// are checked in order.
    final class Snapshot: Sendable {
        final class Index: @unchecked Sendable { // written only while the snapshot is built
            var general: [Int] = []
            var byToken = KeyTable()
            var byTopic = KeyTable()
            /// Rules keyed by their first header condition: name -> (value -> rules).
            var byHeader: [(name: [UInt8], values: KeyTable)] = []
        }
        let rules: [FaultRule]
        /// One index per provider, at `PushProvider.index`.
        let index: [Index]
        let hasRules: Bool
        /// Rules acting on TLS handshakes, not requests.
        let handshake: [FaultRule]

        init(_ r: [FaultRule]) {
            rules = r
            handshake = r.filter { $0.effect.dropHandshake }
            hasRules = r.contains { !$0.effect.dropHandshake }
            let idx = (0..<PushProvider.capacity).map { _ in Index() }
            for (i, rule) in r.enumerated() where !rule.effect.dropHandshake {
                for p in 0..<PushProvider.capacity where rule.provider == nil || rule.provider?.index == p {
                    if let tokens = rule.match.tokens {
                        for t in tokens { idx[p].byToken.add(TokenKey(t), i) }
                    } else if let topic = rule.match.topic {
                        idx[p].byTopic.add(TokenKey(topic), i)
                    } else if let (name, value) = rule.headerBytes.first {
                        if let h = idx[p].byHeader.firstIndex(where: { $0.name == name }) {
                            idx[p].byHeader[h].values.add(TokenKey(value), i)
                        } else {
                            var t = KeyTable()
                            t.add(TokenKey(value), i)
                            idx[p].byHeader.append((name, t))
                        }
                    } else {
                        idx[p].general.append(i)
                    }
                }
            }
            index = idx
        }
    }

    public struct Shaping: Sendable {
        /// Latency added to every response, per provider index (a realistic service profile).
        public var latency: [DelayDistribution?] = Array(repeating: nil, count: PushProvider.capacity)
        public init() {}
    }

    private let rules = FutexLock<[FaultRule]>([])
    /// The same rules by id (kept with `rules`, under its lock: `withRules` rebuilds it), so
    /// applying a record finds its rule without a walk of the list.
    private let byID = FutexLock<[String: FaultRule]>([:])
    private let version = Atomic<Int>(1)
    private let nextID = Atomic<Int>(0)
    /// One slot per event loop: (version, snapshot). Only that loop touches its slot.
    private let slots: UnsafeMutablePointer<(Int, Snapshot)>
    private let slotCount: Int
    public let shaping: Shaping
    public let allowOverrideHeader: Bool
    /// The scenarios started (their steps are rules here).
    public let scenarios: ScenarioRegistry
    /// The answers rules may give (checked when a rule is made).
    public let vocabulary: FaultVocabulary
    public let stateName = "faults"
    public let changes = ChangeLink(store: "faults")

    public init(
        loops: Int, shaping: Shaping = Shaping(), allowOverrideHeader: Bool = false, scenarios: ScenarioRegistry = ScenarioRegistry(),
        vocabulary: FaultVocabulary = .any
    ) {
        self.scenarios = scenarios
        self.vocabulary = vocabulary
        slotCount = max(1, loops)
        slots = .allocate(capacity: slotCount + 1) // the last slot: callers off the loops (under the lock)
        slots.initialize(repeating: (0, Snapshot([])), count: slotCount + 1)
        self.shaping = shaping
        self.allowOverrideHeader = allowOverrideHeader
    }

    deinit {
        slots.deinitialize(count: slotCount + 1)
        slots.deallocate()
    }

    // MARK: management

    /// Adds a rule (kept in the state log unless it is `persistent: false`).
    public func add(_ r: FaultRule) {
        rules.withLock { list in
            list.append(r)
            byID.withLock { $0[r.id] = r }
            if r.persistent, changes.isLogging { changes.emit(kind: Kind.rule, atMs: r.createdAtMs, FaultEngine.record(r)) }
        }
        version.add(1, ordering: .releasing)
    }

    /// The rule with `id`, if any (one lookup).
    public func rule(id: String) -> FaultRule? { byID.withLock { $0[id] } }

    /// Rules made from the configuration at start: first in order (as they were when the state
    /// log's rules were made), never logged.
    public func addConfigured(_ list: [FaultRule]) {
        rules.withLock { all in
            let at = all.prefix { !$0.persistent }.count
            let made = list.map { $0.persistent ? $0.configured() : $0 }
            all.insert(contentsOf: made, at: at)
            byID.withLock { for r in made { $0[r.id] = r } }
        }
        version.add(1, ordering: .releasing)
    }

    /// Starts a scenario: its steps' rules, then the scenario, in the state log.
    func add(scenario s: Scenario, to registry: ScenarioRegistry) {
        rules.withLock { list in
            for step in s.steps {
                list.append(step.rule)
                byID.withLock { $0[step.rule.id] = step.rule }
                if changes.isLogging { changes.emit(kind: Kind.rule, atMs: step.rule.createdAtMs, FaultEngine.record(step.rule)) }
            }
            registry.list.withLock { $0.append(s) }
            if changes.isLogging { changes.emit(kind: Kind.scenario, atMs: s.startMs, FaultEngine.record(s)) }
        }
        version.add(1, ordering: .releasing)
    }

    public func newID() -> String { "fault-\(nextID.add(1, ordering: .relaxed).newValue)" }

    @discardableResult
    public func remove(id: String) -> Bool {
        let removed = rules.withLock { r -> Bool in
            let n = r.count
            r.removeAll { $0.id == id }
            byID.withLock { _ = $0.removeValue(forKey: id) }
            if r.count != n, changes.isLogging { changes.emit(kind: Kind.ruleRemoved, atMs: Clock.nowMs()) { $0.string(1, id) } }
            return r.count != n
        }
        if removed { version.add(1, ordering: .releasing) }
        return removed
    }

    /// Removes every rule (`DELETE /emulator/v1/faults`).
    public func removeAll() {
        rules.withLock { r in
            r.removeAll()
            byID.withLock { $0.removeAll() }
            if changes.isLogging { changes.emit(kind: Kind.rulesCleared, atMs: Clock.nowMs(), []) }
        }
        version.add(1, ordering: .releasing)
    }

    /// Rules ids made from now on follow `id` ("fault-N").
    func noteID(_ id: String) {
        guard id.hasPrefix("fault-"), let n = Int(id.dropFirst(6)) else { return }
        while true {
            let cur = nextID.load(ordering: .relaxed)
            if cur >= n || nextID.compareExchange(expected: cur, desired: n, ordering: .relaxed).exchanged { return }
        }
    }

    /// The rule list under its lock, for the state extension (the version bumped and the index
    /// by id made again after: applying records changes the list wholesale).
    func withRules<R>(_ body: (inout [FaultRule]) throws -> R) rethrows -> R {
        let r = try rules.withLock { list in
            let count = list.count
            let last = list.last
            let out = try body(&list)
            // One rule appended (a start's records, one by one): the index takes just it.
            if list.count == count + 1, list.count < 2 || list[list.count - 2] === last {
                byID.withLock { $0[list[list.count - 1].id] = list[list.count - 1] }
            } else {
                byID.withLock { m in
                    m.removeAll(keepingCapacity: true)
                    for rule in list { m[rule.id] = rule }
                }
            }
            return out
        }
        version.add(1, ordering: .releasing)
        return r
    }

    public var all: [FaultRule] { rules.withLock { $0 } }

    // MARK: the request path

    func snapshot(loop: Int) -> Snapshot {
        let v = version.load(ordering: .acquiring)
        let i = loop < slotCount ? loop : slotCount
        if slots[i].0 == v { return slots[i].1 }
        let s = Snapshot(rules.withLock { $0 })
        if i < slotCount { slots[i] = (v, s) }
        return s
    }

    /// Whether any rule is in force for this loop (one atomic load when none changed).
    public func active(loop: Int) -> Bool { snapshot(loop: loop).hasRules }

    /// The first rule (in the order they were added) that matches this request and whose
    /// selector fires (counted), if any.
    public func evaluate(_ c: FaultContext, loop: Int, nowMs: Int64) -> FaultRule? {
        let snap = snapshot(loop: loop)
        guard snap.hasRules else { return nil }
        let idx = snap.index[c.provider.index]
        var device: (fleet: String?, labels: [String])?
        // Rules whose conditions hold, in rule order (a small inline set: rules rarely overlap).
        var hits = FixedList()
        func consider(_ i: Int) {
            let r = snap.rules[i]
            if let route = r.match.route {
                guard c.route == route else { return }
            } else if c.route.needsNaming, r.pathBytes == nil {
                return
            }
            if let t = r.topicBytes {
                guard let topic = c.topic, Bytes.equal(topic, t) else { return }
            }
            if let p = r.project, c.project != p { return }
            if let p = r.pathBytes {
                guard c.path.count >= p.count, Bytes.equal(c.path.prefix(p.count), p) else { return }
            }
            for (n, v) in r.headerBytes {
                guard let got = c.headers.first(bytes: n), Bytes.equal(got, v) else { return }
            }
            if r.needsDevice {
                if device == nil { device = c.device(c.token) }
                if let f = r.fleet, device?.fleet != f { return }
                if let l = r.label, device?.labels.contains(l) != true { return }
            }
            hits.insert(i)
        }
        for i in idx.general { consider(i) }
        if !idx.byToken.isEmpty, let list = idx.byToken.find(TokenKey(c.token)) { for i in list { consider(i) } }
        if !idx.byTopic.isEmpty, let t = c.topic, let list = idx.byTopic.find(TokenKey(t)) { for i in list { consider(i) } }
        for h in 0..<idx.byHeader.count {
            if let v = c.headers.first(bytes: idx.byHeader[h].name), let list = idx.byHeader[h].values.find(TokenKey(v)) {
                for i in list { consider(i) }
            }
        }
        for i in hits.sorted() {
            let r = snap.rules[i]
            let n = r.seen.add(1, ordering: .relaxed).newValue
            if r.selects(n, nowMs: nowMs) {
                r.firedCount.add(1, ordering: .relaxed)
                if r.match.first != nil { keepCounts(r) }
                return r
            }
        }
        return nil
    }

    /// Whether a TLS handshake starting now may proceed (false: a rule drops it).
    public func admitHandshake(loop: Int, nowMs: Int64) -> Bool {
        for r in snapshot(loop: loop).handshake {
            let n = r.seen.add(1, ordering: .relaxed).newValue
            if r.selects(n, nowMs: nowMs) {
                r.firedCount.add(1, ordering: .relaxed)
                if r.match.first != nil { keepCounts(r) }
                return false
            }
        }
        return true
    }

    /// The per-request override (`x-pushemu-fault: status=503;reason=ServiceUnavailable;delay=200ms`),
    /// when `--allow-override-header` is on.
    public func override(_ headers: HTTPFields) -> FaultEffect? {
        guard allowOverrideHeader, let v = headers.firstString("x-pushemu-fault") else { return nil }
        return try? FaultParser.overrideEffect(v)
    }
}

/// A few rule indices without allocating (spills to an array past eight).
struct FixedList {
    var inline: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
    var count = 0
    var spill: [Int] = []

    mutating func insert(_ v: Int) {
        if count < 8 {
            withUnsafeMutableBytes(of: &inline) { $0.storeBytes(of: v, toByteOffset: count * MemoryLayout<Int>.stride, as: Int.self) }
        } else {
            spill.append(v)
        }
        count += 1
    }

    func sorted() -> [Int] {
        if count == 0 { return [] }
        var out = withUnsafeBytes(of: inline) { b in
            (0..<min(count, 8)).map { b.load(fromByteOffset: $0 * MemoryLayout<Int>.stride, as: Int.self) }
        }
        out += spill
        return Set(out).sorted()
    }
}

/// An open-addressing table from a 128-bit key to rule indices. The key is already a hash, so
/// a lookup is a mask and a compare (no general-purpose hasher on the request path).
struct KeyTable: Sendable {
    private var keys: [TokenKey?] = Array(repeating: nil, count: 8)
    private var values: [[Int]] = Array(repeating: [], count: 8)
    private(set) var count = 0
    var isEmpty: Bool { count == 0 }

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

    func find(_ k: TokenKey) -> [Int]? {
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
