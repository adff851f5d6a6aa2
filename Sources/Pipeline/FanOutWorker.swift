import Fleet
import Glibc
import Observation
import PushCore
import Runtime
import Synchronization
import Transport

/// Delivers the many-device pushes (FCM topic and condition sends, APNs broadcasts) off the
/// event loops. The pipeline answers such a push at once and hands its `FanOutJob` here; this
/// worker's thread resolves the recipients, then logs and delivers to each in batches of
/// `batchSize`, jobs in the order they came.
///
/// The thread runs at nice 10, below the event loops.
///
/// Bounds: at most `maxJobs` jobs wait or run (FCM allows 1,000 concurrent fan-outs per
/// project); the pipeline asks `reserve()` before it accepts such a push, and answers "too many
/// requests" when there is no room, so nothing accepted is ever dropped. The worker appends to
/// the notification log's last shard, which no event loop uses. `stop()` delivers every job
/// already accepted before it returns.
public final class FanOutWorker: @unchecked Sendable { // the thread handle is set by start/stop only
    static let maxJobs = 1_000
    public static let batchSize = 1_024

    public struct Counters: Sendable {
        /// Jobs accepted and not yet finished (waiting or running).
        public var pending: Int
        public var completed: UInt64
        public var delivered: UInt64
        /// Deliveries per second of the last job that reached at least 1,000 devices (0 before one).
        public var lastRate: Double
    }

    let log: NotificationLog
    let devices: DeviceStore
    let logShard: Int
    /// The thread the jobs run on (nice 10), with room for every reservation.
    private let worker = BackgroundWorker(capacity: FanOutWorker.maxJobs, nice: FanOutWorker.nice, name: "pushemu-fanout")
    private let pending = Atomic<Int>(0)
    private let completed = Atomic<UInt64>(0)
    private let delivered = Atomic<UInt64>(0)
    private let lastRateBits = Atomic<UInt64>(0)
    /// Jobs submitted, and jobs finished (in submission order: finished >= n means the first n are done).
    private let submitted = Atomic<UInt64>(0)
    private let finished = Atomic<UInt64>(0)

    /// `logShard`: the notification log shard the worker appends to (one no loop uses).
    public init(log: NotificationLog, devices: DeviceStore, logShard: Int) {
        self.log = log
        self.devices = devices
        self.logShard = logShard
    }

    public func start() { worker.start() }

    /// Finishes every accepted job, then stops the thread.
    public func stop() { worker.stop() }

    /// Claims room for one job; false when `maxJobs` are pending.
    public func reserve() -> Bool { pending.increment(below: FanOutWorker.maxJobs) }

    /// Gives back a reservation no job came of.
    public func release() { pending.subtract(1, ordering: .relaxed) }

    /// Queues a job (after `reserve()`). Without a running thread (a unit test's services), the
    /// job runs on the caller.
    public func submit(_ job: FanOutJob) {
        submitted.add(1, ordering: .relaxed)
        // Room is certain: the worker holds as many jobs as can be reserved.
        _ = worker.submit { [self] in run(job) }
    }

    public var counters: Counters {
        Counters(
            pending: pending.load(ordering: .relaxed), completed: completed.load(ordering: .relaxed),
            delivered: delivered.load(ordering: .relaxed),
            lastRate: Double(bitPattern: lastRateBits.load(ordering: .relaxed)))
    }

    /// A mark for "every job submitted so far" (see `hasFinished`).
    public var submittedMark: UInt64 { submitted.load(ordering: .acquiring) }

    /// Whether every job submitted before `mark` was taken has been delivered: a query that
    /// waits for this sees every topic or broadcast send answered before it began.
    public func hasFinished(_ mark: UInt64) -> Bool { finished.load(ordering: .acquiring) >= mark }

    /// Waits (polling) until no job is pending; false when `timeoutMs` passed first.
    public func waitUntilIdle(timeoutMs: Int) -> Bool {
        let deadline = Clock.monotonicNanoseconds() + UInt64(max(0, timeoutMs)) * 1_000_000
        while pending.load(ordering: .acquiring) > 0 {
            if Clock.monotonicNanoseconds() >= deadline { return false }
            usleep(1_000)
        }
        return true
    }

    /// The worker's nice value: it yields the CPU to the event loops (its deliveries are behind
    /// an answer already sent; a loop's requests are not).
    static let nice: Int32 = 10

    /// One job: its recipients, then a delivery and a log record (with the device's outcome) each, a batch at a time.
    func run(_ job: FanOutJob) {
        let started = Clock.monotonicNanoseconds()
        // Recipients stream in (a fleet's subscribers are never a list); the count delivered is
        // published a batch at a time.
        var index = 0
        var unpublished = 0
        job.recipients { token in
            let delivery = job.delivery(token, index)
            let outcome = devices.deliver(delivery)
            log.append(
                shard: logShard, id: delivery.notificationID, provider: delivery.provider,
                receivedAtMs: delivery.receivedAtMs, environment: delivery.environment ?? "", token: delivery.tokenBytes,
                topic: job.topic?[...], headers: job.headers, payload: delivery.payload, payloadIsJSON: job.payloadIsJSON,
                warnings: job.warnings, outcome: outcome, team: job.team)
            if devices.events.wants(.delivered) { devices.publishDelivered(delivery, outcome, atMs: Clock.nowMs()) }
            index += 1
            unpublished += 1
            if unpublished == FanOutWorker.batchSize {
                delivered.add(UInt64(unpublished), ordering: .relaxed)
                unpublished = 0
            }
            return true
        }
        delivered.add(UInt64(unpublished), ordering: .relaxed)
        if index >= 1_000 {
            let seconds = Double(Clock.monotonicNanoseconds() - started) / 1e9
            lastRateBits.store((Double(index) / max(seconds, 1e-9)).bitPattern, ordering: .relaxed)
        }
        completed.add(1, ordering: .relaxed)
        finished.add(1, ordering: .releasing)
        pending.subtract(1, ordering: .releasing)
    }
}
