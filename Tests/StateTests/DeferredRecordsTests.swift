import Foundation
import PushCore
import Runtime
import Synchronization
import XCTest

@testable import State

/// A store of values by token whose snapshot records are independent and may wait unapplied
/// (as the device stores' are): lookups go through `value(_:)`, which applies a waiting record
/// first, as the real stores' shard lookups do.
final class TokenStore: PersistentStore, @unchecked Sendable {
    let stateName = "tokens"
    let changes = ChangeLink(store: "tokens")
    let values = FutexLock<[TokenKey: (String, String)]>([:])
    /// Records applied (at start, from the log, or when they stopped waiting).
    let applied = Atomic<Int>(0)
    let waiting = DeferredRecords(store: "tokens")
    var deferred: DeferredRecords? { waiting }

    var recordSchemas: [RecordSchema] {
        [RecordSchema(kind: 1, name: "put", fields: [FieldSchema(1, "token", .string), FieldSchema(2, "value", .string)])]
    }

    func record(_ token: String, _ value: String) -> [UInt8] {
        var w = StateWriter()
        w.string(1, token)
        w.string(2, value)
        return w.bytes
    }

    private func ensure(_ k: TokenKey) {
        if waiting.isPending { waiting.materialize(k) { try applyDeferred($0) } }
    }

    func put(_ token: String, _ value: String) {
        let k = TokenKey(token)
        ensure(k)
        values.withLock {
            $0[k] = (token, value)
            changes.emit(kind: 1, atMs: 1, record(token, value))
        }
    }

    /// Appends to the value (a change that depends on the saved one).
    func append(_ token: String, _ suffix: String) {
        let k = TokenKey(token)
        ensure(k)
        values.withLock {
            let v = ($0[k]?.1 ?? "") + suffix
            $0[k] = (token, v)
            changes.emit(kind: 1, atMs: 1, record(token, v))
        }
    }

    func value(_ token: String) -> String? {
        let k = TokenKey(token)
        ensure(k)
        return values.withLock { $0[k]?.1 }
    }

    var all: [String: String] {
        applyAllDeferred()
        return values.withLock { Dictionary(uniqueKeysWithValues: $0.values.map { ($0.0, $0.1) }) }
    }

    func deferredKey(_ record: RecordView) -> TokenKey? { record.kind == 1 && record.version == 1 ? record.key(field: 1) : nil }

    func applyDeferred(_ record: RecordView) throws { try put(record) }

    func apply(_ record: RecordView) throws {
        if let k = deferredKey(record) { ensure(k) }
        try put(record)
    }

    private func put(_ record: RecordView) throws {
        guard record.kind == 1, record.version == 1 else { throw StateFormatError("tokens has no kind \(record.kind)") }
        var token = ""
        var value = ""
        var r = StateReader(record.body)
        while let f = try r.next() {
            switch f {
            case 1: token = try r.string()
            case 2: value = try r.string()
            default: try r.skip()
            }
        }
        guard token != "bad" else { throw StateFormatError("a bad token") }
        values.withLock { $0[TokenKey(token)] = (token, value) }
        applied.add(1, ordering: .relaxed)
    }

    func snapshot(_ emit: (ChangeRecord) -> Void) {}

    func snapshotIndependent(_ emit: (ChangeRecord) -> Void) {
        applyAllDeferred()
        for (t, v) in values.withLock({ $0.values.map { $0 } }).sorted(by: { $0.0 < $1.0 }) {
            emit(ChangeRecord(store: stateName, kind: 1, body: record(t, v)))
        }
    }

    func reset(_ scope: ResetScope) {
        waiting.discard()
        values.withLock { $0.removeAll() }
    }
}

final class DeferredRecordsTests: XCTestCase {
    var dir = ""
    var opened: [StateLog] = []

    override func setUp() {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-deferred-\(UUID().uuidString)").path
    }

    override func tearDown() {
        for log in opened { log.release() }
        try? FileManager.default.removeItem(atPath: dir)
    }

    func open() throws -> (TokenStore, StateLog, StateLog.StartReport) {
        for log in opened { log.release() }
        opened.removeAll()
        let store = TokenStore()
        let (log, report) = try StateLog.open(
            directory: dir, durability: .strict, registry: StoreRegistry([store]), options: StateLog.Options())
        opened.append(log)
        return (store, log, report)
    }

    /// `n` tokens saved in a snapshot, then `tail` written to the log after it.
    func saved(_ n: Int, tail: (TokenStore) -> Void = { _ in }) throws {
        let (store, log, _) = try open()
        for i in 0..<n { store.put("t\(i)", "v\(i)") }
        _ = try log.takeSnapshot()
        tail(store)
        XCTAssertTrue(log.write())
    }

    /// A start reads the snapshot's keys only: each record is applied when its key is first
    /// asked for, and a read of the whole store applies the rest.
    func testSnapshotRecordsWaitUntilTheirKeyIsAskedFor() throws {
        try saved(1_000)
        let (store, _, report) = try open()
        XCTAssertEqual(report.snapshotRecords, 1_000)
        XCTAssertEqual(store.waiting.count, 1_000)
        XCTAssertEqual(store.applied.load(ordering: .relaxed), 0)
        XCTAssertEqual(store.value("t7"), "v7")
        XCTAssertEqual(store.value("T7"), "v7", "keys fold case as tokens do")
        XCTAssertEqual(store.applied.load(ordering: .relaxed), 1)
        XCTAssertEqual(store.waiting.count, 999)
        XCTAssertNil(store.value("t1000"))
        XCTAssertEqual(store.value("t7"), "v7")
        XCTAssertEqual(store.applied.load(ordering: .relaxed), 1, "applied once")
        let all = store.all
        XCTAssertEqual(all.count, 1_000)
        XCTAssertEqual(all["t999"], "v999")
        XCTAssertFalse(store.waiting.isPending)
        XCTAssertEqual(store.applied.load(ordering: .relaxed), 1_000)
    }

    /// The log's tail after the snapshot applies on top of the saved record, as applying every
    /// record in order would: a change that depends on the saved value keeps it.
    func testTheLogsTailAppliesOverAWaitingRecord() throws {
        try saved(100) { store in
            store.append("t5", "-a")
            store.append("t5", "-b")
            store.put("new", "x")
        }
        let (store, log, report) = try open()
        XCTAssertEqual(report.logRecords, 3)
        XCTAssertEqual(store.waiting.count, 99, "the tail applied t5's saved record first")
        XCTAssertEqual(store.value("t5"), "v5-a-b")
        XCTAssertEqual(store.value("new"), "x")
        store.append("t6", "-c")
        XCTAssertEqual(store.value("t6"), "v6-c")
        XCTAssertTrue(log.write())
        // And once more through a restart.
        let (again, _, _) = try open()
        XCTAssertEqual(again.value("t6"), "v6-c")
        XCTAssertEqual(again.all.count, 101)
    }

    /// A snapshot taken while records wait holds them all.
    func testASnapshotWhileRecordsWaitHoldsThemAll() throws {
        try saved(500)
        let (store, log, _) = try open()
        XCTAssertEqual(store.waiting.count, 500)
        _ = try log.takeSnapshot()
        XCTAssertFalse(store.waiting.isPending)
        let (again, _, report) = try open()
        XCTAssertEqual(report.snapshotRecords, 500)
        XCTAssertEqual(again.all.count, 500)
    }

    /// A reset forgets waiting records: none comes back afterwards.
    func testAResetForgetsWaitingRecords() throws {
        try saved(100)
        let (store, _, _) = try open()
        store.reset(.all)
        XCTAssertFalse(store.waiting.isPending)
        XCTAssertNil(store.value("t1"))
        XCTAssertEqual(store.all.count, 0)
    }

    /// The background pass and lookups on other threads, together: every record applied exactly
    /// once, every lookup answered with the saved value.
    func testLookupsDuringTheBackgroundPassSeeEveryRecordOnce() throws {
        try saved(20_000)
        let (store, log, _) = try open()
        log.start()
        defer { log.stop(snapshot: false) }
        let misses = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in stride(from: worker, to: 20_000, by: 4) where store.value("t\(i)") != "v\(i)" {
                misses.add(1, ordering: .relaxed)
            }
        }
        XCTAssertEqual(misses.load(ordering: .relaxed), 0)
        XCTAssertEqual(store.all.count, 20_000)
        XCTAssertEqual(store.applied.load(ordering: .relaxed), 20_000)
    }

    /// A saved record that no longer applies is left out and counted; the others still apply.
    func testARecordThatFailsWhenItsTurnComesIsLeftOut() throws {
        let (saving, log, _) = try open()
        for i in 0..<10 { saving.put("t\(i)", "v\(i)") }
        saving.put("bad", "x") // kept as it is, refused when read back
        _ = try log.takeSnapshot()
        let (store, _, _) = try open()
        XCTAssertEqual(store.waiting.count, 11)
        XCTAssertNil(store.value("bad"))
        XCTAssertEqual(store.waiting.failed.load(ordering: .relaxed), 1)
        XCTAssertEqual(store.all.count, 10)
    }
}
