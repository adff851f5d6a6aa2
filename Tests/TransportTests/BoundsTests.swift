import XCTest

@testable import Transport

/// The transport's process-wide bounds, as values: timeouts that can never trap, the one
/// connection count, the buffer budget's verdict, and route handler wrapping.
final class BoundsTests: XCTestCase {
    func testTimeoutsAreClampedNeverTrapped() {
        var t = ServerTimeouts()
        t.idle = 1e300
        t.requestHead = .infinity
        t.requestBody = .nan
        t.send = -5
        XCTAssertEqual(t.idleNanos, UInt64(3.15e18))
        XCTAssertEqual(t.requestHeadNanos, 1_000_000, "infinity is not finite: the floor, never a trap")
        XCTAssertEqual(t.requestBodyNanos, 1_000_000)
        XCTAssertEqual(t.sendNanos, 1_000_000)
        t.requestHead = 2.5
        XCTAssertEqual(t.requestHeadNanos, 2_500_000_000)
    }

    func testOneConnectionCountForTheWholeServer() {
        let budget = ConnectionBudget(maxConnections: 3, maxBufferedBytes: 1 << 20, loops: 4)
        XCTAssertTrue(budget.admitConnection(cost: 1))
        XCTAssertTrue(budget.admitConnection(cost: 1))
        XCTAssertTrue(budget.admitConnection(cost: 1))
        XCTAssertFalse(budget.admitConnection(cost: 1), "the limit is the server's, whichever loop asks")
        budget.releaseConnection(cost: 1)
        XCTAssertTrue(budget.admitConnection(cost: 1))
        XCTAssertEqual(budget.openConnections, 3)
    }

    /// A connection's fixed cost counts in the memory budget, with the loops' buffers.
    func testConnectionsCostMemoryInTheBudget() {
        let budget = ConnectionBudget(maxConnections: 100, maxBufferedBytes: 10 << 20, loops: 2)
        for _ in 0..<4 { XCTAssertTrue(budget.admitConnection(cost: 2 << 20)) }
        XCTAssertFalse(budget.admitConnection(cost: 4 << 20), "8 MiB held: 4 more would pass 10")
        XCTAssertEqual(budget.openConnections, 4, "a refused one holds nothing")
        _ = budget.publish(loop: 0, bytes: 1 << 20)
        XCTAssertFalse(budget.admitConnection(cost: 2 << 20), "the buffers count too")
        XCTAssertTrue(budget.admitConnection(cost: 1 << 20))
        XCTAssertEqual(budget.publish(loop: 1, bytes: 1 << 20), 11 << 20)
        XCTAssertTrue(budget.overBudget)
        budget.releaseConnection(cost: 2 << 20)
        XCTAssertEqual(budget.connectionBytes, 7 << 20)
    }

    func testBudgetSumsEveryLoop() {
        let budget = ConnectionBudget(maxConnections: 10, maxBufferedBytes: 100 << 20, loops: 2)
        XCTAssertEqual(budget.perLoopShare, 50 << 20, "no connection costs yet")
        XCTAssertEqual(budget.publish(loop: 0, bytes: 60 << 20), 60 << 20)
        XCTAssertFalse(budget.overBudget)
        XCTAssertEqual(budget.publish(loop: 1, bytes: 50 << 20), 110 << 20)
        XCTAssertTrue(budget.overBudget, "over once the loops together hold more than the budget")
        _ = budget.publish(loop: 0, bytes: 10 << 20)
        XCTAssertFalse(budget.overBudget, "and no longer once a loop gave enough back")
    }

    func testWrappingHandlersLeavesTheExemptOnes() throws {
        var router = Router()
        router.add(.get, "/before") { _ in }
        let first = router.routes.count
        router.add(.get, "/healthz") { _ in }
        router.add(.get, "/limited") { _ in }
        final class Count: @unchecked Sendable { var n = 0 }
        let wrapped = Count()
        router.wrapHandlers(from: first, except: ["/healthz"]) { handler in
            wrapped.n += 1
            return handler
        }
        XCTAssertEqual(wrapped.n, 1, "only /limited: /before came earlier and /healthz is exempt")
    }
}
