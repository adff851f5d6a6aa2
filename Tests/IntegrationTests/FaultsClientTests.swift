import Foundation
import TestSupport
import XCTest

/// Injected faults met by real clients: aioapns, firebase-admin, an HTTP/2 client, curl, h2load.
final class FaultsClientTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static let ca = root + "/Certs/ca.pem"
    static var python: String { root + "/.venv/bin/python" }
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-faults-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    func write(_ name: String, _ text: String) throws -> String {
        let p = dir.appendingPathComponent(name).path
        try text.write(toFile: p, atomically: true, encoding: .utf8)
        return p
    }

    func apnsKey() throws -> (key: String, jwt: String) {
        let c = try runCommand(
            ServerProcess.binaryPath,
            [
                "credentials", "apns", "--out", dir.path, "--data-dir", dir.path + "/keys",
                "--team-id", "TEAM123456", "--key-id", "KEY1234567",
            ], timeout: 10)
        XCTAssertEqual(c.status, 0, c.stderr)
        let key = dir.path + "/AuthKey_KEY1234567.p8"
        let t = try runCommand(
            ServerProcess.binaryPath, ["token", "apns", "--key", key, "--key-id", "KEY1234567", "--team-id", "TEAM123456"], timeout: 10)
        return (key, t.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func json(_ s: String) throws -> Any { try JSONSerialization.jsonObject(with: Data(s.utf8)) }

    static let token = String(repeating: "ab", count: 32)

    func testAioapnsSeesA503AndRetries() throws {
        let rules = try write(
            "f.json", #"[{"match":{"provider":"apns","first":1},"effect":{"status":503,"reason":"ServiceUnavailable","retryAfter":1}}]"#)
        let s = try ServerProcess(["--faults", rules])
        let (key, _) = try apnsKey()
        let r = try runCommand(
            Self.python,
            [
                Self.root + "/Tests/Clients/fault_clients.py", "aioapns", "\(s.httpsPort)", Self.ca, key,
                "KEY1234567", "TEAM123456", "com.example.app",
            ], timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        let seen = try XCTUnwrap(try json(r.stdout) as? [[Any]])
        XCTAssertEqual(seen.count, 2)
        XCTAssertEqual(seen[0][0] as? String, "503")
        XCTAssertEqual(seen[0][1] as? String, "ServiceUnavailable")
        XCTAssertEqual(seen[1][0] as? String, "200")
    }

    func testFirebaseAdminRetries503HonouringRetryAfter() throws {
        let rules = try write(
            "f.json", #"[{"match":{"provider":"fcm","first":2},"effect":{"status":503,"errorCode":"UNAVAILABLE","retryAfter":1}}]"#)
        let s = try ServerProcess(["--in-memory=false", "--data-dir", dir.path + "/data", "--faults", rules])
        let cred = dir.path + "/sa.json"
        let c = try runCommand(
            ServerProcess.binaryPath,
            [
                "credentials", "fcm", "--project", "retry-proj", "--out", cred,
                "--token-uri", "http://127.0.0.1:\(s.httpPort)/token", "--data-dir", dir.path + "/data",
            ], timeout: 20)
        XCTAssertEqual(c.status, 0, c.stderr)
        let token = "f" + String(repeating: "1", count: 21) + ":APA91b" + String(repeating: "r", count: 134)
        let r = try runCommand(
            Self.python,
            [
                Self.root + "/Tests/Clients/fault_clients.py", "firebase", "http://127.0.0.1:\(s.httpPort)",
                cred, "retry-proj", token,
            ], timeout: 60, environment: ["PYTHONWARNINGS": "ignore"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try XCTUnwrap(try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "") as? [String: Any])
        XCTAssertTrue((out["name"] as? String)?.hasPrefix("projects/retry-proj/messages/") == true)
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(out["seconds"] as? Double), 1.9, "two Retry-After: 1 waits")
        let f = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/faults"], timeout: 10)
        let faults = try XCTUnwrap((try json(f.stdout) as? [String: Any])?["faults"] as? [[String: Any]])
        XCTAssertEqual(faults.first?["fired"] as? Int, 2)
    }

    func testGoAwayThenReconnect() throws {
        let s = try ServerProcess()
        let (_, jwt) = try apnsKey()
        let add = try runCommand(
            "curl",
            [
                "-sS", "-X", "POST", "http://127.0.0.1:\(s.httpPort)/emulator/v1/faults",
                "-d", #"{"match":{"provider":"apns","first":1},"effect":{"goaway":"Shutdown"}}"#,
            ], timeout: 10)
        XCTAssertTrue(add.stdout.contains("\"id\":\"fault-"), add.stdout)
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/fault_clients.py", "goaway", "\(s.httpPort)", Self.token, jwt], timeout: 30)
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try XCTUnwrap(try json(r.stdout) as? [String: Any])
        XCTAssertEqual(out["first"] as? String, "200")
        XCTAssertEqual(out["goaway"] as? String, #"{"reason":"Shutdown"}"#)
        XCTAssertEqual(out["second"] as? String, "200")
        XCTAssertTrue(out["secondGoaway"] is NSNull)
    }

    func testStalledAnswerTimesTheClientOut() throws {
        let s = try ServerProcess()
        let (_, jwt) = try apnsKey()
        _ = try runCommand(
            "curl",
            [
                "-sS", "-X", "POST", "http://127.0.0.1:\(s.httpPort)/emulator/v1/faults",
                "-d", #"{"match":{"provider":"apns"},"effect":{"stallMs":3000}}"#,
            ], timeout: 10)
        let t0 = Date()
        let r = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "--max-time", "1", "-H", "apns-topic: com.example.app",
                "-H", "authorization: bearer \(jwt)", "-d", #"{"aps":{"alert":"x"}}"#,
                "http://127.0.0.1:\(s.httpPort)/3/device/\(Self.token)",
            ], timeout: 10)
        XCTAssertEqual(r.status, 28, "curl's timeout exit code")
        XCTAssertLessThan(Date().timeIntervalSince(t0), 2.5)
    }

    func testPercentRuleIsBinomialAndReproducible() throws {
        let (_, jwt) = try apnsKey()
        let rules = try write(
            "f.json", #"[{"match":{"provider":"apns","percent":10},"effect":{"status":503,"reason":"ServiceUnavailable"},"seed":1234}]"#)
        let payload = try write("p.json", #"{"aps":{"alert":"x"}}"#)
        var counts: [Int] = []
        for _ in 0..<2 {
            let s = try ServerProcess(["--faults", rules])
            let h = try runCommand(
                "h2load",
                [
                    "-n", "10000", "-c", "4", "-m", "16", "-d", payload, "-H", "apns-topic: com.example.app",
                    "-H", "authorization: bearer \(jwt)", "http://127.0.0.1:\(s.httpPort)/3/device/\(Self.token)",
                ], timeout: 60)
            let line = try XCTUnwrap(h.stdout.split(separator: "\n").first { $0.contains("status codes:") })
            // "status codes: 9003 2xx, 0 3xx, 0 4xx, 997 5xx"
            let fives = Int(line.split(separator: ",").last!.split(separator: " ").first!)!
            counts.append(fives)
            XCTAssertEqual(s.stop(), 0)
        }
        XCTAssertGreaterThan(counts[0], 850)
        XCTAssertLessThan(counts[0], 1150)
        XCTAssertEqual(counts[0], counts[1], "same seed, same rules, same number of requests")
    }

    func testScenarioRunsOnTime() throws {
        let scenario = try write(
            "s.json",
            #"{"name":"brownout","steps":[{"at":"800ms","for":"400ms","match":{"provider":"fcm"},"effect":{"status":503,"errorCode":"UNAVAILABLE"}}]}"#
        )
        let s = try ServerProcess(["--scenario", scenario])
        let info = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/scenarios"], timeout: 10)
        let started = try XCTUnwrap(
            ((try json(info.stdout) as? [String: Any])?["scenarios"] as? [[String: Any]])?.first?["startedAt"] as? Int)
        let script = """
            import http.client, json, sys, time
            c = http.client.HTTPConnection("127.0.0.1", \(s.httpPort), timeout=5)
            body = json.dumps({"message": {"topic": "t"}})
            out = []
            end = \(started) / 1000 + 1.6
            while time.time() < end:
                t = time.time()
                c.request("POST", "/v1/projects/p/messages:send", body, {"authorization": "Bearer x", "content-type": "application/json"})
                r = c.getresponse(); r.read()
                out.append([int(t * 1000) - \(started), r.status])
                time.sleep(0.005)
            print(json.dumps(out))
            """
        let r = try runCommand("python3", ["-c", script], timeout: 20)
        XCTAssertEqual(r.status, 0, r.stderr)
        let samples = try XCTUnwrap(try json(r.stdout) as? [[Int]])
        let failing = samples.filter { $0[1] == 503 }.map { $0[0] }
        let first = try XCTUnwrap(failing.min())
        let last = try XCTUnwrap(failing.max())
        XCTAssertEqual(Double(first), 800, accuracy: 100)
        XCTAssertEqual(Double(last), 1200, accuracy: 100)
        XCTAssertTrue(samples.filter { $0[0] < 790 || $0[0] > 1210 }.allSatisfy { $0[1] == 200 })
        let stats = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/stats"], timeout: 10)
        XCTAssertTrue(stats.stdout.contains(#""state":"done""#), stats.stdout)
    }

    func testDroppedHandshakeAndOverload() throws {
        let s = try ServerProcess(["--fcm-overload", "100"])
        _ = try runCommand(
            "curl",
            [
                "-sS", "-X", "POST", "http://127.0.0.1:\(s.httpPort)/emulator/v1/faults",
                "-d", #"{"match":{"first":1},"effect":{"dropHandshake":true}}"#,
            ], timeout: 10)
        let first = try runCommand(
            "curl",
            [
                "-sS", "--cacert", Self.ca, "-o", "/dev/null", "-w", "%{http_code}",
                "https://localhost:\(s.httpsPort)/healthz",
            ], timeout: 10)
        XCTAssertNotEqual(first.status, 0, "the first handshake is dropped")
        let second = try runCommand(
            "curl",
            [
                "-sS", "--cacert", Self.ca, "-o", "/dev/null", "-w", "%{http_code}",
                "https://localhost:\(s.httpsPort)/healthz",
            ], timeout: 10)
        XCTAssertEqual(second.stdout, "200")
        // --fcm-overload 100: every send is 503 UNAVAILABLE with Retry-After.
        let token = "f" + String(repeating: "2", count: 21) + ":APA91b" + String(repeating: "o", count: 134)
        let r = try runCommand(
            "curl",
            [
                "-sS", "-i", "-H", "authorization: Bearer x", "-d", #"{"message":{"token":"\#(token)"}}"#,
                "http://127.0.0.1:\(s.httpPort)/v1/projects/p/messages:send",
            ], timeout: 10)
        XCTAssertTrue(r.stdout.hasPrefix("HTTP/1.1 503"), r.stdout)
        XCTAssertTrue(r.stdout.lowercased().contains("retry-after: 2"), r.stdout)
        XCTAssertTrue(r.stdout.contains(#""errorCode":"UNAVAILABLE""#), r.stdout)
    }
}
