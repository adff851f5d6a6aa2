import APNs
import EmulatorTesting
import Fleet
import Foundation
import Pipeline
import PushCore
import XCTest

/// The pipeline end to end, in process: for each gateway, an accepted push, a rejected one and a
/// fault's injected answer, under each journal mode; and a toy third gateway that flows through
/// the same stages with nothing outside its own file.
final class PipelineTests: XCTestCase {
    static let apnsToken = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"

    /// A JSON object from an answer's body.
    func object(_ response: TestResponse, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any], response.text,
            file: file, line: line)
    }

    /// `/metrics`' value for one series, or nil.
    func series(_ metrics: String, _ labels: String) -> Int? {
        metrics.split(separator: "\n").first { $0.hasPrefix("pushemu_requests_total{\(labels)}") }
            .flatMap { $0.split(separator: " ").last }.flatMap { Int($0) }
    }

    /// The journal's stats once it has stored `expected` requests (the writer commits behind
    /// the answers: in groups, within its window), or as they stand after three seconds.
    func journalStats(_ emulator: TestEmulator, storedRequests expected: Int) throws -> [String: Any] {
        var journal: [String: Any] = [:]
        for _ in 0..<60 {
            journal = try XCTUnwrap(try object(try emulator.get("/emulator/v1/stats"))["journal"] as? [String: Any])
            if journal["storedRequests"] as? Int == expected { break }
            usleep(50_000)
        }
        return journal
    }

    /// A provider token signed with a key registered through the admin API.
    func apnsAuthorization(_ emulator: TestEmulator) throws -> String { try Self.apnsAuthorization(emulator) }

    static func apnsAuthorization(_ emulator: TestEmulator) throws -> String {
        let key = try XCTUnwrap(ES256.Key.generate())
        let body = "{\"teamId\":\"TEAM123456\",\"keyId\":\"KEY1234567\",\"publicKeyPem\":" + JSONWriter.quote(key.publicKeyPEM) + "}"
        let created = try emulator.http1(TestRequest("POST", "/emulator/v1/apns/keys", body: body))
        XCTAssertEqual(created.status, 201, created.text)
        let token = try XCTUnwrap(
            ProviderToken.make(
                key: key, keyID: "KEY1234567", teamID: "TEAM123456",
                issuedAt: Int64(Date().timeIntervalSince1970)))
        return "bearer " + token
    }

    struct Case {
        let provider: String
        let accepted: TestRequest
        let rejected: TestRequest
        let rejectedStatus: Int
        let rejectedReason: String
        let injected: TestRequest
        let injectedReason: String
    }

    func cases(_ emulator: TestEmulator) throws -> [Case] {
        let authorization = try apnsAuthorization(emulator)
        let apnsHeaders = [("authorization", authorization), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")]
        let payload = #"{"aps":{"alert":{"title":"Sale","body":"Half price"}}}"#
        var random = FastRandom(seed: 7)
        let fcmToken = DeviceLifecycle.randomToken(.android, &random)
        let fcmHeaders = [("authorization", "Bearer ya29.pipeline-test"), ("content-type", "application/json")]
        let message = #"{"message":{"token":"\#(fcmToken)","notification":{"title":"Hi"}}}"#
        let send = "/v1/projects/demo-project/messages:send"
        return [
            Case(
                provider: "apns",
                accepted: TestRequest("POST", "/3/device/\(Self.apnsToken)", headers: apnsHeaders, body: payload),
                rejected: TestRequest("POST", "/3/device/zz", headers: apnsHeaders, body: payload),
                rejectedStatus: 400, rejectedReason: "BadDeviceToken",
                injected: TestRequest(
                    "POST", "/3/device/\(Self.apnsToken)",
                    headers: apnsHeaders + [("x-pushemu-fault", "status=503;reason=ServiceUnavailable")], body: payload),
                injectedReason: "ServiceUnavailable"),
            Case(
                provider: "fcm",
                accepted: TestRequest("POST", send, headers: fcmHeaders, body: message),
                rejected: TestRequest("POST", send, headers: fcmHeaders, body: #"{"message":{"token":"\#(fcmToken)","bogus":1}}"#),
                rejectedStatus: 400, rejectedReason: "INVALID_ARGUMENT",
                injected: TestRequest("POST", send, headers: fcmHeaders + [("x-pushemu-fault", "errorCode=UNAVAILABLE")], body: message),
                injectedReason: "UNAVAILABLE"),
        ]
    }

    /// {accepted, rejected, fault answer} x journal {strict, relaxed, off}, for APNs and FCM: the
    /// answers, the notification log (only the accepted push), the metrics (one series each) and
    /// the journal (every answer, or none when off).
    func testEveryGatewayUnderEveryJournalMode() throws {
        for durability in ["strict", "relaxed", "off"] {
            let emulator = try TestEmulator(.inProcess, arguments: ["--durability", durability, "--allow-override-header"])
            defer { emulator.stop() }
            for test in try cases(emulator) {
                let context = "\(test.provider), journal \(durability)"
                let answers = try emulator.h2([test.accepted, test.rejected, test.injected])
                XCTAssertEqual(answers.map(\.status), [200, test.rejectedStatus, 503], "\(context): \(answers.map(\.text))")
                XCTAssertTrue(answers[1].text.contains(test.rejectedReason), "\(context): \(answers[1].text)")
                XCTAssertTrue(answers[2].text.contains(test.injectedReason), "\(context): \(answers[2].text)")

                let log = try object(try emulator.get("/emulator/v1/notifications?provider=\(test.provider)"))
                let kept = try XCTUnwrap(log["notifications"] as? [[String: Any]], context)
                XCTAssertEqual(kept.count, 1, "\(context): only the accepted push is logged")
                XCTAssertEqual(kept.first?["provider"] as? String, test.provider, context)

                let metrics = try emulator.get("/metrics").text
                let labels = "provider=\"\(test.provider)\",status="
                XCTAssertEqual(series(metrics, labels + "\"200\",reason=\"\""), 1, context)
                XCTAssertEqual(series(metrics, labels + "\"\(test.rejectedStatus)\",reason=\"\(test.rejectedReason)\""), 1, context)
                XCTAssertEqual(series(metrics, labels + "\"503\",reason=\"\(test.injectedReason)\""), 1, context)
            }
            let stats = try object(try emulator.get("/emulator/v1/stats"))
            if durability == "off" {
                XCTAssertTrue(stats["journal"] is NSNull, "journal off: \(stats)")
            } else {
                let journal = try journalStats(emulator, storedRequests: 6)
                XCTAssertEqual(journal["durability"] as? String, durability)
                XCTAssertEqual(journal["storedRequests"] as? Int, 6, "three answers per gateway journaled: \(journal)")
                let report = try object(try emulator.get("/emulator/v1/report?format=json"))
                XCTAssertTrue("\(report)".contains("apns") && "\(report)".contains("fcm"), "\(report)")
            }
            let deliveries = try XCTUnwrap(stats["deliveries"] as? [String: Any])
            XCTAssertEqual(deliveries["delivered"] as? Int, 2, "one device reached per gateway")
        }
    }

    /// A toy third gateway, registered only here, goes through the pipeline, the notification
    /// log, delivery, fault rules (matched by its provider name), the journal and the metrics.
    func testAToyGatewayIsAPlugIn() throws {
        let emulator = try TestEmulator(.inProcess, arguments: ["--durability", "strict"], gateways: [GatewayPlugin(ToyGateway())])
        defer { emulator.stop() }
        let push = TestRequest("POST", "/toy/v1/push/abcdefgh12", body: #"{"hello":"toy"}"#)
        let answers = try emulator.h2([push, TestRequest("POST", "/toy/v1/push/bad!", body: "{}")])
        XCTAssertEqual(answers.map(\.status), [200, 400])
        XCTAssertTrue(answers[0].text.hasPrefix("{\"id\":\""), answers[0].text)
        XCTAssertEqual(answers[1].text, #"{"error":"BadToken"}"#)

        // A fault rule for the toy's provider answers for it, and leaves APNs alone.
        let rule = #"{"match":{"provider":"toy","first":1},"effect":{"status":503,"reason":"Overloaded"}}"#
        XCTAssertEqual(try emulator.http1(TestRequest("POST", "/emulator/v1/faults", body: rule)).status, 201)
        let faulted = try emulator.h2([push, push])
        XCTAssertEqual(faulted.map(\.status), [503, 200], faulted.map(\.text).joined(separator: " "))
        XCTAssertEqual(faulted[0].text, #"{"error":"Overloaded"}"#)

        let log = try object(try emulator.get("/emulator/v1/notifications?provider=toy"))
        let kept = try XCTUnwrap(log["notifications"] as? [[String: Any]])
        XCTAssertEqual(kept.count, 2)
        XCTAssertEqual(Set(kept.compactMap { $0["provider"] as? String }), ["toy"])
        XCTAssertEqual(Set(kept.compactMap { $0["token"] as? String }), ["abcdefgh12"])

        let metrics = try emulator.get("/metrics").text
        XCTAssertEqual(series(metrics, #"provider="toy",status="200",reason="""#), 2, metrics)
        XCTAssertEqual(series(metrics, #"provider="toy",status="400",reason="BadToken""#), 1)
        XCTAssertEqual(series(metrics, #"provider="toy",status="503",reason="Overloaded""#), 1)
        XCTAssertTrue(metrics.contains(#"pushemu_request_duration_seconds_count{provider="toy"} 4"#), metrics)

        let journal = try journalStats(emulator, storedRequests: 4)
        XCTAssertEqual(journal["storedRequests"] as? Int, 4, "every toy answer journaled")
        let stats = try object(try emulator.get("/emulator/v1/stats"))
        XCTAssertEqual((stats["deliveries"] as? [String: Any])?["delivered"] as? Int, 2)
        let report = try emulator.get("/emulator/v1/report?format=json").text
        XCTAssertTrue(report.contains("\"toy\""), report)
    }

    /// The same test body in process and against the spawned binary: the admin API and an
    /// APNs push answer alike.
    func testTheSameBodyRunsInProcessAndLive() throws {
        for mode in TestEmulator.Mode.allCases {
            let emulator = try TestEmulator(mode)
            defer { emulator.stop() }
            XCTAssertEqual(try emulator.get("/healthz").text, #"{"status":"ok"}"#, mode.rawValue)
            let authorization = try apnsAuthorization(emulator)
            let answer = try emulator.h2([
                TestRequest(
                    "POST", "/3/device/\(Self.apnsToken)",
                    headers: [("authorization", authorization), ("apns-topic", "com.example.app")], body: #"{"aps":{}}"#)
            ])
            XCTAssertEqual(answer.first?.status, 200, "\(mode): \(answer.first?.text ?? "")")
            XCTAssertNotNil(answer.first?.header("apns-id"), mode.rawValue)
        }
    }
}
