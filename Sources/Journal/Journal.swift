import CSQLite
import CSystem
import Glibc
import PushCore
import Runtime
import State
import Synchronization
import Transport

/// The durable record of every provider request and every tracking attempt: SQLite in WAL mode
/// (or memory with `--in-memory`) with group commit.
///
/// Each event loop encodes its records into its own shard (`SegmentEncoder`: compact binary, a
/// repeated payload or header set costs a byte) and keeps the answers waiting on them; the writer
/// thread takes every shard's segment in turn and writes them all in one transaction.
///
/// Durability, on disk:
/// - `.strict` (the default): an answer leaves only once its record is in the journal's files.
///   The loop appends its new records to its segment's write-ahead file (`AheadLog`: one
///   `write` per loop iteration, at the loop's flush barrier) and then gives the answers that
///   waited on them, in the same iteration; the writer commits into SQLite every 10 ms without
///   fsync and deletes the files it committed. Killing the process at any instant loses no
///   answered request; a restart stores what the files hold that SQLite does not.
/// - `.sync`: an answer leaves once its record's commit is fsynced (a power cut loses nothing
///   answered): the writer commits every 1-2 ms and hands each loop its released answers.
/// - `.relaxed`: answers at once, commits behind.
/// A record that cannot be stored (a full disk) is not acknowledged under `.strict` or `.sync`
/// (its answer is told it was not stored); the event loop never waits on the disk.
public final class Journal: @unchecked Sendable {
    /// `--durability`: what an answer waits for (see `WriterMode` for each on disk and in memory).
    public enum Durability: String, Sendable { case strict, sync, relaxed }

    /// Retention: the oldest segments go once records exceed `maxRecords` or end before `maxAgeMs`
    /// ago (checked by the writer at most once a second; whole segments, so a limit can be passed
    /// by at most one commit's records).
    public struct Retention: Sendable {
        /// Records kept at most (`--journal-max-records`).
        public var maxRecords: Int
        /// Records older than this go (`--journal-max-age`, ms).
        public var maxAgeMs: Int64
        /// The serve defaults: ten million records, seven days.
        public init(maxRecords: Int = 10_000_000, maxAgeMs: Int64 = 7 * 86_400_000) {
            self.maxRecords = maxRecords
            self.maxAgeMs = maxAgeMs
        }
    }

    /// The journal's counts, for `/emulator/v1/stats` and `/metrics`.
    public struct Stats: Sendable {
        /// Records appended and not yet committed.
        public var queued = 0
        /// Records committed since the start.
        public var committed: UInt64 = 0
        /// Group commits made.
        public var batches: UInt64 = 0
        /// Records in the last commit.
        public var lastBatch = 0
        /// How long the last commit took (µs).
        public var lastCommitUs: UInt64 = 0
        /// Records dropped under `.relaxed` because the backlog was full.
        public var dropped: UInt64 = 0
        /// Commits SQLite refused, and write-ahead writes the disk refused (strict), counted alike.
        public var failedCommits: UInt64 = 0
        /// True from a failed commit or write-ahead write until one succeeds again.
        public var failing = false
        /// The last failure's error (kept after recovery, for the record).
        public var lastError: String?
        /// Strict answers not acknowledged because their record's commit failed (answered 503).
        public var withheldAnswers: UInt64 = 0
        /// Strict: answered records held in their write-ahead files because SQLite refused their
        /// commit (a full disk); committed with the next commit that succeeds.
        public var awaitingStore = 0
        /// Records removed by retention.
        public var pruned: UInt64 = 0
        /// The writer thread's nice value (-10 with strict durability where raising it is allowed).
        public var writerNice = 0
        /// Request records in the store now.
        public var storedRequests = 0
        /// Tracking records in the store now.
        public var storedTracking = 0
        /// Histograms of commit durations (seconds) and of records per commit: counts per bound
        /// of `commitBounds` / `batchBounds` (not cumulative; the last slot is above every bound).
        var commitSeconds = [UInt64](repeating: 0, count: Journal.commitBounds.count + 1)
        var commitSecondsSum = 0.0
        var batchRecords = [UInt64](repeating: 0, count: Journal.batchBounds.count + 1)
        var batchRecordsSum: UInt64 = 0
    }

    static let commitBounds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
    static let batchBounds = [1.0, 4, 16, 64, 256, 1024, 4096, 16384]

    static func bucket(_ v: Double, _ bounds: [Double]) -> Int { bounds.firstIndex { v <= $0 } ?? bounds.count }

    /// An answer waiting for its commit. Wrapped: a bare closure stored in an array is converted
    /// to the array's generic representation through a heap-allocated thunk, one per answer.
    struct Answer: Sendable {
        let run: @Sendable (Bool) -> Void
    }

    /// Consecutive answers one `CommitWaiter` parked: released together by one call.
    struct WaiterRun {
        let waiter: any CommitWaiter
        var count: Int
        /// Whether their records were stored (write-ahead: decided when they are written).
        var stored = true
    }

    /// What one producer (an event loop; or every other thread together) has waiting for the writer.
    struct Pending {
        var encoder: SegmentEncoder?
        var answers: [Answer] = []
        /// Answers parked by their callers (`StoredNotice.parked`), in append order.
        var runs: [WaiterRun] = []
        /// The loop the answers are given on (the first that parked or handed one over).
        var loop: EventLoop?
        /// Write-ahead's part (`.strict` on disk, event-loop shards only).
        var ahead = Ahead()
    }

    /// What a loop's shard holds for write-ahead (`.strict` on disk) beyond its encoder.
    struct Ahead {
        /// The loop's write-ahead file (nil: none open; the next record opens one).
        var file: AheadLog.File?
        /// How much of the encoder is in `file`.
        var written = SegmentEncoder.Mark()
        /// Where in `file` the encoder's first chunk is.
        var segmentStart = 0
        /// Runs whose records were written (or failed to be), for the loop's barrier to give.
        var decided: [WaiterRun] = []
        /// Segments cut short by a failed write: what their files hold, for the writer to take.
        var sealed: [AheadSegment] = []
    }

    /// A segment the writer takes from a write-ahead shard, with where its file holds it (nil:
    /// nowhere, its bytes are stored in SQLite).
    struct AheadSegment {
        var encoder: SegmentEncoder
        let location: AheadLog.Location?
    }

    /// What the writer hands one loop after a commit.
    struct Released {
        let loop: EventLoop?
        let answers: [Answer]
        let runs: [WaiterRun]
        var count: Int { runs.reduce(answers.count) { $0 + $1.count } }
        func run(_ stored: Bool) {
            for a in answers { a.run(stored) }
            for r in runs { r.waiter.committed(r.count, stored: stored) }
        }
    }

    final class Shard: Sendable {
        let pending = FutexLock(Pending())
        /// Loops locking neighbouring shards do not share a line.
        private let padding = CacheLinePadding()
    }

    /// Payload bytes kept per record: every valid APNs (VoIP 5120) and FCM (4096) payload whole.
    public static let maxPayload = 5120
    /// The group-commit window (see `run`). Strict: 1 ms once the last commit carried 8 records
    /// or more (measured: 2,000 rather than 6,000 commits for 450,000 requests, for +15% req/s),
    /// 2 ms once it carried 64 or more (a sender keeping hundreds of pushes in flight: half the
    /// commits again, each fdatasync's CPU shared by twice the records). Relaxed: 10 ms always
    /// (no answer waits on it).
    static let windowThreshold = 8
    static let wideWindowThreshold = 64
    static let strictWindowNs = 1_000_000
    static let strictWideWindowNs = 2_000_000
    static let relaxedWindowNs = 10_000_000

    /// How long the writer lets records gather before its next commit, after one of `lastBatch`.
    static func windowNs(strict: Bool, lastBatch: Int) -> Int {
        guard strict else { return relaxedWindowNs }
        return lastBatch >= wideWindowThreshold ? strictWideWindowNs : strictWindowNs
    }
    /// The durability it was opened with.
    public let durability: Durability
    /// Answers wait for their record: `.strict` and `.sync` on disk (strict: until the loop has
    /// written it ahead, at its flush barrier; sync: until its commit). In memory nothing
    /// survives the process anyway, so what both promise there is that a read sees every
    /// request answered before it: answers leave at once and every read first commits what is
    /// waiting (`flush`). When false, a caller may answer at once and append without a notice.
    public var answersWait: Bool { mode.answersWait }
    /// How the writer commits: the durability mode on its medium.
    let mode: WriterMode

    /// One case per way the journal commits, fixed at start-up; each reads on its own in the
    /// writer (`waitForMore`, `takeBatch`) and in `appendRequest`.
    enum WriterMode: Equatable, Sendable {
        /// `.relaxed`, on disk or in memory: records follow their answers, the backlog bounded.
        case relaxed
        /// `.strict` or `.sync` in memory: answers go at once; a read first has the writer
        /// commit what is queued.
        case memory
        /// `.sync` on disk: the writer releases answers after each fsynced commit.
        case sync
        /// `.strict` on disk: loops write their records ahead (`AheadLog`) and give their own
        /// answers at their flush barrier; reads flush first.
        case writeAhead

        init(_ durability: Durability, onDisk: Bool) {
            switch durability {
            case .relaxed: self = .relaxed
            case .sync: self = onDisk ? .sync : .memory
            case .strict: self = onDisk ? .writeAhead : .memory
            }
        }

        /// Whether answers wait for their records.
        var answersWait: Bool { self == .sync || self == .writeAhead }
        /// Whether a read first has the writer commit what is queued (where a read would not
        /// see every answered request otherwise).
        var flushesBeforeReads: Bool { self == .memory || self == .writeAhead }
    }
    /// The write-ahead files' directory (`.writeAhead`).
    let aheadDirectory: String?
    let nextSerial = Atomic<UInt64>(1)
    /// A loop's write-ahead file past this size is closed when the writer takes its segment.
    let aheadRotateBytes: Int
    /// One barrier per event-loop shard (`.writeAhead`).
    private var barriers: [AheadBarrier] = []
    /// Set by the writer while SQLite refuses commits: loops then store nothing new (answers
    /// told not stored) until a commit of what was already answered succeeds.
    let storeFailing = Atomic<Bool>(false)
    /// Set while the last commit failed (whatever the durability), cleared by one that succeeds.
    let commitFailing = Atomic<Bool>(false)
    /// Set while a loop's last write-ahead write failed, cleared by one that succeeds.
    let aheadFailing = Atomic<Bool>(false)
    /// Write-ahead failures since the last stderr message (said at most once a second, by
    /// whichever loop fails): (reported at, failures, records not stored).
    let aheadFailures = FutexLock<(reportedAt: UInt64, count: Int, records: Int)>((0, 0, 0))
    /// Written-ahead segments whose commit failed (writer thread only): committed first next time.
    var retry: [AheadSegment] = []
    /// Reads waiting for the writer to commit what was queued before they asked.
    private let flushWaiters = FutexLock<[FlushWaiter]>([])
    private let running = Atomic<Bool>(false)
    /// The SQLite file (nil: in memory).
    public let path: String?
    /// How much it keeps.
    public let retention: Retention
    /// Campaign id of a payload (set by the composition root: the presets' keys), read from the
    /// tokens of the request's body when the gateway lent them.
    /// A payload's campaign: its bytes, its gateway's tokens if any, and the campaign read
    /// last (to be returned as it is when the payload names the same one).
    let campaignOf: @Sendable (PushProvider, ArraySlice<UInt8>, ParsedJSON?, String?) -> String?
    /// One shard per event loop, then `otherShards` for every other thread (tracking lanes,
    /// tests), picked by thread, so the dispatcher's lanes do not contend on one lock.
    let shards: [Shard]
    /// Event-loop shards: one per loop the journal was made for.
    public let loopShards: Int
    static let otherShards = 4

    /// The calling thread's shard among the others.
    private var otherShard: Int { loopShards + ThreadStripes.index(count: Journal.otherShards) }
    private let resets = FutexLock<[@Sendable () -> Void]>([])
    let stats = FutexLock(Stats())
    private let sleeping = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let wakeFD: Int32
    private let maxQueue: Int
    private var thread: pthread_t?
    /// Failed commits not yet said on stderr (the writer thread's own).
    private var failures: (reportedAt: UInt64, count: Int, records: Int) = (0, 0, 0)
    let store: SegmentStore
    /// Summaries of the stored segments, so searches and campaign counts read only what they need.
    let index: SegmentIndex
    /// The exact report being made, if any: how far it has read.
    let reportProgress = FutexLock(ReportProgress())
    /// The state log, written by this writer with its group commit (see `drive`).
    /// Weak: the emulator owns the log (which refers back to the stores this journal serves).
    private weak var stateLog: StateLog?

    /// `path` nil: segments kept in memory (nothing survives the process). `loops`: the event
    /// loops that will append (by `EventLoop.index`). `payloadTerms`: a payload's campaign ids and
    /// alert text for the index (nil: campaign and text terms never rule a block out).
    /// `campaignOf`: a payload's campaign id; `campaignOfParsed`, the same read from the tokens
    /// its gateway's parse of the request's body left (nil: `campaignOf` parses the payload
    /// every time), given the campaign read last: it returns that String as it is when the
    /// payload names the same one, so a personalised campaign makes no String per request.
    /// `indexRebuildLimit`: the most records after the last stored index block summarised at open.
    /// `aheadRotateBytes`: the size past which a loop's write-ahead file is closed for a new one.
    public init(
        path: String?, durability: Durability, loops: Int = 1, maxQueue: Int = 1_000_000, retention: Retention = Retention(),
        campaignOf: @escaping @Sendable (PushProvider, ArraySlice<UInt8>) -> String?,
        campaignOfParsed: (@Sendable (PushProvider, ParsedJSON, String?) -> String?)? = nil, payloadTerms: PayloadTermsReader? = nil,
        indexRebuildLimit: Int = 65_536, aheadRotateBytes: Int? = nil
    ) throws {
        self.aheadRotateBytes = max(1, aheadRotateBytes ?? AheadLog.rotateBytes)
        self.durability = durability
        mode = WriterMode(durability, onDisk: path != nil)
        aheadDirectory = path.map(AheadLog.directory(journal:))
        self.maxQueue = maxQueue
        self.retention = retention
        if let campaignOfParsed {
            self.campaignOf = { provider, payload, parsed, last in
                if let parsed { return campaignOfParsed(provider, parsed, last) }
                return campaignOf(provider, payload)
            }
        } else {
            self.campaignOf = { provider, payload, _, _ in campaignOf(provider, payload) }
        }
        self.path = path
        loopShards = max(1, loops)
        shards = (0..<(loopShards + Journal.otherShards)).map { _ in Shard() }
        if let path {
            let sqlite: SQLiteSegmentStore
            do {
                sqlite = try SQLiteSegmentStore(path: path, synchronous: durability == .sync ? "FULL" : "NORMAL")
            } catch {
                throw SQLiteDatabase.SQLiteError(description: "the journal at \(path): \(error)")
            }
            store = sqlite
            // What a strict run wrote ahead and did not commit (killed): stored now, whatever
            // this run's durability.
            let dir = AheadLog.directory(journal: path)
            let last = try Journal.recoverAhead(dir, into: sqlite)
            nextSerial.store(last &+ 1, ordering: .relaxed)
            if durability == .strict, !AheadLog.makeDirectory(dir) {
                throw SQLiteDatabase.SQLiteError(
                    description: "the journal at \(path): cannot create \(dir): \(String(cString: strerror(errno)))")
            }
        } else {
            store = MemorySegmentStore()
        }
        index = SegmentIndex(payloadTerms: payloadTerms)
        let unindexed = index.restore(from: store, rebuildLimit: indexRebuildLimit)
        if unindexed > 0, let path {
            csys_write_stderr(
                "pushemu: the journal at \(path) holds \(unindexed) records its index does not cover (written by an older version, or cut by retention); searches read them all\n"
            )
        }
        wakeFD = csys_eventfd()
        if mode == .writeAhead { barriers = (0..<loopShards).map { AheadBarrier(journal: self, shard: $0) } }
    }

    deinit {
        close(wakeFD)
        for shard in shards {
            shard.pending.withLock { p in
                if let f = p.ahead.file { close(f.fd) }
            }
        }
    }

    /// Makes this writer write the state log too, each iteration: behind (relaxed), or with an
    /// fdatasync before the answers waiting on it go (sync). Called before `start`.
    public func drive(_ log: StateLog) {
        stateLog = log
        log.drive(wake: { [weak self] in self?.wake() })
    }

    /// Starts the writer thread; records appended before this wait for it.
    public func start() {
        running.store(true, ordering: .releasing)
        thread = Threads.spawn { [self] in self.run() }
    }

    /// Writes what is queued, then stops.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Records a request; `completion` (the answer) runs on `loop` (or, without one, on the writer
    /// thread) once the record's commit is over (`.strict` on disk), told whether it was stored:
    /// false when the commit failed (a full disk, a file-size limit), and the answer must not
    /// acknowledge the request. With `.relaxed`, and in memory, it runs at once, on the caller's
    /// thread, told true. Called on `loop`'s thread.
    public func append(_ r: RequestRecord, loop: EventLoop?, completion: @escaping @Sendable (Bool) -> Void) {
        appendRequest(
            atMs: r.atMs, provider: r.provider, connection: r.connection, environment: r.environment, token: r.token,
            topic: r.topic, status: r.status, reason: r.reason, latencyUs: r.latencyUs, headers: r.headers,
            payload: r.payload, warnings: r.warnings, device: r.device, team: r.team, notificationID: r.notificationID,
            loop: loop, notify: .handedOver(completion))
    }

    /// `append` with the record's fields as they lie: building a `RequestRecord` retained each of
    /// its references, only to release them once encoded (about eight pairs per request).
    /// `notice` may be `.none` only when answers do not wait (`answersWait` false): the caller
    /// answers at once, and no closure is built per request. `payloadTokens`: the tokens of the
    /// document `payload` is a value of (its request's body), when the gateway parsed it just now:
    /// the campaign id is then read from them (read during this call only).
    public func appendRequest(
        atMs: Int64, provider: PushProvider, connection: UInt64, environment: String,
        token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, status: Int, reason: String, latencyUs: Int64,
        headers: HTTPFields, payload: ArraySlice<UInt8>, payloadTokens: JSONTokenBuffer? = nil, warnings: [String],
        device: DeviceOutcome? = nil, team: TeamID? = nil, notificationID: UUIDValue?, loop: EventLoop?, notify notice: StoredNotice
    ) {
        if case .parked = notice, answersWait {
            precondition(loop.map(parksOwnAnswers) == true, "answers park on a loop with a shard of its own")
        }
        let strict = answersWait
        let shard = loop.map { min($0.index, loopShards - 1) } ?? otherShard
        let kept = shards[shard].pending.withLock { p -> Bool in
            if p.encoder == nil { p.encoder = SegmentEncoder(baseMs: atMs) }
            // A strict or sync record is always kept (an answer waits for it, or a read expects
            // it); otherwise the backlog is bounded.
            guard durability != .relaxed || p.encoder!.count < maxQueue else { return false }
            p.encoder!.appendRequest(
                atMs: atMs, provider: provider, connection: connection, environment: environment, token: token,
                topic: topic, status: status, reason: reason, latencyUs: latencyUs, headers: headers,
                payload: payload, payloadTokens: payloadTokens, warnings: warnings, device: device, team: team,
                notificationID: notificationID, maxPayload: Journal.maxPayload, campaignOf: campaignOf)
            guard strict else { return true }
            switch notice {
            case .none:
                preconditionFailure("answers wait for their records here: each needs a notice")
            case .parked(let waiter):
                if let last = p.runs.indices.last, p.runs[last].waiter === waiter {
                    p.runs[last].count += 1
                } else {
                    p.runs.append(WaiterRun(waiter: waiter, count: 1))
                }
            case .handedOver(let completion):
                p.answers.append(Answer(run: completion))
            }
            if p.loop == nil { p.loop = loop }
            return true
        }
        if !strict {
            switch notice {
            case .none: break
            case .parked(let waiter): waiter.committed(1, stored: true)
            case .handedOver(let completion): completion(true)
            }
        } else if mode == .writeAhead, let loop, case .parked = notice {
            let b = barriers[shard]
            if !b.armed {
                b.armed = true
                loop.arm(b)
            }
        }
        appended(kept: kept)
    }

    /// Whether answers parked on `loop` come back on it: it has a shard of its own (every loop
    /// the journal was made for; a loop beyond them shares the last shard, whose answers run on
    /// the first loop that parked one).
    public func parksOwnAnswers(_ loop: EventLoop) -> Bool { loop.index < loopShards }

    /// Records a tracking attempt (any thread; never waits).
    public func append(_ t: TrackingRecord) {
        appendOther(atMs: t.atMs) { $0.append(t) }
    }

    /// A tracking attempt from its fields (the dispatcher's hook: no record built per attempt).
    public func appendTracking(
        atMs: Int64, preset: String, event: String, token: String, notificationID: String,
        method: String, url: String, status: Int, outcome: String, attempt: Int,
        latencyMs: Double, error: String?, events: Int, campaign: String? = nil
    ) {
        appendOther(atMs: atMs) {
            $0.appendTracking(
                atMs: atMs, preset: preset, event: event, token: token, notificationID: notificationID,
                method: method, url: url, status: status, outcome: outcome, attempt: attempt,
                latencyMs: latencyMs, error: error, events: events, campaign: campaign)
        }
    }

    /// Writes a record from a thread that is not an event loop into its shard's encoder.
    private func appendOther(atMs: Int64, _ write: (inout SegmentEncoder) -> Void) {
        let kept = shards[otherShard].pending.withLock { p -> Bool in
            if p.encoder == nil { p.encoder = SegmentEncoder(baseMs: atMs) }
            guard p.encoder!.count < maxQueue else { return false }
            write(&p.encoder!)
            return true
        }
        appended(kept: kept)
    }

    /// After a record is queued (or dropped, `kept` false): count the drop, wake a sleeping writer.
    private func appended(kept: Bool) {
        if !kept { stats.withLock { $0.dropped += 1 } }
        if sleeping.load(ordering: .relaxed), sleeping.exchange(false, ordering: .acquiringAndReleasing) { wake() }
    }

    /// Empties the journal, after writing what is waiting; `done` runs on the writer thread once
    /// it is empty.
    public func reset(_ done: @escaping @Sendable () -> Void) {
        resets.withLock { $0.append(done) }
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Whether the journal cannot store what it is given now (a commit or a write-ahead write
    /// failed, and none has succeeded since): `/healthz` and the dashboard say so.
    public var isFailing: Bool {
        commitFailing.load(ordering: .relaxed) || aheadFailing.load(ordering: .relaxed) || storeFailing.load(ordering: .relaxed)
    }

    /// The last failure's error.
    public var lastError: String? { stats.withLock { $0.lastError } }

    /// The counts now, with the store's totals (reads the store: not for the event loops).
    public var statistics: Stats {
        var s = stats.withLock { $0 }
        s.failing = isFailing
        s.queued = shards.reduce(0) { n, shard in n + shard.pending.withLock { $0.encoder?.count ?? 0 } }
        (s.storedRequests, s.storedTracking) = store.totals()
        return s
    }

    // MARK: the writer thread

    private func run() {
        // Sync answers wait on this thread: at a higher scheduling priority than the event loops
        // it runs as soon as its window or its fsync ends instead of queueing behind the loop on
        // the same CPU, so answers are held for less time. It needs CAP_SYS_NICE (or
        // RLIMIT_NICE); without it the writer keeps the default priority.
        if mode == .sync, Journal.setThreadNice(Journal.strictWriterNice) {
            stats.withLock { $0.writerNice = Int(Journal.strictWriterNice) }
        }
        var lastPrune: Int64 = 0
        var lastBatch = 0
        while true {
            if lastBatch > 0 { waitForMore(after: lastBatch) }
            sleeping.store(true, ordering: .releasing)
            stateLog?.writerTurn()
            // Taken before the shards: what was queued before a read asked is in this commit.
            let flushing = mode.flushesBeforeReads ? Journal.takeAll(flushWaiters) : []
            let resetting = Journal.takeAll(resets)
            let batch = takeBatch()
            if batch.isEmpty && retry.isEmpty && resetting.isEmpty {
                for w in flushing { w.signal() }
                if stateLog?.hasWork == true { continue }
                // Idle: the next records (or a read's flush) need no window first.
                if mode.flushesBeforeReads { lastBatch = 0 }
                if stopping.load(ordering: .acquiring) { break }
                waitIdle()
                prune(&lastPrune)
                continue
            }
            sleeping.store(false, ordering: .releasing)
            lastBatch = store(batch, resetting: resetting, flushing: flushing)
            prune(&lastPrune)
            // Stopping with commits refused: what is held stays in its write-ahead files, for the
            // next start to store (retrying here would never let the process stop).
            if !retry.isEmpty, stopping.load(ordering: .acquiring) { break }
        }
        // The open block is stored too, so the next start has no tail to summarise again.
        if let open = index.closeOpen() { try? store.appendBlock(open) }
        if mode == .writeAhead { closeAheadFiles() }
        running.store(false, ordering: .releasing)
        for w in Journal.takeAll(flushWaiters) { w.signal() }
    }

    /// The group commit window: while many producers are active (the last commit carried
    /// several records), more records join before the next commit is paid for. Each mode's own.
    private func waitForMore(after lastBatch: Int) {
        switch mode {
        case .memory, .writeAhead:
            // The relaxed window, cut short by a read asking for a flush.
            var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, Int32(Journal.relaxedWindowNs / 1_000_000)) > 0 {
                var v: UInt64 = 0
                _ = read(wakeFD, &v, 8)
            }
        case .sync:
            // Answers wait for this commit: a window only under load, sized by it.
            guard lastBatch >= Journal.windowThreshold else { return }
            var t = timespec(tv_sec: 0, tv_nsec: Journal.windowNs(strict: true, lastBatch: lastBatch))
            nanosleep(&t, nil)
        case .relaxed:
            var t = timespec(tv_sec: 0, tv_nsec: Journal.windowNs(strict: false, lastBatch: lastBatch))
            nanosleep(&t, nil)
        }
    }

    /// Nothing to commit: sleeps until a producer wakes the writer, 100 ms at most.
    private func waitIdle() {
        var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, 100)
        var v: UInt64 = 0
        _ = read(wakeFD, &v, 8)
    }

    /// What one turn of the writer took from the shards.
    struct Batch {
        var segments: [SegmentEncoder] = []
        /// Write-ahead shards' segments, with where their files hold them.
        var ahead: [AheadSegment] = []
        /// Answers to give after the commit, per loop (write-ahead loops give their own).
        var released: [Released] = []
        var isEmpty: Bool { segments.isEmpty && ahead.isEmpty }
        var records: Int { segments.reduce(0) { $0 + $1.count } + ahead.reduce(0) { $0 + $1.encoder.count } }
    }

    /// Takes every shard's queued records and the answers waiting for them.
    private func takeBatch() -> Batch {
        var batch = Batch()
        for (i, shard) in shards.enumerated() {
            shard.pending.withLock { p in
                if mode == .writeAhead && i < loopShards {
                    takeAhead(&p, shard: i, into: &batch.ahead)
                } else if let e = p.encoder {
                    batch.segments.append(e)
                    p.encoder = nil
                }
                // Under write-ahead the loop's barrier gives the runs.
                let runs = mode == .writeAhead ? [] : p.runs
                guard !p.answers.isEmpty || !runs.isEmpty else { return }
                batch.released.append(Released(loop: p.loop, answers: p.answers, runs: runs))
                // The next batch starts with room for as many as this one (growing from empty
                // cost nine reallocations a commit).
                if !p.answers.isEmpty {
                    let n = p.answers.count
                    p.answers = []
                    p.answers.reserveCapacity(n)
                }
                if !runs.isEmpty {
                    let n = p.runs.count
                    p.runs = []
                    p.runs.reserveCapacity(n)
                }
            }
        }
        return batch
    }

    /// Commits one batch, runs the resets that waited for it, wakes the reads that asked for it
    /// and releases its answers (told whether it was stored). Answers the batch's record count.
    private func store(_ batch: Batch, resetting: [@Sendable () -> Void], flushing: [FlushWaiter]) -> Int {
        let stored = commitAll(batch.segments, ahead: batch.ahead)
        for w in flushing { w.signal() }
        var records = batch.records
        // Held for a retry (SQLite refused the commit): tried again after a window, not at once.
        if !retry.isEmpty { records = max(records, 1) }
        if !resetting.isEmpty {
            atDefaultPriority {
                try? store.removeAll()
                index.removeAll()
                discardRetry()
            }
            for done in resetting { done() }
        }
        if !stored {
            let withheld = batch.released.reduce(0) { $0 + $1.count }
            stats.withLock { $0.withheldAnswers &+= UInt64(withheld) }
        }
        for released in batch.released {
            if let loop = released.loop { loop.execute { released.run(stored) } } else { released.run(stored) }
        }
        return records
    }

    /// Empties a locked list, answering what it held.
    static func takeAll<T>(_ list: FutexLock<[T]>) -> [T] {
        list.withLock { l in
            let out = l
            l.removeAll()
            return out
        }
    }

    /// One read waiting on a flush: an eventfd the writer signals once the commit is stored. A
    /// reference, so a reader that gave up never has its descriptor written after closing it.
    final class FlushWaiter: Sendable {
        let fd = csys_eventfd()
        deinit { if fd >= 0 { close(fd) } }
        func signal() {
            var one: UInt64 = 1
            _ = Glibc.write(fd, &one, 8)
        }
    }

    /// In memory with `.strict`: commits what is queued now and returns once it is stored, so the
    /// caller's read sees every request answered before it (the reads below call it first). A
    /// round trip to the writer, which cuts its window short for it. Elsewhere it returns at once.
    public func flush() {
        guard mode.flushesBeforeReads, running.load(ordering: .acquiring) else { return }
        let w = FlushWaiter()
        guard w.fd >= 0 else { return }
        flushWaiters.withLock { $0.append(w) }
        wake()
        var p = pollfd(fd: w.fd, events: Int16(POLLIN), revents: 0)
        // Bounded: a writer that stops meanwhile signals every waiter, and is waited for 5 s at most.
        for _ in 0..<50 where running.load(ordering: .acquiring) {
            if poll(&p, 1, 100) > 0 { return }
        }
    }

    /// One group commit: every shard's segment in one transaction. False when it failed.
    func commit(
        _ segments: [SegmentEncoder], locations: [AheadLog.Location?] = [], through: [Int: AheadLog.Position] = [:]
    ) -> Bool {
        let t0 = Clock.monotonicNanoseconds()
        let records = segments.reduce(0) { $0 + $1.count }
        var ok = true
        do {
            let ids = try store.append(segments, locations: locations, aheadThrough: through)
            var closed: [BlockSummary] = []
            for (segment, id) in zip(segments.lazy.filter { !$0.isEmpty }, ids) {
                if let block = segment.withBytes({ index.add(segmentID: id, $0) }) { closed.append(block) }
            }
            // A block that cannot be stored stays in memory; after a restart its segments are
            // summarised again (or read whole).
            for block in closed { try? store.appendBlock(block) }
        } catch {
            // The answers still go (a failing disk must not hang clients), told the record was
            // not stored: under strict they are the service's retryable 503, not an
            // acknowledgement. The failure is counted in /stats and /metrics and said on stderr,
            // at most once a second.
            ok = false
            commitFailing.store(true, ordering: .relaxed)
            stats.withLock {
                $0.failedCommits += 1
                $0.lastError = "\(error)"
            }
            failures.count += 1
            failures.records += records
            if t0 &- failures.reportedAt >= 1_000_000_000 || failures.reportedAt == 0 {
                let answered = answersWait ? "; their requests were answered 503, not acknowledged" : ""
                csys_write_stderr(
                    "pushemu: journal commit failed: \(error) (\(failures.count) failed commit(s), \(failures.records) record(s) not stored since the last message\(answered))\n"
                )
                failures = (t0, 0, 0)
            }
        }
        if ok, commitFailing.load(ordering: .relaxed) { commitFailing.store(false, ordering: .relaxed) }
        let us = (Clock.monotonicNanoseconds() - t0) / 1000
        stats.withLock { s in
            if ok { s.committed &+= UInt64(records) }
            s.batches &+= 1
            s.lastBatch = records
            s.lastCommitUs = us
            s.commitSeconds[Journal.bucket(Double(us) / 1e6, Journal.commitBounds)] += 1
            s.commitSecondsSum += Double(us) / 1e6
            s.batchRecords[Journal.bucket(Double(records), Journal.batchBounds)] += 1
            s.batchRecordsSum &+= UInt64(records)
        }
        return ok
    }

    /// Retention, at most once a second, at the default priority (a large delete must not
    /// take the loops' CPU away).
    private func prune(_ last: inout Int64) {
        let now = Clock.nowMs()
        guard now - last >= 1000 else { return }
        last = now
        atDefaultPriority {
            if let cut = try? store.prune(beforeMs: now - retention.maxAgeMs, keepRecords: retention.maxRecords), cut.records > 0 {
                index.pruned(through: cut.through)
                try? store.deleteBlocks(through: cut.through)
                stats.withLock { $0.pruned &+= UInt64(cut.records) }
            }
        }
    }

    static let strictWriterNice: Int32 = -10

    private func atDefaultPriority(_ body: () -> Void) {
        let raised = stats.withLock { $0.writerNice } != 0
        if raised { _ = Journal.setThreadNice(0) }
        body()
        if raised { _ = Journal.setThreadNice(Journal.strictWriterNice) }
    }

    /// Sets the calling thread's nice value (on Linux, PRIO_PROCESS with 0 is the calling thread).
    private static func setThreadNice(_ nice: Int32) -> Bool {
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) == 0
    }

    // MARK: reading (any thread)

    /// Records stored (committed and not yet pruned).
    public func counts() -> (requests: Int, tracking: Int) {
        flush()
        return store.totals()
    }

    /// Every stored record with a time at or after `sinceMs`, in write order (or newest first);
    /// `body` returns false to stop.
    public func scan(sinceMs: Int64 = 0, newestFirst: Bool = false, _ body: (JournalEntry) -> Bool) {
        flush()
        store.read(sinceMs: sinceMs, newestFirst: newestFirst) { seg in
            Journal.entries(seg, sinceMs: sinceMs, newestFirst: newestFirst, body)
        }
    }

    /// Records a search may want, read through the index: only the blocks whose summaries allow
    /// the search's terms, newest first in order of their newest record (oldest first: of their
    /// oldest). Before each block `more` is told that bound; false ends the search (the caller
    /// has its page, and no later block can hold a record that belongs on it). Records that fail
    /// the terms the index can test per record (kind, token, id, time) are passed over unbuilt;
    /// the rest go to `each` (false stops), which applies the search's own filter.
    public func search(_ search: JournalSearch, more: (Int64) -> Bool, each body: (JournalEntry) -> Bool) {
        flush()
        let probe = IndexProbe(search.terms)
        var blocks = index.candidates(probe)
        if search.newestFirst {
            blocks.sort { $0.maxMs > $1.maxMs }
        } else {
            blocks.sort { $0.minMs < $1.minMs }
        }
        for block in blocks {
            guard more(search.newestFirst ? block.maxMs : block.minMs) else { return }
            var found: [JournalEntry] = []
            store.read(ids: block.segments, newestFirst: search.newestFirst) { seg in
                let start = found.count
                seg.data.withUnsafeBytes { b in
                    var cursor = SegmentCursor(b)
                    var v = RecordView()
                    while cursor.next(b, into: &v) {
                        if search.admits(v, b, probe) { found.append(cursor.entry(v, b)) }
                    }
                }
                if search.newestFirst { found[start...].reverse() }
                return true
            }
            for e in found where !body(e) { return }
        }
    }

    /// Requests counted per campaign, provider and outcome, from the index's block counts (and,
    /// record by record, the blocks that straddle `sinceMs` or that no summary describes): a
    /// campaign's totals over millions of records without reading them.
    public func campaignCounts(sinceMs: Int64 = .min) -> [CampaignTally] {
        flush()
        var (whole, partial) = index.counts(sinceMs: sinceMs)
        var counted = BlockSummary(firstSegment: 0)
        let attribution = TrackingAttribution()
        for range in partial {
            store.read(ids: range, newestFirst: false) { seg in
                seg.data.withUnsafeBytes {
                    SegmentIndex.summarise($0, into: &counted, terms: nil, keys: false, countsFromMs: sinceMs, attribution: attribution)
                }
                return true
            }
        }
        for (k, t) in counted.counts { whole[k, default: BlockSummary.Tally()].add(t) }
        return whole.map { k, t in
            CampaignTally(
                campaign: k.campaign, provider: PushProvider.stored(k.provider), rejection: k.rejection, count: t.count,
                firstMs: t.firstMs, lastMs: t.lastMs)
        }
    }

    /// The index's shape: closed blocks, unindexed ranges, records in the open block.
    public var indexShape: (blocks: Int, unindexed: Int, openRecords: Int) { index.shape }

    /// The same, from a journal file no server holds open (the CLI).
    public static func scan(path: String, sinceMs: Int64 = 0, _ body: (JournalEntry) -> Bool) throws {
        try SQLiteSegmentStore.read(path: path, sinceMs: sinceMs) { seg in
            entries(seg, sinceMs: sinceMs, newestFirst: false, body)
        }
    }

    /// A segment's records; false once `body` wants no more.
    static func entries(_ seg: Segment, sinceMs: Int64, newestFirst: Bool, _ body: (JournalEntry) -> Bool) -> Bool {
        var d = SegmentDecoder(seg.data)
        if newestFirst {
            var all: [JournalEntry] = []
            while let e = d.next() { all.append(e) }
            for e in all.reversed() where e.atMs >= sinceMs { if !body(e) { return false } }
            return true
        }
        while let e = d.next() {
            if e.atMs >= sinceMs, !body(e) { return false }
        }
        return true
    }

    /// Records a report reads one by one, at most, before it merges the index's summaries
    /// instead (when the caller leaves `exact` unsaid): a small journal's report is exact.
    public static let exactReportRecords = 200_000

    /// The campaign report of every record since `sinceMs` (only `campaign`'s when given).
    /// `exact` true: every record read (unique devices counted, percentiles exact), with its
    /// progress in `reportProgress`; false: the blocks' campaign digests merged, and only the
    /// records no digest describes read (blocks that straddle `sinceMs`, unindexed ones); nil:
    /// exact when the journal holds at most `exactReportRecords` records since `sinceMs`.
    public func report(sinceMs: Int64 = 0, campaign: String? = nil, exact: Bool? = nil) -> CampaignReport {
        flush()
        let (whole, partial, digested) = index.digests(sinceMs: sinceMs)
        guard !(exact ?? (digested <= Journal.exactReportRecords)) else {
            let total = max(0, store.totals().requests + store.totals().tracking)
            reportProgress.withLock { $0 = ReportProgress(running: true, read: 0, total: total) }
            defer { reportProgress.withLock { $0.running = false } }
            var read = 0
            return CampaignReport.build(sinceMs: sinceMs, campaign: campaign, nowMs: Clock.nowMs()) { body in
                scan(sinceMs: sinceMs) { e in
                    read += 1
                    if read & 0x3FFF == 0 { reportProgress.withLock { [read] in $0.read = read } }
                    return body(e)
                }
            }
        }
        return CampaignReport.summarised(
            digests(whole: whole, partial: partial, sinceMs: sinceMs), sinceMs: sinceMs, campaign: campaign, nowMs: Clock.nowMs())
    }

    /// The campaign digests of every record since `sinceMs`: the index's whole blocks' merged,
    /// and the records of the blocks no digest describes read.
    func digests(sinceMs: Int64) -> CampaignDigests {
        flush()
        let (whole, partial, _) = index.digests(sinceMs: sinceMs)
        return digests(whole: whole, partial: partial, sinceMs: sinceMs)
    }

    private func digests(whole: CampaignDigests, partial: [ClosedRange<Int64>], sinceMs: Int64) -> CampaignDigests {
        var digests = whole
        var read = CampaignDigests()
        read.limit = .max
        var block = BlockSummary(firstSegment: 0)
        block.digests = read
        let attribution = TrackingAttribution()
        for range in partial {
            store.read(ids: range, newestFirst: false) { seg in
                seg.data.withUnsafeBytes {
                    SegmentIndex.summarise($0, into: &block, terms: nil, keys: false, countsFromMs: sinceMs, attribution: attribution)
                }
                return true
            }
        }
        for (a, c) in attribution.resolve(giveUp: true) { block.digests.add(a, campaign: c) }
        digests.merge(block.digests)
        return digests
    }

    /// How far the exact report being made has read (`/emulator/v1/stats`).
    public struct ReportProgress: Sendable {
        /// Whether an exact report is being made.
        public var running = false
        /// Records read so far.
        public var read = 0
        /// Records the journal holds.
        public var total = 0
    }

    /// The exact report's progress.
    public var reportStatus: ReportProgress { reportProgress.withLock { $0 } }

    /// The campaign report of the journal at `path` without opening it for writing (`pushemu report`).
    public static func report(path: String, sinceMs: Int64 = 0, campaign: String? = nil) throws -> CampaignReport {
        var failure: Error?
        let r = CampaignReport.build(sinceMs: sinceMs, campaign: campaign, nowMs: Clock.nowMs()) { body in
            do { try scan(path: path, sinceMs: sinceMs, body) } catch { failure = error }
        }
        if let failure { throw failure }
        return r
    }

    /// Every record since `sinceMs` as NDJSON lines, in write order.
    public func export(sinceMs: Int64, _ line: (String) -> Void) {
        scan(sinceMs: sinceMs) {
            line($0.json)
            return true
        }
    }

    /// Every record of the journal at `path` since `sinceMs` as NDJSON lines (`pushemu export`).
    public static func export(path: String, sinceMs: Int64, _ line: (String) -> Void) throws {
        try scan(path: path, sinceMs: sinceMs) {
            line($0.json)
            return true
        }
    }
}

/// A search through the journal's index (`Journal.search`).
public struct JournalSearch: Sendable {
    /// Which records a search returns.
    public enum Records: Sendable {
        /// Accepted requests (they carry a notification id).
        case notifications
        case tracking
    }

    /// Which records it returns.
    public var records: Records
    /// The terms each must match (all of them).
    public var terms: [IndexTerm]
    /// Newest first (the dashboard's order) or oldest first.
    public var newestFirst: Bool

    /// A search for `records` matching every one of `terms`.
    public init(records: Records, terms: [IndexTerm], newestFirst: Bool) {
        self.records = records
        self.terms = terms
        self.newestFirst = newestFirst
    }

    /// Whether a record is of the kind searched for and passes the terms testable on its view.
    func admits(_ v: RecordView, _ b: UnsafeRawBufferPointer, _ probe: IndexProbe) -> Bool {
        guard v.atMs >= probe.fromMs, v.atMs <= probe.toMs else { return false }
        switch records {
        case .notifications:
            guard v.isRequest, PushProvider.accepts(v.status), v.id.count == 16 else { return false }
            if let p = probe.provider, v.provider != p { return false }
            if let id = probe.id, SegmentCursor.id(v, b) != id { return false }
        case .tracking:
            guard !v.isRequest else { return false }
        }
        if let t = probe.token {
            guard v.tokenPacked == t.packed, v.token.count == t.bytes.count,
                v.token.isEmpty
                    || t.bytes.withUnsafeBytes({ sameBytes($0.baseAddress!, b.baseAddress! + v.token.lowerBound, v.token.count) })
            else { return false }
        }
        return true
    }
}

/// Requests of one campaign (nil: none), provider and outcome (`rejection` empty: accepted).
public struct CampaignTally: Sendable {
    /// The campaign id (nil: requests outside any campaign).
    public var campaign: String?
    /// The provider the requests went to.
    public var provider: PushProvider
    /// The rejection reason (empty: accepted).
    public var rejection: String
    /// How many requests.
    public var count: Int
    /// When the first was received (ms since the epoch).
    public var firstMs: Int64
    /// When the last was received (ms since the epoch).
    public var lastMs: Int64
}

extension StoredRequest {
    /// FCM's message name (`projects/P/messages/0:...`) of an accepted FCM request.
    public var messageName: String? {
        guard provider == .fcm, let id = notificationID, let u = UUIDValue.parseCanonicalLowercase(Array(id.utf8)) else { return nil }
        return "projects/\(environment)/messages/" + PushNotification.fcmMessageID(u, receivedAtMs: atMs)
    }
}

extension JournalEntry {
    /// When the record was made (ms since the epoch).
    public var atMs: Int64 {
        switch self {
        case .request(let r): r.atMs
        case .tracking(let t): t.atMs
        }
    }

    /// One NDJSON line (`pushemu export`).
    public var json: String {
        func q(_ s: String?) -> String { s.map(JSONWriter.quote) ?? "null" }
        switch self {
        case .request(let r):
            var s = "{\"type\":\"request\",\"at\":\(r.atMs),\"provider\":\(q(r.provider.name)),\"connection\":\(r.connection)"
            s += ",\"environment\":\(q(r.environment)),\"token\":\(q(r.token)),\"topic\":\(q(r.topic)),\"campaign\":\(q(r.campaign))"
            s += ",\"status\":\(r.status),\"reason\":\(r.reason.isEmpty ? "null" : q(r.reason)),\"latencyUs\":\(r.latencyUs)"
            s += ",\"headers\":{" + r.headers.map { q($0.name) + ":" + q($0.value) }.joined(separator: ",") + "}"
            s += ",\"payload\":\(q(String(decoding: r.payload, as: UTF8.self))),\"payloadSize\":\(r.payloadSize)"
            s += ",\"warnings\":[" + r.warnings.map(JSONWriter.quote).joined(separator: ",") + "],\"notificationId\":\(q(r.notificationID))"
            if let name = r.messageName { s += ",\"name\":" + q(name) }
            return s + "}"
        case .tracking(let t):
            var s = "{\"type\":\"tracking\",\"at\":\(t.atMs),\"preset\":\(q(t.preset)),\"event\":\(q(t.event)),\"token\":\(q(t.token))"
            s += ",\"notificationId\":\(q(t.notificationID)),\"method\":\(q(t.method)),\"url\":\(q(t.url)),\"status\":\(t.status)"
            s += ",\"outcome\":\(q(t.outcome)),\"attempt\":\(t.attempt),\"latencyMs\":\(t.latencyMs),\"error\":\(q(t.error))"
            if let c = t.campaign { s += ",\"campaign\":" + q(c) }
            return s + "}"
        }
    }
}

/// Answers parked by a caller on its event loop while their records wait for a strict commit:
/// no closure is made per answer. The journal counts each waiter's parked answers in append
/// order and, after the commit, tells the waiter on that loop how many of its oldest ones it
/// may now give (`stored` false: the commit failed, and they must not acknowledge). With
/// `.relaxed`, and in memory, it is told at once, on the caller's thread, with a count of 1.
public protocol CommitWaiter: AnyObject, Sendable {
    func committed(_ count: Int, stored: Bool)
}

/// How the answer to an appended request hears that its record is stored: one case per way an
/// answer can wait (see `Journal.appendRequest`).
public enum StoredNotice: Sendable {
    /// Nothing waits: the caller answered already (`.relaxed`, or in memory).
    case none
    /// The caller's loop parked the answer (a `CommitWaiter` on a loop with its own shard): the
    /// waiter is told how many of its oldest answers may go, in order, on that loop.
    case parked(any CommitWaiter)
    /// A closure given whether the record was stored, run on the loop the shard answers on
    /// (a loop without a shard of its own, or a caller that is no loop: the writer thread).
    case handedOver(@Sendable (Bool) -> Void)
}
