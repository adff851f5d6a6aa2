import Foundation
import TestSupport
import XCTest

/// Two nodes of one cluster over a real redis-server (Debian's): what one node is told, the
/// other acts on; a node that loses Redis serves pushes and refuses changes, and catches up
/// when it is back.
final class ClusterTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static var python: String { root + "/.venv/bin/python" }

    /// A redis-server on a free port, without persistence (the tests' Redis restarts empty).
    final class Redis {
        let process = Process()
        let port: Int

        init(port: Int? = nil) throws {
            self.port = try port ?? freeLocalPort()
            process.executableURL = URL(fileURLWithPath: try resolveExecutable("redis-server"))
            process.arguments = ["--port", String(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if let r = try? runCommand("redis-cli", ["-p", String(self.port), "PING"], timeout: 5), r.stdout.contains("PONG") {
                    return
                }
                usleep(50_000)
            }
            throw TestSupportError("redis-server did not answer on port \(self.port)")
        }

        func stop() {
            guard process.isRunning else { return }
            process.terminate()
            process.waitUntilExit()
        }

        deinit { stop() }
    }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func testTwoNodesShareTheirStateThroughRedis() throws {
        let redis = try Redis()
        defer { redis.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-cluster-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func node(_ name: String) throws -> ServerProcess {
            try ServerProcess([
                "--in-memory=false", "--data-dir", dir + "/" + name, "--cluster", "redis://127.0.0.1:\(redis.port)",
                "--cluster-name", "ci", "--node-name", name, "--webpush-endpoints", "local",
            ])
        }
        let a = try node("a")
        defer { a.stop() }
        let b = try node("b")
        defer { b.stop() }
        let base = { (s: ServerProcess) in "http://127.0.0.1:\(s.httpPort)" }
        // The APNs key registered through A signs tokens B accepts.
        let creds = try runCommand(
            ServerProcess.binaryPath, ["credentials", "apns", "--server", base(a), "--out", dir, "--topics", "com.example.cluster"],
            timeout: 20)
        XCTAssertEqual(creds.status, 0, creds.stderr)
        let made = try json(creds.stdout)
        let kid = try XCTUnwrap(made["keyId"] as? String)
        let team = try XCTUnwrap(made["teamId"] as? String)
        let jwt = try runCommand(
            ServerProcess.binaryPath, ["token", "apns", "--key", dir + "/AuthKey_\(kid).p8", "--key-id", kid, "--team-id", team],
            timeout: 20
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let vapid = try runCommand(ServerProcess.binaryPath, ["credentials", "vapid", "--out", dir + "/vapid.pem"], timeout: 20)
        XCTAssertEqual(vapid.status, 0, vapid.stderr)
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/cluster_check.py", base(a), base(b), jwt, dir + "/vapid.pem", "20"], timeout: 180,
            environment: ["PYTHONWARNINGS": "ignore"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "")
        let cluster = try XCTUnwrap(out["cluster"] as? [String: Any])
        XCTAssertEqual(cluster["cluster"] as? String, "ci")
        let nodes = try XCTUnwrap(cluster["nodes"] as? [[String: Any]])
        XCTAssertEqual(nodes.map { $0["name"] as? String ?? "" }, ["a", "b"], "\(cluster)")
        XCTAssertTrue(nodes.allSatisfy { $0["healthy"] as? Bool == true }, "\(nodes)")
        XCTAssertEqual(nodes.first { $0["name"] as? String == "b" }?["url"] as? String, base(b))
        XCTAssertEqual(out["firstPush"] as? [Int], Array(repeating: 200, count: 20), "\(out)")
        XCTAssertEqual(out["afterUninstall"] as? [Int], Array(repeating: 410, count: 20), "\(out)")
        let lags = try XCTUnwrap(out["uninstallLagMs"] as? [Double], "\(out)")
        XCTAssertEqual(lags.count, 20)
        XCTAssertLessThan(lags.max() ?? 1e9, 100, "an uninstall on A reaches B within 100 ms: \(lags)")
        XCTAssertEqual(out["ruleMade"] as? Int, 201)
        XCTAssertEqual(out["faulted"] as? Int, 503, "the rule made on A answers on B")
        XCTAssertEqual(out["webpush"] as? Int, 201)
        XCTAssertEqual(out["webpushTitle"] as? String, "Across the cluster")

        // Redis goes away: B serves pushes with the state it has, A refuses changes (503 naming
        // Redis) and says `degraded` in /healthz (200); once Redis is back, changes flow again.
        let token = String(repeating: "c", count: 64)
        XCTAssertEqual(
            try adminRequest(a, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.example.cluster","token":"\#(token)"}"#).0,
            201)
        var seen = false
        for _ in 0..<200 where !seen {
            seen = try adminRequest(b, "GET", "/emulator/v1/devices/\(token)").0 == 200
            if !seen { usleep(10_000) }
        }
        XCTAssertTrue(seen)
        redis.stop()
        var health = ""
        for _ in 0..<100 {
            health = try adminRequest(a, "GET", "/healthz").1
            if health.contains("degraded") { break }
            usleep(50_000)
        }
        XCTAssertTrue(health.contains(#""status":"degraded""#), health)
        XCTAssertEqual(try adminRequest(a, "GET", "/healthz").0, 200)
        let refused = try adminRequest(a, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.example.cluster"}"#)
        XCTAssertEqual(refused.0, 503, refused.1)
        XCTAssertTrue(refused.1.contains("Redis"), refused.1)
        let push = try runCommand(
            "curl",
            [
                "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: bearer \(jwt)",
                "-H", "apns-topic: com.example.cluster", "-d", #"{"aps":{"alert":"hi"}}"#, base(b) + "/3/device/\(token)",
            ], timeout: 10)
        XCTAssertEqual(push.stdout, "200", "pushes are served without Redis")
        let back = try Redis(port: redis.port)
        defer { back.stop() }
        for _ in 0..<100 {
            health = try adminRequest(a, "GET", "/healthz").1
            if health.contains(#""status":"ok""#) { break }
            usleep(50_000)
        }
        XCTAssertTrue(health.contains(#""status":"ok""#), health)
        let later = String(repeating: "d", count: 64)
        XCTAssertEqual(
            try adminRequest(a, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.example.cluster","token":"\#(later)"}"#).0,
            201)
        seen = false
        for _ in 0..<200 where !seen {
            seen = try adminRequest(b, "GET", "/emulator/v1/devices/\(later)").0 == 200
            if !seen { usleep(10_000) }
        }
        XCTAssertTrue(seen, "a change made after Redis came back reaches B")
        XCTAssertTrue(a.stderr.contains("lost Redis"), a.stderr)
    }
}
