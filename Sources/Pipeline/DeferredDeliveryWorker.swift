import Runtime
import Synchronization

/// Delivers the pushes a gateway finishes after its answer (`PushGateway.deferredPush`: a Web
/// Push message, which the browser decrypts), off the event loops, on `lanes` threads. They run
/// at the loops' priority: each push costs a lane a fixed share of the loop's work (unlike a
/// fan-out's), and a lane starved by busy loops would fill its queue and refuse pushes.
/// A push goes to the lane its token hashes to, so one device's pushes are delivered in the
/// order they were answered.
///
/// Bounds: at most `capacity` pushes wait or run. The pipeline asks `reserve()` before it
/// accepts one and answers "too many requests" (in the service's format) when there is no room,
/// so nothing accepted is ever dropped. `stop()` delivers every push already accepted.
public final class DeferredDeliveryWorker: Sendable {
    /// Pushes accepted and not yet delivered, at most (a body is at most 8 KiB: 128 MiB in all).
    public static let capacity = 16_384

    public struct Counters: Sendable {
        public var lanes: Int
        /// Accepted and not yet delivered.
        public var pending: Int
        public var completed: UInt64
    }

    /// One thread, with its pushes submitted and finished (in order within the lane).
    final class Lane: Sendable {
        let worker = BackgroundWorker(capacity: DeferredDeliveryWorker.capacity, name: "pushemu-deliver")
        let submitted = Atomic<UInt64>(0)
        let finished = Atomic<UInt64>(0)
    }

    private let lanes: [Lane]
    private let pending = Atomic<Int>(0)
    private let completed = Atomic<UInt64>(0)

    /// `lanes` threads (at least one).
    public init(lanes: Int) {
        self.lanes = (0..<max(1, lanes)).map { _ in Lane() }
    }

    public var laneCount: Int { lanes.count }

    public func start() { for l in lanes { l.worker.start() } }

    /// Delivers every accepted push, then stops the threads.
    public func stop() { for l in lanes { l.worker.stop() } }

    /// Claims room for one push; false when `capacity` are pending.
    public func reserve() -> Bool { pending.increment(below: DeferredDeliveryWorker.capacity) }

    /// Gives back a reservation no push came of.
    public func release() { pending.subtract(1, ordering: .relaxed) }

    /// Runs `job` (after `reserve()`) on the lane `lane` hashes to. Without started threads (a
    /// unit test's services), it runs on the caller.
    public func submit(lane: UInt64, _ job: @escaping @Sendable () -> Void) {
        let l = lanes[Int(lane % UInt64(lanes.count))]
        l.submitted.add(1, ordering: .relaxed)
        // Room is certain: each lane holds as many pushes as can be reserved.
        _ = l.worker.submit { [self] in
            job()
            completed.add(1, ordering: .relaxed)
            l.finished.add(1, ordering: .releasing)
            pending.subtract(1, ordering: .releasing)
        }
    }

    public var counters: Counters {
        Counters(lanes: lanes.count, pending: pending.load(ordering: .relaxed), completed: completed.load(ordering: .relaxed))
    }

    /// A mark for "every push submitted so far" (see `hasFinished`).
    public var submittedMark: [UInt64] { lanes.map { $0.submitted.load(ordering: .acquiring) } }

    /// Whether every push submitted before `mark` was taken has been delivered.
    public func hasFinished(_ mark: [UInt64]) -> Bool {
        for (l, m) in zip(lanes, mark) where l.finished.load(ordering: .acquiring) < m { return false }
        return true
    }
}
