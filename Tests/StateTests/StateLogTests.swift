import CSystem
import Foundation
import Runtime
import Transport
import XCTest

@testable import State

/// A store of string values by key, changed only through its records (as every store is).
final class KeyValueStore: PersistentStore, @unchecked Sendable {
    let stateName: String
    let changes: ChangeLink
    let values = FutexLock<[String: String]>([:])
    let checkpoints = FutexLock(0)

    init(_ name: String = "kv") {
        stateName = name
        changes = ChangeLink(store: name)
    }

    var recordSchemas: [RecordSchema] {
        [
            RecordSchema(kind: 1, name: "put", fields: [FieldSchema(1, "key", .string), FieldSchema(2, "value", .string)]),
            RecordSchema(kind: 2, name: "remove", fields: [FieldSchema(1, "key", .string)]),
        ]
    }

    func put(_ key: String, _ value: String) {
        values.withLock { v in
            v[key] = value
            changes.emit(kind: 1, atMs: 1) { w in
                w.string(1, key)
                w.string(2, value)
            }
        }
    }

    func remove(_ key: String) {
        values.withLock { v in
            v[key] = nil
            changes.emit(kind: 2, atMs: 1) { $0.string(1, key) }
        }
    }

    func apply(_ record: RecordView) throws {
        guard record.version == 1 else { throw StateFormatError("kv record version \(record.version) is newer than this pushemu") }
        var key = ""
        var value = ""
        try record.withBody { raw in
            var r = StateReader(raw)
            while let f = try r.next() {
                switch f {
                case 1: key = try r.string()
                case 2: value = try r.string()
                default: try r.skip()
                }
            }
        }
        switch record.kind {
        case 1: values.withLock { $0[key] = value }
        case 2: _ = values.withLock { $0.removeValue(forKey: key) }
        default: throw StateFormatError("kv has no kind \(record.kind)")
        }
    }

    func snapshot(_ emit: (ChangeRecord) -> Void) {
        for (k, v) in values.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            var w = StateWriter()
            w.string(1, k)
            w.string(2, v)
            emit(ChangeRecord(store: stateName, kind: 1, body: w.bytes))
        }
    }

    func checkpoint() { checkpoints.withLock { $0 += 1 } }

    func reset(_ scope: ResetScope) { values.withLock { $0.removeAll() } }

    var all: [String: String] { values.withLock { $0 } }
}

final class StateLogTests: XCTestCase {
    var dir = ""
    /// Logs opened by this test: the next `open` releases them first, as a restart would.
    var opened: [StateLog] = []

    override func setUp() {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-state-\(UUID().uuidString)").path
    }

    override func tearDown() {
        for log in opened { log.release() }
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// One process writes a directory: a second open is refused, saying who holds it.
    func testASecondOpenOfTheDirectoryIsRefused() throws {
        let (_, log, _) = try open()
        XCTAssertThrowsError(try StateLog.open(directory: dir, durability: .strict, registry: StoreRegistry([KeyValueStore()]))) {
            XCTAssertTrue("\($0)".contains("another pushemu (pid \(getpid()))"), "\($0)")
        }
        log.release()
        XCTAssertNoThrow(try open())
    }

    /// A store and its log over `dir`, as a start would make them.
    func open(
        _ durability: StateLog.Durability = .strict, options: StateLog.Options = StateLog.Options()
    ) throws -> (KeyValueStore, StateLog, StateLog.StartReport) {
        for log in opened { log.release() }
        let store = KeyValueStore()
        let registry = StoreRegistry([store])
        let (log, report) = try StateLog.open(directory: dir, durability: durability, registry: registry, options: options)
        opened.append(log)
        return (store, log, report)
    }

    /// The log and snapshot files (not the lock).
    func logFiles() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: dir).sorted()) ?? []).filter { $0 != "lock" } }

    func testChangesSurviveAReopenInOrder() throws {
        var (store, log, report) = try open()
        XCTAssertTrue(report.noSavedState)
        for i in 0..<100 { store.put("k\(i % 10)", "v\(i)") }
        store.remove("k3")
        XCTAssertTrue(log.write())
        XCTAssertEqual(log.lastAppended, 101)
        (store, log, report) = try open()
        XCTAssertFalse(report.noSavedState)
        XCTAssertEqual(report.logRecords, 101)
        XCTAssertEqual(store.all.count, 9)
        XCTAssertEqual(store.all["k9"], "v99")
        XCTAssertNil(store.all["k3"])
        // Positions continue after the ones read.
        store.put("new", "x")
        XCTAssertEqual(log.lastAppended, 102)
    }

    /// Under strict, an answer waits for its record in the file: `whenDurable` writes it.
    func testStrictDurabilityWritesBeforeItAnswers() throws {
        let (store, log, _) = try open(.strict)
        store.put("a", "1")
        let size = { (try? FileManager.default.attributesOfItem(atPath: self.dir + "/" + self.logFiles()[0])[.size] as? Int) ?? 0 }
        XCTAssertEqual(size(), 16, "appending queues only")
        let done = expectation(description: "durable")
        log.whenDurable(log.lastAppended) { ok in
            XCTAssertTrue(ok)
            done.fulfill()
        }
        wait(for: [done], timeout: 1)
        XCTAssertGreaterThan(size(), 16)
    }

    /// A crash while a record was written leaves a partial frame: start keeps what is whole, says
    /// how many were dropped, and appends after the last whole record.
    func testATornTailIsDroppedAndSaid() throws {
        var (store, log, _) = try open()
        for i in 0..<20 { store.put("k\(i)", "v\(i)") }
        XCTAssertTrue(log.write())
        let path = dir + "/" + logFiles()[0]
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        XCTAssertEqual(truncate(path, off_t(size - 3)), 0)
        (store, log, _) = try open()
        XCTAssertEqual(store.all.count, 19)
        XCTAssertNil(store.all["k19"])
        // The damaged tail was cut away: a new record lands after the 19th and all read back.
        store.put("after", "crash")
        XCTAssertTrue(log.write())
        let (again, _, r2) = try open()
        XCTAssertEqual(again.all.count, 20)
        XCTAssertEqual(again.all["after"], "crash")
        XCTAssertTrue(r2.warnings.isEmpty, "\(r2.warnings)")
    }

    func testTornTailReportCountsTheDroppedRecord() throws {
        let (store, log, _) = try open()
        for i in 0..<5 { store.put("k\(i)", "v\(i)") }
        XCTAssertTrue(log.write())
        let path = dir + "/" + logFiles()[0]
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        XCTAssertEqual(truncate(path, off_t(size - 1)), 0)
        let (_, _, report) = try open()
        XCTAssertEqual(report.logRecords, 4)
        XCTAssertEqual(report.warnings.count, 1)
        XCTAssertTrue(report.warnings[0].contains("1 record(s) dropped; started with the 4 before them"), report.warnings[0])
    }

    /// A damaged record in the middle (a flipped byte): the records before it are applied, and
    /// the ones after it are counted as dropped (their order past the damage cannot be trusted).
    func testADamagedRecordInTheMiddleCountsWhatFollows() throws {
        let (store, log, _) = try open()
        for i in 0..<10 { store.put("k\(i)", "value \(i)") }
        XCTAssertTrue(log.write())
        let path = dir + "/" + logFiles()[0]
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: path))
        // Record 6 (each frame here is the same size).
        let frame = (bytes.count - 16) / 10
        bytes[16 + frame * 5 + 12] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: path))
        let (after, _, report) = try open()
        XCTAssertEqual(after.all.count, 5)
        XCTAssertTrue(report.warnings.first?.contains("5 record(s) dropped") == true, "\(report.warnings)")
    }

    /// A snapshot cuts the log: the older log files go, the state is the same after a reopen,
    /// and the log after it holds only what came later.
    func testSnapshotBoundsTheLog() throws {
        let (store, log, _) = try open()
        for i in 0..<1000 { store.put("k\(i % 100)", "v\(i)") }
        XCTAssertTrue(log.write())
        let before = log.statistics.logBytes
        XCTAssertGreaterThan(before, 20_000)
        let path = try log.takeSnapshot()
        XCTAssertTrue(path.hasSuffix("snapshot-00000000000000001001.bin"), path)
        XCTAssertEqual(logFiles(), ["log-00000000000000001001.bin", "snapshot-00000000000000001001.bin"])
        XCTAssertEqual(log.statistics.logBytes, 16)
        XCTAssertEqual(log.statistics.recordsSinceSnapshot, 0)
        store.put("later", "1")
        XCTAssertTrue(log.write())
        let (again, _, report) = try open()
        XCTAssertEqual(report.snapshotRecords, 100)
        XCTAssertEqual(report.logRecords, 1)
        XCTAssertEqual(again.all, store.all)
    }

    /// A snapshot cut short (no end marker) is not used: the previous one and the logs after it are.
    func testAPartialSnapshotIsNotUsed() throws {
        let (store, log, _) = try open()
        store.put("a", "1")
        try log.takeSnapshot()
        store.put("b", "2")
        XCTAssertTrue(log.write())
        // A later snapshot whose writing stopped halfway (its logs kept: it never completed).
        let partial = dir + "/snapshot-00000000000000000003.bin"
        let good = try XCTUnwrap(FileManager.default.contents(atPath: dir + "/snapshot-00000000000000000002.bin"))
        try good.prefix(good.count - 5).write(to: URL(fileURLWithPath: partial))
        let (again, _, report) = try open()
        XCTAssertEqual(again.all, ["a": "1", "b": "2"])
        XCTAssertTrue(report.warnings.contains { $0.contains("is damaged") }, "\(report.warnings)")
    }

    func testANewerFormatIsRefused() throws {
        let (store, log, _) = try open()
        store.put("a", "1")
        XCTAssertTrue(log.write())
        let path = dir + "/" + logFiles()[0]
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: path))
        bytes[9] = StateLog.format + 1
        try bytes.write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try open()) { XCTAssertTrue("\($0)".contains("newer pushemu"), "\($0)") }
    }

    func testARecordOfANewerVersionIsRefused() throws {
        let (_, log, _) = try open()
        log.append(ChangeRecord(store: "kv", kind: 1, version: 2, body: []))
        XCTAssertTrue(log.write())
        XCTAssertThrowsError(try open()) { XCTAssertTrue("\($0)".contains("newer"), "\($0)") }
    }

    /// Writes that fail (here: the file's descriptor is closed under it) keep the records queued,
    /// make the log failing, answer strict waiters false, and succeed once writing works again.
    func testAFailedWriteKeepsTheRecordsAndSaysSo() throws {
        let (store, log, _) = try open(.strict)
        store.put("a", "1")
        XCTAssertTrue(log.write())
        // RLIMIT_FSIZE at the file's size: the next write gets EFBIG (SIGXFSZ ignored).
        let old = signal(SIGXFSZ, SIG_IGN)
        defer { signal(SIGXFSZ, old) }
        var lim = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &lim)
        let saved = lim
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: dir + "/" + logFiles()[0])[.size] as? Int)
        lim.rlim_cur = rlim_t(size)
        XCTAssertEqual(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &lim), 0)
        store.put("b", "2")
        let stored = FutexLock<Bool?>(nil)
        log.whenDurable(log.lastAppended) { ok in stored.withLock { $0 = ok } }
        XCTAssertEqual(stored.withLock { $0 }, false)
        XCTAssertTrue(log.isFailing)
        XCTAssertEqual(log.statistics.writeFailures, 1)
        var restore = saved
        XCTAssertEqual(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &restore), 0)
        XCTAssertTrue(log.write())
        XCTAssertFalse(log.isFailing)
        let (again, _, _) = try open()
        XCTAssertEqual(again.all, ["a": "1", "b": "2"], "the refused change was kept queued and written once the disk took it")
    }

    /// `sync`: waiters are released by the writer's turn after its fdatasync.
    func testSyncWaitsForTheWritersTurn() throws {
        let (store, log, _) = try open(.sync)
        let woke = FutexLock(0)
        log.drive(wake: { woke.withLock { $0 += 1 } })
        store.put("a", "1")
        let done = FutexLock<Bool?>(nil)
        log.whenDurable(log.lastAppended) { ok in done.withLock { $0 = ok } }
        XCTAssertNil(done.withLock { $0 }, "not before the writer's turn")
        XCTAssertEqual(woke.withLock { $0 }, 1)
        log.writerTurn()
        XCTAssertEqual(done.withLock { $0 }, true)
    }

    /// Records of a registry reset, and the export lines: parsed back, applied, exported again,
    /// the same text.
    func testExportImportExportIsTheSameText() throws {
        let a = KeyValueStore()
        let ra = StoreRegistry([a])
        a.put("x", "1")
        a.put("y", "two \"quoted\"")
        var first = ""
        try ra.export { first += $0 + "\n" }
        XCTAssertEqual(
            first,
            """
            {"pushemu":"state","format":1}
            {"store":"kv","kind":"put","key":"x","value":"1"}
            {"store":"kv","kind":"put","key":"y","value":"two \\"quoted\\""}

            """)
        let b = KeyValueStore()
        let rb = StoreRegistry([b])
        let records = try rb.parseExport(Array(first.utf8).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false))
        _ = try rb.apply(imported: records, log: nil, nowMs: 0)
        var second = ""
        try rb.export { second += $0 + "\n" }
        XCTAssertEqual(first, second)
        // A newer format, an unknown store and an unknown kind are refused with what is wrong.
        for (text, message) in [
            (#"{"pushemu":"state","format":2}"#, "newer than this pushemu reads"),
            ("{\"pushemu\":\"state\",\"format\":1}\n{\"store\":\"nope\",\"kind\":\"put\"}", "no store 'nope'"),
            ("{\"pushemu\":\"state\",\"format\":1}\n{\"store\":\"kv\",\"kind\":\"drop\"}", "has no record kind 'drop'"),
            ("{\"pushemu\":\"state\",\"format\":1}\n{\"store\":\"kv\",\"kind\":\"put\",\"v\":2}", "newer than this pushemu reads"),
            ("{\"store\":\"kv\",\"kind\":\"put\"}", "header"),
            ("", "empty"),
        ] {
            XCTAssertThrowsError(
                try rb.parseExport(Array(text.utf8).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false))
            ) {
                XCTAssertTrue("\($0)".contains(message), "\(text): \($0)")
            }
        }
    }

    /// The background thread snapshots once enough records were appended, and checkpoints stores.
    func testTheBackgroundThreadSnapshotsByCount() throws {
        var options = StateLog.Options()
        options.snapshotRecords = 100
        options.snapshotIntervalMs = 0
        let (store, log, _) = try open(.strict, options: options)
        log.start()
        defer { log.stop(snapshot: false) }
        for i in 0..<150 { store.put("k\(i)", "v") }
        XCTAssertTrue(log.write())
        let deadline = Date().addingTimeInterval(10)
        while log.statistics.snapshots == 0 && Date() < deadline { usleep(50_000) }
        XCTAssertEqual(log.statistics.snapshots, 1)
        XCTAssertGreaterThan(store.checkpoints.withLock { $0 }, 0)
    }
}
