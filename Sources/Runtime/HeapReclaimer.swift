import CSystem
import Glibc
import Synchronization

/// Gives memory back to the kernel after a burst: once a second a thread of its own reads the
/// allocator's counts, and when what it holds free is both at least `minimumFree` and a
/// quarter of what is in use (connections closed, rules or state deleted, buffers drained) it
/// trims every arena (`malloc_trim`), at most every `interval`; so it does, with at least 1 MiB
/// free, once what is in use has not grown for three seconds. The allocator keeps freed
/// memory otherwise (`csys_tune_malloc`: no trim-and-regrow on the request path), so RSS would
/// stay at its peak. The loops never wait for it: trimming takes arena locks briefly, off them.
public final class HeapReclaimer: @unchecked Sendable { // the thread handle is set by start/stop only
    let minimumFree: Int
    let intervalNanos: UInt64
    private let stopping = Atomic<Bool>(false)
    private let trims = Atomic<Int>(0)
    private var thread: pthread_t?

    public init(minimumFree: Int = 4 << 20, intervalNanos: UInt64 = 2_000_000_000) {
        self.minimumFree = minimumFree
        self.intervalNanos = intervalNanos
    }

    /// What a quiet heap must hold free before it is trimmed (see `run`).
    static let quietMinimumFree = 1 << 20

    /// How many times it trimmed.
    var trimCount: Int { trims.load(ordering: .relaxed) }

    public func start() {
        guard thread == nil else { return }
        stopping.store(false, ordering: .relaxed)
        thread = Threads.spawn { [self] in run() }
    }

    public func stop() {
        stopping.store(true, ordering: .releasing)
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func run() {
        var lastTrim: UInt64 = 0
        var slept = 0
        var lastInUse = Int.max
        var quietChecks = 0
        while !stopping.load(ordering: .acquiring) {
            usleep(100_000)
            slept += 1
            guard slept >= 10 else { continue }
            slept = 0
            var inUse = 0
            var free = 0
            csys_heap_usage(&inUse, &free)
            let now = csys_monotonic_ns()
            // Quiet: what is in use has not grown for three checks in a row (the burst is
            // over), so the free memory left below the quarter rule is given back too.
            quietChecks = inUse <= lastInUse ? quietChecks + 1 : 0
            lastInUse = inUse
            let worth = free >= minimumFree && free >= inUse / 4
            let quietRest = quietChecks >= 3 && free >= Self.quietMinimumFree
            if (worth || quietRest) && now &- lastTrim >= intervalNanos {
                quietChecks = 0
                csys_trim_heap()
                lastTrim = now
                trims.add(1, ordering: .relaxed)
            }
        }
    }
}
