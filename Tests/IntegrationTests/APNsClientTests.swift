import Foundation
import TestSupport
import XCTest

/// The APNs provider API driven by real clients against the real binary: aioapns (token and
/// certificate auth, no ALPN, `host` instead of `:authority`), curl over TLS and h2c, nghttp with
/// a client certificate, and the `h2` library for connection behaviour.
final class APNsClientTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static let ca = root + "/Certs/ca.pem"
    static var python: String { root + "/.venv/bin/python" }
    static let token = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"

    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.python), "run Scripts/install-deps to create .venv")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: dir)
    }

    /// `pushemu credentials apns` into this test's data dir; returns (teamId, keyId, keyFile).
    func credentials(_ extra: [String] = []) throws -> (String, String, String) {
        let r = try runCommand(
            ServerProcess.binaryPath,
            [
                "credentials", "apns", "--out", dir.path + "/keys",
                "--data-dir", dir.path + "/data",
            ] + extra, timeout: 10)
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: String])
        return (try XCTUnwrap(json["teamId"]), try XCTUnwrap(json["keyId"]), try XCTUnwrap(json["keyFile"]))
    }

    func jwt(_ team: String, _ kid: String, _ keyFile: String, iat: Int? = nil) throws -> String {
        var args = ["token", "apns", "--key", keyFile, "--key-id", kid, "--team-id", team]
        if let iat { args += ["--iat", String(iat)] }
        let r = try runCommand(ServerProcess.binaryPath, args, timeout: 10)
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func server(_ extra: [String] = []) throws -> ServerProcess {
        try ServerProcess(["--in-memory=false", "--data-dir", dir.path + "/data"] + extra)
    }

    func notifications(_ s: ServerProcess, _ query: String) throws -> [[String: Any]] {
        let r = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?\(query)"], timeout: 10)
        let obj = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], r.stdout)
        return try XCTUnwrap(obj["notifications"] as? [[String: Any]])
    }

    func results(_ r: CommandResult) throws -> [[String: Any]] {
        XCTAssertEqual(r.status, 0, r.stderr)
        return try r.stdout.split(separator: "\n").map {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    func testAioapnsWithProviderTokens() throws {
        let (team, kid, keyFile) = try credentials()
        let s = try server(["--apns-auth", "strict"])
        defer { s.stop() }
        // 40 concurrent pushes on a connection that starts with one stream, plus a bad token.
        let r = try runCommand(
            Self.python,
            [
                Self.root + "/Tests/Clients/aioapns_send.py", "\(s.httpsPort)", "token",
                keyFile, kid, team, "com.example.app", "40", "xyz",
            ], timeout: 60, environment: ["SSL_CERT_FILE": Self.ca])
        let out = try results(r)
        XCTAssertEqual(out.count, 41, r.stdout + r.stderr)
        XCTAssertEqual(out.prefix(40).filter { $0["ok"] as? Bool == true }.count, 40, r.stdout)
        XCTAssertEqual(out.last?["status"] as? String, "400")
        XCTAssertEqual(out.last?["description"] as? String, "BadDeviceToken")
        let got = try notifications(s, "provider=apns&limit=100")
        XCTAssertEqual(got.count, 40)
        let first = try XCTUnwrap(got.first)
        XCTAssertEqual(first["environment"] as? String, "sandbox", "localhost names no environment: the default, sandbox")
        let ids = Set(out.prefix(40).compactMap { $0["id"] as? String })
        XCTAssertEqual(Set(got.compactMap { $0["id"] as? String }), ids, "apns-id echoed and recorded")
        let payload = try XCTUnwrap(first["payload"] as? [String: Any])
        XCTAssertNotNil(payload["_mId"])
    }

    /// `Certs/apns-<environment>-client.pem` and its key in one file, as aioapns takes them.
    func clientCertificate(_ environment: String) throws -> URL {
        let combined = dir.appendingPathComponent("\(environment)-client.pem")
        let cert = try String(contentsOfFile: Self.root + "/Certs/apns-\(environment)-client.pem", encoding: .utf8)
        let key = try String(contentsOfFile: Self.root + "/Certs/apns-\(environment)-client-key.pem", encoding: .utf8)
        try (cert + key).write(to: combined, atomically: true, encoding: .utf8)
        return combined
    }

    func testAioapnsWithClientCertificate() throws {
        let combined = try clientCertificate("sandbox")
        let s = try server()
        defer { s.stop() }
        let r = try runCommand(
            Self.python,
            [
                Self.root + "/Tests/Clients/aioapns_send.py", "\(s.httpsPort)", "cert",
                combined.path, "5",
            ], timeout: 60, environment: ["SSL_CERT_FILE": Self.ca])
        let out = try results(r)
        XCTAssertEqual(out.count, 5, r.stdout + r.stderr)
        XCTAssertTrue(out.allSatisfy { $0["ok"] as? Bool == true }, r.stdout)
        let got = try notifications(s, "topic=com.example.app")
        XCTAssertEqual(got.count, 5)
    }

    func testCurlOverTLSAndH2C() throws {
        let (team, kid, keyFile) = try credentials()
        let s = try server()
        defer { s.stop() }
        let token = try jwt(team, kid, keyFile)
        let common = [
            "-sS", "-i", "-H", "authorization: bearer \(token)", "-H", "apns-topic: com.example.app",
            "-H", "apns-push-type: alert", "-H", "apns-id: 123e4567-e89b-12d3-a456-426614174000",
            "-d", #"{"aps":{"alert":"hi"}}"#,
        ]
        let tls = try runCommand(
            "curl",
            common + [
                "--http2", "--cacert", Self.ca, "--resolve", "api.push.apple.com:\(s.httpsPort):127.0.0.1",
                "https://api.push.apple.com:\(s.httpsPort)/3/device/\(Self.token)",
            ], timeout: 15)
        XCTAssertTrue(tls.stdout.hasPrefix("HTTP/2 200"), tls.stdout + tls.stderr)
        XCTAssertTrue(tls.stdout.contains("apns-id: 123e4567-e89b-12d3-a456-426614174000"), tls.stdout)
        XCTAssertFalse(tls.stdout.contains("apns-unique-id"), "production carries no apns-unique-id")
        // h2c: the host names no environment, so the default (sandbox) applies; the token is now
        // bound to production, so the sandbox says BadDeviceToken.
        let h2c = try runCommand(
            "curl", common + ["--http2-prior-knowledge", "http://127.0.0.1:\(s.httpPort)/3/device/\(Self.token)"], timeout: 15)
        XCTAssertTrue(h2c.stdout.hasPrefix("HTTP/2 400"), h2c.stdout)
        XCTAssertTrue(h2c.stdout.contains(#"{"reason":"BadDeviceToken"}"#), h2c.stdout)
        XCTAssertTrue(h2c.stdout.contains("apns-unique-id: "), h2c.stdout)
        let other = String(repeating: "1", count: 64)
        let ok = try runCommand(
            "curl", common + ["--http2-prior-knowledge", "http://127.0.0.1:\(s.httpPort)/3/device/\(other)"], timeout: 15)
        XCTAssertTrue(ok.stdout.hasPrefix("HTTP/2 200"), ok.stdout)
        // Uninstall through the admin API: 410 with the time.
        let del = try runCommand(
            "curl", ["-sS", "-X", "DELETE", "http://127.0.0.1:\(s.httpPort)/emulator/v1/devices/\(other)"], timeout: 10)
        XCTAssertTrue(del.stdout.contains("\"installed\":false"), del.stdout)
        let gone = try runCommand(
            "curl", common + ["--http2-prior-knowledge", "http://127.0.0.1:\(s.httpPort)/3/device/\(other)"], timeout: 15)
        XCTAssertTrue(gone.stdout.hasPrefix("HTTP/2 410"), gone.stdout)
        XCTAssertTrue(gone.stdout.contains(#"{"reason":"Unregistered","timestamp":1"#), gone.stdout)
        // Oversized bodies are refused by the transport before buffering, still in APNs format.
        let big = try runCommand(
            "curl",
            [
                "-sS", "-i", "--http2-prior-knowledge", "-H", "apns-id: 123e4567-e89b-12d3-a456-426614174000",
                "--data-binary", String(repeating: "x", count: 6000),
                "http://127.0.0.1:\(s.httpPort)/3/device/\(other)",
            ], timeout: 15)
        XCTAssertTrue(big.stdout.hasPrefix("HTTP/2 413"), big.stdout)
        XCTAssertTrue(big.stdout.contains(#"{"reason":"PayloadTooLarge"}"#), big.stdout)
        XCTAssertTrue(big.stdout.contains("apns-id: 123e4567-e89b-12d3-a456-426614174000"), big.stdout)
        // Unknown paths under an APNs host are BadPath.
        let path = try runCommand(
            "curl",
            [
                "-sS", "-i", "--http2", "--cacert", Self.ca, "--resolve", "api.push.apple.com:\(s.httpsPort):127.0.0.1",
                "https://api.push.apple.com:\(s.httpsPort)/4/nothing",
            ], timeout: 15)
        XCTAssertTrue(path.stdout.hasPrefix("HTTP/2 404"), path.stdout)
        XCTAssertTrue(path.stdout.contains(#"{"reason":"BadPath"}"#), path.stdout)
    }

    func testStreamsRiseAfterFirstValidTokenAndShutdownGoAway() throws {
        let (team, kid, keyFile) = try credentials()
        let s = try server()
        let token = try jwt(team, kid, keyFile)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.python)
        p.arguments = [
            Self.root + "/Tests/Clients/apns_settings.py", "\(s.httpsPort)", Self.ca, "api.sandbox.push.apple.com",
            token, "com.example.app", "--hold", "5",
        ]
        let out = dir.appendingPathComponent("settings.out")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = p.standardOutput
        try p.run()
        usleep(2_000_000)
        XCTAssertEqual(s.stop(signal: SIGTERM, timeout: 10), 0)
        p.waitUntilExit()
        let text = try String(contentsOf: out, encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "SETTINGS max_concurrent_streams=1", text)
        XCTAssertTrue(lines.contains("RESPONSE status=403 body={\"reason\":\"MissingProviderToken\"}"), text)
        XCTAssertTrue(lines.contains("RESPONSE status=200 body="), text)
        XCTAssertTrue(lines.contains("SETTINGS max_concurrent_streams=1000"), text)
        XCTAssertTrue(lines.contains("GOAWAY debug={\"reason\":\"Shutdown\"}"), text)
    }

    func testWrongEnvironmentCertificateGetsGoAway() throws {
        let s = try server()
        defer { s.stop() }
        let r = try runCommand(
            "nghttp",
            [
                "-nv", "--cert", Self.root + "/Certs/apns-sandbox-client.pem",
                "--key", Self.root + "/Certs/apns-sandbox-client-key.pem",
                "-H", ":method: POST", "-H", ":authority: api.push.apple.com", "-d", Self.root + "/Tests/Fixtures/apns-payload.json",
                "https://127.0.0.1:\(s.httpsPort)/3/device/\(Self.token)",
            ], timeout: 15)
        XCTAssertTrue(r.stdout.contains(":status: 403"), r.stdout)
        XCTAssertTrue(r.stdout.contains("recv GOAWAY frame"), r.stdout)
        XCTAssertTrue(r.stdout.contains("{\"reason\":\"BadCertificateEnvironment\"}"), r.stdout)
        // The answer's DATA (with END_STREAM) before the GOAWAY, so every client can read it.
        let data = try XCTUnwrap(r.stdout.range(of: "recv DATA frame"), r.stdout)
        let goAway = try XCTUnwrap(r.stdout.range(of: "recv GOAWAY frame"), r.stdout)
        XCTAssertLessThan(data.lowerBound, goAway.lowerBound, "HEADERS, DATA, then GOAWAY: \(r.stdout)")
    }

    func testAdminKeyRegistrationAndStrictMode() throws {
        let s = try server(["--apns-auth", "strict"])
        defer { s.stop() }
        let created = try runCommand(
            "curl",
            [
                "-sS", "-w", "\n%{http_code}", "-d", #"{"teamId":"ABCDE12345"}"#,
                "http://127.0.0.1:\(s.httpPort)/emulator/v1/apns/keys",
            ], timeout: 10)
        let parts = created.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(parts.last, "201", created.stdout)
        let json = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(parts.dropLast().joined(separator: "\n").utf8)) as? [String: String])
        XCTAssertEqual(json["teamId"], "ABCDE12345")
        let kid = try XCTUnwrap(json["keyId"])
        let pem = try XCTUnwrap(json["privateKeyPem"])
        XCTAssertTrue(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let keyFile = dir.appendingPathComponent("AuthKey.p8")
        try pem.write(to: keyFile, atomically: true, encoding: .utf8)
        let token = try jwt("ABCDE12345", kid, keyFile.path)
        let push = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                "-H", "authorization: bearer \(token)", "-H", "apns-topic: com.example.app",
                "-d", #"{"aps":{}}"#, "http://127.0.0.1:\(s.httpPort)/3/device/\(Self.token)",
            ], timeout: 10)
        XCTAssertEqual(push.stdout, "200")
        // Strict mode refuses a token signed by a key it never saw.
        let (team2, kid2, file2) = try credentials(["--data-dir", dir.path + "/elsewhere"])
        let stranger = try jwt(team2, kid2, file2)
        let refused = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-H", "authorization: bearer \(stranger)",
                "-H", "apns-topic: com.example.app", "-d", #"{"aps":{}}"#,
                "http://127.0.0.1:\(s.httpPort)/3/device/\(Self.token)",
            ], timeout: 10)
        XCTAssertEqual(refused.stdout, #"{"reason":"InvalidProviderToken"}"#)
        let list = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/apns/keys"], timeout: 10)
        XCTAssertTrue(list.stdout.contains("\"keyId\":\"\(kid)\""), list.stdout)
        let bad = try runCommand(
            "curl", ["-sS", "-d", #"{"teamId":"short"}"#, "http://127.0.0.1:\(s.httpPort)/emulator/v1/apns/keys"], timeout: 10)
        XCTAssertEqual(bad.stdout, #"{"error":{"code":400,"message":"teamId must be 10 letters or digits"}}"#)
    }

    func testCredentialsRegisteredWhileRunningAreFound() throws {
        let s = try server(["--apns-auth", "strict"])
        defer { s.stop() }
        let (team, kid, keyFile) = try credentials() // after the server started, same data dir
        let token = try jwt(team, kid, keyFile)
        let push = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                "-H", "authorization: bearer \(token)", "-H", "apns-topic: com.example.app",
                "-d", #"{"aps":{}}"#, "http://127.0.0.1:\(s.httpPort)/3/device/\(Self.token)",
            ], timeout: 10)
        XCTAssertEqual(push.stdout, "200")
    }
}

extension APNsClientTests {
    /// apns2-up (the PyAPNs2 family, on hyper) signs `iat: time.time()`, a float: it works
    /// against Apple, and so under `--apns-auth strict` here (it was refused as
    /// InvalidProviderToken before NumericDate fractions were accepted).
    func testPyAPNs2FamilyClientWithItsFloatIssuedAt() throws {
        let (team, kid, keyFile) = try credentials()
        let s = try server(["--apns-auth", "strict"])
        defer { s.stop() }
        let r = try runCommand(
            Self.python,
            [
                Self.root + "/Tests/Clients/apns2_send.py", "\(s.httpsPort)", Self.ca, keyFile, kid, team, Self.token,
                "com.example.app",
            ], timeout: 60)
        XCTAssertEqual(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "sent", r.stdout + r.stderr)
        let log = try runCommand(
            "curl", ["-sS", "--max-time", "10", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?provider=apns"], timeout: 15)
        XCTAssertTrue(log.stdout.contains("Hello from apns2"), log.stdout)
    }
}

extension APNsClientTests {
    /// The answer that ends a connection comes before its GOAWAY. aioapns (on Python's h2) with
    /// the production certificate against the sandbox host reads 403 BadCertificateEnvironment;
    /// it used to see GOAWAY ahead of the answer's DATA, retry and give up (MaxAttemptsExceeded).
    func testAioapnsReadsTheAnswerThatEndsTheConnection() throws {
        let combined = try clientCertificate("production")
        let s = try server()
        defer { s.stop() }
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/aioapns_send.py", "\(s.httpsPort)", "cert", combined.path, "1"],
            timeout: 60, environment: ["SSL_CERT_FILE": Self.ca])
        let out = try results(r)
        XCTAssertEqual(out.count, 1, r.stdout + r.stderr)
        XCTAssertEqual(out.first?["status"] as? String, "403", r.stdout + r.stderr)
        XCTAssertEqual(out.first?["description"] as? String, "BadCertificateEnvironment", r.stdout)
    }

    /// httpx (on h2) reads the answer that spends the connection's error budget, then goes on
    /// on a new connection; the GOAWAY came after that answer's DATA.
    func testAnH2ClientReadsTheAnswerThatSpendsTheErrorBudget() throws {
        let s = try server(["--apns-max-errors", "10"]) // BadDeviceToken weighs 5: the second answer spends it
        defer { s.stop() }
        let r = try runCommand(Self.python, [Self.root + "/Tests/Clients/httpx_budget.py", "\(s.httpPort)", "3"], timeout: 60)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, Array(repeating: #"400 {"reason":"BadDeviceToken"}"#, count: 3), r.stdout + r.stderr)
    }
}
