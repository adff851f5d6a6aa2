import Foundation
import TestSupport
import XCTest

/// The intercepting proxy on the cleartext port: unmodified senders reach the emulator with only
/// the environment `pushemu env` prints; any other host is refused and nothing is forwarded.
final class ProxyTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static var python: String { root + "/.venv/bin/python" }
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: dir)
    }

    /// `pushemu env`'s `export NAME='value'` lines as a dictionary.
    func environment(port: Int, dataDir: String) throws -> [String: String] {
        let r = try runCommand(ServerProcess.binaryPath, ["env", "--http-port", String(port), "--data-dir", dataDir], timeout: 20)
        XCTAssertEqual(r.status, 0, r.stderr)
        var env: [String: String] = [:]
        for line in r.stdout.split(separator: "\n") where line.hasPrefix("export ") {
            let assignment = line.dropFirst("export ".count)
            guard let eq = assignment.firstIndex(of: "=") else { continue }
            env[String(assignment[..<eq])] = String(assignment[assignment.index(after: eq)...].dropFirst().dropLast())
        }
        return env
    }

    func testUnmodifiedSendersThroughTheProxy() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.python), "run Scripts/install-deps to create .venv")
        // Strict FCM auth: each FCM success proves the sender got its access token from the
        // emulator's token endpoint, reached as https://oauth2.googleapis.com/token.
        let data = dir.path + "/data"
        let s = try ServerProcess(["--in-memory=false", "--data-dir", data, "--fcm-auth", "strict"])
        let cred = dir.path + "/service-account.json"
        let c = try runCommand(
            ServerProcess.binaryPath,
            ["credentials", "fcm", "--project", "proxy-proj", "--out", cred, "--token-uri", "google", "--data-dir", data], timeout: 20)
        XCTAssertEqual(c.status, 0, c.stderr)
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: cred))) as? [String: Any]
        XCTAssertEqual(file?["token_uri"] as? String, "https://oauth2.googleapis.com/token")

        var env = try environment(port: s.httpPort, dataDir: data)
        XCTAssertEqual(env["HTTPS_PROXY"], "http://127.0.0.1:\(s.httpPort)")
        XCTAssertEqual(env["NO_PROXY"], "localhost,127.0.0.1,::1")
        let bundle = try XCTUnwrap(env["SSL_CERT_FILE"])
        XCTAssertEqual(env["REQUESTS_CA_BUNDLE"], bundle)
        let bundleText = try String(contentsOfFile: bundle, encoding: .utf8)
        XCTAssertTrue(
            bundleText.contains(
                try String(contentsOfFile: Self.root + "/Certs/ca.pem", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertGreaterThan(bundleText.components(separatedBy: "BEGIN CERTIFICATE").count, 3, "the system's CAs are in the bundle")
        env["PYTHONWARNINGS"] = "ignore"

        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/proxy_senders.py", cred, "proxy-proj"], timeout: 180, environment: env)
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data((r.stdout.split(separator: "\n").last.map(String.init) ?? "").utf8))
                as? [String: Any])

        XCTAssertTrue((out["admin_send"] as? String)?.hasPrefix("projects/proxy-proj/messages/0:") == true, "\(out)")
        XCTAssertEqual((out["admin_send_each"] as? [String: Int])?["success"], 2, "\(out)")
        XCTAssertEqual((out["admin_subscribe"] as? [String: Int])?["success"], 2, "\(out)")
        XCTAssertTrue(
            ((out["pyfcm_notify"] as? [String: Any])?["name"] as? String)?.hasPrefix("projects/proxy-proj/messages/") == true, "\(out)")
        XCTAssertEqual((out["async_firebase_send"] as? [String: Any])?["success"] as? Bool, true, "\(out)")
        let sandbox = try XCTUnwrap(out["httpx_apns_sandbox"] as? [String: Any], "\(out)")
        XCTAssertEqual(sandbox["status"] as? Int, 200, "\(out)")
        XCTAssertEqual(sandbox["http_version"] as? String, "HTTP/2")
        // The same token on the production host: APNs's answer for a token of the other environment.
        let production = try XCTUnwrap(out["httpx_apns_production"] as? [String: Any], "\(out)")
        XCTAssertEqual(production["status"] as? Int, 400)
        XCTAssertEqual(production["body"] as? String, "{\"reason\":\"BadDeviceToken\"}")
        XCTAssertEqual((out["curl_apns"] as? [String: Any])?["out"] as? String, "200 2", "\(out)")
        for refused in ["refused_httpx", "refused_requests"] {
            let message = ((out[refused] as? [String: Any])?["error"] as? [String: Any])?["message"] as? String ?? ""
            XCTAssertTrue(message.contains("403"), "\(refused): \(out[refused] ?? "nil")")
        }

        // What the emulator recorded: the APNs push under the sandbox environment, SNI included.
        let (status, body) = try adminRequest(s, "GET", "/emulator/v1/notifications?provider=apns&limit=10")
        XCTAssertEqual(status, 200)
        let list = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        let notes = try XCTUnwrap(list["notifications"] as? [[String: Any]])
        let accepted = notes.first { ($0["id"] as? String) == (sandbox["apns_id"] as? String) }
        XCTAssertNotNil(accepted, body)
        XCTAssertEqual(accepted?["environment"] as? String, "sandbox", body)
        let (_, fcmBody) = try adminRequest(s, "GET", "/emulator/v1/notifications?provider=fcm&limit=100")
        XCTAssertEqual(fcmBody.components(separatedBy: "\"provider\":\"fcm\"").count - 1, 5, fcmBody)
    }

    /// A client certificate inside a tunnel authenticates as on the TLS listener (its CA asked).
    /// kalyke-apns 1.5.0, unchanged, signs `"iat"` as a string of digits: accepted under strict
    /// APNs auth (refused as InvalidProviderToken before round 3), through the proxy.
    func testKalykeAPNsSendsThroughTheProxy() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.python), "run Scripts/install-deps to create .venv")
        let data = dir.path + "/data"
        let s = try ServerProcess(["--in-memory=false", "--data-dir", data, "--apns-auth", "strict"])
        defer { s.stop() }
        let c = try runCommand(
            ServerProcess.binaryPath,
            ["credentials", "apns", "--data-dir", data, "--out", dir.path, "--team-id", "TEAM123456", "--key-id", "KEY1234567"],
            timeout: 20)
        XCTAssertEqual(c.status, 0, c.stderr)
        var env = try environment(port: s.httpPort, dataDir: data)
        env["PYTHONWARNINGS"] = "ignore"
        let token = String(repeating: "ab", count: 32)
        let r = try runCommand(
            Self.python,
            [Self.root + "/Tests/Clients/kalyke_send.py", dir.path + "/AuthKey_KEY1234567.p8", "KEY1234567", "TEAM123456", token],
            timeout: 60, environment: env)
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.stdout.split(separator: "\n")
        XCTAssertTrue(lines.first?.hasPrefix("sent ") == true, r.stdout + r.stderr)
        XCTAssertEqual(lines.dropFirst().first, "refused BadDeviceToken", r.stdout)
        let latest = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications/latest"], timeout: 10)
        XCTAssertTrue(latest.stdout.contains(token) && latest.stdout.contains("kalyke"), latest.stdout)
    }

    func testCertificateAuthenticationThroughATunnel() throws {
        let s = try ServerProcess()
        let token = String(repeating: "c3", count: 32)
        let r = try runCommand(
            "curl",
            [
                "-sS", "--http2", "-x", "http://127.0.0.1:\(s.httpPort)", "--cacert", Self.root + "/Certs/ca.pem",
                "--cert", Self.root + "/Certs/apns-sandbox-client.pem", "--key", Self.root + "/Certs/apns-sandbox-client-key.pem",
                "-H", "apns-topic: com.example.app", "-d", "{\"aps\":{\"alert\":\"cert\"}}", "-w", "%{http_code} %{http_version}",
                "--max-time", "10", "https://api.sandbox.push.apple.com/3/device/\(token)",
            ], timeout: 20)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "200 2", r.stderr)
        // curl -x to Apple's sandbox host: answered by the APNs emulation, environment sandbox.
        let (status, body) = try adminRequest(s, "GET", "/emulator/v1/notifications?provider=apns&limit=1")
        XCTAssertEqual(status, 200)
        XCTAssertTrue(body.contains("\"environment\":\"sandbox\""), body)
        XCTAssertTrue(body.contains("\"token\":\"\(token)\""), body)
    }

    func testOnlyInterceptedHostsAreTunnelled() throws {
        let s = try ServerProcess(["--intercept-host", "push.example.com"])
        func exchange(_ text: String, port: Int? = nil) throws -> String {
            let c = try RawClient(port: port ?? s.httpPort)
            try c.send(text)
            return c.read(until: "\r\n\r\n")
        }
        let refused = try RawClient(port: s.httpPort)
        try refused.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        let answer = refused.readAll()
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 403 "), answer)
        XCTAssertTrue(answer.contains("--intercept-host"), answer)
        XCTAssertTrue(answer.contains("never forwards"), answer)
        XCTAssertTrue(
            try exchange("CONNECT push.example.com:443 HTTP/1.1\r\nHost: push.example.com:443\r\n\r\n").hasPrefix("HTTP/1.1 200 "))
        XCTAssertTrue(
            try exchange("CONNECT FCM.GoogleAPIs.com.:443 HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 200 "), "case and a trailing dot")
        XCTAssertTrue(try exchange("CONNECT fcm.googleapis.com HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("HTTP/1.1 400 "), "no port")
        XCTAssertTrue(try exchange("CONNECT fcm.googleapis.com:99999 HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(try exchange("CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("HTTP/1.1 400 "), "origin-form")
        // Absolute-form: served for intercepted hosts and this machine, refused for the rest.
        XCTAssertTrue(try exchange("GET http://example.com/healthz HTTP/1.1\r\nHost: example.com\r\n\r\n").hasPrefix("HTTP/1.1 403 "))
        XCTAssertTrue(
            try exchange("GET http://localhost:\(s.httpPort)/healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").hasPrefix("HTTP/1.1 200 "))
        let fcm = try exchange(
            "POST http://fcm.googleapis.com/v1/projects/p/messages:send HTTP/1.1\r\nHost: fcm.googleapis.com\r\nContent-Length: 2\r\n\r\n{}"
        )
        XCTAssertTrue(fcm.hasPrefix("HTTP/1.1 401 "), fcm)
        // Not on the TLS listener: a tunnel in a tunnel is not a thing pushemu serves.
        let tls = try runCommand(
            "curl",
            [
                "-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", "-X", "CONNECT", "--request-target", "fcm.googleapis.com:443",
                "--http1.1", "https://127.0.0.1:\(s.httpsPort)",
            ], timeout: 20)
        XCTAssertEqual(tls.stdout, "405", tls.stderr)
        // The tunnel's certificate names the host and chains to the development CA.
        let cert = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", "http://127.0.0.1:\(s.httpPort)", "--cacert",
                Self.root + "/Certs/ca.pem",
                "https://push.example.com/healthz", "--max-time", "10",
            ], timeout: 20)
        XCTAssertEqual(cert.stdout, "200", cert.stderr)
        XCTAssertEqual(s.stop(), 0)
    }
}
