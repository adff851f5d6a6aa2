import EmulatorTesting
import Foundation
import TestSupport
import XCTest

/// `GET /emulator/v1/events`: Server-Sent Events over HTTP/1.1 and HTTP/2, their filters, and
/// the browser guard on the admin API.
final class EventStreamTests: XCTestCase {
    static let token = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"

    /// The `data:` objects of the stream's events of `kind`.
    func events(_ stream: String, _ kind: String) throws -> [[String: Any]] {
        try stream.components(separatedBy: "\n\n").compactMap { block -> [String: Any]? in
            let lines = block.split(separator: "\n").map(String.init)
            guard lines.contains("event: \(kind)"), let data = lines.first(where: { $0.hasPrefix("data: ") }) else { return nil }
            return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(data.dropFirst(6).utf8)) as? [String: Any], data)
        }
    }

    func subscribe(_ emulator: TestEmulator, _ query: String) throws -> RawClient {
        let client = try RawClient(port: emulator.httpPort, timeout: 5)
        try client.send("GET /emulator/v1/events?\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let head = client.read(until: ": pushemu event stream\n")
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200 OK\r\n"), head)
        XCTAssertTrue(head.contains("content-type: text/event-stream; charset=utf-8\r\n"), head)
        XCTAssertTrue(head.contains("connection: close\r\n"), head)
        XCTAssertFalse(head.contains("content-length"), head)
        return client
    }

    func testStreamOverHTTP1CarriesPushesFaultsAndDeviceChanges() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let auth = try PipelineTests.apnsAuthorization(emulator)
        let all = try subscribe(emulator, "")
        let onlyRejected = try subscribe(emulator, "types=rejected")
        let onlyOther = try subscribe(emulator, "q=token:\(String(repeating: "ab", count: 32))")

        func push(_ token: String) throws -> Int {
            try emulator.h2([
                TestRequest(
                    "POST", "/3/device/\(token)",
                    headers: [("authorization", auth), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")],
                    body: #"{"aps":{"alert":"Hi"}}"#)
            ])[0].status
        }
        XCTAssertEqual(try push(Self.token), 200)
        XCTAssertEqual(try push("00"), 400)
        let rule = #"{"match":{"provider":"apns","first":1},"effect":{"status":503,"reason":"ServiceUnavailable"}}"#
        let created = try emulator.http1(TestRequest("POST", "/emulator/v1/faults", body: rule))
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual(try push(Self.token), 503)
        XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/devices/\(Self.token)")).status, 200)

        let stream = all.read(until: "event: device", count: 2)
        let accepted = try events(stream, "accepted")
        XCTAssertEqual(accepted.count, 1, stream)
        XCTAssertEqual(accepted.first?["token"] as? String, Self.token)
        XCTAssertEqual(accepted.first?["status"] as? Int, 200)
        XCTAssertEqual(accepted.first?["topic"] as? String, "com.example.app")
        XCTAssertEqual((accepted.first?["display"] as? [String: Any])?["outcome"] as? String, "shown", stream)
        XCTAssertEqual((accepted.first?["id"] as? String)?.count, 36)
        let rejected = try events(stream, "rejected")
        XCTAssertEqual(rejected.map { $0["reason"] as? String }, ["BadDeviceToken", "ServiceUnavailable"], stream)
        XCTAssertEqual(rejected.last?["fault"] as? String, try events(stream, "fault").first?["rule"] as? String)
        let devices = try events(stream, "device")
        // The first push auto-created the device; the DELETE uninstalled it.
        XCTAssertEqual(devices.map { $0["change"] as? String }, ["created", "uninstalled"], stream)
        XCTAssertTrue(stream.contains("\nid: ") || stream.hasPrefix("id: "), stream)

        let rejectedOnly = onlyRejected.read(until: "event: rejected", count: 2)
        XCTAssertEqual(try events(rejectedOnly, "rejected").count, 2, rejectedOnly)
        XCTAssertEqual(try events(rejectedOnly, "accepted").count, 0, rejectedOnly)

        // Its filter matched nothing: the stream is still open and quiet.
        XCTAssertEqual(try push(String(repeating: "ab", count: 32)), 200)
        let other = onlyOther.read(until: "event: accepted")
        XCTAssertEqual(try events(other, "accepted").map { $0["token"] as? String }, [String(repeating: "ab", count: 32)])
        XCTAssertFalse(other.contains(Self.token), other)
    }

    func testStreamOverHTTP2EndsWithTheClient() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let auth = try PipelineTests.apnsAuthorization(emulator)
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = [
            "-sN", "--http2-prior-knowledge", "--max-time", "3", "http://127.0.0.1:\(emulator.httpPort)/emulator/v1/events?types=accepted",
        ]
        let out = Pipe()
        curl.standardOutput = out
        try curl.run()
        // Wait until it is subscribed (bounded).
        for _ in 0..<200 {
            if try emulator.get("/emulator/v1/stats").text.contains(#""subscribers":1"#) { break }
            usleep(10_000)
        }
        XCTAssertTrue(try emulator.get("/emulator/v1/stats").text.contains(#""subscribers":1"#))
        let r = try emulator.h2([
            TestRequest(
                "POST", "/3/device/\(Self.token)",
                headers: [("authorization", auth), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")],
                body: #"{"aps":{"alert":"Hi"}}"#)
        ])[0]
        XCTAssertEqual(r.status, 200)
        curl.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(try events(text, "accepted").count, 1, text)
        // curl gave up at --max-time: the stream closed and its subscription went with it.
        for _ in 0..<200 {
            if try emulator.get("/emulator/v1/stats").text.contains(#""subscribers":0"#) { break }
            usleep(10_000)
        }
        XCTAssertTrue(try emulator.get("/emulator/v1/stats").text.contains(#""subscribers":0"#))
    }

    func testBadFiltersAreRefused() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        for (query, message) in [
            ("types=pushed", "type must be one of"), ("q=campaign:x", "campaign: is a search over stored notifications"),
            ("q=hello", "matches no words"), ("q=colour:red", "unknown event filter term colour:"),
            ("q=status:abc", "status: takes"),
        ] {
            let r = try emulator.get("/emulator/v1/events?" + query)
            XCTAssertEqual(r.status, 400, query)
            XCTAssertTrue(r.text.contains(message), "\(query): \(r.text)")
        }
    }

    func testBrowserGuard() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let port = emulator.httpPort
        func send(_ method: String, host: String, _ headers: [(String, String)]) throws -> TestResponse {
            try emulator.h2([TestRequest(method, "/emulator/v1/faults", headers: headers)], authority: host)[0]
        }
        // Another site's page cannot change state.
        let crossSite = try send(
            "DELETE", host: "127.0.0.1:\(port)", [("origin", "https://evil.example"), ("sec-fetch-site", "cross-site")])
        XCTAssertEqual(crossSite.status, 403, crossSite.text)
        XCTAssertTrue(crossSite.text.contains("cannot change pushemu's state"), crossSite.text)
        let otherOrigin = try send("DELETE", host: "127.0.0.1:\(port)", [("origin", "http://localhost:9999")])
        XCTAssertEqual(otherOrigin.status, 403, otherOrigin.text)
        // DNS rebinding: a browser at a name that is not a loopback one, even for reads.
        let rebound = try send("GET", host: "evil.example:\(port)", [("sec-fetch-site", "same-origin")])
        XCTAssertEqual(rebound.status, 403, rebound.text)
        // The dashboard's own requests, and tools without browser headers, pass.
        XCTAssertEqual(
            try send("DELETE", host: "127.0.0.1:\(port)", [("origin", "http://127.0.0.1:\(port)"), ("sec-fetch-site", "same-origin")])
                .status,
            200)
        XCTAssertEqual(try send("DELETE", host: "localhost:\(port)", [("origin", "http://localhost:\(port)")]).status, 200)
        XCTAssertEqual(try send("DELETE", host: "evil.example", []).status, 200)
        XCTAssertEqual(try send("GET", host: "[::1]:\(port)", [("sec-fetch-site", "cross-site")]).status, 200)
    }
}
