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

    /// The stream is compacted: past `--cluster-compact-after` entries a node writes the
    /// cluster's snapshot to Redis and trims the stream. A node that comes back after changes it
    /// missed were trimmed (a rule deleted, a device uninstalled) loads the snapshot in place of
    /// its own state; a node that joins late loads it and the stream's tail.
    func testTheStreamIsCompactedIntoASnapshot() throws {
        let redis = try Redis()
        defer { redis.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-compact-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func node(_ name: String) throws -> ServerProcess {
            try ServerProcess([
                "--in-memory=false", "--data-dir", dir + "/" + name, "--cluster", "redis://127.0.0.1:\(redis.port)",
                "--cluster-name", "compact", "--node-name", name, "--cluster-compact-after", "100",
            ])
        }
        func streamLength() throws -> Int {
            Int(
                try runCommand("redis-cli", ["-p", String(redis.port), "XLEN", "pushemu:{compact}:changes"], timeout: 5).stdout
                    .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        func devices(_ n: Int, via s: ServerProcess, from first: Int) throws {
            let body = dir + "/device.json"
            for i in first..<(first + n) {
                try Data(#"{"platform":"ios","app":"com.example.compact","token":"\#(String(format: "%064x", i))"}"#.utf8).write(
                    to: URL(fileURLWithPath: body))
                XCTAssertEqual(try adminRequest(s, "POST", "/emulator/v1/devices", "@" + body).0, 201)
            }
        }
        let a = try node("a")
        defer { a.stop() }
        var b = try node("b")
        defer { b.stop() }
        let rule = #"{"match":{"provider":"apns","token":"\#(String(repeating: "9", count: 64))"},"effect":{"status":500}}"#
        let ruleID = try XCTUnwrap(try json(try adminRequest(a, "POST", "/emulator/v1/faults", rule).1)["id"] as? String)
        try devices(40, via: a, from: 1)
        // B sees them, then stops; A deletes the rule and uninstalls a device, and makes enough
        // changes for the stream to be compacted without B.
        var seen = 0
        for _ in 0..<200 where seen != 40 {
            seen = (try json(try adminRequest(b, "GET", "/emulator/v1/devices?limit=1000").1)["devices"] as? [Any])?.count ?? 0
            if seen != 40 { usleep(20_000) }
        }
        XCTAssertEqual(seen, 40)
        XCTAssertEqual(b.stop(), 0)
        XCTAssertEqual(try adminRequest(a, "DELETE", "/emulator/v1/faults/\(ruleID)").0, 200)
        let uninstalled = String(format: "%064x", 7)
        XCTAssertEqual(try adminRequest(a, "DELETE", "/emulator/v1/devices/\(uninstalled)").0, 200)
        try devices(80, via: a, from: 41)
        // A's changes reach the stream in batches, and each batch past the threshold compacts it
        // again: wait until A has written a snapshot that stays its last (the same one on three
        // reads in a row, with the stream trimmed), which is the one B and C load.
        var snapshot: [String: Any] = [:]
        var unchanged = 0
        for _ in 0..<150 where unchanged < 2 {
            let now = try json(try adminRequest(a, "GET", "/emulator/v1/cluster").1)["snapshot"] as? [String: Any] ?? [:]
            let same = now["wrote"] as? Bool == true && now["through"] as? String == snapshot["through"] as? String
            unchanged = try same && (0..<100).contains(streamLength()) ? unchanged + 1 : 0
            snapshot = now
            if unchanged < 2 { usleep(100_000) }
        }
        XCTAssertEqual(snapshot["wrote"] as? Bool, true, "A compacted the stream: \(snapshot)")
        XCTAssertGreaterThanOrEqual(snapshot["trimmed"] as? Int ?? 0, 100, "\(snapshot)")
        XCTAssertLessThan(try streamLength(), 100)
        // B comes back: what it missed was trimmed, so it loads the snapshot.
        b = try node("b")
        let c = try node("c")
        defer { c.stop() }
        for s in [b, c] {
            let listed = try json(try adminRequest(s, "GET", "/emulator/v1/devices?limit=1000").1)["devices"] as? [[String: Any]] ?? []
            XCTAssertEqual(listed.count, 120)
            let one = try json(try adminRequest(s, "GET", "/emulator/v1/devices/\(uninstalled)").1)
            XCTAssertEqual(one["installed"] as? Bool, false, "\(one)")
            let rules = try json(try adminRequest(s, "GET", "/emulator/v1/faults").1)["faults"] as? [Any]
            XCTAssertEqual(rules?.count, 0, "the rule deleted while B was away")
            let loaded = try json(try adminRequest(s, "GET", "/emulator/v1/cluster").1)["snapshot"] as? [String: Any]
            XCTAssertEqual(loaded?["wrote"] as? Bool, false, "\(String(describing: loaded))")
            XCTAssertEqual(loaded?["through"] as? String, snapshot["through"] as? String)
        }
        // Changes after the load still flow both ways.
        XCTAssertEqual(try adminRequest(c, "POST", "/emulator/v1/faults", rule).0, 201)
        var count = 0
        for _ in 0..<200 where count != 1 {
            count = (try json(try adminRequest(b, "GET", "/emulator/v1/faults").1)["faults"] as? [Any])?.count ?? 0
            if count != 1 { usleep(10_000) }
        }
        XCTAssertEqual(count, 1)
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
        XCTAssertEqual(out["scenarioMade"] as? Int, 201)
        XCTAssertEqual(out["scenarioStep"] as? Int, 500, "the scenario's first step, started on A, answers on B")
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
        // Rules made on both nodes at once get ids no other node gave (the cluster's counter),
        // and each node holds both.
        let rule = #"{"match":{"provider":"apns","token":"\#(String(repeating: "9", count: 64))"},"effect":{"status":500}}"#
        let onA = try json(try adminRequest(a, "POST", "/emulator/v1/faults", rule).1)["id"] as? String
        let onB = try json(try adminRequest(b, "POST", "/emulator/v1/faults", rule).1)["id"] as? String
        XCTAssertNotNil(onA)
        XCTAssertNotEqual(onA, onB)
        for n in [a, b] {
            var ids: [String] = []
            for _ in 0..<100 {
                ids =
                    (try json(try adminRequest(n, "GET", "/emulator/v1/faults").1)["faults"] as? [[String: Any]])?.compactMap {
                        $0["id"] as? String
                    } ?? []
                if Set(ids).isSuperset(of: [onA, onB].compactMap { $0 }) { break }
                usleep(20_000)
            }
            XCTAssertTrue(Set(ids).isSuperset(of: [onA, onB].compactMap { $0 }), "\(ids)")
        }
        XCTAssertEqual(try adminRequest(a, "DELETE", "/emulator/v1/faults").0, 200)
        // Fleets are numbered in order: made on both nodes at once, each under the cluster's
        // lock, they get two numbers, and both nodes hold both.
        let fleetOnA = try json(
            try adminRequest(a, "POST", "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example.a","count":10}"#).1)
        let fleetOnB = try json(
            try adminRequest(b, "POST", "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example.b","count":10}"#).1)
        XCTAssertNotNil(fleetOnA["id"] as? String, "\(fleetOnA)")
        XCTAssertNotEqual(fleetOnA["id"] as? String, fleetOnB["id"] as? String)
        for n in [a, b] {
            var apps: [String: String] = [:]
            for _ in 0..<100 {
                let list = try json(try adminRequest(n, "GET", "/emulator/v1/fleets").1)["fleets"] as? [[String: Any]] ?? []
                apps = Dictionary(
                    uniqueKeysWithValues: list.compactMap { f in (f["id"] as? String).map { ($0, f["app"] as? String ?? "") } })
                if apps.count == 2 { break }
                usleep(20_000)
            }
            XCTAssertEqual(apps[fleetOnA["id"] as? String ?? ""], "com.example.a", "\(apps)")
            XCTAssertEqual(apps[fleetOnB["id"] as? String ?? ""], "com.example.b", "\(apps)")
        }
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
        // The Redis that came back had lost the stream: the nodes re-seeded it from their state,
        // so a node that joins now has the devices made before the outage.
        var status = try json(try adminRequest(a, "GET", "/emulator/v1/cluster").1)
        for _ in 0..<100 where status["reseeded"] == nil {
            usleep(50_000)
            status = try json(try adminRequest(a, "GET", "/emulator/v1/cluster").1)
        }
        XCTAssertNotNil(status["reseeded"], "\(status)")
        XCTAssertTrue(a.stderr.contains("re-seeding it"), a.stderr)
        let c = try node("c")
        defer { c.stop() }
        XCTAssertEqual(try adminRequest(c, "GET", "/emulator/v1/devices/\(token)").0, 200, "made before the outage")
        XCTAssertEqual(try adminRequest(c, "GET", "/emulator/v1/devices/\(later)").0, 200, "made after it")
    }

    /// `Scripts/cluster up --nodes 3`: redis-server, three nodes and HAProxy in TCP mode. Senders
    /// and the admin API go through HAProxy; each new connection may reach another node, and
    /// every node answers as one emulator: a key and devices made through one node, pushes
    /// accepted on all three (h2c and TLS passed through), an uninstall seen by all.
    func testThreeNodesBehindHAProxy() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-haproxy-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let http = try freeLocalPort()
        let https = try freeLocalPort()
        // FCM's project quota, 1,200 a minute, shared by the three nodes.
        let env = ["PUSHEMU_BIN": ServerProcess.binaryPath, "PUSHEMU_FCM_QUOTA": "1200"]
        let up = try runCommand(
            Self.root + "/Scripts/cluster",
            ["up", "--nodes", "3", "--dir", dir, "--http-port", String(http), "--https-port", String(https), "--name", "ha"], timeout: 120,
            environment: env)
        defer { _ = try? runCommand(Self.root + "/Scripts/cluster", ["down", "--dir", dir], timeout: 60, environment: env) }
        XCTAssertEqual(up.status, 0, up.stdout + up.stderr)
        let nodePorts = up.stdout.split(separator: "\n").compactMap { line -> Int? in
            guard line.contains("node-"), let url = line.split(separator: " ").first(where: { $0.hasPrefix("http://") }) else { return nil }
            return Int(url.split(separator: ":").last ?? "")
        }
        XCTAssertEqual(nodePorts.count, 3, up.stdout)
        let front = "http://127.0.0.1:\(http)"
        let creds = try runCommand(
            ServerProcess.binaryPath, ["credentials", "apns", "--server", front, "--out", dir, "--topics", "com.example.ha"], timeout: 20)
        XCTAssertEqual(creds.status, 0, creds.stderr)
        let made = try json(creds.stdout)
        let kid = try XCTUnwrap(made["keyId"] as? String)
        let jwt = try runCommand(
            ServerProcess.binaryPath,
            ["token", "apns", "--key", dir + "/AuthKey_\(kid).p8", "--key-id", kid, "--team-id", try XCTUnwrap(made["teamId"] as? String)],
            timeout: 20
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let ca = dir + "/ca.pem"
        try Data(#"{"aps":{"alert":"counted"}}"#.utf8).write(to: URL(fileURLWithPath: dir + "/payload.json"))
        XCTAssertEqual(try runCommand(ServerProcess.binaryPath, ["ca", "--out", ca], timeout: 20).status, 0)
        let token = String(repeating: "e", count: 64)
        let added = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-d", #"{"platform":"ios","app":"com.example.ha","token":"\#(token)"}"#,
                front + "/emulator/v1/devices",
            ], timeout: 10)
        XCTAssertEqual(added.stdout, "201")
        func push(tls: Bool) throws -> String {
            let url = tls ? "https://127.0.0.1:\(https)/3/device/\(token)" : front + "/3/device/\(token)"
            let args =
                (tls ? ["--http2", "--cacert", ca] : ["--http2-prior-knowledge"])
                + [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: bearer \(jwt)", "-H", "apns-topic: com.example.ha",
                    "-d", #"{"aps":{"alert":"through HAProxy"}}"#, url,
                ]
            return try runCommand("curl", args, timeout: 10).stdout
        }
        // The device reaches every node within a moment; then 12 connections, round robin.
        usleep(300_000)
        var codes: [String] = []
        for i in 0..<12 { codes.append(try push(tls: i % 2 == 1)) }
        XCTAssertEqual(codes, Array(repeating: "200", count: 12))
        // Each node took its share of them.
        for port in nodePorts {
            let metrics = try runCommand("curl", ["-sS", "http://127.0.0.1:\(port)/metrics"], timeout: 10).stdout
            let line = metrics.split(separator: "\n").first {
                $0.hasPrefix("pushemu_requests_total{") && $0.contains("provider=\"apns\"") && $0.contains("status=\"200\"")
            }
            XCTAssertNotNil(line, "node on \(port) answered none: \(metrics.prefix(2000))")
            XCTAssertTrue(line?.contains(#"{node="node-"#) == true, "each node's samples are labelled: \(line ?? "")")
            let checked = try runCommand("promtool", ["check", "metrics"], timeout: 20, stdin: Data(metrics.utf8))
            XCTAssertFalse(checked.stdout.contains("error") || checked.stderr.contains("error"), checked.stdout + checked.stderr)
        }
        // Reads answer for the whole cluster, from any node: the 12 pushes, whichever node took them.
        let listed = try json(
            try runCommand("curl", ["-sS", front + "/emulator/v1/notifications?token=\(token)&limit=100"], timeout: 20).stdout)
        let all = try XCTUnwrap(listed["notifications"] as? [[String: Any]], "\(listed)")
        XCTAssertEqual(all.count, 12, "\(listed)")
        XCTAssertNil(listed["partial"])
        let times = all.compactMap { $0["receivedAt"] as? Int }
        XCTAssertEqual(times, times.sorted(), "oldest first, over every node")
        let page = try json(
            try runCommand("curl", ["-sS", front + "/emulator/v1/notifications?token=\(token)&limit=5&order=desc"], timeout: 20).stdout)
        XCTAssertEqual((page["notifications"] as? [[String: Any]])?.count, 5)
        XCTAssertNotNil(page["next"] as? String, "\(page)")
        for port in nodePorts {
            // Each node, asked directly, answers for all: the newest, and any one by its id.
            let latest = try json(
                try runCommand("curl", ["-sS", "http://127.0.0.1:\(port)/emulator/v1/notifications/latest?token=\(token)"], timeout: 20)
                    .stdout)
            XCTAssertEqual(latest["id"] as? String, all.last?["id"] as? String, "\(latest)")
            let firstID = try XCTUnwrap(all.first?["id"] as? String)
            let one = try runCommand(
                "curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)/emulator/v1/notifications/\(firstID)"],
                timeout: 20)
            XCTAssertEqual(one.stdout, "200")
        }
        // The device's inbox holds what every node delivered to it: each node's own, merged.
        let ownInboxes = try nodePorts.map { port in
            (try json(
                try runCommand(
                    "curl", ["-sS", "-H", "x-pushemu-local: 1", "http://127.0.0.1:\(port)/emulator/v1/devices/\(token)/inbox"], timeout: 20
                ).stdout)["inbox"] as? [[String: Any]])?.count ?? -1
        }
        XCTAssertGreaterThan(ownInboxes.filter { $0 > 0 }.count, 1, "the pushes reached the device through several nodes: \(ownInboxes)")
        let inbox = try json(try runCommand("curl", ["-sS", front + "/emulator/v1/devices/\(token)/inbox"], timeout: 20).stdout)
        let merged = try XCTUnwrap(inbox["inbox"] as? [[String: Any]], "\(inbox)")
        XCTAssertEqual(merged.count, ownInboxes.reduce(0, +), "\(ownInboxes)")
        let inboxTimes = merged.compactMap { $0["receivedAt"] as? Int }
        XCTAssertEqual(inboxTimes, inboxTimes.sorted())
        // The event stream of one node carries every node's events, each naming its node: a
        // reader on node-1, a push straight to each node.
        let streamed = dir + "/events.txt"
        let pushes = nodePorts.map { port in
            "curl -s -o /dev/null --http2-prior-knowledge -H 'authorization: bearer \(jwt)' -H 'apns-topic: com.example.ha' "
                + "-d '{\"aps\":{\"alert\":\"streamed\"}}' http://127.0.0.1:\(port)/3/device/\(token)"
        }.joined(separator: "; ")
        let events = try runCommand(
            "bash",
            [
                "-c",
                "curl -sN --max-time 6 'http://127.0.0.1:\(nodePorts[0])/emulator/v1/events?types=accepted' > \(streamed) & "
                    + "sleep 2.5; \(pushes); wait",
            ], timeout: 30)
        XCTAssertEqual(events.status, 0, events.stderr)
        let frames = try String(contentsOfFile: streamed, encoding: .utf8)
        for n in 1...3 {
            XCTAssertEqual(
                frames.components(separatedBy: #""node":"node-\#(n)""#).count - 1, 1, "node-\(n)'s push, once: \(frames)")
        }
        XCTAssertEqual(frames.components(separatedBy: "event: accepted").count - 1, 3, frames)
        let cluster = try json(try runCommand("curl", ["-sS", front + "/emulator/v1/cluster"], timeout: 10).stdout)
        XCTAssertEqual((cluster["nodes"] as? [[String: Any]])?.filter { $0["healthy"] as? Bool == true }.count, 3, "\(cluster)")
        let removed = try runCommand(
            "curl", ["-sS", "-X", "DELETE", "-o", "/dev/null", "-w", "%{http_code}", front + "/emulator/v1/devices/\(token)"], timeout: 10)
        XCTAssertEqual(removed.stdout, "200")
        usleep(300_000)
        codes = []
        for i in 0..<6 { codes.append(try push(tls: i % 2 == 1)) }
        XCTAssertEqual(codes, Array(repeating: "410", count: 6), "every node knows the uninstall")
        // A `first 10` rule fires exactly 10 times over the three nodes: 300 pushes from h2load
        // on 6 connections through HAProxy (two a node), its count kept in Redis.
        let counted = String(repeating: "f", count: 64)
        let rule = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-d",
                #"{"match":{"provider":"apns","token":"\#(counted)","first":10},"effect":{"status":503,"reason":"ServiceUnavailable"}}"#,
                front + "/emulator/v1/faults",
            ], timeout: 10)
        XCTAssertEqual(rule.stdout, "201")
        usleep(300_000)
        let load = try runCommand(
            "h2load",
            [
                "-n", "300", "-c", "6", "-m", "10", "-H", "authorization: bearer \(jwt)", "-H", "apns-topic: com.example.ha", "-d",
                dir + "/payload.json", "http://127.0.0.1:\(http)/3/device/\(counted)",
            ], timeout: 60, stdin: nil)
        XCTAssertTrue(load.stdout.contains("status codes: 290 2xx, 0 3xx, 0 4xx, 10 5xx"), load.stdout)
        let faults = try json(try runCommand("curl", ["-sS", "http://127.0.0.1:\(nodePorts[1])/emulator/v1/faults"], timeout: 10).stdout)
        let counts = try XCTUnwrap((faults["faults"] as? [[String: Any]])?.first, "\(faults)")
        XCTAssertEqual(counts["fired"] as? Int, 10, "\(counts)")
        XCTAssertGreaterThanOrEqual(counts["seen"] as? Int ?? 0, 11, "\(counts)")
        // A campaign sent through HAProxy reports as one campaign from any node: each node's
        // journal digests merged, totals equal to what was sent (321 requests before it).
        try Data(#"{"aps":{"alert":"spring sale"},"_dId":"spring"}"#.utf8).write(to: URL(fileURLWithPath: dir + "/campaign.json"))
        let campaign = try runCommand(
            "h2load",
            [
                "-n", "150", "-c", "6", "-m", "10", "-H", "authorization: bearer \(jwt)", "-H", "apns-topic: com.example.ha", "-d",
                dir + "/campaign.json", "http://127.0.0.1:\(http)/3/device/\(String(repeating: "c", count: 64))",
            ], timeout: 60, stdin: nil)
        XCTAssertTrue(campaign.stdout.contains("status codes: 150 2xx"), campaign.stdout)
        func sent(_ base: String, _ path: String) throws -> (spring: Int?, all: Int?, doc: [String: Any]) {
            let doc = try json(try runCommand("curl", ["-sS", base + path], timeout: 30).stdout)
            let spring = (doc["campaigns"] as? [[String: Any]])?.first { $0["campaign"] as? String == "spring" }
            return (spring?["sent"] as? Int, (doc["totals"] as? [String: Any])?["sent"] as? Int, doc)
        }
        for port in nodePorts {
            for path in ["/emulator/v1/report", "/emulator/v1/campaigns"] {
                let r = try sent("http://127.0.0.1:\(port)", path)
                XCTAssertEqual(r.spring, 150, "\(path) on \(port): \(r.doc)")
                XCTAssertEqual(r.all, 471, "\(path) on \(port): \(r.doc)")
                XCTAssertNil(r.doc["partial"])
            }
        }
        let report = try sent(front, "/emulator/v1/report?campaign=spring")
        let spring = try XCTUnwrap((report.doc["campaigns"] as? [[String: Any]])?.first, "\(report.doc)")
        XCTAssertEqual(spring["accepted"] as? Int, 150)
        XCTAssertEqual(spring["uniqueDevices"] as? Int, 1, "one device over three nodes: \(spring)")
        let stats = try json(try runCommand("curl", ["-sS", front + "/emulator/v1/stats"], timeout: 20).stdout)
        XCTAssertEqual((stats["nodes"] as? [[String: Any]])?.count, 3, "\(stats)")
        XCTAssertEqual((stats["notifications"] as? [String: Any])?["kept"] as? Int, 15 + 290 + 150, "summed over the nodes: \(stats)")
        // A node that stops answering is named: reads stay 200, partial.
        let third = try String(contentsOfFile: dir + "/node-3.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        kill(pid_t(third) ?? 0, SIGKILL)
        var partial: [String: Any] = [:]
        for _ in 0..<60 {
            partial = try json(
                try runCommand("curl", ["-sS", "http://127.0.0.1:\(nodePorts[0])/emulator/v1/notifications?token=\(token)"], timeout: 20)
                    .stdout)
            if partial["partial"] != nil { break }
            usleep(100_000)
        }
        XCTAssertEqual(partial["partial"] as? Bool, true, "\(partial)")
        XCTAssertEqual(partial["unreachable"] as? [String], ["node-3"], "\(partial)")
        let without = try sent("http://127.0.0.1:\(nodePorts[0])", "/emulator/v1/report")
        XCTAssertEqual(without.doc["unreachable"] as? [String], ["node-3"], "\(without.doc)")
        XCTAssertLessThan(without.all ?? 0, 471)
        // Back from its kill -9, the node's journal kept what it acknowledged: the report counts it again.
        let restarted = try runCommand(
            Self.root + "/Scripts/cluster", ["start-node", "--node", "3", "--dir", dir], timeout: 60, environment: env)
        XCTAssertEqual(restarted.status, 0, restarted.stdout + restarted.stderr)
        var whole = without
        for _ in 0..<50 {
            whole = try sent("http://127.0.0.1:\(nodePorts[0])", "/emulator/v1/report")
            if whole.doc["partial"] == nil { break }
            usleep(100_000)
        }
        XCTAssertEqual(whole.all, 471, "\(whole.doc)")
        XCTAssertEqual(whole.spring, 150)
        // FCM's quota holds for the cluster: 3,000 sends on three connections (one a node) get
        // the quota's 1,200 (within 10%: the buckets refill while they run), not three times it.
        let bearer = "authorization: Bearer ya29.c.b0AXv0zTPq" + String(repeating: "x", count: 190)
        func fcmLoad(_ project: String, connections: Int, requests: Int) throws -> Int {
            let body = #"{"message":{"token":"\#(project):"# + String(repeating: "q", count: 140) + #"","notification":{"title":"quota"}}}"#
            try Data(body.utf8).write(to: URL(fileURLWithPath: dir + "/fcm-\(project).json"))
            let run = try runCommand(
                "h2load",
                [
                    "-n", String(requests), "-c", String(connections), "-m", "10", "-H", bearer, "-H", "content-type: application/json",
                    "-d", dir + "/fcm-\(project).json", "http://127.0.0.1:\(http)/v1/projects/\(project)/messages:send",
                ], timeout: 60, stdin: nil)
            let line = run.stdout.split(separator: "\n").first { $0.contains("status codes:") } ?? ""
            return Int(line.split(separator: " ").dropFirst(2).first ?? "") ?? -1
        }
        // Once the shares have settled (node-3 came back a moment ago and starts small), each
        // node holds a third.
        func quotaShares() throws -> [Double] {
            try nodePorts.map { port in
                try json(try runCommand("curl", ["-sS", "http://127.0.0.1:\(port)/emulator/v1/cluster"], timeout: 10).stdout)["quotaShare"]
                    as? Double ?? 0
            }
        }
        var settled: [Double] = []
        for _ in 0..<100 {
            settled = try quotaShares()
            if settled.allSatisfy({ abs($0 - 1.0 / 3) < 0.02 }) { break }
            usleep(100_000)
        }
        XCTAssertTrue(settled.allSatisfy { abs($0 - 1.0 / 3) < 0.02 }, "\(settled)")
        let shared = try fcmLoad("quota-three", connections: 3, requests: 3000)
        XCTAssertTrue((1140...1320).contains(shared), "\(shared) of 3000 accepted against a quota of 1200")
        // A sender whose load is all on one node (one HTTP/2 connection to node-1, 200 sends a
        // second for 8 s) moves the quota to that node within seconds: shares follow demand.
        let body = #"{"message":{"token":"quota-one:"# + String(repeating: "q", count: 140) + #"","notification":{"title":"quota"}}}"#
        try Data(body.utf8).write(to: URL(fileURLWithPath: dir + "/fcm-one.json"))
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
        sender.arguments = [
            "-n", "1600", "-c", "1", "--rps", "200", "-H", bearer, "-H", "content-type: application/json", "-d", dir + "/fcm-one.json",
            "http://127.0.0.1:\(nodePorts[0])/v1/projects/quota-one/messages:send",
        ]
        sender.standardOutput = FileHandle.nullDevice
        sender.standardError = FileHandle.nullDevice
        try sender.run()
        defer { if sender.isRunning { sender.terminate() } }
        var shares: [Double] = []
        // Settled: the busy node's share grows into what the idle ones gave up a heartbeat
        // later (meanwhile the shares add up to less than the quota, never more).
        for _ in 0..<100 {
            shares = try quotaShares()
            XCTAssertLessThanOrEqual(shares.reduce(0, +), 1.05, "never more than the quota: \(shares)")
            if shares[0] > 0.5, shares[1] < 0.2, shares[2] < 0.2, abs(shares.reduce(0, +) - 1) <= 0.05 { break }
            usleep(100_000)
        }
        XCTAssertEqual(shares.reduce(0, +), 1, accuracy: 0.05, "the shares add up to the quota: \(shares)")
        XCTAssertGreaterThan(shares[0], 0.5, "the busy node's share: \(shares)")
        XCTAssertLessThan(max(shares[1], shares[2]), 0.2, "the idle nodes' shares: \(shares)")
        // A deletion made through any node is a change record: every node forgets its own
        // notifications of it (each asked for its own alone).
        let deleted = try runCommand("curl", ["-sS", "-X", "DELETE", front + "/emulator/v1/notifications?token=\(token)"], timeout: 20)
        XCTAssertTrue(deleted.stdout.contains("\"deleted\""), deleted.stdout + deleted.stderr)
        func ownCounts() throws -> [Int] {
            try nodePorts.map { port in
                let own = try json(
                    try runCommand(
                        "curl",
                        ["-sS", "-H", "x-pushemu-local: 1", "http://127.0.0.1:\(port)/emulator/v1/notifications?token=\(token)&limit=100"],
                        timeout: 20
                    ).stdout)
                return (own["notifications"] as? [[String: Any]])?.count ?? -1
            }
        }
        var left: [Int] = []
        for _ in 0..<50 {
            left = try ownCounts()
            if left == [0, 0, 0] { break }
            usleep(100_000)
        }
        XCTAssertEqual(left, [0, 0, 0], "each node's own notifications of the token after the deletion")
    }

    /// Parallel CI jobs, each with its own key or project, through HAProxy to three nodes
    /// (Tests/Clients/scoped_jobs.py with the real aioapns and firebase-admin): each sees only its
    /// own notifications, events, totals and rules, whichever nodes took its pushes, and a scoped
    /// reset forgets the scope's notifications on every node.
    func testScopedJobsAcrossTheCluster() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-scoped-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let http = try freeLocalPort()
        let https = try freeLocalPort()
        let env = ["PUSHEMU_BIN": ServerProcess.binaryPath]
        let up = try runCommand(
            Self.root + "/Scripts/cluster",
            ["up", "--nodes", "3", "--dir", dir, "--http-port", String(http), "--https-port", String(https), "--name", "scoped"],
            timeout: 120, environment: env)
        defer { _ = try? runCommand(Self.root + "/Scripts/cluster", ["down", "--dir", dir], timeout: 60, environment: env) }
        XCTAssertEqual(up.status, 0, up.stdout + up.stderr)
        let front = "http://127.0.0.1:\(http)"
        var jobs: [[String: Any]] = []
        for (i, team) in ["TEAMCLU001", "TEAMCLU002"].enumerated() {
            let made = try runCommand(
                ServerProcess.binaryPath,
                ["credentials", "apns", "--server", front, "--out", dir, "--team-id", team, "--topics", "com.example.ci"], timeout: 20)
            XCTAssertEqual(made.status, 0, made.stderr)
            let kid = try XCTUnwrap(try json(made.stdout)["keyId"] as? String)
            jobs.append([
                "name": "apns-job-\(i + 1)", "scope": "team:\(team)",
                "apns": ["key": dir + "/AuthKey_\(kid).p8", "keyId": kid, "team": team],
            ])
        }
        let made = try runCommand(
            ServerProcess.binaryPath, ["credentials", "fcm", "--server", front, "--project", "ci-cluster", "--out", dir + "/sa.json"],
            timeout: 20)
        XCTAssertEqual(made.status, 0, made.stderr)
        jobs.append(["name": "fcm-job", "scope": "project:ci-cluster", "fcm": ["credentials": dir + "/sa.json", "project": "ci-cluster"]])
        let ca = dir + "/ca.pem"
        XCTAssertEqual(try runCommand(ServerProcess.binaryPath, ["ca", "--out", ca], timeout: 20).status, 0)
        usleep(300_000) // the keys and the service account reach every node
        let spec = String(decoding: try JSONSerialization.data(withJSONObject: jobs), as: UTF8.self)
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/scoped_jobs.py", front, "\(https)", spec, "--cluster"], timeout: 240,
            environment: ["SSL_CERT_FILE": ca])
        XCTAssertEqual(r.status, 0, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "{}")
        XCTAssertEqual((out["jobs"] as? [String: Any])?.count, 3, r.stdout)
    }
}
