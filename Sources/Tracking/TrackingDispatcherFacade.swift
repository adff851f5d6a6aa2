import CCurl
import Observation
import PushCore
import Runtime

/// The tracking dispatcher: `threads` lanes, each a thread with its own libcurl multi handle,
/// connection pool and queue. A device's calls always take the same lane (by token hash), so
/// they keep their order and its batches meet. Submitting never blocks the caller.
public final class TrackingDispatcher: @unchecked Sendable {
    public struct Options: Sendable {
        /// Dispatcher threads (lanes); the emulator gives one per event loop unless told
        /// (`--tracking-lanes`).
        public var threads = 2
        /// Requests in flight at most, per lane.
        public var maxInFlight = 32
        public var maxPerHost = 32
        /// Jobs waiting at most, split evenly over the lanes (a device's jobs all wait on its lane).
        public var queueCapacity = 2_000_000
        /// Bytes the waiting jobs may take at most (each counted by `TrackingJob.footprint`),
        /// split the same way: beyond it, calls wait in the spool on disk (`spoolBytes`), and
        /// are dropped (counted) only when that is full too.
        public var queueBytes = 64 << 20
        /// Disk the calls beyond `queueBytes` may take while they wait, split over the lanes
        /// (0: none, they are dropped and counted).
        public var spoolBytes = 8 << 30
        /// Where the spool's nameless files are made (the data directory, or TMPDIR).
        public var spoolDirectory = Files.temporaryDirectory
        public var timeoutMs = 30_000
        public var connectTimeoutMs = 5_000
        /// Attempts in all, the first included.
        public var maxAttempts = 5
        public var backoffBaseMs: Int64 = 200
        var backoffMaxMs: Int64 = 30_000
        public var caFile: String?
        public init() {}
    }

    public let options: Options
    public let log: TrackingLog
    let lanes: [TrackingLane]

    public init(options: Options = Options(), log: TrackingLog) {
        CurlGlobal.initialize()
        self.options = options
        self.log = log
        let n = max(1, options.threads)
        var laneOptions = options
        laneOptions.queueCapacity = max(1, options.queueCapacity / n)
        laneOptions.queueBytes = max(1 << 16, options.queueBytes / n)
        laneOptions.spoolBytes = options.spoolBytes / n
        lanes = (0..<n).map { _ in TrackingLane(options: laneOptions, log: log) }
    }

    public func start() { for l in lanes { l.start() } }

    public func stop() { for l in lanes { l.stop() } }

    /// The lanes (threads) calls are spread over.
    public var laneCount: Int { lanes.count }

    /// Jobs waiting (in memory or in the spool) or in flight.
    public var depth: Int { lanes.reduce(0) { $0 + $1.depth } }

    /// Jobs waiting in the spool, on disk.
    public var spooled: Int { lanes.reduce(0) { $0 + $1.spooledCount } }

    /// Queues a job; false (and counted as dropped) when its lane's queue is full.
    @discardableResult
    public func submit(_ job: TrackingJob) -> Bool {
        if lanes.count == 1 { return lanes[0].submit(job) }
        // One device, one lane: its calls keep their order and its batches meet.
        return lanes[TokenKey(job.token).shard(lanes.count)].submit(job)
    }

    /// Queues a bulk job (a fleet's registration) only while its lane's queue keeps a tenth of
    /// its room free for pushes' tracking; false, and nothing dropped or counted, otherwise:
    /// the caller offers it again later.
    public func offer(_ job: TrackingJob) -> Bool {
        let lane = lanes.count == 1 ? lanes[0] : lanes[TokenKey(job.token).shard(lanes.count)]
        return lane.submit(job, leaving: max(1, lane.options.queueCapacity / 10))
    }
}

extension TrackingDispatcher: MetricsSource {
    /// The calls waiting or in flight, over every lane.
    public func writeMetrics(_ m: inout MetricsText) {
        m.single("pushemu_tracking_queue_depth", "gauge", "Tracking calls waiting or in flight.", depth)
    }
}
