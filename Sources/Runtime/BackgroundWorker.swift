import CSystem
import Glibc
import Synchronization

/// A thread for work too slow for an event loop (RSA key generation, say): jobs run one at a
/// time, in order, and answer through `Exchange.respond`, which hops back to the owning loop.
/// At most `capacity` jobs wait; `submit` refuses more, so a flood of slow requests queues
/// nothing unbounded and never stalls a loop. `stop()` runs what is queued, then joins.
public final class BackgroundWorker: @unchecked Sendable { // the thread handle is set by start/stop only
    public let capacity: Int
    /// The thread's nice value (0: as the loops; more: it yields the CPU to them).
    public let nice: Int32
    private let queue = FutexLock<[@Sendable () -> Void]>([])
    private let waiting = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    /// The thread is about to wait, or waits, on `wakeFD`: only then does a submit write to it
    /// (a push a loop hands over costs no system call while the thread is busy).
    private let sleeping = Atomic<Bool>(false)
    private let wakeFD: Int32
    private var thread: pthread_t?

    /// The thread's name (`top -H`), at most 15 bytes.
    public let name: String?

    public init(capacity: Int = 64, nice: Int32 = 0, name: String? = nil) {
        self.capacity = capacity
        self.nice = nice
        self.name = name
        wakeFD = csys_eventfd()
    }

    deinit { if wakeFD >= 0 { close(wakeFD) } }

    public func start() {
        guard thread == nil else { return }
        stopping.store(false, ordering: .relaxed)
        thread = Threads.spawn { [self] in run() }
    }

    public func stop() {
        stopping.store(true, ordering: .releasing)
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Queues `job`; false when `capacity` jobs are waiting already. Without a started thread
    /// (a unit test's), the job runs on the caller.
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        guard thread != nil else {
            job()
            return true
        }
        guard waiting.increment(below: capacity) else { return false }
        queue.withLock { $0.append(job) }
        // Sequentially consistent with the thread's store and re-check: either it sees the job, or this sees it sleeping.
        if sleeping.load(ordering: .sequentiallyConsistent) { wake() }
        return true
    }

    private func wake() {
        guard wakeFD >= 0 else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Whether `start()` made the thread (jobs are queued, not run on the caller).
    public var isRunning: Bool { thread != nil }

    private func run() {
        if let name { csys_name_thread(name) }
        if nice != 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) } // 0: this thread, on Linux
        while true {
            let jobs = queue.withLock { q -> [@Sendable () -> Void] in
                let all = q
                q.removeAll(keepingCapacity: true)
                return all
            }
            for job in jobs {
                job()
                waiting.subtract(1, ordering: .relaxed)
            }
            if jobs.isEmpty {
                if stopping.load(ordering: .acquiring) && queue.withLock({ $0.isEmpty }) { return }
                sleeping.store(true, ordering: .sequentiallyConsistent)
                if queue.withLock({ $0.isEmpty }) {
                    var fds = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
                    _ = poll(&fds, 1, 100)
                    var drained: UInt64 = 0
                    _ = read(wakeFD, &drained, 8)
                }
                sleeping.store(false, ordering: .relaxed)
            }
        }
    }
}
