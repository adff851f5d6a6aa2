import CCurl
import CSystem
import Glibc
import PushCore
import Runtime
import Synchronization
import Transport

/// Requests to be grouped into one (MoEngage's and Braze's batched SDK endpoints): items with
/// the same key are sent together when `maxItems` are waiting or `flushAfterMs` has passed. Plain
/// data (the request is built from `kind` and `fields` when the batch is sent), so a waiting job
/// can be written to the spool and read back.
public struct TrackingBatch: Sendable {
    /// The preset whose request carries the items.
    public enum Kind: UInt8, Sendable {
        case moengage = 1
        case braze = 2
    }
    public var key: String
    public var item: [UInt8]
    var flushAfterMs: Int64
    var maxItems: Int
    public var kind: Kind
    /// What the request needs besides the items (its URL first), in the order `kind` reads them.
    public var fields: [String]

    public init(key: String, item: [UInt8], flushAfterMs: Int64, maxItems: Int, kind: Kind, fields: [String]) {
        self.key = key
        self.item = item
        self.flushAfterMs = flushAfterMs
        self.maxItems = maxItems
        self.kind = kind
        self.fields = fields
    }

    /// The one request that carries `items`.
    public func build(_ items: [[UInt8]]) -> TrackingRequest {
        switch kind {
        case .moengage: MoEngagePreset.batchRequest(fields: fields, items: items)
        case .braze: BrazePreset.batchRequest(fields: fields, items: items)
        }
    }
}

/// One tracking call to make, not before `notBeforeMs`. A reference: queues and heaps move a
/// pointer, not a dozen fields. Owned by one thread at a time (the submitter, then its lane).
public final class TrackingJob: @unchecked Sendable {
    public var request: TrackingRequest
    public var event: TrackingEvent
    public var preset: String
    public var token: String
    public var notificationID: String
    public var notBeforeMs: Int64
    public var batch: TrackingBatch?
    /// The device's platform, "ios" or "android".
    public var platform: String
    /// The campaign id of the notification reported on (nil: none, or a registration).
    public var campaign: String?
    /// The memory it holds while it waits, about (counted against `Options.queueBytes`).
    var footprint: Int {
        var n = 360 + request.url.utf8.count + request.body.count + token.utf8.count + notificationID.utf8.count
        for (k, v) in request.headers { n += 32 + k.utf8.count + v.utf8.count }
        if let b = batch { n += 64 + b.item.count + b.key.utf8.count + b.fields.reduce(0) { $0 + 16 + $1.utf8.count } }
        return n + (campaign?.utf8.count ?? 0)
    }
    /// `footprint` when it was queued (given back when it leaves).
    var queuedBytes = 0
    /// Queued to wait in the spool, not in memory (its lane's memory was full).
    var spill = false
    var attempt = 1
    var events = 1

    public init(
        request: TrackingRequest, event: TrackingEvent, preset: String, token: String, notificationID: String,
        notBeforeMs: Int64, batch: TrackingBatch? = nil, platform: String = "", campaign: String? = nil
    ) {
        self.campaign = campaign
        self.request = request
        self.event = event
        self.preset = preset
        self.token = token
        self.notificationID = notificationID
        self.notBeforeMs = notBeforeMs
        self.batch = batch
        self.platform = platform
    }
}

/// One lane of the tracking dispatcher: one thread running libcurl's multi socket interface on
/// its own epoll set (only the sockets with events are serviced, never a scan of every
/// transfer). Submitting never
/// blocks the caller (an event loop): jobs go into a bounded queue, and when it is full they
/// are dropped and counted, never lost silently. Connections are reused (libcurl's pool, at
/// most `maxPerHost` per target), transfers have a timeout, and 5xx answers and connection
/// errors are retried with exponential backoff (4xx are final). Every attempt is recorded.
final class TrackingLane: @unchecked Sendable {
    typealias Options = TrackingDispatcher.Options

    public let options: Options
    public let log: TrackingLog
    private let inbox = FutexLock<[TrackingJob]>([])
    /// Jobs waiting in memory or in flight.
    private let queued = Atomic<Int>(0)
    /// Jobs waiting in the spool (or on their way to it).
    private let spooled = Atomic<Int>(0)
    /// The spool refused a job (full, or its file failed): submissions beyond memory are
    /// dropped until it has drained to half.
    private let spoolFull = Atomic<Bool>(false)
    /// The waiting jobs' footprints.
    private let queuedBytes = Atomic<Int>(0)
    private let wakePending = Atomic<Bool>(false)
    /// The lane is asleep with nothing in flight: only then does a submission need a wake-up
    /// (a busy lane looks at its inbox at least every `busyPollMs`, without a syscall per job).
    private let idle = Atomic<Bool>(true)
    static let busyPollMs = 5
    private let stopping = Atomic<Bool>(false)
    private let multi: UnsafeMutableRawPointer
    private var thread: pthread_t?

    // Owned by the dispatcher thread.
    private var heap = JobHeap()
    private var ready: [TrackingJob] = []
    private var readyHead = 0
    private var batches: [String: OpenBatch] = [:]
    /// Where jobs wait once memory is full (nil: `spoolBytes` is 0, they are dropped).
    private let spool: TrackingSpool?
    /// Transfers in flight (each rides in its easy handle's CURLOPT_PRIVATE, retained).
    private var inFlight = 0
    /// Easy handles kept configured between transfers, with the shape they were last set up for
    /// (a plain GET needs only its URL changed).
    private var idleHandles: [(UnsafeMutableRawPointer, Shape)] = []
    /// Each easy handle's parsed URL (see `CurlURLs`).
    private var urls = CurlURLs()
    /// Calls to `http://` sinks at an IP address or `localhost`, made without libcurl.
    private let plain: PlainHTTPClient

    enum Shape: Equatable { case fresh, plainGet, other }

    struct OpenBatch {
        var first: TrackingJob
        var items: [[UInt8]]
        var deadlineMs: Int64
    }

    final class Transfer {
        let job: TrackingJob
        let easy: UnsafeMutableRawPointer
        var headers: UnsafeMutablePointer<curl_slist>?
        var shape = Shape.other
        let startNs: UInt64
        init(job: TrackingJob, easy: UnsafeMutableRawPointer, startNs: UInt64) {
            self.job = job
            self.easy = easy
            self.startNs = startNs
        }
    }

    init(options: Options, log: TrackingLog) {
        epfd = csys_epoll_create()
        wakeFD = csys_eventfd()
        _ = csys_epoll_add(epfd, wakeFD, CSYS_EPOLLIN, TrackingLane.wakeTag)
        self.options = options
        self.log = log
        spool = options.spoolBytes > 0 ? TrackingSpool(directory: options.spoolDirectory, maxBytes: options.spoolBytes) : nil
        plain = PlainHTTPClient(
            epfd: epfd, maxPerHost: options.maxPerHost, timeoutMs: options.timeoutMs, connectTimeoutMs: options.connectTimeoutMs)
        multi = curl_multi_init()
        pushemu_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, options.maxPerHost)
        pushemu_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, options.maxInFlight)
        pushemu_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        // Keep the pool as large as the connections in use: a smaller cache closes and reopens
        // connections under load (a connect per few hundred requests).
        pushemu_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(options.maxInFlight, options.maxPerHost) * 2)
    }

    deinit {
        plain.closeAll()
        for (h, _) in idleHandles { curl_easy_cleanup(h) }
        urls.removeAll()
        curl_multi_cleanup(multi)
        close(wakeFD)
        close(epfd)
    }

    public func start() {
        thread = Threads.spawn { [self] in self.run() }
    }

    /// Stops after in-flight transfers finish or `graceMs` passes; queued jobs are dropped (counted).
    public func stop() {
        stopping.store(true, ordering: .releasing)
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Jobs waiting (in memory or in the spool) or in flight.
    public var depth: Int { queued.load(ordering: .relaxed) + spooled.load(ordering: .relaxed) }

    /// Jobs waiting in the spool.
    var spooledCount: Int { spooled.load(ordering: .relaxed) }

    /// Queues a job; false (and counted as dropped) when the queue is full.
    @discardableResult
    public func submit(_ job: TrackingJob) -> Bool { submit(job, leaving: 0) }

    /// Queues `job` while more than `reserve` places are free; otherwise false, counted as a
    /// drop only when no reserve was asked for (a bulk producer waits and offers it again).
    func submit(_ job: TrackingJob, leaving reserve: Int) -> Bool {
        let bytes = job.footprint
        let reserveBytes = reserve == 0 ? 0 : options.queueBytes / 10
        if queued.load(ordering: .relaxed) >= options.queueCapacity - reserve
            || queuedBytes.load(ordering: .relaxed) + bytes > options.queueBytes - reserveBytes
        {
            guard reserve == 0 else { return false }
            guard spool != nil && !spoolFull.load(ordering: .relaxed) else {
                log.countDropped()
                return false
            }
            // Memory is full: the job waits on disk, behind those already there.
            job.spill = true
            job.queuedBytes = 0
            spooled.add(1, ordering: .relaxed)
        } else {
            job.queuedBytes = bytes
            queuedBytes.add(bytes, ordering: .relaxed)
            queued.add(1, ordering: .relaxed)
        }
        log.countScheduled()
        inbox.withLock { $0.append(job) }
        if idle.load(ordering: .acquiring) && !wakePending.exchange(true, ordering: .acquiringAndReleasing) { wake() }
        return true
    }

    private func wake() {
        guard wakeFD >= 0 else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: the dispatcher thread

    // epoll, the wake-up eventfd and libcurl's timer, owned by the lane's thread.
    private let epfd: Int32
    private let wakeFD: Int32
    /// Per socket (by fd): the events its epoll registration asks for (0: not registered), and
    /// whether libcurl wants them now. libcurl stops watching a connection at the end of every
    /// transfer and watches it again at the next one; the registration is kept in between (an
    /// idle pooled connection is quiet), so a reused connection costs no epoll_ctl. It goes when
    /// libcurl closes the socket (`closed`) or when an unwanted event arrives (a server closing
    /// an idle connection).
    private var registered: [UInt32] = []
    private var wanted: [Bool] = []
    private var curlDeadlineNs: UInt64? = nil
    private static let wakeTag = UInt64.max

    private func run() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        pushemu_curl_multi_socket_callback(
            multi,
            { _, fd, what, userp, _ in
                Unmanaged<TrackingLane>.fromOpaque(userp!).takeUnretainedValue().watch(fd, what)
                return 0
            }, me)
        pushemu_curl_multi_timer_callback(
            multi,
            { _, ms, userp in
                let lane = Unmanaged<TrackingLane>.fromOpaque(userp!).takeUnretainedValue()
                lane.curlDeadlineNs = ms < 0 ? nil : Clock.monotonicNanoseconds() + UInt64(ms) * 1_000_000
                return 0
            }, me)
        var events = [csys_event](repeating: csys_event(), count: 256)
        var running: Int32 = 0
        while true {
            let now = Clock.nowMs()
            wakePending.store(false, ordering: .releasing)
            let incoming = inbox.withLock { j -> [TrackingJob] in
                let out = j
                j.removeAll(keepingCapacity: true)
                return out
            }
            // Due jobs from the heap first (they came earlier), then those the spool holds, then
            // the new ones: those already due skip the heap (most receive calls have no delay).
            // While the spool holds any, new jobs join it behind them (a device's calls keep
            // their order).
            while let top = heap.peek, top.notBeforeMs <= now { enqueue(heap.pop()!, now: now) }
            refill(now: now)
            for job in incoming {
                if job.spill || !(spool?.isEmpty ?? true) {
                    toSpool(job)
                } else if job.notBeforeMs <= now {
                    enqueue(job, now: now)
                } else {
                    heap.push(job)
                }
            }
            flushBatches(now: now, force: false)
            while inFlight < options.maxInFlight, readyHead < ready.count {
                let job = ready[readyHead]
                readyHead += 1
                begin(job)
            }
            if readyHead > 4096 && readyHead * 2 > ready.count {
                ready.removeFirst(readyHead)
                readyHead = 0
            }
            if let d = curlDeadlineNs, d <= Clock.monotonicNanoseconds() {
                curlDeadlineNs = nil
                curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
            }
            plain.sweep(nowNs: Clock.monotonicNanoseconds())
            completions()
            if stopping.load(ordering: .acquiring) && inFlight == 0 { break }
            var timeout = 1000
            if let top = heap.peek { timeout = min(timeout, Int(max(0, top.notBeforeMs - Clock.nowMs()))) }
            if let b = batches.values.map(\.deadlineMs).min() { timeout = min(timeout, Int(max(0, b - Clock.nowMs()))) }
            if let d = curlDeadlineNs {
                let n = Clock.monotonicNanoseconds()
                timeout = min(timeout, d <= n ? 0 : Int((d - n + 999_999) / 1_000_000))
            }
            if readyHead < ready.count && inFlight < options.maxInFlight { timeout = 0 }
            if inFlight > 0 { timeout = min(timeout, TrackingLane.busyPollMs) }
            let sleepsIdle = inFlight == 0 && timeout > 0
            if sleepsIdle {
                idle.store(true, ordering: .releasing)
                // A job that arrived before the flag was set is in the inbox: do not sleep on it.
                if inbox.withLock({ !$0.isEmpty }) { timeout = 0 }
            }
            let n = events.withUnsafeMutableBufferPointer { csys_epoll_wait(epfd, $0.baseAddress, Int32($0.count), Int32(timeout)) }
            if sleepsIdle { idle.store(false, ordering: .releasing) }
            if n > 0 {
                for i in 0..<Int(n) {
                    let e = events[i]
                    if e.data == TrackingLane.wakeTag {
                        var v: UInt64 = 0
                        _ = read(wakeFD, &v, 8)
                        continue
                    }
                    if e.data & PlainHTTPClient.tag != 0 {
                        plain.handle(fd: Int32(truncatingIfNeeded: e.data & 0xFFFF_FFFF), events: e.events)
                        continue
                    }
                    let fd = Int32(truncatingIfNeeded: e.data)
                    if Int(fd) < wanted.count, !wanted[Int(fd)] {
                        // An idle connection's event (its server closed it): stop watching; libcurl
                        // finds it dead when it next tries to reuse it.
                        _ = csys_epoll_del(epfd, fd)
                        registered[Int(fd)] = 0
                        continue
                    }
                    var mask: Int32 = 0
                    if e.events & CSYS_EPOLLIN != 0 { mask |= CURL_CSELECT_IN }
                    if e.events & CSYS_EPOLLOUT != 0 { mask |= CURL_CSELECT_OUT }
                    if e.events & (CSYS_EPOLLERR | CSYS_EPOLLHUP) != 0 { mask |= CURL_CSELECT_ERR }
                    curl_multi_socket_action(multi, curl_socket_t(fd), mask, &running)
                }
            }
            completions()
        }
        var left = heap.count + (ready.count - readyHead) + batches.values.reduce(0) { $0 + $1.items.count }
        if let spool {
            left += spool.count
            spooled.subtract(spool.count, ordering: .relaxed)
            spool.removeAll()
        }
        for job in inbox.withLock({ j -> [TrackingJob] in
            defer { j.removeAll() }
            return j
        }) {
            left += 1
            if job.spill { spooled.subtract(1, ordering: .relaxed) }
        }
        if left > 0 { log.countDropped(UInt64(left)) }
    }

    /// Moves `job` to the end of the spool (a job counted in memory stops being counted there);
    /// a job the spool refuses is dropped and counted.
    private func toSpool(_ job: TrackingJob) {
        guard let spool else { return }
        if !job.spill {
            queued.subtract(1, ordering: .relaxed)
            queuedBytes.subtract(job.queuedBytes, ordering: .relaxed)
            job.queuedBytes = 0
            job.spill = true
            spooled.add(1, ordering: .relaxed)
        }
        if !spool.append(job) {
            spoolFull.store(true, ordering: .relaxed)
            spooled.subtract(1, ordering: .relaxed)
            log.countDropped()
            if let f = spool.failure { TrackingLane.reportSpoolFailure(f) }
        }
    }

    /// Brings spooled jobs back into memory while it is under half full and few are ready.
    private func refill(now: Int64) {
        guard let spool else { return }
        while !spool.isEmpty, ready.count - readyHead < 4 * options.maxInFlight + 1024,
            queuedBytes.load(ordering: .relaxed) < options.queueBytes / 2,
            queued.load(ordering: .relaxed) < options.queueCapacity / 2
        {
            guard let job = spool.next() else {
                // The file failed: what it holds is lost, and counted.
                let lost = spool.count
                spooled.subtract(lost, ordering: .relaxed)
                log.countDropped(UInt64(lost))
                spool.removeAll()
                if let f = spool.failure { TrackingLane.reportSpoolFailure(f) }
                break
            }
            spooled.subtract(1, ordering: .relaxed)
            job.spill = false
            job.queuedBytes = job.footprint
            queuedBytes.add(job.queuedBytes, ordering: .relaxed)
            queued.add(1, ordering: .relaxed)
            if job.notBeforeMs <= now { enqueue(job, now: now) } else { heap.push(job) }
        }
        if spoolFull.load(ordering: .relaxed) && spool.failure == nil && spool.bytes < spool.maxBytes / 2 {
            spoolFull.store(false, ordering: .relaxed)
        }
    }

    private static let spoolFailure = OnceNotice()

    /// The spool's file failed: said once on stderr (later calls beyond memory are dropped).
    private static func reportSpoolFailure(_ why: String) {
        spoolFailure.say("spool") { "tracking spool: \(why); tracking calls beyond --tracking-queue-memory are dropped" }
    }

    /// libcurl's socket callback: watch `fd` for what it needs (or stop watching).
    private func watch(_ fd: curl_socket_t, _ what: Int32) {
        guard fd >= 0 else { return }
        let i = Int(fd)
        if i >= registered.count {
            registered.append(contentsOf: repeatElement(0, count: i + 64 - registered.count))
            wanted.append(contentsOf: repeatElement(false, count: i + 64 - wanted.count))
        }
        if what == CURL_POLL_REMOVE {
            wanted[i] = false // the registration stays (see `registered`)
            return
        }
        var ev: UInt32 = 0
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { ev |= CSYS_EPOLLIN }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { ev |= CSYS_EPOLLOUT }
        wanted[i] = true
        guard registered[i] != ev else { return }
        let data = UInt64(UInt32(bitPattern: fd))
        if registered[i] == 0 {
            if csys_epoll_add(epfd, fd, ev, data) != 0 { _ = csys_epoll_mod(epfd, fd, ev, data) }
        } else if csys_epoll_mod(epfd, fd, ev, data) != 0 {
            _ = csys_epoll_add(epfd, fd, ev, data)
        }
        registered[i] = ev
    }

    /// libcurl closes a socket: its registration goes with it (a new socket may get its number).
    private func closed(_ fd: curl_socket_t) -> Int32 {
        let i = Int(fd)
        if i >= 0 && i < registered.count {
            if registered[i] != 0 { _ = csys_epoll_del(epfd, fd) }
            registered[i] = 0
            wanted[i] = false
        }
        return Glibc.close(fd)
    }

    private func enqueue(_ job: TrackingJob, now: Int64) {
        guard let b = job.batch else {
            ready.append(job)
            return
        }
        if var open = batches[b.key] {
            open.items.append(b.item)
            batches[b.key] = open
            // Its item rides in the open batch's first job from now on; the job itself goes.
            queuedBytes.subtract(job.queuedBytes, ordering: .relaxed)
            if open.items.count >= b.maxItems { flush(b.key) }
        } else {
            batches[b.key] = OpenBatch(first: job, items: [b.item], deadlineMs: now + b.flushAfterMs)
            if b.maxItems <= 1 { flush(b.key) }
        }
    }

    private func flushBatches(now: Int64, force: Bool) {
        guard !batches.isEmpty else { return }
        for (key, b) in batches where force || b.deadlineMs <= now { flush(key) }
    }

    private func flush(_ key: String) {
        guard let b = batches.removeValue(forKey: key), let spec = b.first.batch else { return }
        let job = b.first
        job.request = spec.build(b.items)
        job.batch = nil
        job.events = b.items.count
        // The other items were counted as queued jobs of their own: one request carries them.
        if b.items.count > 1 { queued.subtract(b.items.count - 1, ordering: .relaxed) }
        ready.append(job)
    }

    private func begin(_ job: TrackingJob) {
        if plain.start(job, nowNs: Clock.monotonicNanoseconds()) {
            inFlight += 1
            return
        }
        let plainGet = job.request.method == "GET" && job.request.headers.isEmpty
        let shape: Shape = plainGet ? .plainGet : .other
        var (easy, had) = idleHandles.popLast() ?? (curl_easy_init()!, Shape.fresh)
        if had != shape || shape == .other {
            if had != .fresh { curl_easy_reset(easy) }
            had = .fresh
        }
        let t = Transfer(job: job, easy: easy, startNs: Clock.monotonicNanoseconds())
        t.shape = shape
        urls.apply(job.request.url, to: easy)
        pushemu_curl_setopt_ptr(easy, CURLOPT_PRIVATE, Unmanaged.passRetained(t).toOpaque())
        if had == .fresh {
            pushemu_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            pushemu_curl_setopt_closesocket(
                easy,
                { clientp, fd in
                    Unmanaged<TrackingLane>.fromOpaque(clientp!).takeUnretainedValue().closed(fd)
                }, Unmanaged.passUnretained(self).toOpaque())
            pushemu_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, options.timeoutMs)
            pushemu_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMs)
            pushemu_curl_setopt_write(easy) { _, size, n, _ in size * n } // the body is not needed
            // No proxy, and no proxy lookups per transfer: without CURLOPT_NOPROXY libcurl reads
            // no_proxy and NO_PROXY from the environment at every transfer (getenv scans it).
            "".withCString { _ = pushemu_curl_setopt_ptr(easy, CURLOPT_PROXY, $0) }
            "".withCString { _ = pushemu_curl_setopt_ptr(easy, CURLOPT_NOPROXY, $0) }
            if let ca = options.caFile { ca.withCString { _ = pushemu_curl_setopt_ptr(easy, CURLOPT_CAINFO, $0) } }
            // A plain GET needs no header list: libcurl only sends `Expect` with a request body,
            // and a list would be scanned for each header libcurl adds itself.
            if plainGet { pushemu_curl_setopt_long(easy, CURLOPT_HTTPGET, 1) }
        }
        if !plainGet {
            let method = job.request.method.uppercased()
            if method == "GET" {
                pushemu_curl_setopt_long(easy, CURLOPT_HTTPGET, 1)
            } else {
                method.withCString { _ = pushemu_curl_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, $0) }
                pushemu_curl_setopt_long(easy, CURLOPT_POSTFIELDSIZE, job.request.body.count)
                job.request.body.withUnsafeBytes {
                    _ = pushemu_curl_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!)
                }
            }
            var list: UnsafeMutablePointer<curl_slist>? = nil
            for (n, v) in job.request.headers { list = curl_slist_append(list, "\(n): \(v)") }
            if method != "GET" && !job.request.headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                list = curl_slist_append(list, "Content-Type:") // no default form type
            }
            list = curl_slist_append(list, "Expect:")
            t.headers = list
            pushemu_curl_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)
        }
        inFlight += 1
        curl_multi_add_handle(multi, easy)
    }

    private func completions() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle else { continue }
            let result = msg.pointee.data.result
            var priv: UnsafeMutableRawPointer? = nil
            pushemu_curl_getinfo_ptr(easy, CURLINFO_PRIVATE, &priv)
            var status = 0
            pushemu_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            curl_multi_remove_handle(multi, easy)
            guard let priv else { continue }
            let t = Unmanaged<Transfer>.fromOpaque(priv).takeRetainedValue()
            inFlight -= 1
            if t.shape == .other {
                curl_slist_free_all(t.headers)
                idleHandles.append((easy, .other))
            } else {
                idleHandles.append((easy, t.shape)) // a plain GET handle keeps its options
            }
            var error: String? = nil
            if result != CURLE_OK {
                error = String(cString: curl_easy_strerror(result))
                status = 0
            }
            finished(t.job, status: status, error: error, startNs: t.startNs)
        }
        for c in plain.takeCompletions() {
            inFlight -= 1
            finished(c.job, status: c.status, error: c.error, startNs: c.startNs)
        }
    }

    /// Records an attempt; a failure that may be retried goes back on the heap after its backoff.
    private func finished(_ job: TrackingJob, status: Int, error: String?, startNs: UInt64) {
        let latency = Double(Clock.monotonicNanoseconds() - startNs) / 1_000_000
        let retryable = error != nil || status >= 500
        let willRetry = retryable && job.attempt < options.maxAttempts && !stopping.load(ordering: .relaxed)
        let outcome = error == nil && (200..<300).contains(status) ? "succeeded" : (willRetry ? "retrying" : "failed")
        log.record(
            TrackingAttempt(
                event: job.event, preset: job.preset, token: job.token,
                notificationID: job.notificationID, method: job.request.method, url: job.request.url,
                status: status, latencyMs: latency, error: error, attempt: job.attempt,
                outcome: outcome, atMs: Clock.nowMs(), events: job.events, platform: job.platform, campaign: job.campaign))
        if willRetry {
            let backoff = min(options.backoffMaxMs, options.backoffBaseMs << Int64(min(20, job.attempt - 1)))
            job.attempt += 1
            job.notBeforeMs = Clock.nowMs() + backoff
            heap.push(job)
        } else {
            queued.subtract(1, ordering: .relaxed)
            queuedBytes.subtract(job.queuedBytes, ordering: .relaxed)
        }
    }
}

/// A binary min-heap of jobs by `notBeforeMs` (FIFO among equals is not needed).
struct JobHeap {
    private var a: [TrackingJob] = []
    var count: Int { a.count }
    var peek: TrackingJob? { a.first }

    mutating func push(_ j: TrackingJob) {
        a.append(j)
        var i = a.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if a[p].notBeforeMs <= a[i].notBeforeMs { break }
            a.swapAt(p, i)
            i = p
        }
    }

    mutating func pop() -> TrackingJob? {
        guard !a.isEmpty else { return nil }
        a.swapAt(0, a.count - 1)
        let top = a.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < a.count && a[l].notBeforeMs < a[m].notBeforeMs { m = l }
            if r < a.count && a[r].notBeforeMs < a[m].notBeforeMs { m = r }
            if m == i { break }
            a.swapAt(i, m)
            i = m
        }
        return top
    }
}
