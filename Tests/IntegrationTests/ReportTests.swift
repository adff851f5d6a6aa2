import Foundation
import TestSupport
import XCTest

/// Campaign reports from the journal: a known mix of accepted and rejected requests in several
/// campaigns, tracking that succeeds, fails, and is retried; the JSON report must count exactly.
final class ReportTests: XCTestCase {
    var dir: URL!
    var sinks: [TrackingSink] = []

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        for s in sinks { s.stop() }
        try? FileManager.default.removeItem(at: dir)
    }

    func jwt() throws -> String {
        return try makeProviderToken(in: dir.path, keyStore: dir.path + "/keys")
    }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func admin(_ s: ServerProcess, _ method: String, _ path: String, _ body: String? = nil) throws -> (Int, String) {
        try adminRequest(s, method, path, body)
    }

    func device(_ s: ServerProcess, _ platform: String, tracking url: String) throws -> String {
        let app = platform == "ios" ? "com.example.app" : "com.example.android"
        let (code, body) = try admin(
            s, "POST", "/emulator/v1/devices",
            #"{"platform":"\#(platform)","app":"\#(app)","tracking":{"preset":"adobe-campaign","url":"\#(url)"}}"#)
        XCTAssertEqual(code, 201, body)
        return try XCTUnwrap(try json(body)["token"] as? String)
    }

    func testJSONReportCountsAKnownMixExactly() throws {
        let ok = try TrackingSink()
        let notFound = try TrackingSink(failFirst: 1_000, failStatus: 404)
        sinks = [ok, notFound]
        let dead = "http://127.0.0.1:9" // discard port: nothing listens; connection refused
        let s = try ServerProcess(["--tracking-retries", "1", "--tracking-timeout", "2"])
        let jwt = try jwt()
        func apns(_ token: String, _ body: String, _ headers: [String] = []) throws -> String {
            var args = [
                "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                "-H", "authorization: bearer \(jwt)", "-d", body,
            ]
            for h in headers { args += ["-H", h] }
            return try runCommand("curl", args + ["http://127.0.0.1:\(s.httpPort)/3/device/\(token)"], timeout: 10).stdout
        }
        func fcm(_ token: String, _ campaign: String) throws -> String {
            try runCommand(
                "curl",
                [
                    "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: Bearer x",
                    "-d", #"{"message":{"token":"\#(token)","data":{"_mId":"77","_dId":"\#(campaign)"}}}"#,
                    "http://127.0.0.1:\(s.httpPort)/v1/projects/demo-project/messages:send",
                ], timeout: 10
            ).stdout
        }
        let a = #"{"aps":{"alert":"A","mutable-content":1},"_mId":"12345","_dId":"camp-A"}"#
        let c = #"{"aps":{"alert":"C","mutable-content":1},"_mId":"12345","_dId":"camp-C"}"#

        // camp-A (APNs): 5 accepted, each tracked to a sink that answers 200; 6 rejected.
        let goodIOS = try (0..<5).map { _ in try device(s, "ios", tracking: ok.url) }
        for t in goodIOS { XCTAssertEqual(try apns(t, a), "200") }
        XCTAssertEqual(try apns("abc", a), "400") // BadDeviceToken
        XCTAssertEqual(try apns("abcd", a), "400") // BadDeviceToken
        let gone = try device(s, "ios", tracking: ok.url)
        XCTAssertEqual(try admin(s, "DELETE", "/emulator/v1/devices/\(gone)").0, 200)
        XCTAssertEqual(try apns(gone, a), "410") // Unregistered
        XCTAssertEqual(try apns(goodIOS[0], a, ["apns-priority: 7"]), "400") // BadPriority
        XCTAssertEqual(try apns(goodIOS[0], a, ["apns-push-type: nonsense"]), "400") // InvalidPushType
        XCTAssertEqual(try apns(goodIOS[0], a, ["apns-expiration: soon"]), "400") // BadExpirationDate

        // camp-B (FCM): 3 accepted, tracked to a sink that answers 404 (final, never retried); 3 rejected.
        let android = try (0..<3).map { _ in try device(s, "android", tracking: notFound.url) }
        for t in android { XCTAssertEqual(try fcm(t, "camp-B"), "200") }
        let goneAndroid = try device(s, "android", tracking: notFound.url)
        XCTAssertEqual(try admin(s, "DELETE", "/emulator/v1/devices/\(goneAndroid)").0, 200)
        XCTAssertEqual(try fcm(goneAndroid, "camp-B"), "404") // UNREGISTERED
        XCTAssertEqual(try fcm("bad", "camp-B"), "400") // INVALID_ARGUMENT
        XCTAssertEqual(try fcm("worse", "camp-B"), "400") // INVALID_ARGUMENT

        // camp-C (APNs): 2 accepted, tracked to nothing: each receive tried twice, then failed.
        let deadIOS = try device(s, "ios", tracking: dead)
        XCTAssertEqual(try apns(deadIOS, c), "200")
        XCTAssertEqual(try apns(deadIOS, c), "200")
        // No campaign: 1 accepted (no _dId, so the Adobe SDK tracks nothing).
        XCTAssertEqual(try apns(goodIOS[1], #"{"aps":{"alert":"plain"}}"#), "200")

        // Every tracking call done and journaled: 5 + 3 + 2 x 2 attempts.
        var report: [String: Any] = [:]
        var byName: [String: [String: Any]] = [:]
        let deadline = Date().addingTimeInterval(30)
        repeat {
            let (code, body) = try admin(s, "GET", "/emulator/v1/report?format=json")
            XCTAssertEqual(code, 200, body)
            report = try json(body)
            byName = [:]
            for c in report["campaigns"] as? [[String: Any]] ?? [] { byName[(c["campaign"] as? String) ?? "-"] = c }
            let attempts = (report["totals"] as? [String: Any]).flatMap { $0["tracking"] as? [String: [String: Int]] }?["receive"]?[
                "attempts"]
            if attempts == 12 { break }
            usleep(100_000)
        } while Date() < deadline

        let campA = try XCTUnwrap(byName["camp-A"], "\(report)")
        XCTAssertEqual(campA["sent"] as? Int, 11)
        XCTAssertEqual(campA["accepted"] as? Int, 5)
        XCTAssertEqual(
            campA["rejected"] as? [String: Int],
            ["BadDeviceToken": 2, "Unregistered": 1, "BadPriority": 1, "InvalidPushType": 1, "BadExpirationDate": 1])
        XCTAssertEqual(campA["uniqueDevices"] as? Int, 8)
        XCTAssertEqual((campA["byProvider"] as? [String: [String: Int]])?["apns"], ["sent": 11, "accepted": 5, "rejected": 6])
        XCTAssertEqual((campA["byPlatform"] as? [String: [String: Int]])?["ios"], ["sent": 11, "accepted": 5, "rejected": 6])
        XCTAssertEqual(
            (campA["tracking"] as? [String: [String: Int]])?["receive"],
            ["fired": 5, "succeeded": 5, "failed": 0, "retried": 0, "attempts": 5])
        XCTAssertEqual(campA["receiveRate"] as? Double, 1.0)
        XCTAssertEqual(campA["openRate"] as? Double, 0.0)

        let campB = try XCTUnwrap(byName["camp-B"])
        XCTAssertEqual(campB["sent"] as? Int, 6)
        XCTAssertEqual(campB["accepted"] as? Int, 3)
        XCTAssertEqual(campB["rejected"] as? [String: Int], ["UNREGISTERED": 1, "INVALID_ARGUMENT": 2])
        XCTAssertEqual((campB["byPlatform"] as? [String: [String: Int]])?["android"], ["sent": 6, "accepted": 3, "rejected": 3])
        XCTAssertEqual(
            (campB["tracking"] as? [String: [String: Int]])?["receive"],
            ["fired": 3, "succeeded": 0, "failed": 3, "retried": 0, "attempts": 3])

        let campC = try XCTUnwrap(byName["camp-C"])
        XCTAssertEqual(campC["sent"] as? Int, 2)
        XCTAssertEqual(campC["accepted"] as? Int, 2)
        XCTAssertEqual(campC["rejected"] as? [String: Int], [:])
        XCTAssertEqual(campC["uniqueDevices"] as? Int, 1)
        XCTAssertEqual(
            (campC["tracking"] as? [String: [String: Int]])?["receive"],
            ["fired": 2, "succeeded": 0, "failed": 2, "retried": 2, "attempts": 4])

        let none = try XCTUnwrap(byName["-"], "requests without a campaign id")
        XCTAssertEqual(none["sent"] as? Int, 1)
        XCTAssertEqual(none["accepted"] as? Int, 1)
        let totals = try XCTUnwrap(report["totals"] as? [String: Any])
        XCTAssertEqual(totals["sent"] as? Int, 20)
        XCTAssertEqual(totals["accepted"] as? Int, 11)
        XCTAssertEqual(totals["rejectedTotal"] as? Int, 9)
        XCTAssertEqual(ok.count, 5)
        XCTAssertEqual(notFound.count, 3)

        // One campaign; the text and the self-contained HTML forms; the CLI against the server.
        var (code, body) = try admin(s, "GET", "/emulator/v1/report?campaign=camp-B")
        XCTAssertEqual(code, 200)
        XCTAssertEqual((try json(body)["campaigns"] as? [[String: Any]])?.compactMap { $0["campaign"] as? String }, ["camp-B"])
        (code, body) = try admin(s, "GET", "/emulator/v1/report?format=text")
        XCTAssertTrue(body.contains("Campaign camp-A"), body)
        XCTAssertTrue(body.contains("BadDeviceToken: 2"), body)
        (code, body) = try admin(s, "GET", "/emulator/v1/report?format=html")
        XCTAssertTrue(body.hasPrefix("<!DOCTYPE html>"))
        XCTAssertTrue(body.contains("<svg"))
        XCTAssertFalse(body.contains("<script"))
        XCTAssertFalse(body.contains("src=") || body.contains("<link"), "no external assets")
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/report?format=pdf").0, 400)
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/report?since=yesterday").0, 400)
        // From the index's summaries (what a report over millions of records uses): the same
        // counts and tracking (the attempts carry their campaign), unique devices estimated.
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/report?exact=maybe").0, 400)
        (code, body) = try admin(s, "GET", "/emulator/v1/report?exact=false")
        XCTAssertEqual(code, 200, body)
        let summed = try json(body)
        XCTAssertEqual(summed["exact"] as? Bool, false)
        XCTAssertEqual(report["exact"] as? Bool, true, "a journal this small is reported exactly when nothing is asked")
        var summedByName: [String: [String: Any]] = [:]
        for c in summed["campaigns"] as? [[String: Any]] ?? [] { summedByName[(c["campaign"] as? String) ?? "-"] = c }
        XCTAssertEqual(Set(summedByName.keys), Set(byName.keys))
        for (name, exact) in byName {
            let c = try XCTUnwrap(summedByName[name])
            for key in ["sent", "accepted", "rejectedTotal", "firstAt", "lastAt"] {
                XCTAssertEqual(c[key] as? Int, exact[key] as? Int, "\(name) \(key)")
            }
            for key in ["rejected", "display"] {
                XCTAssertEqual(c[key] as? [String: Int], exact[key] as? [String: Int], "\(name) \(key)")
            }
            XCTAssertEqual(c["tracking"] as? [String: [String: Int]], exact["tracking"] as? [String: [String: Int]], "\(name) tracking")
            XCTAssertEqual(c["uniqueDevices"] as? Int, exact["uniqueDevices"] as? Int, "\(name): a handful is counted exactly")
            XCTAssertEqual(c["uniqueDevicesError"] as? Double, 0.016, name)
        }
        let cli = try runCommand(
            ServerProcess.binaryPath,
            [
                "report", "--server", "http://127.0.0.1:\(s.httpPort)", "--format", "json",
                "--campaign", "camp-C", "--out", dir.path + "/r.json",
            ], timeout: 30)
        XCTAssertEqual(cli.status, 0, cli.stderr)
        let file = try String(contentsOfFile: dir.path + "/r.json", encoding: .utf8)
        XCTAssertEqual((try json(file)["campaigns"] as? [[String: Any]])?.first?["sent"] as? Int, 2)
        // The same totals from the index, through the CLI.
        let counts = try runCommand(
            ServerProcess.binaryPath, ["campaigns", "--server", "http://127.0.0.1:\(s.httpPort)", "--campaign", "camp-C", "--json"],
            timeout: 30)
        XCTAssertEqual(counts.status, 0, counts.stderr)
        let counted = try XCTUnwrap((try json(counts.stdout)["campaigns"] as? [[String: Any]])?.first, counts.stdout)
        XCTAssertEqual(counted["campaign"] as? String, "camp-C")
        XCTAssertEqual(counted["sent"] as? Int, 2)

        // Reset empties the journal too, and its index.
        XCTAssertEqual(try admin(s, "POST", "/emulator/v1/reset").0, 200)
        (code, body) = try admin(s, "GET", "/emulator/v1/report")
        XCTAssertEqual((try json(body)["campaigns"] as? [[String: Any]])?.count, 0)
        (code, body) = try admin(s, "GET", "/emulator/v1/campaigns")
        XCTAssertEqual((try json(body)["campaigns"] as? [[String: Any]])?.count, 0, body)
        XCTAssertEqual(s.stop(), 0)
    }

    /// Notifications and tracking attempts the in-memory logs evicted still come back, from the journal.
    func testInspectionReadsWhatMemoryEvictedFromTheJournal() throws {
        let ok = try TrackingSink()
        sinks = [ok]
        let s = try ServerProcess(["--notification-log-size", "5", "--tracking-log-size", "3"])
        let jwt = try jwt()
        let token = try device(s, "ios", tracking: ok.url)
        for i in 0..<20 {
            let r = try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                    "-H", "apns-topic: com.example.app", "-H", "authorization: bearer \(jwt)",
                    "-d", #"{"aps":{"alert":"n\#(i)","mutable-content":1},"_mId":"\#(i + 1)","_dId":"d"}"#,
                    "http://127.0.0.1:\(s.httpPort)/3/device/\(token)",
                ], timeout: 10)
            XCTAssertEqual(r.stdout, "200")
        }
        XCTAssertEqual(ok.wait(for: 20), 20)
        usleep(300_000)
        var (code, body) = try admin(s, "GET", "/emulator/v1/notifications?limit=50")
        XCTAssertEqual(code, 200)
        let list = try XCTUnwrap(try json(body)["notifications"] as? [[String: Any]])
        XCTAssertEqual(list.count, 20, "5 from memory, 15 from the journal")
        let alerts = list.compactMap { (($0["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String }
        XCTAssertEqual(alerts, (0..<20).map { "n\($0)" }, "oldest first")
        XCTAssertEqual(Set(list.compactMap { $0["id"] as? String }).count, 20)
        (code, body) = try admin(s, "GET", "/emulator/v1/devices/\(token)/notifications")
        XCTAssertEqual((try json(body)["notifications"] as? [[String: Any]])?.count, 20)
        (code, body) = try admin(s, "GET", "/emulator/v1/tracking?token=\(token)&limit=100")
        let attempts = try XCTUnwrap(try json(body)["tracking"] as? [[String: Any]])
        XCTAssertEqual(attempts.count, 20, "3 from memory, 17 from the journal")
        XCTAssertEqual(attempts.compactMap { $0["url"] as? String }, (1...20).map { "\(ok.url)/r/?id=h\(String($0, radix: 16)),d,1" })
        XCTAssertEqual(s.stop(), 0)
    }
}

extension ReportTests {
    /// A push that names no device (MissingDeviceToken) is counted as sent and rejected, but not
    /// as a device: one real device and one tokenless push report one unique device.
    func testUniqueDevicesCountsOnlyRealTokens() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let token = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"
        let headers = ["-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert", "-d", #"{"aps":{"alert":"hi"}}"#]
        for path in ["/3/device/\(token)", "/3/device/", "/3/device/\(token)"] {
            _ = try runCommand(
                "curl", ["-sS", "--max-time", "10", "--http2-prior-knowledge"] + headers + ["http://127.0.0.1:\(s.httpPort)\(path)"],
                timeout: 15)
        }
        let (code, body) = try admin(s, "GET", "/emulator/v1/report?format=json")
        XCTAssertEqual(code, 200, body)
        let totals = try XCTUnwrap(try json(body)["totals"] as? [String: Any], body)
        XCTAssertEqual(totals["sent"] as? Int, 3, body)
        XCTAssertEqual(totals["uniqueDevices"] as? Int, 1, body)
        XCTAssertEqual((totals["rejected"] as? [String: Any])?["MissingDeviceToken"] as? Int, 1, body)
    }
}
