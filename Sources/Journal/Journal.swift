import CSQLite
import CSystem
import Glibc
import PushCore
import Synchronization
import Transport

/// The durable record of every provider request and every tracking attempt: SQLite in WAL mode,
/// written by one thread with group commit (every record waiting is written in one transaction
/// and one fsync). With `.strict` durability a request's answer is released only once its record
/// is committed; the event loop never waits (the answer is sent from the writer thread).
public final class Journal: @unchecked Sendable {
    public enum Durability: String, Sendable { case strict, relaxed }

    public struct Stats: Sendable {
        public var queued = 0
        public var committed: UInt64 = 0
        public var batches: UInt64 = 0
        public var lastBatch = 0
        public var lastCommitUs: UInt64 = 0
        public var dropped: UInt64 = 0
    }

    enum Item {
        case request(RequestRecord, EventLoop?, (@Sendable () -> Void)?)
        case tracking(TrackingRecord)
    }

    public static let maxPayload = 4096
    public let durability: Durability
    public let path: String
    /// Campaign id of a payload (set by the composition root: the presets' keys).
    let campaignOf: @Sendable (PushProvider, ArraySlice<UInt8>) -> String?
    private let queue = Mutex<[Item]>([])
    private let stats = Mutex(Stats())
    private let sleeping = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let wakeFD: Int32
    private let maxQueue: Int
    private var thread: pthread_t?
    private let db: SQLiteDatabase
    private let readDB: Mutex<SQLiteDatabase>

    /// `path` nil: an in-memory database (nothing survives the process).
    public init(path: String?, durability: Durability, maxQueue: Int = 1_000_000,
                campaignOf: @escaping @Sendable (PushProvider, ArraySlice<UInt8>) -> String?) throws {
        self.durability = durability
        self.maxQueue = maxQueue
        self.campaignOf = campaignOf
        // An in-memory database shared by the writer and readers of this process.
        self.path = path ?? "file:pushemu-journal-\(getpid())-\(UInt64(bitPattern: Int64(Clock.nowMs())))?mode=memory&cache=shared"
        db = try SQLiteDatabase(path: self.path)
        try db.exec(path == nil ? "PRAGMA journal_mode=MEMORY" : "PRAGMA journal_mode=WAL")
        try db.exec("PRAGMA synchronous=\(durability == .strict ? "FULL" : "NORMAL")")
        try db.exec(Journal.schema)
        readDB = Mutex(try SQLiteDatabase(path: self.path))
        wakeFD = csys_eventfd()
    }

    static let schema = """
    CREATE TABLE IF NOT EXISTS requests (
      id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, provider TEXT NOT NULL, connection INTEGER, environment TEXT,
      token TEXT, topic TEXT, campaign TEXT, status INTEGER NOT NULL, reason TEXT, latency_us INTEGER,
      headers TEXT, payload TEXT, payload_size INTEGER, warnings TEXT, notification_id TEXT);
    CREATE INDEX IF NOT EXISTS requests_campaign ON requests(campaign);
    CREATE INDEX IF NOT EXISTS requests_at ON requests(at_ms);
    CREATE TABLE IF NOT EXISTS tracking (
      id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, preset TEXT, event TEXT, token TEXT, notification_id TEXT,
      method TEXT, url TEXT, status INTEGER, outcome TEXT, attempt INTEGER, latency_ms REAL, error TEXT);
    CREATE INDEX IF NOT EXISTS tracking_notification ON tracking(notification_id);
    """

    deinit { close(wakeFD) }

    public func start() {
        thread = Threads.spawn { [self] in self.run() }
    }

    /// Writes what is queued, then stops.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Queues a request record; `completion` (the answer) runs on `loop` (or, without one, on the
    /// writer thread) once the record is committed (`.strict`: the completions of one commit go
    /// to each loop in one hop), or at once, on the caller's thread (`.relaxed`).
    public func append(_ r: RequestRecord, loop: EventLoop?, completion: @escaping @Sendable () -> Void) {
        if durability == .relaxed {
            completion()
            enqueue(.request(r, nil, nil))
        } else {
            enqueue(.request(r, loop, completion))
        }
    }

    public func append(_ t: TrackingRecord) { enqueue(.tracking(t)) }

    private func enqueue(_ item: Item) {
        let accepted = queue.withLock { q -> Bool in
            // Strict records carry an answer someone waits for: always kept. Others are bounded.
            if q.count >= maxQueue, case .tracking = item { return false }
            if q.count >= maxQueue, case .request(_, _, nil) = item { return false }
            q.append(item)
            return true
        }
        if !accepted { stats.withLock { $0.dropped += 1 }; return }
        if sleeping.load(ordering: .acquiring) { wake() }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    public var statistics: Stats {
        var s = stats.withLock { $0 }
        s.queued = queue.withLock { $0.count }
        return s
    }

    // MARK: the writer thread

    private func run() {
        let insertRequest = try! db.prepare("""
        INSERT INTO requests (at_ms, provider, connection, environment, token, topic, campaign, status, reason, latency_us,
          headers, payload, payload_size, warnings, notification_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
        """)
        let insertTracking = try! db.prepare("""
        INSERT INTO tracking (at_ms, preset, event, token, notification_id, method, url, status, outcome, attempt, latency_ms, error)
        VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
        """)
        while true {
            sleeping.store(true, ordering: .releasing)
            var items = queue.withLock { q -> [Item] in
                let out = q
                q.removeAll(keepingCapacity: true)
                return out
            }
            if items.isEmpty {
                if stopping.load(ordering: .acquiring) { break }
                var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 100)
                var v: UInt64 = 0
                _ = read(wakeFD, &v, 8)
                continue
            }
            sleeping.store(false, ordering: .releasing)
            let t0 = Clock.monotonicNanoseconds()
            try? db.exec("BEGIN")
            var completions: [ObjectIdentifier: (EventLoop, [@Sendable () -> Void])] = [:]
            var direct: [@Sendable () -> Void] = []
            for item in items {
                switch item {
                case .request(let r, let loop, let done):
                    write(r, insertRequest)
                    if let done {
                        if let loop { completions[ObjectIdentifier(loop), default: (loop, [])].1.append(done) } else { direct.append(done) }
                    }
                case .tracking(let t):
                    write(t, insertTracking)
                }
            }
            try? db.exec("COMMIT")
            let us = (Clock.monotonicNanoseconds() - t0) / 1000
            let n = items.count
            items.removeAll()
            stats.withLock { s in
                s.committed &+= UInt64(n)
                s.batches &+= 1
                s.lastBatch = n
                s.lastCommitUs = us
            }
            for (_, (loop, list)) in completions {
                let actions = list
                loop.execute { for a in actions { a() } }
            }
            for a in direct { a() }
        }
    }

    private func write(_ r: RequestRecord, _ s: SQLiteDatabase.Statement) {
        s.bind(1, r.atMs)
        s.bind(2, r.provider.rawValue)
        s.bind(3, Int64(bitPattern: r.connection))
        s.bind(4, r.environment)
        s.bind(5, bytes: r.token)
        s.bind(6, r.topic)
        s.bind(7, campaignOf(r.provider, r.payload))
        s.bind(8, Int64(r.status))
        s.bind(9, r.reason)
        s.bind(10, r.latencyUs)
        s.bind(11, Journal.headersJSON(r.headers))
        s.bind(12, bytes: r.payload.prefix(Journal.maxPayload))
        s.bind(13, Int64(r.payload.count))
        s.bind(14, r.warnings.isEmpty ? nil : "[" + r.warnings.map(JSONWriter.quote).joined(separator: ",") + "]")
        s.bind(15, r.notificationID)
        s.step()
        s.reset()
    }

    private func write(_ t: TrackingRecord, _ s: SQLiteDatabase.Statement) {
        s.bind(1, t.atMs)
        s.bind(2, t.preset)
        s.bind(3, t.event)
        s.bind(4, t.token)
        s.bind(5, t.notificationID)
        s.bind(6, t.method)
        s.bind(7, t.url)
        s.bind(8, Int64(t.status))
        s.bind(9, t.outcome)
        s.bind(10, Int64(t.attempt))
        s.bind(11, t.latencyMs)
        s.bind(12, t.error)
        s.step()
        s.reset()
    }

    /// The headers a reader of the journal needs (`apns-*`, `x-*`, `content-type`; never
    /// `authorization`), as JSON built from the bytes.
    static func headersJSON(_ h: HTTPFields) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        h.forEach { n, v in
            let keep = (n.count > 5 && n.prefix(5).elementsEqual("apns-".utf8)) || (n.count > 2 && n.prefix(2).elementsEqual("x-".utf8))
                || n.elementsEqual("content-type".utf8)
            guard keep else { return }
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            append(quoted: n, to: &out)
            out.append(UInt8(ascii: ":"))
            append(quoted: v, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    static func append(quoted b: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for c in b {
            switch c {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(c)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [hex[Int(c >> 4)], hex[Int(c & 15)]]
            default: out.append(c)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    // MARK: reading (any thread; its own connection)

    /// Rows in each table.
    public func counts() -> (requests: Int, tracking: Int) {
        readDB.withLock { db in
            func one(_ sql: String) -> Int {
                guard let s = try? db.prepare(sql) else { return 0 }
                return s.step() == SQLITE_ROW ? Int(s.int(0)) : 0
            }
            return (one("SELECT count(*) FROM requests"), one("SELECT count(*) FROM tracking"))
        }
    }

    /// Every record since `sinceMs` as NDJSON lines (requests, then tracking attempts, by time).
    public func export(sinceMs: Int64, _ line: (String) -> Void) {
        Journal.export(path: path, sinceMs: sinceMs, line)
    }

    public static func export(path: String, sinceMs: Int64, _ line: (String) -> Void) {
        guard let db = try? SQLiteDatabase(path: path),
              let r = try? db.prepare("SELECT at_ms, provider, connection, environment, token, topic, campaign, status, reason, latency_us, headers, payload, payload_size, warnings, notification_id FROM requests WHERE at_ms >= ? ORDER BY id"),
              let t = try? db.prepare("SELECT at_ms, preset, event, token, notification_id, method, url, status, outcome, attempt, latency_ms, error FROM tracking WHERE at_ms >= ? ORDER BY id")
        else { return }
        func q(_ s: String?) -> String { s.map(JSONWriter.quote) ?? "null" }
        r.bind(1, sinceMs)
        while r.step() == SQLITE_ROW {
            var s = "{\"type\":\"request\",\"at\":\(r.int(0)),\"provider\":\(q(r.text(1))),\"connection\":\(r.int(2))"
            s += ",\"environment\":\(q(r.text(3))),\"token\":\(q(r.text(4))),\"topic\":\(q(r.text(5))),\"campaign\":\(q(r.text(6)))"
            s += ",\"status\":\(r.int(7)),\"reason\":\(q(r.text(8))),\"latencyUs\":\(r.int(9)),\"headers\":\(r.text(10) ?? "{}")"
            s += ",\"payload\":\(q(r.text(11))),\"payloadSize\":\(r.int(12)),\"warnings\":\(r.text(13) ?? "[]"),\"notificationId\":\(q(r.text(14)))}"
            line(s)
        }
        t.bind(1, sinceMs)
        while t.step() == SQLITE_ROW {
            var s = "{\"type\":\"tracking\",\"at\":\(t.int(0)),\"preset\":\(q(t.text(1))),\"event\":\(q(t.text(2))),\"token\":\(q(t.text(3)))"
            s += ",\"notificationId\":\(q(t.text(4))),\"method\":\(q(t.text(5))),\"url\":\(q(t.text(6))),\"status\":\(t.int(7))"
            s += ",\"outcome\":\(q(t.text(8))),\"attempt\":\(t.int(9)),\"latencyMs\":\(t.double(10)),\"error\":\(q(t.text(11)))}"
            line(s)
        }
    }
}
