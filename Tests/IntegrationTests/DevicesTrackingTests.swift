import Foundation
import TestSupport
import XCTest

/// The device layer end to end: the real binary, real senders (curl over h2c, h2load), and a
/// real tracking sink receiving what the simulated SDKs send.
final class DevicesTrackingTests: XCTestCase {
    var dir: URL!
    var sink: TrackingSink!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-dev-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        sink?.stop()
        try? FileManager.default.removeItem(at: dir)
    }

    /// A provider token from a fresh key (accepted by the default lenient APNs auth).
    func jwt() throws -> String {
        return try makeProviderToken(in: dir.path, keyStore: dir.path + "/keys")
    }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func admin(_ s: ServerProcess, _ method: String, _ path: String, _ body: String? = nil) throws -> (Int, String) {
        try adminRequest(s, method, path, body)
    }

    func rssKB(_ pid: Int32) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    func testAdobeReceiveAndOpenFromAPNsAndFCM() throws {
        sink = try TrackingSink()
        let s = try ServerProcess(["--tracking-preset", "adobe-campaign", "--tracking-url", sink.url])
        let jwt = try jwt()
        var (code, body) = try admin(
            s, "POST", "/emulator/v1/devices",
            #"{"platform":"ios","app":"com.example.app","behavior":{"openRate":1,"openDelayMs":50}}"#)
        XCTAssertEqual(code, 201, body)
        let ios = try XCTUnwrap(try json(body)["token"] as? String)
        XCTAssertEqual(ios.count, 64)
        let push = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                "-H", "apns-topic: com.example.app", "-H", "authorization: bearer \(jwt)",
                "-d", #"{"aps":{"alert":{"title":"Hi"},"mutable-content":1},"_mId":"12345","_dId":"67890"}"#,
                "http://127.0.0.1:\(s.httpPort)/3/device/\(ios)",
            ], timeout: 10)
        XCTAssertEqual(push.stdout, "200")
        XCTAssertEqual(sink.wait(for: 2), 2)
        usleep(300_000)
        XCTAssertEqual(sink.requests.map(\.target), ["/r/?id=h3039,67890,1", "/r/?id=h3039,67890,2"])
        XCTAssertEqual(sink.requests.map(\.method), ["GET", "GET"])

        // FCM: a data message to an Android device fires exactly one receive (open rate 0).
        (code, body) = try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"android","app":"com.example.android"}"#)
        XCTAssertEqual(code, 201, body)
        let android = try XCTUnwrap(try json(body)["token"] as? String)
        let send = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: Bearer x",
                "-d", #"{"message":{"token":"\#(android)","data":{"_mId":"-1","_dId":"d-9"}}}"#,
                "http://127.0.0.1:\(s.httpPort)/v1/projects/demo-project/messages:send",
            ], timeout: 10)
        XCTAssertEqual(send.stdout, "200")
        XCTAssertEqual(sink.wait(for: 3), 3)
        usleep(300_000)
        XCTAssertEqual(sink.requests.last?.target, "/r/?id=hffffffff,d-9,1")
        XCTAssertEqual(sink.count, 3)

        // What the admin API recorded.
        (code, body) = try admin(s, "GET", "/emulator/v1/tracking?token=\(ios)")
        let attempts = try XCTUnwrap(try json(body)["tracking"] as? [[String: Any]])
        XCTAssertEqual(attempts.compactMap { $0["event"] as? String }, ["receive", "open"])
        XCTAssertEqual(attempts.compactMap { $0["status"] as? Int }, [200, 200])
        (code, body) = try admin(s, "GET", "/emulator/v1/devices/\(ios)")
        XCTAssertEqual(try json(body)["opened"] as? Int, 1)
        (code, body) = try admin(s, "GET", "/emulator/v1/stats")
        let tracking = try XCTUnwrap(try json(body)["tracking"] as? [String: Any])
        XCTAssertEqual(tracking["succeeded"] as? Int, 3)
        XCTAssertEqual(s.stop(), 0)
    }

    func testFleetOfTenMillionAndACampaignToOneHundredThousand() throws {
        sink = try TrackingSink(keepRequests: false)
        let s = try ServerProcess(["--tracking-preset", "adobe-campaign", "--tracking-url", sink.url])
        let pid = s.process.processIdentifier
        let before = rssKB(pid)
        let t0 = Date()
        var (code, body) = try admin(
            s, "POST", "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example.app","count":10000000,"seed":1}"#)
        let elapsed = Date().timeIntervalSince(t0)
        XCTAssertEqual(code, 201, body)
        XCTAssertEqual(try json(body)["id"] as? String, "fleet-1")
        XCTAssertLessThan(elapsed, 2)
        XCTAssertLessThan(rssKB(pid) - before, 50 * 1024)

        (code, body) = try admin(s, "GET", "/emulator/v1/fleets/fleet-1/tokens?offset=0&limit=100000")
        XCTAssertEqual(code, 200)
        let tokens = try XCTUnwrap(try json(body)["tokens"] as? [String])
        XCTAssertEqual(tokens.count, 100_000)
        XCTAssertEqual(Set(tokens).count, 100_000)
        let uris = dir.appendingPathComponent("uris.txt")
        try tokens.map { "http://127.0.0.1:\(s.httpPort)/3/device/\($0)" }.joined(separator: "\n").write(
            to: uris, atomically: true, encoding: .utf8)
        let payload = dir.appendingPathComponent("payload.json")
        try #"{"aps":{"alert":{"title":"Sale"},"mutable-content":1},"_mId":"424242","_dId":"campaign-7"}"#.write(
            to: payload, atomically: true, encoding: .utf8)
        // One h2load client: each of h2load's clients walks the URI list from the top, so only one
        // client sends every token exactly once.
        let h = try runCommand(
            "h2load",
            [
                "-n", "100000", "-c", "1", "-m", "64", "-i", uris.path, "-d", payload.path,
                "-H", "apns-topic: com.example.app", "-H", "authorization: bearer \(try jwt())",
            ], timeout: 120)
        XCTAssertTrue(h.stdout.contains("status codes: 100000 2xx"), h.stdout)
        XCTAssertEqual(sink.wait(for: 100_000, timeout: 60), 100_000)
        usleep(500_000)
        XCTAssertEqual(sink.count, 100_000)
        (code, body) = try admin(s, "GET", "/emulator/v1/stats")
        let tracking = try XCTUnwrap(try json(body)["tracking"] as? [String: Any])
        XCTAssertEqual(tracking["succeeded"] as? Int, 100_000)
        XCTAssertEqual(tracking["dropped"] as? Int, 0)
        (code, body) = try admin(s, "GET", "/emulator/v1/report")
        let totals = try XCTUnwrap(try json(body)["totals"] as? [String: Any])
        XCTAssertEqual(totals["uniqueDevices"] as? Int, 100_000, "the campaign reached 100,000 distinct fleet devices")
        XCTAssertEqual(totals["accepted"] as? Int, 100_000)

        // A fleet with uninstalled members: those answer 410 Unregistered, reproducibly.
        (code, body) = try admin(
            s, "POST", "/emulator/v1/fleets",
            #"{"platform":"ios","app":"com.example.app","count":1000,"seed":9,"behavior":{"uninstalledRate":0.5}}"#)
        XCTAssertEqual(code, 201)
        (code, body) = try admin(s, "GET", "/emulator/v1/fleets/fleet-2/tokens?limit=40")
        var statuses: [String] = []
        for t in try XCTUnwrap(try json(body)["tokens"] as? [String]) {
            let r = try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                    "-H", "apns-topic: com.example.app", "-H", "authorization: bearer \(try jwt())",
                    "-d", #"{"aps":{"alert":"x"}}"#, "http://127.0.0.1:\(s.httpPort)/3/device/\(t)",
                ], timeout: 10)
            statuses.append(r.stdout)
        }
        XCTAssertTrue(statuses.contains("410") && statuses.contains("200"), "\(statuses)")
        XCTAssertEqual(Set(statuses), ["410", "200"])
        // Behaviour fields are also accepted at the fleet's top level, over "behavior".
        (code, body) = try admin(
            s, "POST", "/emulator/v1/fleets",
            #"{"platform":"ios","app":"com.example.app","count":1000,"seed":10,"uninstalledRate":0.5,"behavior":{"openRate":0.25}}"#)
        XCTAssertEqual(code, 201, body)
        let b = try XCTUnwrap(try json(body)["behavior"] as? [String: Any])
        XCTAssertEqual(b["uninstalledRate"] as? Double, 0.5)
        XCTAssertEqual(b["openRate"] as? Double, 0.25)
        (code, body) = try admin(
            s, "POST", "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example.app","count":10,"uninstalledRate":3}"#)
        XCTAssertEqual(code, 400)
        XCTAssertTrue(body.contains("uninstalledRate must be a number from 0 to 1"), body)
        XCTAssertEqual(s.stop(), 0)
    }

    func testCommandLine() throws {
        let s = try ServerProcess()
        let server = "http://127.0.0.1:\(s.httpPort)"
        var r = try runCommand(
            ServerProcess.binaryPath,
            [
                "fleet", "create", "--server", server, "--platform", "android",
                "--app", "com.x", "--count", "1234",
            ], timeout: 10)
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try runCommand(ServerProcess.binaryPath, ["fleet", "tokens", "fleet-1", "--server", server], timeout: 30)
        let lines = r.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 1234)
        XCTAssertTrue(lines.allSatisfy { $0.count == 163 && $0.contains(":APA91b") })
        r = try runCommand(
            ServerProcess.binaryPath,
            [
                "devices", "add", "--server", server, "--json", "--platform", "ios", "--app", "com.y",
                "--labels", "beta",
            ], timeout: 10)
        XCTAssertEqual(r.status, 0, r.stderr)
        let token = try XCTUnwrap(try json(r.stdout)["token"] as? String)
        r = try runCommand(ServerProcess.binaryPath, ["devices", "uninstall", token, "--server", server, "--json"], timeout: 10)
        XCTAssertEqual(try json(r.stdout)["installed"] as? Bool, false)
        r = try runCommand(ServerProcess.binaryPath, ["devices", "list", "--label", "beta", "--server", server, "--json"], timeout: 10)
        XCTAssertEqual((try json(r.stdout)["devices"] as? [Any])?.count, 1)
        r = try runCommand(ServerProcess.binaryPath, ["devices", "show", "nope", "--server", server], timeout: 10)
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("404"))
        r = try runCommand(
            ServerProcess.binaryPath,
            [
                "devices", "add", "--server", server, "--json", "--platform", "android", "--app", "com.y",
                "--project", "p-one", "--topics", "news,sports",
            ], timeout: 10)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try json(r.stdout)["topics"] as? [String], ["news", "sports"])
        XCTAssertEqual(try json(r.stdout)["project"] as? String, "p-one")
    }

    /// `pushemu notifications ...`: a CI job's assertions from the shell.
    func testNotificationCommands() throws {
        let s = try ServerProcess()
        let server = "http://127.0.0.1:\(s.httpPort)"
        let jwt = try jwt()
        let cli = { (args: [String]) in try runCommand(ServerProcess.binaryPath, args + ["--server", server, "--json"], timeout: 15) }
        var r = try cli(["notifications", "latest"])
        XCTAssertEqual(r.status, 1, "nothing matches yet")
        XCTAssertTrue(r.stderr.contains("404"), r.stderr)
        for title in ["Spring sale", "Winter news"] {
            let push = try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                    "-H", "authorization: bearer \(jwt)", "-d", #"{"aps":{"alert":{"title":"\#(title)"}}}"#,
                    "http://127.0.0.1:\(s.httpPort)/3/device/f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820",
                ], timeout: 10)
            XCTAssertEqual(push.stdout, "200")
        }
        r = try cli(["notifications", "latest", "--q", "spring sale"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let latest = try json(r.stdout)
        let id = try XCTUnwrap(latest["id"] as? String)
        r = try cli(["notifications", "show", id])
        XCTAssertEqual(try json(r.stdout)["id"] as? String, id)
        r = try cli(["notifications", "list", "--order", "desc", "--limit", "1"])
        let page = try json(r.stdout)
        XCTAssertEqual((page["notifications"] as? [[String: Any]])?.count, 1)
        let next = try XCTUnwrap(page["next"] as? String)
        r = try cli(["notifications", "list", "--order", "desc", "--limit", "1", "--cursor", next])
        XCTAssertEqual(((try json(r.stdout)["notifications"] as? [[String: Any]])?.first?["id"] as? String), id)
        r = try cli(["notifications", "delete", "--q", "winter"])
        XCTAssertEqual(try json(r.stdout)["deleted"] as? Int, 1)
        r = try cli(["notifications", "list", "--q", "provider:apns"])
        XCTAssertEqual((try json(r.stdout)["notifications"] as? [[String: Any]])?.count, 1)
        r = try cli(["notifications", "list", "--q", "colour:red"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("unknown search term colour:"), r.stderr)
        XCTAssertEqual(s.stop(), 0)
    }

    func testStrictRegistryRotationAndCampaignFilter() throws {
        let s = try ServerProcess(["--devices", "strict"])
        let jwt = try jwt()
        func apns(_ token: String, _ body: String = #"{"aps":{"alert":"x"}}"#) throws -> String {
            try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                    "-H", "authorization: bearer \(jwt)", "-d", body,
                    "http://127.0.0.1:\(s.httpPort)/3/device/\(token)",
                ], timeout: 10
            ).stdout
        }
        func fcm(_ token: String) throws -> String {
            try runCommand(
                "curl",
                [
                    "-sS", "-w", "%{http_code}", "-H", "authorization: Bearer x",
                    "-d", #"{"message":{"token":"\#(token)","data":{"_dId":"camp-1"}}}"#,
                    "http://127.0.0.1:\(s.httpPort)/v1/projects/p-one/messages:send",
                ], timeout: 10
            ).stdout
        }
        // Unknown tokens: what the real services answer for tokens they never issued.
        XCTAssertEqual(try apns(String(repeating: "ab", count: 32)), #"{"reason":"BadDeviceToken"}400"#)
        XCTAssertTrue(
            try fcm(String(repeating: "c", count: 22) + ":APA91b" + String(repeating: "y", count: 134))
                .contains("The registration token is not a valid FCM registration token"))
        // Registered devices and fleet members are known.
        var (code, body) = try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.example.app"}"#)
        XCTAssertEqual(code, 201)
        let ios = try XCTUnwrap(try json(body)["token"] as? String)
        XCTAssertEqual(try apns(ios, #"{"aps":{"alert":"x"},"_dId":"camp-1"}"#), "200")
        (code, body) = try admin(s, "POST", "/emulator/v1/fleets", #"{"platform":"android","app":"com.a","count":10,"project":"p-one"}"#)
        (code, body) = try admin(s, "GET", "/emulator/v1/fleets/fleet-1/tokens?limit=1")
        let member = try XCTUnwrap((try json(body)["tokens"] as? [String])?.first)
        XCTAssertTrue(try fcm(member).hasSuffix("200"))
        // The campaign filter finds both (Adobe's _dId in the APNs payload and in FCM data).
        (code, body) = try admin(s, "GET", "/emulator/v1/notifications?campaign=camp-1")
        XCTAssertEqual((try json(body)["notifications"] as? [[String: Any]])?.count, 2)
        (code, body) = try admin(s, "GET", "/emulator/v1/notifications?campaign=other")
        XCTAssertEqual((try json(body)["notifications"] as? [[String: Any]])?.count, 0)
        // Rotation: the old token is unregistered, the new one works.
        (code, body) = try admin(s, "POST", "/emulator/v1/devices/\(ios):rotate")
        XCTAssertEqual(code, 200, body)
        let fresh = try XCTUnwrap(try json(body)["token"] as? String)
        XCTAssertNotEqual(fresh, ios)
        XCTAssertTrue(try apns(ios).hasSuffix("410"))
        XCTAssertEqual(try apns(fresh), "200")
        (code, body) = try admin(s, "GET", "/emulator/v1/devices/\(ios)")
        XCTAssertEqual(try json(body)["rotatedTo"] as? String, fresh)
        XCTAssertEqual(s.stop(), 0)
    }

    /// An android device's FCM topic subscriptions set through the device API: at creation and
    /// by PATCH (which replaces them), validated as FCM validates topic names, refused for iOS,
    /// and honoured by topic sends (only the subscribed device receives).
    func testDeviceTopicsAreFCMSubscriptions() throws {
        let s = try ServerProcess([])
        var (code, body) = try admin(
            s, "POST", "/emulator/v1/devices",
            #"{"platform":"android","app":"com.a","project":"p-one","topics":["news","/topics/sports"]}"#)
        XCTAssertEqual(code, 201, body)
        var d = try json(body)
        let token = try XCTUnwrap(d["token"] as? String)
        XCTAssertEqual(d["topics"] as? [String], ["news", "sports"])
        (code, body) = try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"android","app":"com.a","project":"p-one"}"#)
        let other = try XCTUnwrap(try json(body)["token"] as? String)
        (code, body) = try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.a","topics":["news"]}"#)
        XCTAssertEqual(code, 400)
        XCTAssertTrue(body.contains("android devices only"), body)
        (code, body) = try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"android","app":"com.a","topics":["no spaces"]}"#)
        XCTAssertEqual(code, 400)
        XCTAssertTrue(body.contains("invalid topic name"), body)
        (code, body) = try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"android","app":"com.a","topics":"news"}"#)
        XCTAssertEqual(code, 400)

        func send(_ topic: String) throws -> String {
            try runCommand(
                "curl",
                [
                    "-sS", "-w", "%{http_code}", "-H", "authorization: Bearer x",
                    "-d", #"{"message":{"topic":"\#(topic)","data":{"k":"v"}}}"#,
                    "http://127.0.0.1:\(s.httpPort)/v1/projects/p-one/messages:send",
                ], timeout: 10
            ).stdout
        }
        func inbox(_ t: String) throws -> Int {
            let (_, b) = try admin(s, "GET", "/emulator/v1/devices/\(t)/notifications")
            return (try json(b)["notifications"] as? [[String: Any]])?.count ?? -1
        }
        XCTAssertTrue(try send("sports").hasSuffix("200"))
        XCTAssertEqual(try inbox(token), 1)
        XCTAssertEqual(try inbox(other), 0)
        // PATCH replaces the subscriptions.
        (code, body) = try admin(s, "PATCH", "/emulator/v1/devices/\(token)", #"{"topics":["weather"],"labels":["l"]}"#)
        XCTAssertEqual(code, 200, body)
        d = try json(body)
        XCTAssertEqual(d["topics"] as? [String], ["weather"])
        XCTAssertEqual(d["labels"] as? [String], ["l"])
        XCTAssertTrue(try send("sports").hasSuffix("200"))
        XCTAssertTrue(try send("weather").hasSuffix("200"))
        XCTAssertEqual(try inbox(token), 2, "sports no longer reaches it; weather does")
        XCTAssertEqual(s.stop(), 0)
    }
}
