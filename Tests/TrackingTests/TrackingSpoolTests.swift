import Glibc
import PushCore
import XCTest

@testable import Tracking

/// The tracking spool: calls written to its nameless file come back whole and in order, across
/// its write and read chunks, interleaved with reading; it empties to nothing; a directory it
/// cannot use, or its bound, refuses calls.
final class TrackingSpoolTests: XCTestCase {
    func job(_ i: Int, bodyBytes: Int) -> TrackingJob {
        let batch: TrackingBatch? =
            i % 3 == 0
            ? TrackingBatch(
                key: "moengage|u|t\(i)", item: Array("{\"n\":\(i)}".utf8), flushAfterMs: 1000 + Int64(i), maxItems: 30,
                kind: i % 2 == 0 ? .moengage : .braze, fields: ["http://x/\(i)", "app", "hwid-é", "tok", "android"])
            : nil
        let j = TrackingJob(
            request: TrackingRequest(
                method: i % 2 == 0 ? "GET" : "POST", url: "http://127.0.0.1:9/r/?id=\(i)",
                headers: i % 4 == 0 ? [] : [("Content-Type", "application/json"), ("X-N", "\(i)")],
                body: (0..<bodyBytes).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }),
            event: TrackingEvent.allCases[i % TrackingEvent.allCases.count], preset: "adobe-campaign", token: "token-\(i)",
            notificationID: "id-\(i)", notBeforeMs: i % 5 == 0 ? -Int64(i) : Int64(i) * 1_000_000_007, batch: batch,
            platform: i % 2 == 0 ? "ios" : "android", campaign: i % 7 == 0 ? nil : "camp-\(i % 11)")
        j.attempt = 1 + i % 5
        j.events = 1 + i % 3
        return j
    }

    func assertSame(_ a: TrackingJob, _ b: TrackingJob, _ i: Int) {
        XCTAssertEqual(a.request, b.request, "\(i)")
        XCTAssertEqual(a.event, b.event, "\(i)")
        XCTAssertEqual(a.preset, b.preset)
        XCTAssertEqual(a.token, b.token)
        XCTAssertEqual(a.notificationID, b.notificationID)
        XCTAssertEqual(a.notBeforeMs, b.notBeforeMs)
        XCTAssertEqual(a.platform, b.platform)
        XCTAssertEqual(a.campaign, b.campaign)
        XCTAssertEqual(a.attempt, b.attempt)
        XCTAssertEqual(a.events, b.events)
        XCTAssertEqual(a.batch?.key, b.batch?.key)
        XCTAssertEqual(a.batch?.item, b.batch?.item)
        XCTAssertEqual(a.batch?.kind, b.batch?.kind)
        XCTAssertEqual(a.batch?.fields, b.batch?.fields)
        XCTAssertEqual(a.batch?.flushAfterMs, b.batch?.flushAfterMs)
        XCTAssertEqual(a.batch?.maxItems, b.batch?.maxItems)
    }

    func testCallsComeBackWholeAndInOrderAcrossChunks() throws {
        let spool = TrackingSpool(directory: "/tmp", maxBytes: 1 << 30)
        var written = 0
        var read = 0
        // About 12 MB in all, with a call larger than a read chunk, read while writing.
        for round in 0..<4 {
            for _ in 0..<1_000 {
                let size = written == 1_500 ? (3 << 20) / 2 : (written * 37) % 3_000
                XCTAssertTrue(spool.append(job(written, bodyBytes: size)))
                written += 1
            }
            XCTAssertEqual(spool.count, written - read)
            for _ in 0..<(round < 3 ? 600 : 0) {
                let got = try XCTUnwrap(spool.next())
                let size = read == 1_500 ? (3 << 20) / 2 : (read * 37) % 3_000
                assertSame(got, job(read, bodyBytes: size), read)
                read += 1
            }
        }
        while let got = spool.next() {
            let size = read == 1_500 ? (3 << 20) / 2 : (read * 37) % 3_000
            assertSame(got, job(read, bodyBytes: size), read)
            read += 1
        }
        XCTAssertNil(spool.failure)
        XCTAssertEqual(read, written)
        XCTAssertTrue(spool.isEmpty)
        XCTAssertEqual(spool.bytes, 0)
        // Empty, it starts again from nothing.
        XCTAssertTrue(spool.append(job(7, bodyBytes: 10)))
        assertSame(try XCTUnwrap(spool.next()), job(7, bodyBytes: 10), 7)
        XCTAssertNil(spool.next())
    }

    func testBoundAndAnUnusableDirectoryRefuse() {
        let small = TrackingSpool(directory: "/tmp", maxBytes: 4_096)
        var n = 0
        while small.append(job(1, bodyBytes: 100)) { n += 1 }
        XCTAssertGreaterThan(n, 5)
        XCTAssertLessThan(n, 40)
        XCTAssertLessThanOrEqual(small.bytes, 4_096)
        XCTAssertNil(small.failure, "full is not a failure")
        XCTAssertNotNil(small.next())
        XCTAssertTrue(small.append(job(1, bodyBytes: 100)), "room again once one has left")

        let nowhere = TrackingSpool(directory: "/nonexistent/pushemu-spool", maxBytes: 1 << 20)
        XCTAssertFalse(nowhere.append(job(1, bodyBytes: 10)))
        XCTAssertNotNil(nowhere.failure)
        XCTAssertTrue(nowhere.isEmpty)
    }
}
