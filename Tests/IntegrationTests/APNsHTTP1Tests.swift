import Foundation
import TestSupport
import XCTest

/// The APNs provider API is HTTP/2 only: an HTTP/1.1 request gets what Apple's front end sends,
/// an HTTP/2 SETTINGS and GOAWAY(PROTOCOL_ERROR) naming the request, then the connection closes;
/// over TLS, Apple's host names agree h2 alone in ALPN. `--apns-http1` serves HTTP/1.1 instead.
final class APNsHTTP1Tests: XCTestCase {
    static let ca = ServerProcess.repositoryRoot + "/Certs/ca.pem"

    func curl(_ args: [String]) throws -> CommandResult {
        try runCommand("curl", ["-sS", "--max-time", "15"] + args, timeout: 20)
    }

    /// The frames a raw HTTP/1.1 request gets: (type, error code, debug text) of each.
    func frames(_ bytes: [UInt8]) -> [(UInt8, UInt32, String)] {
        var out: [(UInt8, UInt32, String)] = []
        var i = 0
        while i + 9 <= bytes.count {
            let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            let type = bytes[i + 3]
            guard i + 9 + length <= bytes.count else { break }
            let payload = Array(bytes[(i + 9)..<(i + 9 + length)])
            if type == 7, payload.count >= 8 {
                let code = payload[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                out.append((type, code, String(decoding: payload[8...], as: UTF8.self)))
            } else {
                out.append((type, 0, ""))
            }
            i += 9 + length
        }
        return out
    }

    func testHTTP11RequestGetsAGoawayAsFromApple() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let c = try RawClient(port: s.httpPort)
        let body = "{\"aps\":{\"alert\":\"hi\"}}"
        try c.send(
            "POST /3/device/\(String(repeating: "a", count: 64)) HTTP/1.1\r\nHost: localhost\r\napns-topic: com.example\r\n"
                + "content-length: \(body.utf8.count)\r\n\r\n\(body)")
        let answer = c.readAllBytes()
        let got = frames(answer)
        XCTAssertEqual(got.map(\.0), [4, 7], "SETTINGS then GOAWAY: \(answer)")
        XCTAssertEqual(got.last?.1, 1, "PROTOCOL_ERROR")
        XCTAssertTrue(
            got.last?.2.hasPrefix("Unexpected HTTP/1.x request: POST /3/device/\(String(repeating: "a", count: 64))") ?? false,
            got.last?.2 ?? "")
        XCTAssertTrue(got.last?.2.contains("--apns-http1") ?? false)
        // curl reads it as Apple's: not an HTTP/1.1 response.
        let viaCurl = try curl(["--http1.1", "-X", "POST", "-d", body, "http://127.0.0.1:\(s.httpPort)/3/device/abc"])
        XCTAssertNotEqual(viaCurl.status, 0)
        XCTAssertTrue(viaCurl.stderr.contains("HTTP/0.9"), viaCurl.stderr)
        // The same server still serves HTTP/1.1 elsewhere (admin, FCM) and APNs over h2c.
        XCTAssertEqual(try curl(["--http1.1", "http://127.0.0.1:\(s.httpPort)/healthz"]).stdout, "{\"status\":\"ok\"}")
        let h2 = try curl([
            "--http2-prior-knowledge", "-w", " %{http_code}", "-X", "POST", "-d", body, "http://127.0.0.1:\(s.httpPort)/3/device/abc",
        ])
        XCTAssertEqual(h2.stdout, "{\"reason\":\"BadDeviceToken\"} 400", "h2c reaches the gateway")
        // Said once on stderr, naming the flag.
        _ = try curl(["--http1.1", "-X", "POST", "-d", body, "http://127.0.0.1:\(s.httpPort)/3/device/def"])
        s.stop()
        XCTAssertEqual(s.stderr.components(separatedBy: "--apns-http1").count - 1, 1, s.stderr)
    }

    func testTLSUnderApplesNameAgreesH2Only() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let apple = "api.sandbox.push.apple.com"
        let url = "https://\(apple):\(s.httpsPort)/3/device/abc"
        // An HTTP/1.1-only client gets no protocol agreed and sends its request line: the GOAWAY.
        let old = try curl(["--http1.1", "-v", "--cacert", Self.ca, "--resolve", "\(apple):\(s.httpsPort):127.0.0.1", "-d", "{}", url])
        XCTAssertNotEqual(old.status, 0, old.stderr)
        XCTAssertFalse(old.stderr.contains("ALPN: server accepted http/1.1"), old.stderr)
        // Offering both, h2 is agreed.
        let both = try curl(["--http2", "-v", "--cacert", Self.ca, "--resolve", "\(apple):\(s.httpsPort):127.0.0.1", "-d", "{}", url])
        XCTAssertTrue(both.stderr.contains("ALPN: server accepted h2"), both.stderr)
        // localhost keeps http/1.1 for the admin API.
        let local = try curl(["--http1.1", "-v", "--cacert", Self.ca, "https://localhost:\(s.httpsPort)/healthz"])
        XCTAssertEqual(local.stdout, "{\"status\":\"ok\"}", local.stderr)
    }

    func testApnsHTTP1FlagServesHTTP11() throws {
        let s = try ServerProcess(["--apns-http1"])
        defer { s.stop() }
        let apple = "api.sandbox.push.apple.com"
        let plain = try curl([
            "--http1.1", "-w", " %{http_code} %{http_version}", "-d", "{}",
            "http://127.0.0.1:\(s.httpPort)/3/device/abc",
        ])
        XCTAssertEqual(plain.stdout, "{\"reason\":\"BadDeviceToken\"} 400 1.1", plain.stderr)
        let tls = try curl([
            "--http1.1", "-w", " %{http_code} %{http_version}", "--cacert", Self.ca, "--resolve",
            "\(apple):\(s.httpsPort):127.0.0.1", "-d", "{}", "https://\(apple):\(s.httpsPort)/3/device/abc",
        ])
        XCTAssertEqual(tls.stdout, "{\"reason\":\"BadDeviceToken\"} 400 1.1", tls.stderr)
    }
}
