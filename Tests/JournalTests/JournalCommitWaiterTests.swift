import PushCore
import Runtime
import XCTest

@testable import Journal
@testable import Transport

/// Answers parked through `CommitWaiter` (the pipeline's path under strict and sync durability on
/// disk): under sync released only after their commit, on the loop they were parked on, in
/// order, each waiter told exactly how many of its own (strict: `JournalWriteAheadTests`);
/// relaxed and in-memory journals release each one at once.
final class JournalCommitWaiterTests: XCTestCase {
    /// Records what it was told, checking it runs on its loop.
    final class Waiter: CommitWaiter, @unchecked Sendable {
        let lock = NSLock()
        var released: [(count: Int, stored: Bool)] = []
        var onWrongThread = 0
        let loop: EventLoop?
        init(loop: EventLoop?) { self.loop = loop }
        func committed(_ count: Int, stored: Bool) {
            lock.lock()
            defer { lock.unlock() }
            if let loop, !loop.inEventLoop { onWrongThread += 1 }
            released.append((count, stored))
        }
        var total: Int {
            lock.lock()
            defer { lock.unlock() }
            return released.reduce(0) { $0 + $1.count }
        }
    }

    static func append(_ j: Journal, _ i: Int, loop: EventLoop?, waiter: Waiter) {
        j.appendRequest(
            atMs: 1_000 + Int64(i), provider: .apns, connection: 1, environment: "sandbox", token: Array("tok\(i)".utf8)[...],
            topic: nil, status: 200, reason: "", latencyUs: 1, headers: HTTPFields([("apns-topic", "t")]),
            payload: Array(#"{"aps":{}}"#.utf8)[...], warnings: [], notificationID: nil, loop: loop, notify: .parked(waiter))
    }

    /// `n` started event loops (indexes 0..<n), for `stop` in a `defer`.
    static func startLoops(_ n: Int) throws -> [EventLoop] {
        let loops = try (0..<n).map { try EventLoop(index: $0) }
        for l in loops { l.start() }
        return loops
    }

    static func stop(_ loops: [EventLoop]) {
        for l in loops {
            l.stop()
            l.join()
        }
    }

    func wait(until condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !condition() && Date() < deadline { usleep(2_000) }
    }

    func testSyncOnDiskReleasesEachWaitersAnswersAfterTheCommitOnTheirLoop() throws {
        let dir = "/tmp/pushemu-journal-waiters-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        let loops = try JournalCommitWaiterTests.startLoops(2)
        defer { JournalCommitWaiterTests.stop(loops) }
        let j = try Journal(
            path: dir + "/j.sqlite", durability: .sync, loops: 2, retention: .init(maxRecords: .max, maxAgeMs: .max),
            campaignOf: { _, _ in nil })
        XCTAssertTrue(j.answersWait)
        XCTAssertTrue(j.parksOwnAnswers(loops[1]))
        XCTAssertFalse(j.parksOwnAnswers(try EventLoop(index: 2)), "a loop beyond the journal's shards")
        // Two waiters on loop 0, interleaved in runs, and one on loop 1, all appended on their loops.
        let a = Waiter(loop: loops[0])
        let b = Waiter(loop: loops[0])
        let c = Waiter(loop: loops[1])
        let order = [a, a, a, b, a, b, b, b, b, a]
        let appended = DispatchSemaphore(value: 0)
        loops[0].execute {
            for (i, w) in order.enumerated() { Self.append(j, i, loop: loops[0], waiter: w) }
            appended.signal()
        }
        loops[1].execute {
            for i in 0..<7 { Self.append(j, 100 + i, loop: loops[1], waiter: c) }
            appended.signal()
        }
        appended.wait()
        appended.wait()
        usleep(30_000)
        XCTAssertEqual(a.total + b.total + c.total, 0, "the writer has not started: nothing committed, nothing released")
        j.start()
        wait { a.total == 5 && b.total == 5 && c.total == 7 }
        XCTAssertEqual(a.total, 5)
        XCTAssertEqual(b.total, 5)
        XCTAssertEqual(c.total, 7)
        // One commit: a's runs (3, 1, 1) and b's (1, 4), as appended; every release stored.
        XCTAssertEqual(a.released.map(\.count), [3, 1, 1])
        XCTAssertEqual(b.released.map(\.count), [1, 4])
        XCTAssertEqual(c.released.map(\.count), [7])
        XCTAssertTrue((a.released + b.released + c.released).allSatisfy(\.stored))
        XCTAssertEqual(a.onWrongThread + b.onWrongThread + c.onWrongThread, 0, "released on the loop that parked them")
        XCTAssertEqual(j.counts().requests, 17, "released only once stored")
        // A later batch is counted afresh.
        loops[1].execute { Self.append(j, 200, loop: loops[1], waiter: c) }
        wait { c.total == 8 }
        XCTAssertEqual(c.released.map(\.count), [7, 1])
        j.stop()
    }

    func testRelaxedAndInMemoryReleaseEachAnswerAtOnce() throws {
        let dir = "/tmp/pushemu-journal-waiters-relaxed-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        let relaxed = try Journal(path: dir + "/j.sqlite", durability: .relaxed, campaignOf: { _, _ in nil })
        let memory = try Journal(path: nil, durability: .strict, campaignOf: { _, _ in nil })
        for j in [relaxed, memory] {
            XCTAssertFalse(j.answersWait)
            let w = Waiter(loop: nil)
            for i in 0..<3 { Self.append(j, i, loop: nil, waiter: w) }
            XCTAssertEqual(w.released.map(\.count), [1, 1, 1], "each told at once, before any writer runs")
            XCTAssertTrue(w.released.allSatisfy(\.stored))
        }
    }
}
