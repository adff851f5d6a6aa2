import Journal
import PushCore
import Transport
import XCTest

/// The journal on its own: records written in group commits, read back by export, bounded queue.
final class JournalTests: XCTestCase {
    func record(_ i: Int, status: Int = 200, reason: String = "") -> RequestRecord {
        RequestRecord(atMs: 1_000 + Int64(i), provider: i % 2 == 0 ? .apns : .fcm, connection: 7, environment: "sandbox",
                      token: Array("tok\(i)".utf8)[...], topic: "com.example.app", status: status, reason: reason, latencyUs: 12,
                      headers: HTTPFields([("apns-topic", "com.example.app"), ("authorization", "bearer secret")]),
                      payload: Array(#"{"aps":{},"_dId":"c\#(i % 3)"}"#.utf8)[...], warnings: i == 0 ? ["w"] : [],
                      notificationID: "n\(i)")
    }

    func testWritesAndExports() throws {
        let dir = "/tmp/pushemu-journal-test-\(getpid())"
        mkdir(dir, 0o755)
        defer { for f in Files.list(dir) { unlink(dir + "/" + f) }; rmdir(dir) }
        let j = try Journal(path: dir + "/j.sqlite", durability: .relaxed, campaignOf: { _, payload in
            let s = String(decoding: payload, as: UTF8.self)
            return s.contains("\"c1\"") ? "c1" : nil
        })
        j.start()
        for i in 0..<500 { j.append(record(i, status: i % 10 == 0 ? 410 : 200, reason: i % 10 == 0 ? "Unregistered" : ""), loop: nil) {} }
        j.append(TrackingRecord(atMs: 2_000, preset: "adobe-campaign", event: "receive", token: "tok1", notificationID: "n1",
                                method: "GET", url: "http://sink/r/?id=h1,2,1", status: 200, outcome: "succeeded", attempt: 1,
                                latencyMs: 1.5, error: nil))
        j.stop()
        XCTAssertEqual(j.counts().requests, 500)
        XCTAssertEqual(j.counts().tracking, 1)
        XCTAssertEqual(j.statistics.committed, 501)
        XCTAssertGreaterThanOrEqual(j.statistics.batches, 1)
        var lines: [String] = []
        Journal.export(path: dir + "/j.sqlite", sinceMs: 1_100) { lines.append($0) }
        XCTAssertEqual(lines.count, 400 + 1)   // at_ms >= 1100: records 100...499, and the tracking attempt
        let first = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        XCTAssertEqual(first["type"] as? String, "request")
        XCTAssertEqual(first["status"] as? Int, 410)
        XCTAssertEqual(first["reason"] as? String, "Unregistered")
        XCTAssertEqual((first["headers"] as? [String: String])?["apns-topic"], "com.example.app")
        XCTAssertNil((first["headers"] as? [String: String])?["authorization"], "never the credentials")
        let c1 = lines.filter { $0.contains(#""campaign":"c1""#) }.count
        XCTAssertEqual(c1, (100..<500).filter { $0 % 3 == 1 }.count)
        XCTAssertTrue(lines.last!.contains(#""type":"tracking""#))
    }
}


extension JournalTests {
    func testStrictAnswersOnlyAfterCommit() throws {
        let j = try Journal(path: nil, durability: .strict, campaignOf: { _, _ in nil })
        final class Box: @unchecked Sendable { var done = 0; let lock = NSLock() }
        let box = Box()
        for i in 0..<50 {
            j.append(record(i), loop: nil) { box.lock.lock(); box.done += 1; box.lock.unlock() }
        }
        usleep(50_000)
        XCTAssertEqual(box.done, 0, "not started: nothing committed, nothing answered")
        j.start()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline { box.lock.lock(); let d = box.done; box.lock.unlock(); if d == 50 { break }; usleep(5_000) }
        XCTAssertEqual(box.done, 50)
        XCTAssertEqual(j.counts().requests, 50)
        j.stop()
    }
}
