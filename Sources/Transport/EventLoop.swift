import CSystem
import Glibc
import Runtime
import Synchronization

/// Something registered with an event loop's epoll set.
protocol EventHandler: AnyObject {
    func handle(events: UInt32)
}

/// Work that must be done before output given during this loop iteration leaves: a write-ahead
/// log writing the records the answers about to go depend on. Armed once per iteration with
/// `EventLoop.arm(_:)`; it runs before the iteration's deferred flushes, and what it gives
/// (answers, flush requests) goes out in the same iteration.
public protocol FlushBarrier: AnyObject {
    func beforeFlush()
}

/// A timer scheduled on an event loop; `cancel()` it from that loop.
public final class LoopTimer {
    let deadline: UInt64
    let sequence: UInt64
    var task: (() -> Void)?

    init(deadline: UInt64, sequence: UInt64, task: @escaping () -> Void) {
        self.deadline = deadline
        self.sequence = sequence
        self.task = task
    }

    public func cancel() { task = nil }
}

/// One epoll-based event-loop thread. It owns its connections and everything per connection:
/// nothing it touches per request is shared with another loop.
public final class EventLoop: @unchecked Sendable {
    public let index: Int
    let epfd: Int32
    private let wakeFD: Int32
    private let inbox = FutexLock<[@Sendable () -> Void]>([])
    private var handlers: [EventHandler?] = []
    private var timers: [LoopTimer] = [] // binary min-heap on (deadline, sequence)
    private var timerSequence: UInt64 = 0
    private var thread: pthread_t?
    private var stopping = false
    /// Read buffer shared by every connection of this loop (input is consumed synchronously).
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Connections currently open on this loop (read by the server during drain).
    let openConnections = Atomic<Int>(0)
    /// Accepted sockets another loop's acceptor handed to this one, not yet adopted.
    let incomingConnections = Atomic<Int>(0)
    /// What acceptors balance on: connections open here and on their way here.
    var connectionLoad: Int {
        openConnections.load(ordering: .relaxed) &+ incomingConnections.load(ordering: .relaxed)
    }
    /// HTTP/2 streams currently open on this loop's connections (for metrics; only this loop
    /// writes it).
    let openStreams = Atomic<Int>(0)
    /// Wall-clock milliseconds, refreshed once per loop iteration (for per-request timestamps).
    public private(set) var nowMs: Int64 = csys_wall_ms()
    /// Monotonic nanoseconds, refreshed once per loop iteration (deadlines of streams and heads).
    private(set) var nowNs: UInt64 = csys_monotonic_ns()
    /// Connections that stopped reading at their per-turn budget with input still decrypted
    /// (TLS holds it where epoll cannot see it): they read again next iteration.
    var pendingRead: [Connection] = []
    /// Called once per loop iteration after events: connections that asked for a deferred flush.
    var pendingFlush: [Connection] = []
    /// Barriers armed this iteration (see `FlushBarrier`).
    private var barriers: [any FlushBarrier] = []
    private var barriersRunning: [any FlushBarrier] = []
    /// Input read since the buffers were last measured; past `pressureThreshold` they are
    /// measured at once (`measureNow`) instead of at the next 100 ms sweep, so a fast peer
    /// cannot outrun the buffer budget between sweeps.
    private var inputSinceMeasure = 0
    var pressureThreshold = Int.max
    var measureNow: (() -> Void)?

    @inline(__always)
    func noteInput(_ n: Int) {
        inputSinceMeasure &+= n
        if inputSinceMeasure > pressureThreshold {
            inputSinceMeasure = 0
            measureNow?()
        }
    }

    /// Connections admitted past the server's limit, to be answered 503 / GOAWAY (loop only).
    var sheddingConnections = 0
    /// Those connections, oldest first (some closed since: skipped when reached), so a newcomer
    /// past `Acceptor.maxShedding` resets the oldest instead of being refused unheard.
    var sheddingQueue: [Connection] = []
    var sheddingQueueHead = 0

    /// Drops the queued connections that closed or took a slot (on the sweep: the queue holds
    /// no more than the connections still waiting, give or take a sweep's worth).
    func compactSheddingQueue() {
        if sheddingConnections == 0 {
            // None waiting: the closed ones (and their sessions' memory) go at once.
            if !sheddingQueue.isEmpty { sheddingQueue = [] }
            sheddingQueueHead = 0
            return
        }
        guard sheddingQueue.count > 2 * sheddingConnections + 64 else { return }
        sheddingQueue = sheddingQueue[sheddingQueueHead...].filter(\.isWaitingPastLimit)
        sheddingQueueHead = 0
    }
    /// This loop's acceptors, one per listening socket.
    var acceptors: [Acceptor] = []
    /// The loops are made one after another: what each writes per read stays off the next one's lines.
    private let padding = CacheLinePadding()

    init(index: Int) throws {
        self.index = index
        epfd = csys_epoll_create()
        wakeFD = csys_eventfd()
        guard epfd >= 0, wakeFD >= 0 else { throw TransportError.system("epoll/eventfd", errno) }
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        _ = csys_epoll_add(epfd, wakeFD, CSYS_EPOLLIN, UInt64(wakeFD))
    }

    deinit {
        close(epfd)
        close(wakeFD)
        readBuffer.deallocate()
    }

    /// True on this loop's own thread.
    public var inEventLoop: Bool {
        guard let thread else { return false }
        return pthread_equal(pthread_self(), thread) != 0
    }

    /// Runs `task` on this loop (from any thread).
    public func execute(_ task: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(task) }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Has `barrier` run before this iteration's deferred flushes. Call from the loop only, once
    /// per iteration (the caller remembers that it armed it).
    public func arm(_ barrier: any FlushBarrier) { barriers.append(barrier) }

    /// Runs `task` on this loop after `nanoseconds`. Call from the loop only.
    @discardableResult
    public func schedule(afterNanoseconds nanoseconds: UInt64, _ task: @escaping () -> Void) -> LoopTimer {
        timerSequence &+= 1
        let t = LoopTimer(deadline: csys_monotonic_ns() &+ nanoseconds, sequence: timerSequence, task: task)
        heapPush(t)
        return t
    }

    // MARK: registration (loop thread only)

    func register(fd: Int32, handler: EventHandler, events: UInt32, exclusive: Bool = false) -> Bool {
        let idx = Int(fd)
        if idx >= handlers.count { handlers.append(contentsOf: repeatElement(nil, count: idx + 1 - handlers.count + 64)) }
        handlers[idx] = handler
        let ev = exclusive ? events | CSYS_EPOLLEXCLUSIVE : events
        if csys_epoll_add(epfd, fd, ev, UInt64(fd)) != 0 {
            handlers[idx] = nil
            return false
        }
        return true
    }

    func modify(fd: Int32, events: UInt32) {
        _ = csys_epoll_mod(epfd, fd, events, UInt64(fd))
    }

    func unregister(fd: Int32) {
        _ = csys_epoll_del(epfd, fd)
        if Int(fd) < handlers.count { handlers[Int(fd)] = nil }
    }

    /// At the connection limit: closes this loop's longest-idle connection that holds a slot
    /// (nothing read or answered, nothing buffered; or connected and silent) so a new client
    /// can have it. False when none is idle.
    func evictIdleConnection() -> Bool {
        var oldest: Connection?
        for c in connections where c.holdsSlot && c.isIdle {
            if oldest == nil || c.lastActivity < oldest!.lastActivity { oldest = c }
        }
        guard let oldest else { return false }
        oldest.close()
        return true
    }

    /// Every open connection of this loop.
    var connections: [Connection] {
        handlers.compactMap { $0 as? Connection }
    }

    // MARK: running

    func start() {
        thread = Threads.spawn { [self] in self.run() }
    }

    func join() {
        if let thread { pthread_join(thread, nil) }
    }

    /// Asks the loop to exit after the current iteration.
    func stop() {
        execute { [self] in self.stopping = true }
    }

    private func run() {
        thread = pthread_self()
        var events = [csys_event](repeating: csys_event(), count: 256)
        while !stopping { iterate(&events, timeoutMs: nextTimeoutMs()) }
    }

    /// One turn: wait for events (up to `timeoutMs`), handle them, then the flushes, the
    /// timers, the tasks sent from other threads, and the connections that read again.
    private func iterate(_ events: inout [csys_event], timeoutMs: Int32) {
        let n = events.withUnsafeMutableBufferPointer { csys_epoll_wait(epfd, $0.baseAddress, Int32($0.count), timeoutMs) }
        nowMs = csys_wall_ms()
        nowNs = csys_monotonic_ns()
        if n > 0 {
            for i in 0..<Int(n) {
                let fd = Int(truncatingIfNeeded: events[i].data)
                if fd == Int(wakeFD) {
                    var v: UInt64 = 0
                    _ = read(wakeFD, &v, 8)
                    continue
                }
                if fd < handlers.count, let h = handlers[fd] {
                    h.handle(events: events[i].events)
                }
            }
        }
        runFlushes()
        runTimers()
        runInbox()
        runFlushes()
        runPendingReads()
    }

    /// Runs the loop on the calling thread until `done()` or `timeoutNs` passed (an embedded
    /// loop, never `start`ed: see `EmbeddedTransport`). Returns `done()`.
    func runEmbedded(timeoutNs: UInt64, until done: () -> Bool) -> Bool {
        precondition(pthread_equal(pthread_self(), thread ?? pthread_self()) != 0, "an embedded loop runs on one thread")
        thread = pthread_self()
        let deadline = csys_monotonic_ns() &+ timeoutNs
        var events = [csys_event](repeating: csys_event(), count: 16)
        while !done() {
            let now = csys_monotonic_ns()
            guard now < deadline else { return false }
            let left = Int32(min((deadline - now) / 1_000_000 + 1, 1000))
            iterate(&events, timeoutMs: min(nextTimeoutMs(), left))
        }
        return true
    }

    private func runPendingReads() {
        guard !pendingRead.isEmpty else { return }
        let list = pendingRead
        pendingRead.removeAll(keepingCapacity: true)
        for c in list { c.resumeReading() }
        runFlushes()
    }

    private func runInbox() {
        let tasks = inbox.withLock { q -> [@Sendable () -> Void] in
            if q.isEmpty { return [] }
            let t = q
            q.removeAll(keepingCapacity: true)
            return t
        }
        for t in tasks { t() }
    }

    private func runFlushes() {
        while !pendingFlush.isEmpty || !barriers.isEmpty {
            if !barriers.isEmpty {
                swap(&barriers, &barriersRunning)
                for b in barriersRunning { b.beforeFlush() }
                barriersRunning.removeAll(keepingCapacity: true)
            }
            let list = pendingFlush
            pendingFlush.removeAll(keepingCapacity: true)
            for c in list { c.deferredFlush() }
        }
    }

    private func nextTimeoutMs() -> Int32 {
        if !pendingRead.isEmpty || !inbox.withLock({ $0.isEmpty }) { return 0 }
        guard let first = timers.first else { return 1000 }
        let now = csys_monotonic_ns()
        if first.deadline <= now { return 0 }
        let ms = (first.deadline - now + 999_999) / 1_000_000
        return Int32(min(ms, 1000))
    }

    private func runTimers() {
        guard !timers.isEmpty else { return }
        let now = csys_monotonic_ns()
        while let first = timers.first, first.deadline <= now {
            heapPop()
            if let task = first.task {
                first.task = nil
                task()
            }
        }
    }

    // MARK: timer heap

    private func less(_ a: LoopTimer, _ b: LoopTimer) -> Bool {
        a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence)
    }

    private func heapPush(_ t: LoopTimer) {
        timers.append(t)
        var i = timers.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if less(timers[i], timers[p]) {
                timers.swapAt(i, p)
                i = p
            } else {
                break
            }
        }
    }

    private func heapPop() {
        let last = timers.removeLast()
        guard !timers.isEmpty else { return }
        timers[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < timers.count && less(timers[l], timers[m]) { m = l }
            if r < timers.count && less(timers[r], timers[m]) { m = r }
            if m == i { break }
            timers.swapAt(i, m)
            i = m
        }
    }
}

public enum TransportError: Error, CustomStringConvertible {
    case system(String, Int32)
    case address(String)
    case tls(String)

    public var description: String {
        switch self {
        case .system(let what, let code): "\(what): \(String(cString: strerror(code)))"
        case .address(let s): s
        case .tls(let s): s
        }
    }
}
