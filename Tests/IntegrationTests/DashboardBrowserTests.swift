import Foundation
import TestSupport
import XCTest

/// The dashboard in a real browser: Debian's chromium driven by selenium (Tests/Browser/
/// dashboard.py) against the real binary. A push shows on the Live page within a second
/// without a reload; the detail page previews it for iOS and Android (a Web Push message for
/// Chrome and Safari, decrypted); a rule added on the
/// Faults page fires; a device uninstalled on the Devices page answers 410; the campaign
/// charts render; the scope picker narrows the notifications to one FCM project; another origin's page cannot change state; light and dark, wide and narrow.
/// Screenshots of every page stay in the run's temporary directory (the path is printed).
final class DashboardBrowserTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot

    func testDashboardInChromium() throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            XCTAssertTrue(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: run Scripts/install-deps")
        }
        let python = Self.root + "/.venv/bin/python"
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-dashboard-\(UUID().uuidString)")
        let shots = dir.appendingPathComponent("screenshots")
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
        // An APNs provider token: with --apns-auth lenient, its unknown key id is accepted.
        let key = try runCommand(
            ServerProcess.binaryPath,
            [
                "credentials", "apns", "--out", dir.path, "--data-dir", dir.path + "/keys", "--team-id", "TEAM123456", "--key-id",
                "KEY1234567",
            ],
            timeout: 20)
        XCTAssertEqual(key.status, 0, key.stderr)
        let jwt = try runCommand(
            ServerProcess.binaryPath,
            ["token", "apns", "--key", dir.path + "/AuthKey_KEY1234567.p8", "--key-id", "KEY1234567", "--team-id", "TEAM123456"],
            timeout: 20)
        XCTAssertEqual(jwt.status, 0, jwt.stderr)

        let server = try ServerProcess()
        defer { _ = server.stop() }
        let r = try runCommand(
            python,
            [
                Self.root + "/Tests/Browser/dashboard.py", "http://127.0.0.1:\(server.httpPort)",
                jwt.stdout.trimmingCharacters(in: .whitespacesAndNewlines), shots.path,
            ],
            timeout: 240, environment: ["HOME": dir.path, "SE_OFFLINE": "true"])
        print("dashboard screenshots: \(shots.path)")
        XCTAssertEqual(r.status, 0, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let line = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let results = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], r.stdout)
        for check in [
            "live", "detail", "webpush", "faults", "devices", "campaigns", "history", "report", "credentials", "guard", "keyboard", "scope",
            "dark",
        ] {
            XCTAssertEqual((results[check] as? [String: Any])?["ok"] as? Bool, true, "\(check): \(results[check] ?? "not run")")
        }
        XCTAssertLessThan(results["liveLatencyMs"] as? Int ?? 9999, 1000)
        XCTAssertEqual((results["consoleErrors"] as? [Any])?.count, 0, "\(results["consoleErrors"] ?? "")")
        let files = try FileManager.default.contentsOfDirectory(atPath: shots.path).filter { $0.hasSuffix(".png") }
        for page in [
            "live", "notifications", "detail-apns", "detail-fcm", "detail-webpush", "devices", "device", "faults", "campaigns",
            "credentials", "detail-dark",
            "live-history", "report-html",
        ] {
            XCTAssertTrue(files.contains("\(page).png"), "no screenshot of \(page): \(files)")
        }
    }

    /// A cluster node that lost its Redis: the dashboard's header says it is degraded, serving
    /// pushes and refusing changes (Tests/Browser/degraded.py, in chromium).
    func testDegradedHeaderInChromium() throws {
        let python = Self.root + "/.venv/bin/python"
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-degraded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let redis = try ClusterTests.Redis()
        defer { redis.stop() }
        let server = try ServerProcess([
            "--in-memory=false", "--data-dir", dir.path + "/data", "--cluster", "redis://127.0.0.1:\(redis.port)", "--node-name", "solo",
        ])
        defer { _ = server.stop() }
        redis.stop()
        var health = ""
        for _ in 0..<100 where !health.contains("degraded") {
            health = try runCommand("curl", ["-sS", "http://127.0.0.1:\(server.httpPort)/healthz"], timeout: 10).stdout
            if !health.contains("degraded") { usleep(100_000) }
        }
        XCTAssertTrue(health.contains("\"status\":\"degraded\""), health)
        let r = try runCommand(
            python, [Self.root + "/Tests/Browser/degraded.py", "http://127.0.0.1:\(server.httpPort)", dir.path], timeout: 120,
            environment: ["HOME": dir.path, "SE_OFFLINE": "true"])
        XCTAssertEqual(r.status, 0, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let line = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let result = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], r.stdout)
        XCTAssertEqual(result["ok"] as? Bool, true, "\(result)")
    }
}
