import Foundation
import TestSupport
import XCTest

/// `GET /metrics`: Prometheus text that `promtool check metrics` accepts, with counts that match
/// what was sent.
final class MetricsTests: XCTestCase {
    func testPrometheusExposition() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let s = try ServerProcess(["--tracking-preset", "adobe-campaign", "--tracking-url", sink.url, "--allow-override-header"])
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-metrics-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let jwt = try makeProviderToken(in: dir.path, keyStore: dir.path + "/k")
        func push(_ token: String) throws -> String {
            try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                    "-H", "authorization: bearer \(jwt)", "-d", #"{"aps":{"content-available":1},"_mId":"1","_dId":"2"}"#,
                    "http://127.0.0.1:\(s.httpPort)/3/device/\(token)",
                ], timeout: 10
            ).stdout
        }
        for _ in 0..<3 { XCTAssertEqual(try push(String(repeating: "ab", count: 32)), "200") }
        XCTAssertEqual(try push("nothex"), "400")
        _ = try runCommand("curl", ["-sS", "-d", "{}", "http://127.0.0.1:\(s.httpPort)/v1/projects/p/messages:send"], timeout: 10)
        XCTAssertEqual(sink.wait(for: 3), 3)
        usleep(200_000)

        let text = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/metrics"], timeout: 10).stdout
        XCTAssertTrue(text.contains(#"pushemu_requests_total{provider="apns",status="200",reason=""} 3"#), text)
        XCTAssertTrue(text.contains(#"pushemu_requests_total{provider="apns",status="400",reason="BadDeviceToken"} 1"#), text)
        XCTAssertTrue(text.contains(#"pushemu_requests_total{provider="fcm",status="401",reason="UNAUTHENTICATED"} 1"#), text)
        XCTAssertTrue(text.contains(#"pushemu_request_duration_seconds_count{provider="apns"} 4"#), text)
        XCTAssertTrue(text.contains(#"pushemu_tracking_attempts_total{preset="adobe-campaign",outcome="succeeded"} 3"#), text)
        XCTAssertTrue(text.contains("pushemu_open_connections "), text)
        XCTAssertTrue(text.contains("pushemu_devices 1"), text)
        // The default strict journal (in memory here: committed within its 10 ms window): 5 requests, 3 tracking attempts.
        XCTAssertTrue(text.contains(#"pushemu_journal_stored_records{kind="request"} 5"#), text)
        XCTAssertTrue(text.contains("pushemu_journal_commit_duration_seconds_bucket{le=\"+Inf\"}"), text)
        XCTAssertTrue(text.contains("pushemu_journal_batch_records_sum "), text)

        XCTAssertTrue(text.contains("pushemu_open_streams 0"), text)

        let promtool = try runCommand("promtool", ["check", "metrics"], timeout: 30, stdin: Data(text.utf8))
        XCTAssertEqual(promtool.status, 0, promtool.stdout + promtool.stderr)

        // Open streams: eight requests held 1.5 s on one HTTP/2 connection count while they wait.
        let h2load = Process()
        h2load.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
        h2load.arguments = [
            "-n", "8", "-c", "1", "-m", "8", "-H", "apns-topic: com.example.app", "-H", "authorization: bearer \(jwt)",
            "-H", "x-pushemu-fault: delay=1500ms", "http://127.0.0.1:\(s.httpPort)/3/device/\(String(repeating: "ab", count: 32))",
        ]
        h2load.standardOutput = FileHandle.nullDevice
        h2load.standardError = FileHandle.nullDevice
        try h2load.run()
        var during = ""
        for _ in 0..<50 {
            usleep(50_000)
            during = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/metrics"], timeout: 10).stdout
            if during.contains("pushemu_open_streams 8") { break }
        }
        XCTAssertTrue(during.contains("pushemu_open_streams 8"), during)
        let deadline = Date().addingTimeInterval(10)
        while h2load.isRunning && Date() < deadline { usleep(20_000) }
        XCTAssertFalse(h2load.isRunning)
        usleep(100_000)
        let after = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/metrics"], timeout: 10).stdout
        XCTAssertTrue(after.contains("pushemu_open_streams 0"), after)
        XCTAssertEqual(s.stop(), 0)
    }
}
