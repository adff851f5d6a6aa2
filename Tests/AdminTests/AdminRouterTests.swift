import Emulator
import Foundation
import Transport
import XCTest

/// The admin API through its router alone: an emulator built and started without listening,
/// its routes driven by an `EmbeddedTransport` (no socket, no port). What the groups promise:
/// the probes never limited or held, `/emulator/v1` behind the rate limit and the browser
/// guard, named parameters, one error shape for 404, 405, 413 and bad bodies.
final class AdminRouterTests: XCTestCase {
    var emulator: Emulator!
    var transport: EmbeddedTransport!

    func start(_ arguments: [String] = []) throws {
        emulator = try Emulator(
            configuration: try ServeOptions.parse(["--in-memory", "--threads", "1", "--http-port", "0", "--https-port", "0"] + arguments))
        try emulator.start(listening: false)
        transport = try EmbeddedTransport(router: emulator.router)
    }

    override func tearDown() {
        emulator?.shutdown()
        emulator = nil
        transport = nil
    }

    @discardableResult
    func call(
        _ method: HTTPMethod, _ target: String, _ body: String? = nil, headers: [(String, String)] = [],
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> EmbeddedTransport.Answer {
        let answer = transport.request(method, target, headers: headers, body: body.map { Array($0.utf8) } ?? [], timeout: 10)
        return try XCTUnwrap(answer, "no answer to \(method.name) \(target)", file: file, line: line)
    }

    func object(_ a: EmbeddedTransport.Answer) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(a.body)) as? [String: Any], a.text)
    }

    func errorMessage(_ a: EmbeddedTransport.Answer) throws -> String {
        let error = try XCTUnwrap(try object(a)["error"] as? [String: Any], a.text)
        XCTAssertEqual(error["code"] as? Int, a.status)
        return try XCTUnwrap(error["message"] as? String)
    }

    func testProbesAndErrorShapes() throws {
        try start()
        XCTAssertEqual(try call(.get, "/healthz").text, #"{"status":"ok"}"#)
        let metrics = try call(.get, "/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.text.contains("pushemu_open_connections"), metrics.text)
        XCTAssertTrue(metrics.text.contains("pushemu_state_memory_limit_bytes"), metrics.text)

        let missing = try call(.get, "/emulator/v1/nothing-here")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(try errorMessage(missing), "no route for GET /emulator/v1/nothing-here")
        let wrongMethod = try call(.put, "/emulator/v1/stats")
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.header("allow"), "GET")
        XCTAssertEqual(try errorMessage(wrongMethod), "PUT is not allowed on /emulator/v1/stats")
        let tooLarge = try call(.post, "/emulator/v1/devices", String(repeating: " ", count: 65 * 1024))
        XCTAssertEqual(tooLarge.status, 413)
        XCTAssertEqual(try errorMessage(tooLarge), "the body of POST /emulator/v1/devices is too large")
    }

    func testDeviceResourceWithNamedParameters() throws {
        try start()
        let token = String(repeating: "ab", count: 32)
        let made = try call(.post, "/emulator/v1/devices", #"{"platform":"ios","app":"com.example","token":"\#(token)"}"#)
        XCTAssertEqual(made.status, 201, made.text)
        let read = try call(.get, "/emulator/v1/devices/\(token)")
        XCTAssertEqual(read.status, 200, read.text)
        XCTAssertEqual(try object(read)["token"] as? String, token)
        // The typed reader's one message format, through the route.
        let bad = try call(.patch, "/emulator/v1/devices/\(token)", #"{"behavior":{"opnRate":0.5}}"#)
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(try errorMessage(bad), "unknown field behavior.opnRate (did you mean behavior.openRate?)")
        let online = try call(.post, "/emulator/v1/devices/\(token):online")
        XCTAssertNotEqual(try object(online)["appState"] as? String, "offline", online.text)
        let offline = try call(.post, "/emulator/v1/devices/\(token):offline")
        XCTAssertEqual(try object(offline)["appState"] as? String, "offline", offline.text)
        XCTAssertEqual(try call(.get, "/emulator/v1/devices/\(token)/notifications").text, #"{"notifications":[],"next":null}"#)
        XCTAssertEqual(try call(.get, "/emulator/v1/devices/unknown-token").status, 404)
    }

    func testFleetsStatsAndReset() throws {
        try start()
        let fleet = try object(
            try call(.post, "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example","count":3,"seed":7}"#))
        let id = try XCTUnwrap(fleet["id"] as? String)
        let tokens = try object(try call(.get, "/emulator/v1/fleets/\(id)/tokens?limit=2"))
        XCTAssertEqual((tokens["tokens"] as? [String])?.count, 2)
        XCTAssertEqual(tokens["count"] as? Int, 3)
        XCTAssertEqual(try call(.get, "/emulator/v1/fleets/no-such/tokens").status, 404)
        let stats = try object(try call(.get, "/emulator/v1/stats"))
        XCTAssertNotNil(stats["stateMemory"], "\(stats)")
        XCTAssertEqual(try call(.post, "/emulator/v1/reset").text, #"{"reset":true}"#)
        XCTAssertEqual((try object(try call(.get, "/emulator/v1/fleets"))["fleets"] as? [Any])?.count, 0)
    }

    func testKeysAndServiceAccountsOnTheirWorkers() throws {
        try start()
        let key = try call(.post, "/emulator/v1/apns/keys", #"{"teamId":"TEAM123456","keyId":"KEY1234567"}"#)
        XCTAssertEqual(key.status, 201, key.text)
        XCTAssertTrue(key.text.contains("BEGIN PRIVATE KEY"), key.text)
        // Made on the slow-work thread, answered back through the loop.
        let account = try call(.post, "/emulator/v1/fcm/service-accounts", #"{"projectId":"demo-project"}"#)
        XCTAssertEqual(account.status, 201, account.text)
        XCTAssertEqual(try object(account)["project_id"] as? String, "demo-project")
        let listed = try object(try call(.get, "/emulator/v1/fcm/service-accounts"))
        XCTAssertEqual((listed["serviceAccounts"] as? [Any])?.count, 1)
        let badKey = try call(.post, "/emulator/v1/apns/keys", #"{"environment":"staging"}"#)
        XCTAssertEqual(try errorMessage(badKey), "environment must be sandbox or production")
    }

    func testBrowserGuardOnEveryGroup() throws {
        try start()
        let crossSite = [("origin", "https://evil.example"), ("sec-fetch-site", "cross-site")]
        let write = try call(.post, "/emulator/v1/reset", headers: crossSite)
        XCTAssertEqual(write.status, 403)
        XCTAssertEqual(try errorMessage(write), "a cross-site request from a browser cannot change pushemu's state")
        // A rebinding page (its own name for 127.0.0.1) cannot even read, probes included.
        let rebound = [("host", "evil.example"), ("sec-fetch-site", "same-origin")]
        for target in ["/healthz", "/emulator/v1/devices", "/"] {
            let a = try call(.get, target, headers: rebound)
            XCTAssertEqual(a.status, 403, target)
            XCTAssertTrue(try errorMessage(a).contains("only at a loopback name"), target)
        }
        // The dashboard's own same-origin page passes.
        XCTAssertEqual(try call(.get, "/emulator/v1/stats", headers: [("sec-fetch-site", "same-origin")]).status, 200)
    }

    func testRateLimitSparesTheProbes() throws {
        try start(["--admin-rate", "3"])
        var statuses: [Int] = []
        for _ in 0..<6 { statuses.append(try call(.get, "/emulator/v1/stats").status) }
        XCTAssertEqual(statuses.filter { $0 == 429 }.count, 3, "\(statuses)")
        let limited = try call(.get, "/emulator/v1/devices")
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.header("retry-after"), "1")
        for _ in 0..<10 {
            XCTAssertEqual(try call(.get, "/healthz").status, 200)
            XCTAssertEqual(try call(.get, "/metrics").status, 200)
        }
    }

    func testEventStreamIsAStream() throws {
        try start()
        let head = try XCTUnwrap(transport.request(.get, "/emulator/v1/events", until: { _ in true }))
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(head.streaming)
        XCTAssertEqual(head.header("content-type"), "text/event-stream; charset=utf-8")
        let bad = try call(.get, "/emulator/v1/events?q=campaign:x")
        XCTAssertEqual(bad.status, 400)
    }
}
