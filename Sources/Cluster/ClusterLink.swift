import CSystem
import Glibc
import PushCore
import Runtime
import State
import Synchronization

/// This node's link to the cluster: the change records made here go to a Redis Stream, and the
/// others' are applied here in the stream's order; the node announces itself with a heartbeat.
///
/// Keys, all under `pushemu:{CLUSTER}:` (the braces keep them in one Redis Cluster slot):
/// - `changes`: the stream; each entry `origin NODE rec BYTES` (a `ChangeRecord`'s wire form);
/// - `nodes`: a hash of node name to its URL;
/// - `node:NAME`: its heartbeat, a JSON object, expiring 3 s after the last;
/// - `snapshot`: the cluster's state through one stream entry (`ClusterSnapshot`), in chunks
///   `snapshot:GENERATION:N`, written by one node once the stream holds `compactAfter` entries;
///   the stream is then trimmed to what the healthy nodes still need, and a node that starts (or
///   finds the stream trimmed past what it applied) loads the snapshot, then the stream's tail.
///
/// Threads, none an event loop: the shipper (XADD, in the order the changes were made; it
/// retries while Redis is away, the node `degraded` meanwhile), the reader (XREAD BLOCK from
/// the last entry applied), the heartbeat (once a second). The push path never calls Redis:
/// a change reaches the push path of another node when that node applies its record.
public final class ClusterLink: @unchecked Sendable { // threads and connections are each one thread's; shared state is locked or atomic
    public struct Options: Sendable {
        public var url: RedisURL
        public var cluster: String
        public var node: String
        /// The URL peers and `/emulator/v1/cluster` name this node by.
        public var advertise: String
        /// Stream entries past which a node compacts the stream (`--cluster-compact-after`).
        public var compactAfter: Int

        public init(url: RedisURL, cluster: String, node: String, advertise: String, compactAfter: Int = 100_000) {
            self.url = url
            self.cluster = cluster
            self.node = node
            self.advertise = advertise
            self.compactAfter = compactAfter
        }
    }

    /// One node as `/emulator/v1/cluster` shows it.
    public struct NodeStatus: Sendable {
        public var name: String
        public var url: String
        public var healthy: Bool
        public var lagMs: Int64?
        public var ratePerSecond: Double?
        public var applied: Int64?
        public var degraded: Bool?
        public var isSelf: Bool
        /// Its demand for the shared quota in the last second (see `ClusterLink.init`'s `demand`).
        public var demandPerSecond: Int64 = 0
        /// Its part of the shared quota, as it last said.
        public var quotaShare: Double?
        /// The last stream entry it applied (the stream is never trimmed past it while it is healthy).
        public var appliedID: String?

        public init(
            name: String, url: String, healthy: Bool, lagMs: Int64?, ratePerSecond: Double?, applied: Int64?, degraded: Bool?,
            isSelf: Bool
        ) {
            self.name = name
            self.url = url
            self.healthy = healthy
            self.lagMs = lagMs
            self.ratePerSecond = ratePerSecond
            self.applied = applied
            self.degraded = degraded
            self.isSelf = isSelf
        }
    }

    public let options: Options
    /// The URL it announces (`options.advertise`, or the one it got at bind time).
    private let advertised: FutexLock<String>
    let apply: @Sendable (ChangeRecord) throws -> Void
    let rate: @Sendable () -> Double
    /// Calls its argument with every record of this node's state (to re-seed Redis, or to write
    /// the cluster's snapshot).
    let state: @Sendable ((ChangeRecord) -> Void) -> Void
    /// Empties this node's kept state before it loads the cluster's snapshot (the reset logged
    /// with the given origin, so it is not shipped).
    let resetState: @Sendable (String) -> Void
    /// The cluster's epoch as this node last read it: a Redis that lost it lost the stream.
    private let epoch = FutexLock<String?>(nil)
    /// When this node last re-seeded Redis, and with how many records.
    private let reseeded = FutexLock<(atMs: Int64, records: Int)?>(nil)
    var key: String { "pushemu:{\(options.cluster)}:" }

    /// Changes made here and not yet in the stream, oldest first (bounded: past it the node is
    /// degraded and refuses changes until they drain).
    static let maxQueue = 100_000
    let queue = FutexLock<[ChangeRecord]>([])
    let queued = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let redisUp = Atomic<Bool>(false)
    private let appliedCount = Atomic<Int64>(0)
    private let shippedCount = Atomic<Int64>(0)
    private let lastError = FutexLock<String?>(nil)
    /// The last stream entry applied here (or skipped: this node's own), and when it was made.
    let lastApplied = FutexLock<(id: String, atMs: Int64)>(("0-0", 0))
    private var threads: [pthread_t] = []
    /// Wakes the shipper when a change is queued (it sleeps on it, at most 100 ms at a time).
    private let wakeFD = csys_eventfd()

    deinit { if wakeFD >= 0 { close(wakeFD) } }

    /// `apply`: a record from another node, applied to this node's stores and kept in its log.
    /// `rate`: this node's pushes a second, for its heartbeat.
    /// `state`: every record of this node's state, for re-seeding a Redis that lost them.
    /// `demand`: this node's demand for a quota the cluster shares (a count that only grows);
    /// `share`: told every second this node's part of that quota, its demand's part of the
    /// healthy nodes' (each given a floor of 5% of the mean, so an idle node can start), but
    /// never more than the other healthy nodes leave (1 less the shares they last said): a share
    /// grows only into what others gave up, so the shares never add up to more than the quota
    /// (a node that joins starts small while the others still hold its part).
    public init(
        options: Options, apply: @escaping @Sendable (ChangeRecord) throws -> Void, rate: @escaping @Sendable () -> Double,
        state: @escaping @Sendable ((ChangeRecord) -> Void) -> Void, resetState: @escaping @Sendable (String) -> Void = { _ in },
        demand: @escaping @Sendable () -> Int = { 0 }, share: @escaping @Sendable (Double) -> Void = { _ in }
    ) {
        self.options = options
        self.advertised = FutexLock(options.advertise)
        self.apply = apply
        self.rate = rate
        self.state = state
        self.resetState = resetState
        self.demand = demand
        self.share = share
    }

    private let demand: @Sendable () -> Int
    private let share: @Sendable (Double) -> Void
    /// The demand count at the last heartbeat, and the demand a second it gave.
    private let lastDemand = FutexLock<(count: Int, ms: Int64, perSecond: Int64)>((0, 0, 0))

    /// This node's share: `(own + floor) / (sum + nodes × floor)` over the healthy nodes.
    static func share(own: Int64, all: [Int64]) -> Double {
        guard !all.isEmpty else { return 1 }
        let sum = all.reduce(0, +)
        let floor = max(1, Double(sum) * 0.05 / Double(all.count))
        return (Double(own) + floor) / (Double(sum) + Double(all.count) * floor)
    }

    /// Rebalances the shared quota from the nodes' heartbeats; returns the stream's length.
    @discardableResult
    private func rebalance(_ c: RedisConnection) throws(RedisError) -> Int {
        let all = try nodes(c)
        let healthy = all.nodes.filter(\.healthy)
        let own = lastDemand.withLock { $0.perSecond }
        let wanted = ClusterLink.share(own: own, all: healthy.map { $0.isSelf ? own : $0.demandPerSecond })
        let others = healthy.filter { !$0.isSelf }.reduce(0.0) { $0 + ($1.quotaShare ?? 0) }
        let part = max(0.01, min(wanted, 1 - others))
        lastShare.withLock { $0 = part }
        share(part)
        return Int(all.streamLength)
    }

    private let lastShare = FutexLock(0.0)
    /// A snapshot is being written by this node.
    let compacting = Atomic<Bool>(false)
    /// When this node last started one (monotonic ms; min: never).
    let lastCompactMs = Atomic<Int64>(.min / 2)
    let snapshotEvent = FutexLock<SnapshotEvent?>(nil)
    /// This node's part of the shared quota, as last rebalanced.
    public var quotaShare: Double { lastShare.withLock { $0 } }

    // MARK: what the node asks

    /// Whether changes made here reach the cluster: Redis answers and nothing waits too long.
    public var isDegraded: Bool { !redisUp.load(ordering: .relaxed) || queued.load(ordering: .relaxed) >= ClusterLink.maxQueue }

    /// Why, in words for a 503 and `/healthz`.
    public var degradedReason: String {
        if queued.load(ordering: .relaxed) >= ClusterLink.maxQueue { return "\(ClusterLink.maxQueue) changes wait for Redis" }
        return "Redis at \(options.url) is unreachable" + (lastError.withLock { $0 }.map { ": \($0)" } ?? "")
    }

    /// Queues a change made here for the stream (from `StateLog.shipChanges`).
    public func ship(_ record: ChangeRecord) {
        var r = record
        r.origin = options.node
        queue.withLock { $0.append(r) }
        queued.add(1, ordering: .relaxed)
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Announces `url` from the next heartbeat on (a node that learnt its port at bind time).
    public func advertise(_ url: String) {
        advertised.withLock { $0 = url }
        announceNow.store(true, ordering: .relaxed)
    }
    /// The heartbeat goes at once (the advertised URL changed).
    private let announceNow = Atomic<Bool>(false)

    /// The URL it announces.
    public var advertisedURL: String { advertised.withLock { $0 } }

    // MARK: starting and stopping

    /// Connects, applies the stream from its beginning (the changes the cluster made before this
    /// node joined; records are idempotent, so what this node already has is harmless), then
    /// starts the threads. Throws when Redis cannot be reached at all.
    public func start() throws(RedisError) {
        let c = RedisConnection(options.url)
        try c.connect()
        let pong = try c.call(["PING"])
        guard pong.text == "PONG" else { throw RedisError(description: "Redis at \(options.url) did not answer PING", fromRedis: true) }
        redisUp.store(true, ordering: .relaxed)
        try catchUp(c)
        try checkEpoch(c, joining: true)
        try settleAgreements(c)
        try heartbeat(c)
        try rebalance(c)
        stopping.store(false, ordering: .relaxed)
        threads = [
            Threads.spawn { [self] in runShipper() }, Threads.spawn { [self] in runReader() },
            Threads.spawn { [self] in runHeartbeat() },
        ]
    }

    /// Ships what is queued (for up to 2 s), then stops the threads and says goodbye.
    public func stop() {
        let deadline = monotonicMs() + 2_000
        while queued.load(ordering: .relaxed) > 0 && monotonicMs() < deadline && redisUp.load(ordering: .relaxed) { usleep(10_000) }
        stopping.store(true, ordering: .relaxed)
        for t in threads { pthread_join(t, nil) }
        threads = []
        let c = RedisConnection(options.url, timeoutMs: 500)
        _ = try? c.call(["DEL", key + "node:" + options.node])
    }

    // MARK: the threads

    private func runShipper() {
        let c = RedisConnection(options.url)
        while true {
            let batch = queue.withLock { q -> [ChangeRecord] in
                let b = Array(q.prefix(256))
                return b
            }
            if batch.isEmpty {
                if stopping.load(ordering: .relaxed) { return }
                var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 100)
                var drained: UInt64 = 0
                _ = read(wakeFD, &drained, 8)
                continue
            }
            var sent = 0
            for r in batch {
                do {
                    let reply = try c.call(bytes: [
                        Array("XADD".utf8), Array((key + "changes").utf8), Array("*".utf8), Array("origin".utf8),
                        Array(options.node.utf8), Array("rec".utf8), r.wire,
                    ])
                    if case .error(let e) = reply { throw RedisError(description: e, fromRedis: true) }
                    sent += 1
                } catch {
                    down(error)
                    break
                }
            }
            if sent > 0 {
                queue.withLock { $0.removeFirst(sent) }
                queued.subtract(sent, ordering: .relaxed)
                shippedCount.add(Int64(sent), ordering: .relaxed)
            }
            if sent < batch.count {
                if stopping.load(ordering: .relaxed) { return }
                usleep(200_000)
            }
        }
    }

    private func runReader() {
        let c = RedisConnection(options.url)
        var wasDown = false
        var nextCheck = monotonicMs() + 10_000
        while !stopping.load(ordering: .relaxed) {
            do {
                // Back from an outage (and every 10 s): the stream may have been compacted past
                // what this node applied (while it was not healthy, nobody waited for it).
                if wasDown || monotonicMs() >= nextCheck {
                    try catchUp(c)
                    wasDown = false
                    nextCheck = monotonicMs() + 10_000
                }
                let from = lastApplied.withLock { $0.id }
                let reply = try c.call(
                    ["XREAD", "COUNT", "512", "BLOCK", "500", "STREAMS", key + "changes", from], extraWaitMs: 500)
                if case .error(let e) = reply { throw RedisError(description: e, fromRedis: true) }
                up()
                for stream in reply.elements {
                    let entries = stream.elements.count > 1 ? stream.elements[1].elements : []
                    applyEntries(entries)
                }
            } catch {
                down(error)
                wasDown = true
                usleep(200_000)
            }
        }
    }

    private func runHeartbeat() {
        let c = RedisConnection(options.url, timeoutMs: 1_000)
        var next = monotonicMs()
        while !stopping.load(ordering: .relaxed) {
            if monotonicMs() >= next || announceNow.exchange(false, ordering: .relaxed) {
                do {
                    try checkEpoch(c, joining: false)
                    try heartbeat(c)
                    let length = try rebalance(c)
                    up()
                    // At most one compaction every 10 s from a node (the stream may stay long while a
                    // healthy node lags behind).
                    if length >= options.compactAfter, queued.load(ordering: .relaxed) == 0,
                        monotonicMs() >= lastCompactMs.load(ordering: .relaxed) + 10_000,
                        !compacting.exchange(true, ordering: .relaxed)
                    {
                        lastCompactMs.store(monotonicMs(), ordering: .relaxed)
                        // On its own thread: writing the snapshot must not delay the heartbeat.
                        let t = Threads.spawn { [self] in
                            compact()
                            compacting.store(false, ordering: .relaxed)
                        }
                        pthread_detach(t)
                    }
                } catch {
                    down(error)
                }
                next = monotonicMs() + 1_000
            }
            usleep(50_000)
        }
    }

    // MARK: the stream

    /// Applies stream entries in order, skipping this node's own.
    private func applyEntries(_ entries: [RESPValue]) {
        for e in entries {
            let parts = e.elements
            guard parts.count == 2, let id = parts[0].text else { continue }
            let fields = parts[1].elements
            var origin = ""
            var rec: [UInt8]?
            var i = 0
            while i + 1 < fields.count {
                switch fields[i].text {
                case "origin": origin = fields[i + 1].text ?? ""
                case "rec": if case .bulk(let b?) = fields[i + 1] { rec = b }
                default: break
                }
                i += 2
            }
            if origin != options.node, let rec {
                do {
                    var record = try ChangeRecord(wire: rec)
                    if record.origin.isEmpty { record.origin = origin }
                    try apply(record)
                    appliedCount.add(1, ordering: .relaxed)
                } catch {
                    csys_write_stderr("pushemu: cluster: a change from \(origin) (stream entry \(id)) did not apply: \(error)\n")
                }
            }
            let ms = Int64(id.split(separator: "-").first ?? "0") ?? 0
            lastApplied.withLock { $0 = (id, ms) }
        }
    }

    /// Runs `body` (a change that numbers what it makes in order: a fleet) as the only one in the
    /// cluster: under a lock in Redis (`lock:NAME`, 10 s at most), once this node has applied
    /// every change the stream held when it got the lock, and until its own changes are in the
    /// stream. So two nodes never give two fleets one number. Off the event loops (it waits on
    /// Redis). Throws when Redis cannot be asked or the lock is not had within 5 s.
    public func serialized<T>(_ name: String, _ body: () throws -> T) throws -> T {
        let c = RedisConnection(options.url, timeoutMs: 1_000)
        let lock = key + "lock:" + name
        let token = options.node + "-" + String(UInt64.random(in: 0...UInt64.max))
        let deadline = monotonicMs() + 5_000
        while true {
            if case .simple = try c.call(["SET", lock, token, "NX", "PX", "10000"]) { break }
            guard monotonicMs() < deadline else {
                throw RedisError(description: "another node holds the cluster's \(name) lock", fromRedis: false)
            }
            usleep(20_000)
        }
        defer {
            // Released only if still ours (it expires on its own after 10 s).
            if (try? c.call(["GET", lock]))?.text == token { _ = try? c.call(["DEL", lock]) }
        }
        // Every change before the lock applied here first.
        var newest = ""
        let info = try c.call(["XINFO", "STREAM", key + "changes"])
        let fields = info.elements
        var i = 0
        while i + 1 < fields.count {
            if fields[i].text == "last-generated-id", let t = fields[i + 1].text { newest = t }
            i += 2
        }
        while !newest.isEmpty, ClusterLink.streamID(lastApplied.withLock { $0.id }) < ClusterLink.streamID(newest) {
            guard monotonicMs() < deadline else {
                throw RedisError(description: "this node is behind the cluster's changes", fromRedis: false)
            }
            usleep(5_000)
        }
        let result = try body()
        // Its own changes in the stream before the next node may go.
        while queued.load(ordering: .relaxed) > 0 && monotonicMs() < deadline + 5_000 { usleep(2_000) }
        return result
    }

    /// Values every node must hold alike and that no change record may race over (the FCM
    /// OAuth secret its access tokens are signed with: one node issues, any node verifies).
    private let agreements = FutexLock<[(name: String, proposal: @Sendable () -> [UInt8], adopt: @Sendable ([UInt8]) -> Void)]>([])

    /// Registers a value the nodes agree on (before `start`): at the start, and again when Redis
    /// lost the cluster's keys, the first node's proposal is kept in Redis (`agreed:NAME`, set
    /// only if absent) and every node adopts what Redis holds.
    public func agree(
        _ name: String, proposal: @escaping @Sendable () -> [UInt8], adopt: @escaping @Sendable ([UInt8]) -> Void
    ) {
        agreements.withLock { $0.append((name, proposal, adopt)) }
    }

    private func settleAgreements(_ c: RedisConnection) throws(RedisError) {
        for a in agreements.withLock({ $0 }) {
            _ = try c.call(bytes: [Array("SET".utf8), Array((key + "agreed:" + a.name).utf8), a.proposal(), Array("NX".utf8)])
            if case .bulk(let value?) = try c.call(["GET", key + "agreed:" + a.name]) { a.adopt(value) }
        }
    }

    /// A stream entry id (`MS-SEQ`) as a pair that orders as the stream does.
    static func streamID(_ id: String) -> (UInt64, UInt64) {
        let parts = id.split(separator: "-")
        return (UInt64(parts.first ?? "0") ?? 0, UInt64(parts.count > 1 ? parts[1] : "0") ?? 0)
    }

    /// Applies what the stream holds past what this node applied, a page at a time; first, when
    /// the stream no longer holds everything after that (it was compacted), the cluster's
    /// snapshot in place of this node's state.
    private func catchUp(_ c: RedisConnection) throws(RedisError) {
        while true {
            // Before each page: a node compacting meanwhile may have trimmed past this one
            // (a node that is starting is not yet among the healthy ones it waits for).
            try loadSnapshotIfBehind(c)
            let have = lastApplied.withLock { $0.id }
            let reply = try c.call(["XRANGE", key + "changes", have == "0-0" ? "-" : "(" + have, "+", "COUNT", "1000"])
            if case .error(let e) = reply { throw RedisError(description: e, fromRedis: true) }
            let entries = reply.elements
            applyEntries(entries)
            guard entries.count == 1000 else { return }
        }
    }

    /// The cluster's epoch: made by the first node (`SET NX`), read by every node. When a node
    /// that knew it finds it gone, Redis lost the cluster's keys (restarted without persistence):
    /// the node makes a new one and ships its whole state again, which every node applies (the
    /// records are idempotent), and says so on stderr and in `/emulator/v1/cluster`.
    private func checkEpoch(_ c: RedisConnection, joining: Bool) throws(RedisError) {
        let fresh = "\(options.node)@\(Clock.nowMs())"
        _ = try c.call(["SET", key + "epoch", fresh, "NX"])
        let now = try c.call(["GET", key + "epoch"]).text
        let known = epoch.withLock { e -> String? in
            defer { e = now }
            return e
        }
        guard !joining, let known, known != now else { return }
        try settleAgreements(c)
        var records: [ChangeRecord] = []
        state { records.append($0) }
        for r in records { ship(r) }
        reseeded.withLock { $0 = (Clock.nowMs(), records.count) }
        lastApplied.withLock { $0 = ("0-0", 0) }
        csys_write_stderr(
            "pushemu: cluster: Redis at \(options.url) lost the cluster's state (restarted without persistence?): re-seeding it from this node's (\(records.count) records)\n"
        )
    }

    /// Announces this node: its URL in `nodes`, its status in `node:NAME` for 3 s.
    private func heartbeat(_ c: RedisConnection) throws(RedisError) {
        let (appliedID, atMs) = lastApplied.withLock { ($0.id, $0.atMs) }
        let url = advertisedURL
        var w = JSONObjectWriter()
        w.add("url", url)
        w.add("appliedThrough", atMs)
        w.add("appliedId", appliedID)
        w.add("applied", Int(appliedCount.load(ordering: .relaxed)))
        w.add("shipped", Int(shippedCount.load(ordering: .relaxed)))
        w.add("waiting", queued.load(ordering: .relaxed))
        let r = rate()
        w.add("ratePerSecond", json: r.isFinite ? String(Double(Int(r * 10)) / 10) : "0")
        w.add("degraded", isDegraded)
        let count = demand()
        let now = monotonicMs()
        let perSecond = lastDemand.withLock { l -> Int64 in
            defer {
                l.count = count
                l.ms = now
            }
            guard l.ms > 0, now > l.ms else { return l.perSecond }
            l.perSecond = Int64(max(0, count &- l.count)) * 1000 / (now - l.ms)
            return l.perSecond
        }
        w.add("demandPerSecond", perSecond)
        w.add("quotaShare", json: String(lastShare.withLock { $0 }))
        for reply in [
            try c.call(["HSET", key + "nodes", options.node, url]),
            try c.call(["SET", key + "node:" + options.node, w.text, "PX", "3000"]),
        ] {
            if case .error(let e) = reply { throw RedisError(description: e, fromRedis: true) }
        }
    }

    private func up() {
        if !redisUp.exchange(true, ordering: .relaxed) {
            csys_write_stderr("pushemu: cluster: Redis at \(options.url) answers again\n")
        }
    }

    private func down(_ error: Error) {
        lastError.withLock { $0 = "\(error)" }
        if redisUp.exchange(false, ordering: .relaxed) {
            csys_write_stderr(
                "pushemu: cluster: lost Redis at \(options.url) (\(error)): serving pushes with the state this node has, refusing changes until it is back\n"
            )
        }
    }

    // MARK: reading the cluster

    /// Every node that announced itself, healthy when its heartbeat is fresh, with its lag
    /// behind the stream (ms between the stream's newest entry and the last it applied).
    public func nodes() throws(RedisError) -> (nodes: [NodeStatus], streamLength: Int64, newestMs: Int64) {
        try nodes(RedisConnection(options.url, timeoutMs: 1_000))
    }

    func nodes(_ c: RedisConnection) throws(RedisError) -> (nodes: [NodeStatus], streamLength: Int64, newestMs: Int64) {
        let all = try c.call(["HGETALL", key + "nodes"]).elements
        let info = try c.call(["XINFO", "STREAM", key + "changes"])
        var length: Int64 = 0
        var newest: Int64 = 0
        let fields = info.elements
        var i = 0
        while i + 1 < fields.count {
            if fields[i].text == "length", case .integer(let n) = fields[i + 1] { length = n }
            if fields[i].text == "last-generated-id", let t = fields[i + 1].text {
                newest = Int64(t.split(separator: "-").first ?? "0") ?? 0
            }
            i += 2
        }
        var out: [NodeStatus] = []
        var j = 0
        while j + 1 < all.count {
            let name = all[j].text ?? ""
            let url = all[j + 1].text ?? ""
            j += 2
            var node = NodeStatus(
                name: name, url: url, healthy: false, lagMs: nil, ratePerSecond: nil, applied: nil, degraded: nil,
                isSelf: name == options.node)
            if let beat = try c.call(["GET", key + "node:" + name]).text {
                node.healthy = true
                let raw = Array(beat.utf8)
                raw.withUnsafeBytes { r in
                    var t: [JSONToken] = []
                    guard JSONParser.parse(r, into: &t) == nil, t.first?.kind == .object else { return }
                    let v = JSONView(bytes: r, tokens: t)
                    if let a = v.member(0, "appliedThrough"), let n = v.number(a) { node.lagMs = max(0, newest - Int64(n)) }
                    if let a = v.member(0, "ratePerSecond"), let n = v.number(a) { node.ratePerSecond = n }
                    if let a = v.member(0, "applied"), let n = v.number(a) { node.applied = Int64(n) }
                    if let a = v.member(0, "demandPerSecond"), let n = v.integer(a) { node.demandPerSecond = Int64(n) }
                    if let a = v.member(0, "quotaShare"), let n = v.number(a) { node.quotaShare = n }
                    if let a = v.member(0, "appliedId"), v.tokens[a].kind == .string { node.appliedID = v.string(a) }
                    if let a = v.member(0, "degraded"), v.tokens[a].kind == .true || v.tokens[a].kind == .false {
                        node.degraded = v.tokens[a].kind == .true
                    }
                }
            }
            out.append(node)
        }
        return (out.sorted { $0.name < $1.name }, length, newest)
    }

    /// This node's own view: Redis reachable, changes waiting, applied and shipped, and its last re-seeding.
    public var local:
        (redisUp: Bool, waiting: Int, applied: Int64, shipped: Int64, lastError: String?, reseeded: (atMs: Int64, records: Int)?)
    {
        (
            redisUp.load(ordering: .relaxed), queued.load(ordering: .relaxed), appliedCount.load(ordering: .relaxed),
            shippedCount.load(ordering: .relaxed), lastError.withLock { $0 }, reseeded.withLock { $0 }
        )
    }

    /// The last snapshot this node wrote or loaded (`/emulator/v1/cluster`'s `snapshot`).
    public var lastSnapshot: SnapshotEvent? { snapshotEvent.withLock { $0 } }
}
