import EmulatorTesting
import Foundation
import TestSupport
import XCTest

/// What each device made of a push, end to end in process: the display outcome its permission
/// and app state give, the SDK lint of the payload, both on the notification and counted per
/// campaign in the report; open tracking only for what was displayed.
final class DisplayAndLintTests: XCTestCase {
    func json(_ r: TestResponse) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any], r.text)
    }

    func apnsAuthorization(_ emulator: TestEmulator) throws -> String { try PipelineTests.apnsAuthorization(emulator) }

    func device(_ emulator: TestEmulator, _ body: String) throws -> String {
        let r = try emulator.http1(TestRequest("POST", "/emulator/v1/devices", body: body))
        XCTAssertEqual(r.status, 201, r.text)
        return try XCTUnwrap(try json(r)["token"] as? String)
    }

    /// The one notification recorded for `token`.
    func notification(_ emulator: TestEmulator, _ token: String) throws -> [String: Any] {
        let list = try XCTUnwrap(
            try json(try emulator.get("/emulator/v1/notifications?token=\(token)"))["notifications"] as? [[String: Any]])
        XCTAssertEqual(list.count, 1)
        return try XCTUnwrap(list.first)
    }

    func display(_ n: [String: Any]) -> String {
        let d = n["display"] as? [String: Any]
        return "\(d?["outcome"] as? String ?? "-") \(d?["reason"] as? String ?? "-")"
    }

    func lintCodes(_ n: [String: Any]) -> [String] { (n["lint"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String } }

    func testAPNsDisplayLintAndReport() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let tracking = #""tracking":{"preset":"adobe-campaign","url":"\#(sink.url)"},"behavior":{"openRate":1,"openDelayMs":10}"#
        let provisional = try device(
            emulator, #"{"platform":"ios","app":"com.example.app","permission":"provisional","urlSchemes":["myapp"],\#(tracking)}"#)
        let denied = try device(emulator, #"{"platform":"ios","app":"com.example.app","permission":"denied",\#(tracking)}"#)
        let foreground = try device(emulator, #"{"platform":"ios","app":"com.example.app","appState":"foreground",\#(tracking)}"#)
        let authorization = try apnsAuthorization(emulator)
        let payload = #"{"aps":{"alert":{"title":"Sale","body":"Half price"}},"_mId":"12345","_dId":"camp-7","url":"shop://sale"}"#
        let headers = [("authorization", authorization), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")]
        let answers = try emulator.h2(
            [provisional, denied, foreground].map { TestRequest("POST", "/3/device/\($0)", headers: headers, body: payload) })
        XCTAssertEqual(answers.map(\.status), [200, 200, 200], answers.map(\.text).joined())

        let quiet = try notification(emulator, provisional)
        XCTAssertEqual(display(quiet), "quiet provisional")
        XCTAssertEqual(lintCodes(quiet), ["adobe.mutable-content-missing", "link.scheme-not-declared"])
        let finding = try XCTUnwrap((quiet["lint"] as? [[String: Any]])?.last)
        XCTAssertEqual(finding["severity"] as? String, "error")
        XCTAssertEqual(finding["path"] as? String, "url")
        XCTAssertTrue((finding["message"] as? String ?? "").contains("shop"), "\(finding)")
        let hidden = try notification(emulator, denied)
        XCTAssertEqual(display(hidden), "not-shown permission-denied")
        XCTAssertEqual(lintCodes(hidden), ["adobe.mutable-content-missing"]) // its app declares no schemes: the link rule is quiet
        XCTAssertEqual(display(try notification(emulator, foreground)), "not-shown foreground-not-presented")

        // Only the displayed one can be tapped: one open, and no receive (no extension, no content-available).
        XCTAssertEqual(sink.wait(for: 1), 1)
        usleep(300_000)
        XCTAssertEqual(sink.requests.map(\.target), ["/r/?id=h3039,camp-7,2"])

        let report = try json(try emulator.get("/emulator/v1/report?format=json"))
        let campaigns = try XCTUnwrap(report["campaigns"] as? [[String: Any]])
        let camp = try XCTUnwrap(campaigns.first { $0["campaign"] as? String == "camp-7" }, "\(campaigns)")
        XCTAssertEqual(camp["display"] as? [String: Int], ["quiet": 1, "not-shown": 2])
        XCTAssertEqual(
            camp["displayReasons"] as? [String: Int],
            ["quiet provisional": 1, "not-shown permission-denied": 1, "not-shown foreground-not-presented": 1])
        XCTAssertEqual(camp["lint"] as? [String: Int], ["adobe.mutable-content-missing": 3, "link.scheme-not-declared": 1])
        XCTAssertEqual(
            camp["lintSeverity"] as? [String: String], ["adobe.mutable-content-missing": "warning", "link.scheme-not-declared": "error"])
        let text = try emulator.get("/emulator/v1/report?format=text").text
        XCTAssertTrue(text.contains("link.scheme-not-declared (error): 1"), text)
        XCTAssertTrue(text.contains("display: shown 0, quiet 1, not-shown 2"), text)
        let html = try emulator.get("/emulator/v1/report?format=html").text
        XCTAssertTrue(html.contains("SDK lint") && html.contains("adobe.mutable-content-missing"), html)
    }

    func testFCMDataMessagesAndAFleetsPermissionShares() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let tracking = #""tracking":{"preset":"pushwoosh","url":"\#(sink.url)","appCode":"APP-1","apiToken":"t"}"#
        // Half the fleet denied notifications, drawn from its seed.
        var r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/fleets",
                body:
                    #"{"platform":"android","app":"com.example","count":40,"seed":7,"permission":{"authorized":0.5,"denied":0.5},\#(tracking)}"#
            ))
        XCTAssertEqual(r.status, 201, r.text)
        let fleet = try json(r)
        XCTAssertEqual((fleet["states"] as? [String: Any])?["permission"] as? [String: Double], ["authorized": 0.5, "denied": 0.5])
        r = try emulator.get("/emulator/v1/fleets/fleet-1/tokens?limit=40")
        let tokens = try XCTUnwrap(try json(r)["tokens"] as? [String], r.text)
        XCTAssertEqual(tokens.count, 40)
        let headers = [("authorization", "Bearer ya29.display-test"), ("content-type", "application/json")]
        let send = "/v1/projects/demo-project/messages:send"
        // A Pushwoosh data message without its hash: rendered by the SDK, linted.
        let answers = try emulator.h2(
            tokens.map {
                TestRequest(
                    "POST", send, headers: headers,
                    body: #"{"message":{"token":"\#($0)","data":{"pw_msg":"1","title":"Hi","l":"http://example.com/x"}}}"#)
            })
        XCTAssertEqual(Set(answers.map(\.status)), [200], answers.first?.text ?? "")
        var outcomes: [String: Int] = [:]
        for t in tokens {
            let n = try notification(emulator, t)
            outcomes[display(n), default: 0] += 1
            XCTAssertEqual(lintCodes(n), ["pushwoosh.missing-hash", "link.not-https"])
        }
        XCTAssertEqual(outcomes.keys.sorted(), ["not-shown permission-denied", "shown sdk-rendered"])
        XCTAssertEqual(outcomes.values.reduce(0, +), 40)
        let shown = outcomes["shown sdk-rendered"] ?? 0
        XCTAssertGreaterThan(shown, 8)
        XCTAssertLessThan(shown, 32)
        // The same seed draws the same members: a device's permission is what its notification says.
        let first = try json(try emulator.get("/emulator/v1/devices/\(tokens[0])"))
        let expected = display(try notification(emulator, tokens[0])) == "shown sdk-rendered" ? "authorized" : "denied"
        XCTAssertEqual(first["permission"] as? String, expected)

        let report = try json(try emulator.get("/emulator/v1/report?format=json"))
        let totals = try XCTUnwrap(report["totals"] as? [String: Any])
        XCTAssertEqual(totals["display"] as? [String: Int], ["shown": shown, "not-shown": 40 - shown])
        XCTAssertEqual(totals["lint"] as? [String: Int], ["pushwoosh.missing-hash": 40, "link.not-https": 40])
    }

    /// Lint is never a rejection, not even with --strict-payload; bad device fields are refused.
    func testLintDoesNotRejectAndBadFieldsAreRefused() throws {
        let emulator = try TestEmulator(.inProcess, arguments: ["--strict-payload"])
        defer { emulator.stop() }
        let token = try device(
            emulator, #"{"platform":"ios","app":"com.example.app","tracking":{"preset":"braze","url":"http://127.0.0.1:9"}}"#)
        let authorization = try apnsAuthorization(emulator)
        let headers = [("authorization", authorization), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")]
        let r = try emulator.h2([
            TestRequest("POST", "/3/device/\(token)", headers: headers, body: #"{"aps":{"alert":"Hi","sound":"a.mp3"}}"#)
        ])[0]
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(lintCodes(try notification(emulator, token)), ["braze.not-braze", "sound.format"])
        for (body, message) in [
            (#"{"platform":"ios","app":"a","urlSchemes":["my app"]}"#, "urlSchemes must be URL schemes"),
            (#"{"platform":"ios","app":"a","sounds":"chime.caf"}"#, "sounds must be an array"),
            (#"{"platform":"ios","app":"a","appState":"asleep"}"#, "appState must be foreground, background, killed or offline"),
        ] {
            let bad = try emulator.http1(TestRequest("POST", "/emulator/v1/devices", body: body))
            XCTAssertEqual(bad.status, 400, body)
            XCTAssertTrue(bad.text.contains(message), bad.text)
        }
        let fleet = try emulator.http1(
            TestRequest("POST", "/emulator/v1/fleets", body: #"{"platform":"ios","app":"a","count":5,"permission":{"denied":0.3}}"#))
        XCTAssertEqual(fleet.status, 400)
        XCTAssertTrue(fleet.text.contains("permission shares must sum to 1"), fleet.text)
    }
}
