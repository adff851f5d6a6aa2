import CCurl
import PushCore

/// The tracking dispatcher: `threads` lanes, each a thread with its own libcurl multi handle,
/// connection pool and queue. A device's calls always take the same lane (by token hash), so
/// they keep their order and its batches meet. Submitting never blocks the caller.
package final class TrackingDispatcher: @unchecked Sendable {
    package struct Options: Sendable {
        /// Dispatcher threads (lanes).
        package var threads = 2
        /// Requests in flight at most, per lane.
        package var maxInFlight = 32
        package var maxPerHost = 32
        package var queueCapacity = 2_000_000
        package var timeoutMs = 30_000
        package var connectTimeoutMs = 5_000
        /// Attempts in all, the first included.
        package var maxAttempts = 5
        package var backoffBaseMs: Int64 = 200
        package var backoffMaxMs: Int64 = 30_000
        package var caFile: String?
        package init() {}
    }

    package let options: Options
    package let log: TrackingLog
    let lanes: [TrackingLane]

    package init(options: Options = Options(), log: TrackingLog) {
        CurlGlobal.initialize()
        self.options = options
        self.log = log
        let n = max(1, options.threads)
        var laneOptions = options
        laneOptions.queueCapacity = max(1, options.queueCapacity / n)
        lanes = (0..<n).map { _ in TrackingLane(options: laneOptions, log: log) }
    }

    package func start() { for l in lanes { l.start() } }

    package func stop() { for l in lanes { l.stop() } }

    /// Jobs waiting or in flight.
    package var depth: Int { lanes.reduce(0) { $0 + $1.depth } }

    /// Queues a job; false (and counted as dropped) when its lane's queue is full.
    @discardableResult
    package func submit(_ job: TrackingJob) -> Bool {
        if lanes.count == 1 { return lanes[0].submit(job) }
        // One device, one lane: its calls keep their order and its batches meet.
        return lanes[TokenKey(job.token).shard(lanes.count)].submit(job)
    }
}
