import Foundation
import Synchronization
import XCTest

@testable import Runtime

/// `FutexLock` keeps its value consistent with more threads than cores taking it at once, hands
/// back what the body returns or throws, and frees its value with itself.
final class FutexLockTests: XCTestCase {
    func testManyThreadsCountEveryIncrementUnderContention() {
        let lock = FutexLock<[Int: Int]>([:])
        let threads = 16 // more than this machine's cores: sleepers and spinners both
        let perThread = 20_000
        let done = DispatchGroup()
        for t in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                for i in 0..<perThread {
                    lock.withLock { $0[(t &+ i) % 4, default: 0] += 1 }
                }
                done.leave()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "every thread finished")
        let counts = lock.withLock { $0 }
        XCTAssertEqual(counts.values.reduce(0, +), threads * perThread)
        XCTAssertEqual(counts.count, 4)
    }

    struct Refused: Error {}

    func testBodyResultAndErrorPassThroughAndTheLockIsFreedAfterAThrow() {
        let lock = FutexLock(41)
        XCTAssertEqual(
            lock.withLock { v -> Int in
                v += 1
                return v * 2
            }, 84)
        XCTAssertThrowsError(try lock.withLock { (_: inout Int) throws(Refused) -> Void in throw Refused() })
        // Taken again at once: the throw released it.
        XCTAssertEqual(lock.withLock { $0 }, 42)
    }

    final class Tracked: Sendable {
        static let alive = Atomic<Int>(0)
        init() { Tracked.alive.add(1, ordering: .relaxed) }
        deinit { Tracked.alive.subtract(1, ordering: .relaxed) }
    }

    func testValueIsReleasedWithTheLock() {
        let before = Tracked.alive.load(ordering: .relaxed)
        do {
            let lock = FutexLock([Tracked(), Tracked()])
            XCTAssertEqual(lock.withLock { $0.count }, 2)
            XCTAssertEqual(Tracked.alive.load(ordering: .relaxed), before + 2)
        }
        XCTAssertEqual(Tracked.alive.load(ordering: .relaxed), before)
    }

    func testThreadStripeIsStableAndInRange() {
        let mine = ThreadStripes.index(count: 32)
        XCTAssertTrue((0..<32).contains(mine))
        XCTAssertEqual(ThreadStripes.index(count: 32), mine)
        XCTAssertEqual(ThreadStripes.index(count: 1), 0)
        let seen = FutexLock<Set<Int>>([])
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread.detachNewThread {
                let i = ThreadStripes.index(count: 32)
                seen.withLock { _ = $0.insert(i) }
                Thread.sleep(forTimeInterval: 0.2) // all alive at once: distinct control blocks
                done.leave()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertGreaterThan(seen.withLock { $0.count }, 3, "eight live threads spread over the stripes")
    }
}
