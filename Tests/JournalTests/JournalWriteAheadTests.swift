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
        XCTAssertTrue(j.writesAhead)
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
        XCTAssertEqual(segFiles(AheadLog.directory(journal: path)), [], "stored, then deleted")
        var tokens: Set<String> = []
        again.scan { e in
            if case .request(let r) = e { tokens.insert(r.token) }
            return true
        }
        XCTAssertEqual(tokens, Set((0..<10).map { "tok\($0)" } + (100..<107).map { "tok\($0)" }))

        // Opened again: nothing is stored twice, and a new record gets a new file and a commit.
        again.start()
        let d = Waiter(loop: loops[1])
        runOn(loops[1]) { JournalCommitWaiterTests.append(again, 500, loop: loops[1], waiter: d) }
        runOn(loops[1]) {}
        XCTAssertEqual(d.released.map(\.count), [1])
        again.stop()
        XCTAssertEqual(segFiles(AheadLog.directory(journal: path)), [], "committed, then deleted")
        let third = try Journal(
            path: path, durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        XCTAssertEqual(third.counts().requests, 18)
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
        // The directory is back: the next answers are stored, and only their records are kept.
        XCTAssertEqual(mkdir(ahead, 0o700), 0)
        runOn(loop) { for i in 3..<5 { JournalCommitWaiterTests.append(j, i, loop: loop, waiter: w) } }
        runOn(loop) {}
        XCTAssertEqual(w.released.last?.count, 2)
        XCTAssertEqual(w.released.last?.stored, true)
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
                warnings: [], device: nil, notificationID: nil, maxPayload: 5120, campaignOf: { _, _ in nil })
        }
        let f = try XCTUnwrap(AheadLog.create(in: dir, loop: 3, serial: 42))
        for i in 0..<2 { add(i) }
        let first = e.mark
        XCTAssertTrue(e.withBytes { AheadLog.write(f, offset: 0, $0) })
        for i in 2..<5 { add(i) }
        XCTAssertTrue(e.withBytes { AheadLog.write(f, offset: first.byteCount, UnsafeRawBufferPointer(rebasing: $0[first.byteCount...])) })
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
        let r = try XCTUnwrap(AheadLog.read(f.path, loop: 3, serial: 42))
        XCTAssertEqual(r.mark.requests, 5)
        XCTAssertEqual(r.mark.byteCount, whole.byteCount)
        XCTAssertEqual(r.mark.oldestMs, 1_000)
        XCTAssertEqual(r.mark.newestMs, 1_004)
        // A chunk whose bytes do not match its checksum ends what is read, as a torn one does.
        let g = try XCTUnwrap(AheadLog.create(in: dir, loop: 3, serial: 43))
        XCTAssertTrue(e.withBytes { AheadLog.write(g, offset: 0, UnsafeRawBufferPointer(rebasing: $0[0..<first.byteCount])) })
        XCTAssertTrue(
            e.withBytes {
                AheadLog.write(g, offset: first.byteCount, UnsafeRawBufferPointer(rebasing: $0[first.byteCount..<whole.byteCount]))
            })
        close(g.fd)
        // (A descriptor of its own: Linux appends every pwrite to a file opened O_APPEND.)
        let h = open(g.path, O_WRONLY)
        var flip: UInt8 = 0xFF
        XCTAssertEqual(pwrite(h, &flip, 1, off_t(AheadLog.headerSize * 2 + first.byteCount + 3)), 1)
        close(h)
        XCTAssertEqual(AheadLog.read(g.path, loop: 3, serial: 43)?.mark.requests, 2)
        // What a journal already holds (by its per-loop serial) is not read again.
        XCTAssertEqual(AheadLog.pending(in: dir, through: [3: 42]).map(\.serial), [43])
    }
}
