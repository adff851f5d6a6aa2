import XCTest

@testable import Tracking

/// The attempt log's query: the newest `limit` matches, oldest first, through the ring's wrap;
/// a status filter is an HTTP status as written or an outcome.
final class TrackingLogTests: XCTestCase {
    func attempt(_ n: Int, token: String, status: Int, outcome: String, event: TrackingEvent = .receive) -> TrackingAttempt {
        TrackingAttempt(
            event: event, preset: "webhook", token: token, notificationID: "n\(n)", method: "POST", url: "http://127.0.0.1/",
            status: status, latencyMs: 1, error: nil, attempt: 1, outcome: outcome, atMs: Int64(n), events: 1)
    }

    func testQueryTakesTheNewestMatchesOldestFirst() {
        let log = TrackingLog(capacity: 8)
        for n in 1...13 {
            log.record(
                attempt(
                    n, token: n % 2 == 0 ? "even" : "odd", status: n % 3 == 0 ? 500 : 200, outcome: n % 3 == 0 ? "retrying" : "succeeded",
                    event: n == 12 ? .open : .receive))
        }
        // The ring holds 6...13.
        var f = TrackingLog.Filter()
        XCTAssertEqual(log.query(f).map(\.atMs), [6, 7, 8, 9, 10, 11, 12, 13])
        f.limit = 3
        XCTAssertEqual(log.query(f).map(\.atMs), [11, 12, 13])
        f.limit = 0
        XCTAssertEqual(log.query(f).map(\.atMs), [])
        f = TrackingLog.Filter()
        f.token = "even"
        f.limit = 2
        XCTAssertEqual(log.query(f).map(\.atMs), [10, 12])
        f = TrackingLog.Filter()
        f.status = "500"
        XCTAssertEqual(log.query(f).map(\.atMs), [6, 9, 12])
        f.status = "retrying"
        XCTAssertEqual(log.query(f).map(\.atMs), [6, 9, 12])
        f.status = "0500"
        XCTAssertEqual(log.query(f).map(\.atMs), [], "a status is matched as written")
        f.status = "200"
        f.token = "odd"
        XCTAssertEqual(log.query(f).map(\.atMs), [7, 11, 13])
        f = TrackingLog.Filter()
        f.event = .open
        XCTAssertEqual(log.query(f).map(\.notificationID), ["n12"])
    }
}
