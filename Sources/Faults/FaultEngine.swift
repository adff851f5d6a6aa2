import Glibc
import Observation
import PushCore
import Runtime
import State
import Synchronization
import Transport

/// A cluster's counts of its counting rules (`first N`, `every N`), kept where every node sees
/// them (Redis). `next` is called on the rule's path only, and nil means the cluster cannot be
/// asked (the node counts alone meanwhile).
public protocol SharedRuleCounter: Sendable {
    /// Counts one more request the rule matched; the cluster's count, this one included.
    func next(seen rule: String) -> UInt64?
    /// Counts one more firing.
    func fired(_ rule: String)
    /// The cluster's counts, for the admin API.
    func counts(_ rule: String) -> (seen: UInt64, fired: UInt64)?
    /// A number for a new rule's or scenario's id (`kind` "fault" or "scenario") that no node
    /// has given, above `known` (the highest this node has seen); nil when the cluster cannot
    /// be asked.
    func nextID(_ kind: String, above known: Int) -> Int?
}

/// The fault rules in force, read on every request without a shared lock: each event loop keeps
/// its own snapshot of the (immutable) rule list and refreshes it only when the version moves.
public final class FaultEngine: PersistentStore, @unchecked Sendable {
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
    private let counterBox = FutexLock<(any SharedRuleCounter)?>(nil)
    /// One slot per event loop: (version, snapshot). Only that loop touches its slot.
    private let slots: UnsafeMutablePointer<(Int, FaultSnapshot)>
    /// The latest snapshot built, by whichever loop or the background builder, for the others.
    private let shared = FutexLock<(version: Int, snapshot: FaultSnapshot)>((0, FaultSnapshot([], nowMs: 0)))
    private let building = Atomic<Bool>(false)
    /// Snapshots of at most this many rules are built on the loop that needs one.
    let inlineRules: Int
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
        vocabulary: FaultVocabulary = .any, inlineRules: Int = 2_000
    ) {
        self.inlineRules = inlineRules
        self.scenarios = scenarios
        self.vocabulary = vocabulary
        slotCount = max(1, loops)
        slots = .allocate(capacity: slotCount + 1) // the last slot: callers off the loops (under the lock)
        slots.initialize(repeating: (0, FaultSnapshot([], nowMs: 0)), count: slotCount + 1)
        self.shaping = shaping
        self.allowOverrideHeader = allowOverrideHeader
    }

    deinit {
        slots.deinitialize(count: slotCount + 1)
        slots.deallocate()
    }

    // MARK: management

    /// At most this many rules (scenario steps included) are in force at once: each costs about
    /// 1 KB and a share of a rebuild (docs/faults.md).
    public static let maxRules = 100_000

    public struct TooManyRules: Error, CustomStringConvertible {
        public let description: String
    }

    /// Adds a rule (kept in the state log unless it is `persistent: false`).
    public func add(_ r: FaultRule) throws(TooManyRules) { try add([r]) }

    /// Adds rules, all or none: past `maxRules` in all, none is added.
    public func add(_ list: [FaultRule]) throws(TooManyRules) {
        let added = rules.withLock { all -> Bool in
            guard all.count + list.count <= FaultEngine.maxRules else { return false }
            for r in list {
                all.append(r)
                byID.withLock { $0[r.id] = r }
                if r.persistent, changes.isLogging { changes.emit(kind: Kind.rule, atMs: r.createdAtMs, FaultEngine.record(r)) }
            }
            return true
        }
        guard added else { throw FaultEngine.tooMany(adding: list.count) }
        version.add(1, ordering: .releasing)
    }

    static func tooMany(adding n: Int) -> TooManyRules {
        TooManyRules(
            description:
                "at most \(maxRules) fault rules (scenario steps included) are in force at once; \(n == 1 ? "this one was" : "these \(n) were") not added (DELETE /emulator/v1/faults/{id} or /emulator/v1/faults)"
        )
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
    func add(scenario s: Scenario, to registry: ScenarioRegistry) throws(TooManyRules) {
        let added = rules.withLock { list -> Bool in
            guard list.count + s.steps.count <= FaultEngine.maxRules else { return false }
            for step in s.steps {
                list.append(step.rule)
                byID.withLock { $0[step.rule.id] = step.rule }
                if changes.isLogging { changes.emit(kind: Kind.rule, atMs: step.rule.createdAtMs, FaultEngine.record(step.rule)) }
            }
            registry.list.withLock { $0.append(s) }
            if changes.isLogging { changes.emit(kind: Kind.scenario, atMs: s.startMs, FaultEngine.record(s)) }
            return true
        }
        guard added else { throw FaultEngine.tooMany(adding: s.steps.count) }
        version.add(1, ordering: .releasing)
    }

    /// A new rule's id: "fault-N", N from the cluster's counter on a cluster node (two nodes
    /// never make the same), else the next after the highest seen.
    public func newID() -> String {
        if let counter = sharedCounter, let n = counter.nextID("fault", above: nextID.load(ordering: .relaxed)) {
            noteID("fault-\(n)")
            return "fault-\(n)"
        }
        return "fault-\(nextID.add(1, ordering: .relaxed).newValue)"
    }

    /// A new scenario's id, as `newID`'s.
    public func newScenarioID() -> String {
        if let counter = sharedCounter, let n = counter.nextID("scenario", above: scenarios.next.load(ordering: .relaxed)) {
            scenarios.noteID("scenario-\(n)")
            return "scenario-\(n)"
        }
        return scenarios.newID()
    }

    @discardableResult
    public func remove(id: String) -> Bool {
        let removed = rules.withLock { r -> Bool in
            let n = r.count
            r.removeAll { $0.id == id }
            byID.withLock { _ = $0.removeValue(forKey: id) }
            if r.count != n, changes.isLogging { changes.emit(kind: Kind.ruleRemoved, atMs: Clock.nowMs()) { $0.string(1, id) } }
            return r.count != n
        }
        if removed {
            version.add(1, ordering: .releasing)
            pruneScenarios()
        }
        return removed
    }

    /// Scenarios keep only the steps whose rules are still here (none left: the scenario goes).
    func pruneScenarios() {
        let ids = byID.withLock { Set($0.keys) }
        scenarios.prune { ids.contains($0) }
    }

    /// Removes every rule (`DELETE /emulator/v1/faults`).
    public func removeAll() {
        rules.withLock { r in
            r.removeAll()
            byID.withLock { $0.removeAll() }
            if changes.isLogging { changes.emit(kind: Kind.rulesCleared, atMs: Clock.nowMs(), []) }
        }
        version.add(1, ordering: .releasing)
        pruneScenarios()
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

    /// The loop's snapshot of the rules. A change to the rules is taken at the loop's next
    /// request while building a snapshot is cheap (at most `inlineRules` rules, under a
    /// millisecond);
    /// past that, one background thread builds it for every loop and the loops keep their last
    /// one until it is ready (tens of milliseconds at 100,000 rules), so no loop stalls and a
    /// burst of changes costs one build at a time. A window about to open is built for a
    /// horizon ahead (`FaultSnapshot.windowHorizonMs`), so it opens on time either way.
    func snapshot(loop: Int, nowMs: Int64) -> FaultSnapshot {
        let v = version.load(ordering: .acquiring)
        let i = loop < slotCount ? loop : slotCount
        let (have, current) = slots[i]
        if have == v && nowMs < current.validUntilMs { return current }
        let (builtVersion, built) = shared.withLock { $0 }
        if builtVersion == v && nowMs < built.validUntilMs {
            if i < slotCount { slots[i] = (v, built) }
            return built
        }
        let list = rules.withLock { $0 }
        if i == slotCount || list.count <= inlineRules {
            let s = FaultSnapshot(list, nowMs: nowMs)
            shared.withLock { if $0.version <= v { $0 = (v, s) } }
            if i < slotCount { slots[i] = (v, s) }
            return s
        }
        buildInBackground(nowMs: nowMs)
        let newer = builtVersion > have ? built : current
        if i < slotCount { slots[i] = (max(builtVersion, have), newer) }
        return newer
    }

    /// Builds the latest rules' snapshot on a thread of its own (one at a time) for the loops.
    private func buildInBackground(nowMs: Int64) {
        guard building.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        let started = Clock.nowMs()
        let thread = Threads.spawn { [self] in
            while true {
                let v = version.load(ordering: .acquiring)
                // The requesting loop's clock, moved on by the time spent since.
                let s = FaultSnapshot(rules.withLock { $0 }, nowMs: nowMs &+ max(0, Clock.nowMs() - started))
                shared.withLock { if $0.version <= v { $0 = (v, s) } }
                building.store(false, ordering: .releasing)
                // A change made while building: build again, unless another thread took over.
                guard version.load(ordering: .acquiring) != v,
                    building.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
                else { return }
            }
        }
        pthread_detach(thread)
    }

    /// Whether any rule is in force for this loop (one atomic load when none changed).
    public func active(loop: Int, nowMs: Int64) -> Bool { snapshot(loop: loop, nowMs: nowMs).hasRules }

    /// The first rule (in the order they were added) that matches this request and whose
    /// selector fires (counted), if any. Only the rules the index finds for the request are
    /// tested, in rule order; a rule's `seen` counts requests up to the one a rule fires on.
    public func evaluate(_ c: FaultContext, loop: Int, nowMs: Int64) -> FaultRule? {
        let snap = snapshot(loop: loop, nowMs: nowMs)
        guard snap.hasRules else { return nil }
        let idx = snap.index[c.provider.index]
        var device: (fleet: String?, labels: [String])?
        var lists = CandidateLists()
        idx.candidates(c, device: &device) { lists.append($0) }
        if lists.isEmpty { return nil }
        var fired: FaultRule?
        lists.walk { i in
            let r = snap.rules[i]
            guard FaultEngine.conditionsHold(r, c, device: &device) else { return false }
            var n = r.seen.add(1, ordering: .relaxed).newValue
            // In a cluster, a counting rule's count is the cluster's (one atomic increment in
            // Redis, on this rule's path only; a `first N` rule past N stops asking).
            let counter = r.countsRequests ? sharedCounter : nil
            if let counter {
                if r.clusterExhausted.load(ordering: .relaxed) {
                    n = UInt64(max(0, r.match.first ?? 0)) + 1
                } else if let shared = counter.next(seen: r.clusterKey) {
                    n = shared
                    if let first = r.match.first, n > UInt64(max(0, first)) { r.clusterExhausted.store(true, ordering: .relaxed) }
                }
            }
            guard r.selects(n, nowMs: nowMs) else { return false }
            r.firedCount.add(1, ordering: .relaxed)
            if let counter { counter.fired(r.clusterKey) }
            if r.match.first != nil { keepCounts(r) }
            fired = r
            return true
        }
        return fired
    }

    /// A cluster's counts for counting rules (nil on a single node). Set once, before serving.
    public var sharedCounter: (any SharedRuleCounter)? {
        get { counterBox.withLock { $0 } }
        set { counterBox.withLock { $0 = newValue } }
    }

    /// A rule as `/emulator/v1/faults` shows it: in a cluster, a counting rule's counts are the cluster's.
    public func json(_ r: FaultRule) -> String {
        let c = counts(r)
        return r.json(seen: c.seen, fired: c.fired)
    }

    /// A rule's `seen` and `fired`: in a cluster, a counting rule's are the cluster's.
    public func counts(_ r: FaultRule) -> (seen: UInt64, fired: UInt64) {
        guard r.countsRequests, let counter = sharedCounter, let counts = counter.counts(r.clusterKey) else {
            return (r.seenCount, r.fired)
        }
        return counts
    }

    /// How many rules the index hands `evaluate` to test for this request (what a request
    /// costs beyond the lookups: the figures in docs/faults.md come from it).
    public func candidateCount(_ c: FaultContext, loop: Int, nowMs: Int64) -> Int {
        let snap = snapshot(loop: loop, nowMs: nowMs)
        var device: (fleet: String?, labels: [String])?
        var n = 0
        snap.index[c.provider.index].candidates(c, device: &device) { n += $0.count }
        return n
    }

    /// Whether every condition of `r` holds for the request (its index bucket held one).
    static func conditionsHold(_ r: FaultRule, _ c: FaultContext, device: inout (fleet: String?, labels: [String])?) -> Bool {
        if let route = r.match.route {
            guard c.route == route else { return false }
        } else if c.route.needsNaming, r.pathBytes == nil {
            return false
        }
        if let list = r.tokenList {
            let k = TokenKey(c.token)
            guard list.contains(where: { $0.a == k.a && $0.b == k.b }) else { return false }
        } else if let keys = r.tokenKeys {
            guard keys.contains(TokenKey(c.token)) else { return false }
        }
        if let t = r.topicBytes {
            guard let topic = c.topic, Bytes.equal(topic, t) else { return false }
        }
        if let p = r.project, c.project != p { return false }
        if let t = r.match.team, c.team?.text != t { return false }
        if let p = r.pathBytes {
            guard c.path.count >= p.count, Bytes.equal(c.path.prefix(p.count), p) else { return false }
        }
        for (n, v) in r.headerBytes {
            guard let got = c.headers.first(bytes: n), Bytes.equal(got, v) else { return false }
        }
        if r.needsDevice {
            if device == nil { device = c.device(c.token) }
            if let f = r.fleet, device?.fleet != f { return false }
            if let l = r.label, device?.labels.contains(l) != true { return false }
        }
        return true
    }

    /// Whether a TLS handshake starting now may proceed (false: a rule drops it).
    public func admitHandshake(loop: Int, nowMs: Int64) -> Bool {
        for r in snapshot(loop: loop, nowMs: nowMs).handshake {
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

extension FaultEngine: MetricsSource {
    /// The rules in force and how often they fired.
    public func writeMetrics(_ m: inout MetricsText) {
        let rules = all
        m.single("pushemu_fault_rules", "gauge", "Fault rules in force.", rules.count)
        m.single("pushemu_faults_fired_total", "counter", "Times fault rules fired.", rules.reduce(0) { $0 + $1.fired })
    }
}
