import CSystem
import Glibc
import PushCore
import Runtime
import Synchronization
import Transport

/// The change log of the emulator's state (devices, fleets, subscriptions, channels, rules,
/// credentials) in `<data-dir>/state/`: every change a store makes is appended as a
/// `ChangeRecord`, framed with a checksum, to the current log file; snapshots of every store are
/// written in the background, after which the older log files go. At start the stores are
/// rebuilt from the newest snapshot and the log files after it.
///
/// ```
/// state/snapshot-00000000000000012001.bin   every store's records as of log position 12001
/// state/log-00000000000000012001.bin        the changes from 12001 on (appended)
/// ```
///
/// Durability follows the journal's setting:
/// - `.strict`: an answer that made a change waits until its record is written to the log file
///   (one `write`, on the thread that answers; killing the process loses no acknowledged change);
/// - `.sync`: it also waits for the file's fdatasync, which the journal's writer does with its
///   group commit (a power cut loses none either);
/// - `.relaxed` (and `--durability off`): answers at once; the journal's writer writes the log
///   behind (within its commit window).
/// A change whose record cannot be written (a full disk) is not acknowledged under `.strict` and
/// `.sync`: the answer is a 503, the record stays queued and is written with the next write
/// that succeeds, and while writes fail new changes are refused before they are made.
///
/// Thread-safety: `append` from any thread (a leaf lock); writes are ordered by the file's lock;
/// snapshots on their own thread.
public final class StateLog: @unchecked Sendable { // mutable state is behind its locks or atomics
    /// `--durability`: when an admin change's answer may leave (strict: its records written; sync: fdatasynced; relaxed: at once).
    public enum Durability: String, Sendable { case strict, sync, relaxed }

    /// When snapshots are taken.
    public struct Options: Sendable {
        /// Snapshot once this many records were appended since the last one.
        public var snapshotRecords = 100_000
        /// Snapshot once the log files hold this many bytes.
        var snapshotBytes = 64 << 20
        /// Snapshot at most this often when only the push path changed state (counters, devices
        /// first seen), or a few records were appended (ms; 0: only by count, size and at stop).
        public var snapshotIntervalMs: Int64 = 60_000
        /// The defaults: a snapshot after 100,000 records or 64 MiB of log, and at most once a
        /// minute when only pushes (or a few records) changed the state.
        public init() {}
    }

    /// The data directory's `state` folder (log files and snapshots).
    public let directory: String
    /// The durability it was opened with.
    public let durability: Durability
    let registry: StoreRegistry
    let options: Options

    struct Pending {
        var bytes: [UInt8] = []
        var next: UInt64 = 1
        var records = 0
    }
    /// Records appended and not yet written (a leaf lock: taken inside stores' locks).
    private let pending = FutexLock(Pending())
    /// The last position appended, written to the file, and fdatasynced.
    let appended = Atomic<UInt64>(0)
    let written = Atomic<UInt64>(0)
    let synced = Atomic<UInt64>(0)

    struct Output {
        var fd: Int32 = -1
        var startSeq: UInt64 = 0
        var size = 0
    }
    /// The current log file; held while writing, so records reach it in order.
    private let output = FutexLock(Output())
    /// Set while writes fail; cleared by the next one that succeeds.
    let failing = Atomic<Bool>(false)

    /// The log's counts, for `/emulator/v1/stats` and `/metrics`.
    public struct Stats: Sendable {
        /// Bytes in the log files (since the last snapshot).
        public var logBytes = 0
        /// Records appended since the last snapshot.
        public var recordsSinceSnapshot = 0
        /// Records appended since the start.
        public var appended: UInt64 = 0
        /// Writes the disk refused (each answered 503 under strict).
        public var writeFailures: UInt64 = 0
        /// The last write's or snapshot's error (kept after recovery).
        public var lastError: String?
        /// Snapshots taken since the start.
        public var snapshots: UInt64 = 0
        /// The last snapshot: when (ms), its log position, size and how long it took.
        public var lastSnapshotAtMs: Int64?
        var lastSnapshotSeq: UInt64 = 0
        /// The last snapshot's size (bytes).
        public var lastSnapshotBytes = 0
        /// How long the last snapshot took (ms).
        public var lastSnapshotDurationMs: Int64 = 0
        /// Snapshots that failed (the log is kept until one succeeds).
        public var snapshotFailures: UInt64 = 0
        /// What start read: records applied, and dropped from a damaged log.
        public var loadedRecords = 0
        /// Records dropped at start from a damaged log tail.
        public var droppedAtStart = 0
        /// How long start took to read the state (ms).
        public var loadMs: Int64 = 0
        /// A snapshot's records still waiting to be applied (0 a few seconds after start).
        public var deferredRecords = 0
    }
    private let counters = FutexLock(Stats())
    /// When write failures were last said on stderr (once a second at most).
    private let lastComplaintMs = Atomic<Int64>(0)

    struct Waiter {
        let seq: UInt64
        let done: @Sendable (Bool) -> Void
    }
    /// `.sync` answers waiting for their record's fdatasync.
    private let waiters = FutexLock<[Waiter]>([])
    /// The journal writer's wake-up, when one drives this log (set before serving).
    private let driver = FutexLock<(@Sendable () -> Void)?>(nil)

    /// Serialises snapshots (the background thread's and the last one at stop).
    private let snapshotting = FutexLock(false)
    private let stopping = Atomic<Bool>(false)
    private let wakeFD: Int32
    /// `state/lock`, held (flock) while this log is open: one process writes a directory.
    private let lockFD = Atomic<Int32>(-1)
    private var thread: pthread_t?
    /// Something that grows with the push path's changes to state (deliveries, first sights).
    private let activity: @Sendable () -> UInt64
    private var activityAtSnapshot: UInt64 = 0 // snapshot thread only
    private var lastSnapshotMs: Int64 = 0 // snapshot thread only

    init(directory: String, durability: Durability, registry: StoreRegistry, options: Options, activity: @escaping @Sendable () -> UInt64) {
        self.directory = directory
        self.durability = durability
        self.registry = registry
        self.options = options
        self.activity = activity
        wakeFD = csys_eventfd()
    }

    deinit {
        close(wakeFD)
        output.withLock { o in if o.fd >= 0 { close(o.fd) } }
        release()
    }

    /// Lets another process open the directory (at stop; the kernel does it at exit too).
    public func release() {
        let fd = lockFD.exchange(-1, ordering: .relaxed)
        if fd >= 0 { close(fd) }
    }

    /// Takes `directory/lock`, or says who holds it.
    static func lock(_ directory: String) throws -> Int32 {
        let path = directory + "/lock"
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StateFormatError("cannot open \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var buf = [UInt8](repeating: 0, count: 32)
            let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, 31, 0) }
            close(fd)
            let pid = n > 0 ? String(decoding: buf.prefix(n), as: UTF8.self).trimmingSpaces : "?"
            throw StateFormatError(
                "another pushemu (pid \(pid)) is using \(directory): stop it first, talk to it with --server URL, or use another --data-dir"
            )
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) }
        return fd
    }

    // MARK: appending

    /// Who is told of each change made here (a record with no origin): a cluster node's shipper.
    /// Set once, before the stores change.
    private let shipper = FutexLock<(@Sendable (ChangeRecord) -> Void)?>(nil)

    /// Has `ship` called with each record made on this node, after it is appended (a cluster
    /// node ships it to the others; records applied from them carry their origin and are not).
    public func shipChanges(to ship: @escaping @Sendable (ChangeRecord) -> Void) { shipper.withLock { $0 = ship } }

    /// Appends a record (assigning its position). Cheap: the bytes are queued for the next write.
    @discardableResult
    public func append(_ record: ChangeRecord) -> UInt64 {
        var r = record
        let seq = pending.withLock { p -> UInt64 in
            let seq = p.next
            p.next += 1
            r.seq = seq
            StateFrame.append(r.encoded(), to: &p.bytes)
            p.records += 1
            return seq
        }
        appended.store(seq, ordering: .releasing)
        if record.origin.isEmpty, let ship = shipper.withLock({ $0 }) { ship(r) }
        if durability == .relaxed, driver.withLock({ $0 }) == nil {
            // No writer writes behind: write now.
            _ = write()
        }
        return seq
    }

    /// The last position appended (a middleware reads it before and after a request).
    public var lastAppended: UInt64 { appended.load(ordering: .acquiring) }

    /// Whether writes are failing (new changes are refused meanwhile).
    public var isFailing: Bool { failing.load(ordering: .relaxed) }

    /// Writes every queued record to the log file. False when the write failed: the records stay
    /// queued for the next write.
    @discardableResult
    public func write() -> Bool {
        output.withLock { o in writeLocked(&o) }
    }

    private func writeLocked(_ o: inout Output) -> Bool {
        let (bytes, last, records) = pending.withLock { p -> ([UInt8], UInt64, Int) in
            let out = (p.bytes, p.next - 1, p.records)
            p.bytes = []
            p.records = 0
            return out
        }
        guard !bytes.isEmpty else { return true }
        var error: Int32 = 0
        if o.fd < 0 { error = EBADF }
        var off = 0
        while error == 0 && off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(o.fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                error = errno
            } else {
                off += n
            }
        }
        if error != 0 {
            // Nothing half-written stays in the file; the records go back in front of the queue.
            if off > 0 { _ = ftruncate(o.fd, off_t(o.size)) }
            pending.withLock { p in
                p.bytes = bytes + p.bytes
                p.records += records
            }
            failing.store(true, ordering: .relaxed)
            complain(error, records: records)
            return false
        }
        o.size += bytes.count
        written.store(last, ordering: .releasing)
        if failing.load(ordering: .relaxed) {
            failing.store(false, ordering: .relaxed)
            csys_write_stderr("pushemu: the state log is being written again (\(records) queued record(s) written)\n")
        }
        counters.withLock { c in
            c.logBytes += bytes.count
            c.recordsSinceSnapshot += records
        }
        return true
    }

    private func complain(_ error: Int32, records: Int) {
        let text = String(cString: strerror(error))
        counters.withLock { c in
            c.writeFailures += 1
            c.lastError = text
        }
        let now = Clock.nowMs()
        let last = lastComplaintMs.load(ordering: .relaxed)
        if now - last >= 1000, lastComplaintMs.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged {
            csys_write_stderr(
                "pushemu: cannot write the state log in \(directory): \(text) (\(records) record(s) queued; changes are refused with 503 until a write succeeds)\n"
            )
        }
    }

    /// Calls `done` once every record up to `seq` is as durable as the setting asks: at once under
    /// `.relaxed`; after this thread wrote it under `.strict`; after the writer's fdatasync under
    /// `.sync`. `done(false)`: it could not be written, and the change must not be acknowledged.
    /// `done` may run on another thread (`.sync`: the journal's writer).
    public func whenDurable(_ seq: UInt64, _ done: @escaping @Sendable (Bool) -> Void) {
        switch durability {
        case .relaxed:
            done(true)
        case .strict:
            if written.load(ordering: .acquiring) >= seq { return done(true) }
            done(write())
        case .sync:
            if synced.load(ordering: .acquiring) >= seq { return done(true) }
            let wake = driver.withLock { $0 }
            guard let wake else {
                // No writer thread (`--durability` is sync but the journal is not running): here.
                return done(write() && sync())
            }
            waiters.withLock { $0.append(Waiter(seq: seq, done: done)) }
            wake()
        }
    }

    /// Has `wake` called when `.sync` answers wait (the journal's writer, which then calls
    /// `writerTurn`); without one, writes happen on the answering thread.
    public func drive(wake: @escaping @Sendable () -> Void) {
        driver.withLock { $0 = wake }
    }

    /// The journal writer's turn, once per iteration: writes what is queued and, under `.sync`,
    /// fdatasyncs and releases the answers waiting on it.
    public func writerTurn() {
        let queued = pending.withLock { !$0.bytes.isEmpty }
        let waiting = waiters.withLock { !$0.isEmpty }
        guard queued || waiting else { return }
        let ok = write() && (durability != .sync || !waiting || sync())
        guard waiting else { return }
        let through = ok ? synced.load(ordering: .acquiring) : UInt64.max
        let ready = waiters.withLock { w -> [Waiter] in
            let out = ok ? w.filter { $0.seq <= through } : w
            w.removeAll { ok ? $0.seq <= through : true }
            return out
        }
        for waiter in ready { waiter.done(ok) }
    }

    /// Whether the writer has something to do for this log (it then skips its idle sleep).
    public var hasWork: Bool { !isFailing && (pending.withLock { !$0.bytes.isEmpty } || waiters.withLock { !$0.isEmpty }) }

    private func sync() -> Bool {
        let through = written.load(ordering: .acquiring)
        let ok = output.withLock { o in o.fd >= 0 && fdatasync(o.fd) == 0 }
        if ok { synced.store(through, ordering: .releasing) } else { complain(errno, records: 0) }
        return ok
    }

    // MARK: stats

    /// The counts now.
    public var statistics: Stats {
        var s = counters.withLock { $0 }
        s.appended = appended.load(ordering: .relaxed)
        s.deferredRecords = registry.persistent.values.reduce(0) { $0 + ($1.deferred?.count ?? 0) }
        return s
    }

    // MARK: files

    static let magic: [UInt8] = Array("pushemu\u{0}".utf8)
    /// The format of the log and snapshot files; a newer one is refused at start.
    public static let format: UInt8 = 1
    static let fileHeaderSize = 16

    static func header(_ type: UInt8) -> [UInt8] {
        magic + [type, format] + [UInt8](repeating: 0, count: 6)
    }

    static func name(_ prefix: String, _ seq: UInt64) -> String {
        let digits = String(seq)
        return prefix + "-" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".bin"
    }

    static func seq(of name: String, prefix: String) -> UInt64? {
        guard name.hasPrefix(prefix + "-"), name.hasSuffix(".bin") else { return nil }
        return UInt64(name.dropFirst(prefix.count + 1).dropLast(4))
    }

    /// Opens (creating) a log file for appending; writes its header when new.
    static func openLog(_ path: String, size: Int?) throws -> (Int32, Int) {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StateFormatError("cannot open \(path): \(String(cString: strerror(errno)))") }
        if let size { return (fd, size) }
        let h = header(UInt8(ascii: "L"))
        let n = h.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        guard n == h.count else {
            let text = String(cString: strerror(errno))
            close(fd)
            unlink(path)
            throw StateFormatError("cannot write \(path): \(text)")
        }
        return (fd, h.count)
    }

    /// A file mapped read-only (no copy, no zeroed pages), for `body` only.
    static func withMapped<R>(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        let size = Int(st.st_size)
        guard size > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else { return nil }
        defer { munmap(p, size) }
        _ = madvise(p, size, MADV_SEQUENTIAL)
        return try body(UnsafeRawBufferPointer(start: p, count: size))
    }

    /// Checks a file's header: nil when it is one of ours of a format this pushemu reads; a
    /// message otherwise. A newer format throws (starting would lose what it holds).
    static func checkHeader(_ b: UnsafeRawBufferPointer, type: UInt8, path: String) throws -> String? {
        guard b.count >= fileHeaderSize, b.prefix(8).elementsEqual(magic), b[8] == type else {
            return "\(path) is not a pushemu state file"
        }
        if b[9] > format {
            throw StateFormatError(
                "\(path) was written by a newer pushemu (state format \(b[9]); this one reads \(format)): start that version, or move the directory aside"
            )
        }
        return nil
    }
}

// MARK: - start

extension StateLog {
    /// What start found, for the caller to say on stderr.
    public struct StartReport: Sendable {
        /// Nothing was saved there before (a new or an older version's data directory).
        public var noSavedState = false
        /// The snapshot file it started from (nil: none).
        public var snapshot: String?
        /// Records read from the snapshot.
        public var snapshotRecords = 0
        /// Records read from the log after it.
        public var logRecords = 0
        /// Problems found, one line each (damaged snapshot, records dropped from a damaged log).
        public var warnings: [String] = []
        /// How long reading took (ms).
        public var loadMs: Int64 = 0
    }

    /// Opens the log in `directory` (made if missing), rebuilding every store of `registry` from
    /// the newest snapshot and the log after it, and connects the stores to it.
    public static func open(
        directory: String, durability: Durability, registry: StoreRegistry, options: Options = Options(),
        activity: @escaping @Sendable () -> UInt64 = { 0 }
    ) throws -> (StateLog, StartReport) {
        let t0 = Clock.monotonicNanoseconds()
        Files.makeDirectories(directory)
        var dirStat = stat()
        guard stat(directory, &dirStat) == 0 else {
            throw StateFormatError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let log = StateLog(directory: directory, durability: durability, registry: registry, options: options, activity: activity)
        log.lockFD.store(try StateLog.lock(directory), ordering: .relaxed)
        var report = StartReport()
        var snapshots: [UInt64] = []
        var logs: [UInt64] = []
        for name in Files.list(directory) {
            if let s = StateLog.seq(of: name, prefix: "snapshot") { snapshots.append(s) }
            if let s = StateLog.seq(of: name, prefix: "log") { logs.append(s) }
            if name.hasSuffix(".tmp") { unlink(directory + "/" + name) } // a snapshot cut short
        }
        snapshots.sort(by: >)
        logs.sort()
        report.noSavedState = snapshots.isEmpty && logs.isEmpty

        // The newest snapshot that is whole; older ones are tried when it is not.
        var base: UInt64 = 1
        for s in snapshots {
            let path = directory + "/" + StateLog.name("snapshot", s)
            guard let file = MappedSnapshot(path: path) else {
                report.warnings.append("cannot read \(path): \(String(cString: strerror(errno)))")
                continue
            }
            let result = try StateLog.loadSnapshot(file, path: path, into: registry)
            switch result {
            case .loaded(let n):
                base = s
                report.snapshot = path
                report.snapshotRecords = n
            case .damaged(let why):
                report.warnings.append("the snapshot \(path) is damaged (\(why)); trying an older one")
                for store in registry.stores { store.reset(.all) }
                continue
            }
            break
        }
        if !snapshots.isEmpty && report.snapshot == nil {
            report.warnings.append("no whole snapshot in \(directory): the state is rebuilt from the log files alone")
            base = 1
        }

        // The log files from the snapshot on (a file that starts before it holds nothing newer:
        // a snapshot cuts the log at its position).
        var last: UInt64 = base - 1
        var dropped = 0
        var current: (seq: UInt64, size: Int)?
        let usable = logs.filter { $0 >= base || (report.snapshot == nil) }
        for (i, s) in usable.enumerated() {
            let path = directory + "/" + StateLog.name("log", s)
            guard let read = try StateLog.withMapped(path, { b in try StateLog.replay(b, path: path, after: base, into: registry) }) else {
                report.warnings.append("cannot read \(path): \(String(cString: strerror(errno)))")
                continue
            }
            let isLast = i == usable.count - 1
            report.logRecords += read.applied
            dropped += read.dropped
            last = max(last, read.lastSeq)
            if read.dropped > 0 || read.skipped > 0 {
                if read.dropped > 0 {
                    report.warnings.append(
                        "the state log \(path) is damaged at byte \(read.goodSize) (a crash while it was written?): \(read.dropped) record(s) dropped; started with the \(read.applied) before them"
                    )
                }
                if read.skipped > 0 {
                    report.warnings.append("\(read.skipped) record(s) of \(path) could not be applied: \(read.firstError ?? "")")
                }
                if isLast && read.dropped > 0 { _ = truncate(path, off_t(read.goodSize)) }
            }
            if isLast { current = (s, read.goodSize) }
        }
        // Append to the last file, or begin one at the next position.
        let next = max(last + 1, base)
        let (fd, size): (Int32, Int)
        let startSeq: UInt64
        if let current, current.size >= StateLog.fileHeaderSize {
            (fd, size) = try StateLog.openLog(directory + "/" + StateLog.name("log", current.seq), size: current.size)
            startSeq = current.seq
        } else {
            if let current { unlink(directory + "/" + StateLog.name("log", current.seq)) }
            (fd, size) = try StateLog.openLog(directory + "/" + StateLog.name("log", next), size: nil)
            startSeq = next
        }
        log.output.withLock { o in o = Output(fd: fd, startSeq: startSeq, size: size) }
        log.pending.withLock { $0.next = next }
        log.appended.store(next - 1, ordering: .relaxed)
        log.written.store(next - 1, ordering: .relaxed)
        log.synced.store(next - 1, ordering: .relaxed)
        let logBytes = logs.filter { $0 >= startSeq || $0 >= base }.reduce(0) { n, s in
            var st = stat()
            return n + (stat(directory + "/" + StateLog.name("log", s), &st) == 0 ? Int(st.st_size) : 0)
        }
        report.loadMs = Int64((Clock.monotonicNanoseconds() - t0) / 1_000_000)
        log.counters.withLock { c in
            c.loadedRecords = report.snapshotRecords + report.logRecords
            c.droppedAtStart = dropped
            c.logBytes = logBytes
            c.recordsSinceSnapshot = report.logRecords
            c.loadMs = report.loadMs
            if let snapshot = report.snapshot {
                var st = stat()
                if stat(snapshot, &st) == 0 {
                    c.lastSnapshotBytes = Int(st.st_size)
                    c.lastSnapshotAtMs = Int64(st.st_mtim.tv_sec) * 1000 + Int64(st.st_mtim.tv_nsec) / 1_000_000
                }
                c.lastSnapshotSeq = base
            }
        }
        registry.connect(log)
        return (log, report)
    }

    enum SnapshotLoad {
        case loaded(Int)
        case damaged(String)
    }

    /// A record's envelope read in place: the store's name and the body are ranges of `b`.
    struct Envelope {
        var seq: UInt64 = 0
        var atMs: Int64 = 0
        var store: Range<Int> = 0..<0
        var kind = 0
        var version = 1
        var body: Range<Int> = 0..<0
    }

    static func envelope(_ b: UnsafeRawBufferPointer, _ frame: Range<Int>) throws -> Envelope {
        var r = StateReader(b, from: frame.lowerBound, to: frame.upperBound)
        var e = Envelope()
        var hasStore = false
        while let f = try r.next() {
            switch f {
            case ChangeRecord.Field.seq: e.seq = try r.uint()
            case ChangeRecord.Field.atMs: e.atMs = try r.int()
            case ChangeRecord.Field.store:
                e.store = try r.span()
                hasStore = true
            case ChangeRecord.Field.kind: e.kind = try r.int(in: 0...255, unsigned: true)
            case ChangeRecord.Field.version: e.version = try r.int(in: 1...255, unsigned: true)
            case ChangeRecord.Field.body: e.body = try r.span()
            default: try r.skip()
            }
        }
        guard hasStore, !e.store.isEmpty else { throw StateFormatError("a record names no store") }
        return e
    }

    /// One store's part of a snapshot, as its end marker lists it.
    struct Section {
        var name = ""
        var offset = 0
        var length = 0
        var count = 0
        var independent = false
    }

    /// Reads a snapshot: its end marker (found by the file's last eight bytes) lists each store's
    /// section; up to two threads verify (every frame's checksum) and apply them, a chunk at a
    /// time from one queue: first every store's ordered section whole, then the independent
    /// sections cut into chunks. An independent record its store can defer (`deferredKey`) is
    /// verified and its key noted, not applied: the store takes them at the end (`DeferredRecords`,
    /// keeping `file` mapped). Damage anywhere stops every thread: the caller then resets the
    /// stores and tries an older snapshot.
    static func loadSnapshot(_ file: MappedSnapshot, path: String, into registry: StoreRegistry) throws -> SnapshotLoad {
        let b = file.bytes
        if let why = try checkHeader(b, type: UInt8(ascii: "S"), path: path) { return .damaged(why) }
        guard b.count >= fileHeaderSize + 8 else { return .damaged("cut short") }
        var endAt = 0
        for i in 0..<8 { endAt |= Int(b[b.count - 8 + i]) << (8 * i) }
        guard endAt >= fileHeaderSize, endAt < b.count - 8, case .frame(let endFrame) = StateFrame.read(b, at: endAt),
            endFrame.upperBound == b.count - 8, let end = try? envelope(b, endFrame),
            UnsafeRawBufferPointer(rebasing: b[end.store]).elementsEqual(snapshotEnd.utf8)
        else { return .damaged("no end marker: it was not written whole") }
        var total = 0
        var sections: [Section] = []
        do {
            var r = StateReader(b, from: end.body.lowerBound, to: end.body.upperBound)
            while let f = try r.next() {
                switch f {
                case 1: total = try r.int(in: 0...Int.max, unsigned: true)
                case 2:
                    var m = try r.message()
                    var section = Section()
                    while let g = try m.next() {
                        switch g {
                        case 1: section.name = try m.string()
                        case 2: section.offset = try m.int(in: 0...Int.max, unsigned: true)
                        case 3: section.length = try m.int(in: 0...Int.max, unsigned: true)
                        case 4: section.count = try m.int(in: 0...Int.max, unsigned: true)
                        case 5: section.independent = try m.bool()
                        default: try m.skip()
                        }
                    }
                    sections.append(section)
                default: try r.skip()
                }
            }
        } catch {
            return .damaged("its end marker is unreadable")
        }
        var expected = fileHeaderSize
        for section in sections {
            guard section.offset == expected, section.length >= 0, section.offset + section.length <= endAt else {
                return .damaged("its sections do not follow one another")
            }
            expected += section.length
        }
        guard expected == endAt, sections.reduce(0, { $0 + $1.count }) == total else {
            return .damaged("it holds other records than its end marker lists")
        }
        // Chunks: an ordered section whole; an independent one in runs of about 16k records.
        struct Chunk {
            let store: any PersistentStore
            let from: Int
            let to: Int
            /// Its store defers what it can (an independent section only).
            var defers = false
        }
        var ordered: [Chunk] = []
        var independent: [Chunk] = []
        var reserved: [String: Int] = [:]
        for section in sections { reserved[section.name, default: 0] += section.count }
        for section in sections where section.count > 0 {
            guard let store = registry.persistent[section.name] else {
                throw StateFormatError(
                    "\(path): records of store '\(section.name)', which this pushemu does not have (written by a newer version?)")
            }
            if let n = reserved.removeValue(forKey: section.name) { store.reserve(records: n) }
            guard section.independent else {
                ordered.append(Chunk(store: store, from: section.offset, to: section.offset + section.length))
                continue
            }
            var at = section.offset
            let stop = section.offset + section.length
            var start = at
            var n = 0
            while at < stop {
                guard stop - at >= StateFrame.headerSize else { return .damaged("cut short at byte \(at)") }
                at += StateFrame.headerSize + Int(StateFrame.u32(b, at))
                n += 1
                if n == 16_384 || at >= stop {
                    independent.append(Chunk(store: store, from: start, to: min(at, stop), defers: store.deferred != nil))
                    start = at
                    n = 0
                }
            }
            guard at == stop else { return .damaged("a record runs past its section at byte \(stop)") }
        }
        // Each chunk verified and applied by whichever thread takes it next.
        let next = Atomic<Int>(0)
        let damage = FutexLock<String?>(nil)
        let failure = FutexLock<Error?>(nil)
        let applied = Atomic<Int>(0)
        let deferred = FutexLock<[String: [[DeferredRecords.Slot]]]>([:])
        let base = UInt(bitPattern: b.baseAddress)
        let size = b.count
        let work: @Sendable ([Chunk]) -> Void = { chunks in
            let buffer = UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: base), count: size)
            while damage.withLock({ $0 == nil }) && failure.withLock({ $0 == nil }) {
                let i = next.add(1, ordering: .relaxed).oldValue
                guard i < chunks.count else { return }
                let chunk = chunks[i]
                var at = chunk.from
                var views: [RecordView] = []
                views.reserveCapacity(16_384)
                var waiting: [DeferredRecords.Slot] = []
                var offsets: [Int] = []
                if chunk.defers {
                    waiting.reserveCapacity(16_384)
                    offsets.reserveCapacity(16_384)
                }
                do {
                    while at < chunk.to {
                        let frameAt = at
                        guard case .frame(let r) = StateFrame.read(buffer, at: at), r.upperBound <= chunk.to else {
                            damage.withLock { if $0 == nil { $0 = "a bad record at byte \(at)" } }
                            return
                        }
                        at = r.upperBound
                        let e = try envelope(buffer, r)
                        views.append(
                            RecordView(
                                kind: e.kind, version: e.version, atMs: e.atMs, body: UnsafeRawBufferPointer(rebasing: buffer[e.body])))
                        if chunk.defers {
                            offsets.append(frameAt)
                            continue // a chunk of an independent section: at most 16,384 records
                        }
                        // An ordered section's records go in batches too (in order).
                        if views.count == 16_384 {
                            try chunk.store.apply(batch: views)
                            applied.add(views.count, ordering: .relaxed)
                            views.removeAll(keepingCapacity: true)
                        }
                    }
                    if chunk.defers {
                        // The keys asked once for the chunk (a call a record through the existential
                        // retained and released the store: its side table's slow path).
                        let keys = chunk.store.deferredKeys(views)
                        var eager: [RecordView] = []
                        for (k, key) in keys.enumerated() {
                            if let key {
                                waiting.append(DeferredRecords.Slot(a: key.a, b: key.b, at: offsets[k]))
                            } else {
                                eager.append(views[k])
                            }
                        }
                        views = eager
                    }
                    try chunk.store.apply(batch: views)
                    applied.add(views.count + waiting.count, ordering: .relaxed)
                    if !waiting.isEmpty { deferred.withLock { $0[chunk.store.stateName, default: []].append(waiting) } }
                } catch {
                    failure.withLock { if $0 == nil { $0 = error } }
                    return
                }
            }
        }
        func run(_ list: [Chunk]) {
            next.store(0, ordering: .releasing)
            if csys_cpu_count() > 1, list.count > 1 {
                let helper = Threads.spawn { work(list) }
                work(list)
                pthread_join(helper, nil)
            } else {
                work(list)
            }
        }
        run(ordered)
        run(independent)
        if let e = failure.withLock({ $0 }) {
            if let f = e as? StateFormatError { throw StateFormatError("\(path): \(f.description)") }
            throw e
        }
        if let why = damage.withLock({ $0 }) { return .damaged(why) }
        guard applied.load(ordering: .relaxed) == total else { return .damaged("it holds other records than its end marker lists") }
        for (name, lists) in deferred.withLock({ $0 }) { registry.persistent[name]?.deferred?.adopt(lists, file: file) }
        return .loaded(total)
    }

    struct Replay {
        var applied = 0
        var lastSeq: UInt64 = 0
        /// Bytes of whole, valid frames from the start (with the header).
        var goodSize = 0
        var dropped = 0
        var skipped = 0
        var firstError: String?
    }

    /// Applies a log file's records from position `after` on, stopping at damage.
    static func replay(_ b: UnsafeRawBufferPointer, path: String, after base: UInt64, into registry: StoreRegistry) throws -> Replay {
        var out = Replay()
        if b.count < fileHeaderSize {
            // Cut short before its header was whole: nothing in it.
            return out
        }
        if let why = try checkHeader(b, type: UInt8(ascii: "L"), path: path) {
            out.firstError = why
            return out
        }
        var at = fileHeaderSize
        out.goodSize = at
        while true {
            switch StateFrame.read(b, at: at) {
            case .frame(let r):
                let record: ChangeRecord
                do {
                    record = try ChangeRecord.decode(UnsafeRawBufferPointer(rebasing: b[r]))
                } catch {
                    out.skipped += 1
                    out.firstError = out.firstError ?? "\(error)"
                    at = r.upperBound
                    out.goodSize = at
                    continue
                }
                at = r.upperBound
                out.goodSize = at
                out.lastSeq = max(out.lastSeq, record.seq)
                guard record.seq >= base else { continue }
                do {
                    try registry.apply(record)
                    out.applied += 1
                } catch let e as StateFormatError where e.description.contains("newer") {
                    throw StateFormatError("\(path): \(e.description)")
                } catch {
                    out.skipped += 1
                    out.firstError = out.firstError ?? "\(error)"
                }
            case .end:
                return out
            case .truncated:
                out.dropped = 1
                return out
            case .damaged:
                out.dropped = 1 + StateFrame.countRecoverable(b, from: at + 1)
                return out
            }
        }
    }

    static let snapshotBegin = "#begin"
    static let snapshotEnd = "#end"
}

// MARK: - snapshots

extension StateLog {
    /// Starts the background thread that takes snapshots (by count, size and time).
    public func start() {
        lastSnapshotMs = Clock.nowMs()
        activityAtSnapshot = activity()
        thread = Threads.spawn { [self] in self.run() }
        // The records a start deferred, applied in the background a few hundred at a time (a
        // lookup that needs one sooner applies it itself).
        let waiting = registry.persistent.values.filter { $0.deferred?.isPending == true }
        if !waiting.isEmpty {
            pthread_detach(
                Threads.spawn {
                    for store in waiting {
                        while store.deferred?.applySome(128, { try store.applyDeferred($0) }) == true {}
                    }
                })
        }
    }

    /// Writes what is queued, takes a last snapshot (so the next start reads one file), stops.
    public func stop(snapshot: Bool = true) {
        stopping.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        for store in registry.persistentStores { store.checkpoint() }
        _ = write()
        if durability == .sync { _ = sync() }
        writerTurn()
        if snapshot { _ = try? takeSnapshot() }
        release()
    }

    private func run() {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        while !stopping.load(ordering: .acquiring) {
            var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 1000) > 0 {
                var v: UInt64 = 0
                _ = Glibc.read(wakeFD, &v, 8)
            }
            if stopping.load(ordering: .acquiring) { break }
            for store in registry.persistentStores { store.checkpoint() }
            if durability == .relaxed, driver.withLock({ $0 }) == nil { _ = write() }
            let s = statistics
            let now = Clock.nowMs()
            let byCount = s.recordsSinceSnapshot >= options.snapshotRecords || s.logBytes >= options.snapshotBytes
            let changed = s.recordsSinceSnapshot > 0 || activity() != activityAtSnapshot
            let byTime = options.snapshotIntervalMs > 0 && changed && now - lastSnapshotMs >= options.snapshotIntervalMs
            guard byCount || byTime, !isFailing else { continue }
            let mark = activity()
            if (try? takeSnapshot()) != nil {
                activityAtSnapshot = mark
            }
            lastSnapshotMs = Clock.nowMs()
        }
    }

    /// Writes a snapshot of every store now: the log is cut at the next position, every store's
    /// records are written to a new snapshot file (fsynced, then renamed into place), and the log
    /// files before the cut are deleted. Returns the snapshot's path.
    @discardableResult
    public func takeSnapshot() throws -> String {
        try snapshotting.withLock { _ in try snapshotLocked() }
    }

    private func snapshotLocked() throws -> String {
        let t0 = Clock.monotonicNanoseconds()
        // 1. Cut the log: what is queued goes to the current file; later records to a new one.
        let cut: UInt64 = try output.withLock { o in
            guard writeLocked(&o) else { throw StateFormatError("the state log cannot be written") }
            let next = pending.withLock { $0.next }
            if next != o.startSeq {
                let (fd, size) = try StateLog.openLog(directory + "/" + StateLog.name("log", next), size: nil)
                if o.fd >= 0 {
                    if durability == .sync { fdatasync(o.fd) }
                    close(o.fd)
                }
                o = Output(fd: fd, startSeq: next, size: size)
            }
            return next
        }
        // 2. Every store's records.
        let path = directory + "/" + StateLog.name("snapshot", cut)
        let tmp = path + ".tmp"
        let fd = Glibc.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            counters.withLock { $0.snapshotFailures += 1 }
            throw StateFormatError("cannot write \(tmp): \(String(cString: strerror(errno)))")
        }
        var buffer = StateLog.header(UInt8(ascii: "S"))
        var failed: Int32 = 0
        var total = 0
        func flush(_ force: Bool) {
            guard failed == 0, force || buffer.count >= 1 << 20 else { return }
            var off = 0
            while off < buffer.count {
                let n = buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
                if n < 0 {
                    if errno == EINTR { continue }
                    failed = errno
                    return
                }
                off += n
            }
            total += buffer.count
            buffer.removeAll(keepingCapacity: true)
        }
        var count: UInt64 = 0
        // Where each store's records are: the end marker lists them, so a start hands each
        // store's section (or its chunks) to a thread without reading the records first.
        var sections: [(name: String, offset: Int, length: Int, count: UInt64, independent: Bool)] = []
        func section(_ store: any PersistentStore, independent: Bool) {
            let offset = total + buffer.count
            let before = count
            let write: (ChangeRecord) -> Void = { record in
                var r = record
                r.seq = 0
                StateFrame.append(r.encoded(), to: &buffer)
                count += 1
                flush(false)
            }
            if independent {
                store.applyAllDeferred()
                store.snapshotIndependent(write)
            } else {
                store.snapshot(write)
            }
            if count > before { sections.append((store.stateName, offset, total + buffer.count - offset, count - before, independent)) }
        }
        for store in registry.persistentStores { section(store, independent: false) }
        for store in registry.persistentStores { section(store, independent: true) }
        let endOffset = total + buffer.count
        var end = StateWriter()
        end.uint(1, count)
        for section in sections {
            end.message(2) { m in
                m.string(1, section.name)
                m.uint(2, UInt64(section.offset))
                m.uint(3, UInt64(section.length))
                m.uint(4, section.count)
                if section.independent { m.bool(5, true) }
            }
        }
        StateFrame.append(ChangeRecord(store: StateLog.snapshotEnd, kind: 0, body: end.bytes).encoded(), to: &buffer)
        // The trailer: where the end marker starts.
        var trailer = UInt64(endOffset)
        for _ in 0..<8 {
            buffer.append(UInt8(truncatingIfNeeded: trailer))
            trailer >>= 8
        }
        flush(true)
        if failed == 0, fsync(fd) != 0 { failed = errno }
        close(fd)
        guard failed == 0, rename(tmp, path) == 0 else {
            let text = String(cString: strerror(failed != 0 ? failed : errno))
            unlink(tmp)
            counters.withLock { $0.snapshotFailures += 1 }
            throw StateFormatError("cannot write the snapshot \(path): \(text)")
        }
        let dfd = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            fsync(dfd)
            close(dfd)
        }
        // 3. What the snapshot made redundant.
        var logBytes = 0
        for name in Files.list(directory) {
            if let s = StateLog.seq(of: name, prefix: "log") {
                if s < cut {
                    unlink(directory + "/" + name)
                } else {
                    var st = stat()
                    if stat(directory + "/" + name, &st) == 0 { logBytes += Int(st.st_size) }
                }
            }
            if let s = StateLog.seq(of: name, prefix: "snapshot"), s < cut { unlink(directory + "/" + name) }
        }
        let ms = Int64((Clock.monotonicNanoseconds() - t0) / 1_000_000)
        let sinceCut = Int(appended.load(ordering: .relaxed) - min(appended.load(ordering: .relaxed), cut - 1))
        counters.withLock { c in
            c.snapshots += 1
            c.lastSnapshotAtMs = Clock.nowMs()
            c.lastSnapshotSeq = cut
            c.lastSnapshotBytes = total
            c.lastSnapshotDurationMs = ms
            c.logBytes = logBytes
            c.recordsSinceSnapshot = sinceCut
        }
        return path
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\n" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\n" { s.removeLast() }
        return String(s)
    }
}
