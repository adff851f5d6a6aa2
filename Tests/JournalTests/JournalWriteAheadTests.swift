import CSQLite
import Foundation
import PushCore
import XCTest

@testable import Journal
@testable import Transport

/// Strict durability on disk: each loop writes its records ahead (`AheadLog`) at its flush
/// barrier and gives the answers waiting on them in the same iteration, before any commit; what
/// the files hold survives the process and is stored by the next journal opened on the path;
/// a write that fails tells its answers they were not stored.
final class JournalWriteAheadTests: XCTestCase {
    /// Each durability mode on each medium is one writer mode, and only the on-disk ones make
    /// answers wait.
    func testWriterModes() {
        typealias M = Journal.WriterMode
        XCTAssertEqual(M(.relaxed, onDisk: true), .relaxed)
        XCTAssertEqual(M(.relaxed, onDisk: false), .relaxed)
        XCTAssertEqual(M(.sync, onDisk: true), .sync)
        XCTAssertEqual(M(.strict, onDisk: true), .writeAhead)
        XCTAssertEqual(M(.sync, onDisk: false), .memory)
        XCTAssertEqual(M(.strict, onDisk: false), .memory)
        XCTAssertEqual([M.relaxed, .memory, .sync, .writeAhead].map(\.answersWait), [false, false, true, true])
        XCTAssertEqual([M.relaxed, .memory, .sync, .writeAhead].map(\.flushesBeforeReads), [false, true, false, true])
    }

    typealias Waiter = JournalCommitWaiterTests.Waiter

    private func directory(_ name: String) -> String {
        let dir = NSTemporaryDirectory() + "pushemu-ahead-\(name)-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        mkdir(dir, 0o755)
        return dir
    }

    private func segFiles(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".seg") }
    }

    private func runOn(_ loop: EventLoop, _ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            body()
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
    }

    func testAnswersLeaveAtTheLoopsBarrierAndTheFilesOutliveTheProcess() throws {
        let dir = directory("barrier")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loops = try JournalCommitWaiterTests.startLoops(2)
        defer { JournalCommitWaiterTests.stop(loops) }
        let path = dir + "/j.sqlite"
        let j = try Journal(
            path: path, durability: .strict, loops: 2, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        XCTAssertTrue(j.answersWait)
        XCTAssertEqual(j.mode, .writeAhead)
        // The writer never starts: nothing is committed, yet every answer goes, once written ahead.
        let a = Waiter(loop: loops[0])
        let b = Waiter(loop: loops[0])
        let c = Waiter(loop: loops[1])
        let order = [a, a, a, b, a, b, b, b, b, a]
        runOn(loops[0]) {
            for (i, w) in order.enumerated() { JournalCommitWaiterTests.append(j, i, loop: loops[0], waiter: w) }
            XCTAssertEqual(a.total + b.total, 0, "parked until the barrier, which runs after this block")
        }
        runOn(loops[1]) {
            for i in 0..<7 { JournalCommitWaiterTests.append(j, 100 + i, loop: loops[1], waiter: c) }
        }
        // The barrier ran in the iteration that appended: before the next task on the loop.
        runOn(loops[0]) {}
        runOn(loops[1]) {}
        XCTAssertEqual(a.released.map(\.count), [3, 1, 1])
        XCTAssertEqual(b.released.map(\.count), [1, 4])
        XCTAssertEqual(c.released.map(\.count), [7])
        XCTAssertTrue((a.released + b.released + c.released).allSatisfy(\.stored))
        XCTAssertEqual(a.onWrongThread + b.onWrongThread + c.onWrongThread, 0, "given on the loop that parked them")
        XCTAssertEqual(j.statistics.storedRequests, 0, "nothing committed")
        XCTAssertEqual(segFiles(AheadLog.directory(journal: path)).count, 2, "one file per loop's segment")

        // As if the process had been killed: a journal opened on the path stores what the files hold.
        let again = try Journal(
            path: path, durability: .strict, loops: 2, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        XCTAssertEqual(again.counts().requests, 17)
        XCTAssertEqual(segFiles(AheadLog.directory(journal: path)).sorted(), ["L0-1.seg", "L1-2.seg"], "each at its loop's mark, kept")
        var tokens: Set<String> = []
        again.scan { e in
            if case .request(let r) = e { tokens.insert(r.token) }
            return true
        }
        XCTAssertEqual(tokens, Set((0..<10).map { "tok\($0)" } + (100..<107).map { "tok\($0)" }))

        // Opened again: nothing is stored twice, and a new record gets a new file and a commit
        // whose row points into it.
        again.start()
        let d = Waiter(loop: loops[1])
        runOn(loops[1]) { JournalCommitWaiterTests.append(again, 500, loop: loops[1], waiter: d) }
        runOn(loops[1]) {}
        XCTAssertEqual(d.released.map(\.count), [1])
        again.stop()
        let third = try Journal(
            path: path, durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        XCTAssertEqual(third.counts().requests, 18)
        XCTAssertEqual(
            segFiles(AheadLog.directory(journal: path)).sorted(), ["L0-1.seg", "L1-3.seg"],
            "loop 1's first file is behind its mark and no row points into it: deleted")
        var last: [String] = []
        third.scan { e in
            if case .request(let r) = e { last.append(r.token) }
            return true
        }
        XCTAssertEqual(last.last, "tok500", "read back from its file")
        XCTAssertEqual(last.count, 18)
    }

    /// Rows in `path`'s journal whose bytes are in a write-ahead file (none in the row).
    private func fileBackedRows(_ path: String) throws -> Int {
        let db = try SQLiteDatabase(path: path)
        let s = try db.prepare("SELECT count(*) FROM segments WHERE file_loop IS NOT NULL AND length(data) = 0")
        return s.step() == SQLITE_ROW ? Int(s.int(0)) : -1
    }

    /// The files rows of `path`'s journal point into, and each loop's file at its mark.
    private func keptFiles(_ path: String) throws -> [String] {
        let db = try SQLiteDatabase(path: path)
        let s = try db.prepare("SELECT DISTINCT file_loop, file_serial FROM segments WHERE file_loop IS NOT NULL")
        var names: Set<String> = []
        while s.step() == SQLITE_ROW { names.insert("L\(s.int(0))-\(s.int(1)).seg") }
        for (loop, p) in SQLiteSegmentStore.aheadThrough(db) { names.insert("L\(loop)-\(p.serial).seg") }
        return names.sorted()
    }

    private func waitUntil(_ what: String, _ condition: () -> Bool) {
        for _ in 0..<200 where !condition() { usleep(25_000) }
        XCTAssertTrue(condition(), what)
    }

    /// Appends `batches` of `size` records (tokens `tok<batch><i>`) on `loop`, each committed
    /// (or pruned) before the next.
    private func commitBatches(_ j: Journal, on loop: EventLoop, _ batches: Int, of size: Int) {
        let w = Waiter(loop: loop)
        for batch in 0..<batches {
            runOn(loop) { for i in 0..<size { JournalCommitWaiterTests.append(j, batch * 10 + i, loop: loop, waiter: w) } }
            waitUntil("batch \(batch) committed") { j.statistics.storedRequests + Int(j.statistics.pruned) >= (batch + 1) * size }
        }
        XCTAssertEqual(w.released.reduce(0) { $0 + $1.count }, batches * size)
    }

    func testSegmentsStayInTheirFilesUntilRetentionLetsThemGo() throws {
        let dir = directory("segments")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loops = try JournalCommitWaiterTests.startLoops(1)
        defer { JournalCommitWaiterTests.stop(loops) }
        let path = dir + "/j.sqlite"
        // Every file is closed once its segment is taken: one file per commit.
        let j = try Journal(
            path: path, durability: .strict, loops: 1, retention: .init(maxRecords: 8, maxAgeMs: .max), campaignOf: { _, _ in nil },
            aheadRotateBytes: 1)
        j.start()
        commitBatches(j, on: loops[0], 3, of: 4)
        let ahead = AheadLog.directory(journal: path)
        // Retention keeps 8 records: the oldest whole segments go, and their files with them (one
        // segment a file here). Records are appended one by one and the writer takes whenever its
        // window ends, so a batch may span segments: what is checked is which files are left.
        waitUntil("the oldest segments pruned") { j.statistics.pruned > 0 }
        waitUntil("the pruned segments' files deleted") { !segFiles(ahead).contains("L0-1.seg") }
        let kept = try keptFiles(path)
        XCTAssertEqual(segFiles(ahead).sorted(), kept, "exactly the files a row points into, and the one at the loop's mark")
        XCTAssertGreaterThan(kept.count, 1)
        XCTAssertGreaterThanOrEqual(try fileBackedRows(path), kept.count, "every kept row points into a file")
        var tokens: [String] = []
        j.scan { e in
            if case .request(let r) = e { tokens.append(r.token) }
            return true
        }
        let all = (0..<3).flatMap { b in (0..<4).map { "tok\(b * 10 + $0)" } }
        XCTAssertEqual(tokens, Array(all.dropFirst(Int(j.statistics.pruned))), "read back from their files")
        // A reset takes every row; the files go once behind the mark (the last stays).
        let reset = DispatchSemaphore(value: 0)
        j.reset { reset.signal() }
        XCTAssertEqual(reset.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(segFiles(ahead).count, 1)
        j.stop()
        // The export path (no writer) reads the same: nothing.
        var exported = 0
        try SQLiteSegmentStore.read(path: path, sinceMs: 0) { _ in
            exported += 1
            return true
        }
        XCTAssertEqual(exported, 0)
    }

    func testOneFileHoldsManySegmentsAndARestartStoresOnlyWhatLiesPastItsMark() throws {
        let dir = directory("many")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loops = try JournalCommitWaiterTests.startLoops(1)
        defer { JournalCommitWaiterTests.stop(loops) }
        let path = dir + "/j.sqlite"
        let j = try Journal(
            path: path, durability: .strict, loops: 1, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        j.start()
        commitBatches(j, on: loops[0], 3, of: 3)
        j.stop()
        let ahead = AheadLog.directory(journal: path)
        XCTAssertEqual(segFiles(ahead), ["L0-1.seg"], "one file, a segment a commit")
        let f = AheadLog.path(in: ahead, loop: 0, serial: 1)
        let all = AheadLog.segments(f, loop: 0, serial: 1, from: 0)
        XCTAssertGreaterThanOrEqual(all.count, 3)
        XCTAssertEqual(try fileBackedRows(path), all.count)
        XCTAssertEqual(all.reduce(0) { $0 + $1.mark.requests }, 9)
        XCTAssertEqual(all.first?.location.start, 0)
        for (a, b) in zip(all, all.dropFirst()) { XCTAssertEqual(b.location.start, a.location.end, "back to back") }
        XCTAssertEqual(
            AheadLog.segments(f, loop: 0, serial: 1, from: all[1].location.end).map(\.mark.requests), all.dropFirst(2).map(\.mark.requests))
        XCTAssertEqual(AheadLog.Reader(dir: ahead).read(all[1].location), all[1].bytes)

        // A fourth segment written after the last commit (a kill before the writer took it):
        // the next journal stores it alone, copied into its row.
        var e = SegmentEncoder(baseMs: 2_000)
        e.appendRequest(
            atMs: 2_000, provider: .apns, connection: 1, environment: "sandbox", token: Array("late".utf8)[...], topic: nil,
            status: 200, reason: "", latencyUs: 1, headers: HTTPFields(), payload: Array(#"{"aps":{}}"#.utf8)[...], warnings: [],
            device: nil, notificationID: nil, maxPayload: 5120, campaignOf: { _, _, _, _ in nil })
        let h = open(f, O_WRONLY | O_APPEND)
        var file = AheadLog.File(fd: h, path: f, loop: 0, serial: 1)
        XCTAssertTrue(e.withBytes { AheadLog.write(&file, offset: 0, $0) })
        close(h)
        var exported: [String] = []
        try SQLiteSegmentStore.read(path: path, sinceMs: 0) { seg in
            Journal.entries(seg, sinceMs: 0, newestFirst: false) { entry in
                if case .request(let r) = entry { exported.append(r.token) }
                return true
            }
        }
        XCTAssertEqual(exported.count, 10, "export reads the rows' files and what lies past the mark")
        XCTAssertEqual(exported.last, "late")
        let again = try Journal(
            path: path, durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        XCTAssertEqual(again.counts().requests, 10)
        let third = try Journal(
            path: path, durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        XCTAssertEqual(third.counts().requests, 10, "stored once")
    }

    func testAWriteThatFailsTellsItsAnswersTheyWereNotStored() throws {
        let dir = directory("failing")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop(index: 0)
        loop.start()
        defer {
            loop.stop()
            loop.join()
        }
        let path = dir + "/j.sqlite"
        let j = try Journal(
            path: path, durability: .strict, loops: 1, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        let ahead = AheadLog.directory(journal: path)
        // The files cannot be created (their directory is gone): the answers say not stored.
        XCTAssertEqual(rmdir(ahead), 0)
        let w = Waiter(loop: loop)
        runOn(loop) { for i in 0..<3 { JournalCommitWaiterTests.append(j, i, loop: loop, waiter: w) } }
        runOn(loop) {}
        XCTAssertEqual(w.released.map(\.count), [3])
        XCTAssertEqual(w.released.map(\.stored), [false])
        XCTAssertEqual(j.statistics.withheldAnswers, 3)
        // Reported as a refused commit is: counted, the journal failing, the error kept.
        XCTAssertEqual(j.statistics.failedCommits, 1)
        XCTAssertTrue(j.isFailing)
        XCTAssertTrue(j.statistics.failing)
        XCTAssertTrue(
            j.lastError?.hasPrefix("cannot create a write-ahead file in \(ahead): No such file or directory") ?? false,
            "\(j.lastError ?? "")")
        // The directory is back: the next answers are stored, and only their records are kept.
        XCTAssertEqual(mkdir(ahead, 0o700), 0)
        runOn(loop) { for i in 3..<5 { JournalCommitWaiterTests.append(j, i, loop: loop, waiter: w) } }
        runOn(loop) {}
        XCTAssertEqual(w.released.last?.count, 2)
        XCTAssertEqual(w.released.last?.stored, true)
        XCTAssertFalse(j.isFailing, "a write that succeeds ends it")
        j.start()
        j.stop()
        XCTAssertEqual(j.counts().requests, 2, "\(j.statistics)")
    }

    func testATornFileKeepsItsWholeChunks() throws {
        let dir = directory("torn")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var e = SegmentEncoder(baseMs: 1_000)
        func add(_ i: Int) {
            e.appendRequest(
                atMs: 1_000 + Int64(i), provider: .apns, connection: 1, environment: "sandbox", token: Array("tok\(i)".utf8)[...],
                topic: nil, status: 200, reason: "", latencyUs: 1, headers: HTTPFields(), payload: Array(#"{"aps":{}}"#.utf8)[...],
                warnings: [], device: nil, notificationID: nil, maxPayload: 5120, campaignOf: { _, _, _, _ in nil })
        }
        var f = try XCTUnwrap(AheadLog.create(in: dir, loop: 3, serial: 42))
        for i in 0..<2 { add(i) }
        let first = e.mark
        XCTAssertTrue(e.withBytes { AheadLog.write(&f, offset: 0, $0) })
        for i in 2..<5 { add(i) }
        XCTAssertTrue(e.withBytes { AheadLog.write(&f, offset: first.byteCount, UnsafeRawBufferPointer(rebasing: $0[first.byteCount...])) })
        let whole = e.mark
        // A torn third chunk: its header promises more than follows.
        for i in 5..<7 { add(i) }
        e.withBytes { b in
            let tail = UnsafeRawBufferPointer(rebasing: b[whole.byteCount...])
            var header: [UInt32] = [AheadLog.magic, UInt32(whole.byteCount), UInt32(tail.count), AheadLog.checksum(tail)]
            _ = header.withUnsafeMutableBytes { write(f.fd, $0.baseAddress, $0.count) }
            _ = write(f.fd, tail.baseAddress, tail.count / 2)
        }
        close(f.fd)
        XCTAssertEqual(AheadLog.files(in: dir).map(\.serial), [42])
        let r = try XCTUnwrap(AheadLog.segments(f.path, loop: 3, serial: 42, from: 0).first)
        XCTAssertEqual(r.mark.requests, 5)
        XCTAssertEqual(r.mark.byteCount, whole.byteCount)
        XCTAssertEqual(r.mark.oldestMs, 1_000)
        XCTAssertEqual(r.mark.newestMs, 1_004)
        // A chunk whose bytes do not match its checksum ends what is read, as a torn one does.
        var g = try XCTUnwrap(AheadLog.create(in: dir, loop: 3, serial: 43))
        XCTAssertTrue(e.withBytes { AheadLog.write(&g, offset: 0, UnsafeRawBufferPointer(rebasing: $0[0..<first.byteCount])) })
        XCTAssertTrue(
            e.withBytes {
                AheadLog.write(&g, offset: first.byteCount, UnsafeRawBufferPointer(rebasing: $0[first.byteCount..<whole.byteCount]))
            })
        close(g.fd)
        // (A descriptor of its own: Linux appends every pwrite to a file opened O_APPEND.)
        let h = open(g.path, O_WRONLY)
        var flip: UInt8 = 0xFF
        XCTAssertEqual(pwrite(h, &flip, 1, off_t(AheadLog.headerSize * 2 + first.byteCount + 3)), 1)
        close(h)
        XCTAssertEqual(AheadLog.segments(g.path, loop: 3, serial: 43, from: 0).map(\.mark.requests), [2])
        // What a journal already holds (by its per-loop mark) is not read again.
        XCTAssertEqual(AheadLog.pending(in: dir, through: [3: AheadLog.Position(serial: 42, end: .max)]).map(\.serial), [43])
        XCTAssertEqual(AheadLog.Position(text: "42"), AheadLog.Position(serial: 42, end: .max), "an earlier version's mark")
        XCTAssertEqual(AheadLog.Position(text: "42:160"), AheadLog.Position(serial: 42, end: 160))
        XCTAssertNil(AheadLog.Position(text: "42:-1"))
    }
}
