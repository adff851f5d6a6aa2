import Foundation
import TestSupport
import XCTest

/// The FCM HTTP v1 API driven by real clients against the real binary: firebase-admin (PyPI)
/// with credentials from `pushemu credentials fcm` (its access token fetched from pushemu's
/// /token by google-auth), over HTTP/1.1 (requests) and HTTP/2 over TLS (httpx); curl over h2c.
final class FCMClientTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static let ca = root + "/Certs/ca.pem"
    static var python: String { root + "/.venv/bin/python" }

    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.python), "run Scripts/install-deps to create .venv")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: dir)
    }

    /// The same token scheme as Tests/Clients/fcm_admin.py.
    static func token(_ i: Int) -> String {
        "e" + String(format: "%021d", i) + ":APA91b" + String(repeating: String(format: "Tok%03d", i), count: 19) + "x"
    }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func notifications(_ s: ServerProcess, _ query: String) throws -> [[String: Any]] {
        let r = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?\(query)"], timeout: 10)
        return try XCTUnwrap(try json(r.stdout)["notifications"] as? [[String: Any]])
    }

    func testFirebaseAdminSDK() throws {
        // Strict auth: only tokens pushemu issued are accepted, so every success below proves
        // google-auth fetched its access token from pushemu's /token.
        let s = try ServerProcess(["--in-memory=false", "--data-dir", dir.path + "/data", "--fcm-auth", "strict"])
        let cred = dir.path + "/sa.json"
        let c = try runCommand(
            ServerProcess.binaryPath,
            [
                "credentials", "fcm", "--project", "demo-proj", "--out", cred,
                "--token-uri", "http://127.0.0.1:\(s.httpPort)/token",
                "--data-dir", dir.path + "/data",
            ], timeout: 20)
        XCTAssertEqual(c.status, 0, c.stderr)
        let r = try runCommand(
            Self.python,
            [
                Self.root + "/Tests/Clients/fcm_admin.py", "http://127.0.0.1:\(s.httpPort)",
                "https://127.0.0.1:\(s.httpsPort)", cred, "demo-proj",
            ],
            timeout: 120, environment: ["SSL_CERT_FILE": Self.ca, "PYTHONWARNINGS": "ignore"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "")

        let name = try XCTUnwrap(out["send"] as? String)
        XCTAssertTrue(name.hasPrefix("projects/demo-proj/messages/0:"), name)
        XCTAssertEqual(out["dry_run"] as? String, "projects/demo-proj/messages/fake_message_id")
        XCTAssertTrue((out["fid_send"] as? String)?.hasPrefix("projects/demo-proj/messages/0:") == true, "\(out)")
        XCTAssertEqual((out["fid_unknown"] as? [String: Any])?["type"] as? String, "UnregisteredError", "\(out)")
        let each = try XCTUnwrap(out["send_each"] as? [String: Any])
        XCTAssertEqual(each["success"] as? Int, 3)
        XCTAssertEqual(Set(try XCTUnwrap(each["ids"] as? [String])).count, 3)
        XCTAssertEqual((out["subscribe"] as? [String: Int])?["success"], 2)
        XCTAssertEqual((out["subscribe_legacy"] as? [String: Int])?["success"], 2)
        let partial = try XCTUnwrap(out["subscribe_legacy_partial"] as? [String: Any])
        XCTAssertEqual(partial["failure"] as? Int, 1)
        XCTAssertEqual(((partial["errors"] as? [[Any]])?.first?.last as? String), "INVALID_ARGUMENT")
        XCTAssertEqual((out["unsubscribe_legacy"] as? [String: Int])?["success"], 1)
        XCTAssertEqual((out["unsubscribe"] as? [String: Int])?["success"], 1)
        XCTAssertEqual((out["oversized"] as? [String: Any])?["type"] as? String, "InvalidArgumentError")
        XCTAssertEqual((out["unregistered"] as? [String: Any])?["type"] as? String, "UnregisteredError")
        XCTAssertEqual((out["unregistered_dry_run"] as? [String: Any])?["type"] as? String, "UnregisteredError")
        let async = try XCTUnwrap(out["send_each_async"] as? [String: Any])
        XCTAssertEqual(async["success"] as? Int, 3)
        XCTAssertEqual(async["http_versions"] as? [String], ["HTTP/2"])

        // What was delivered: news ended with only token 1; sports && !news matched 2 and 3.
        let topic = try notifications(s, "provider=fcm&topic=news")
        XCTAssertEqual(topic.compactMap { $0["token"] as? String }, [Self.token(1)])
        XCTAssertEqual(topic.first?["name"] as? String, out["topic_send"] as? String)
        let cond = try notifications(
            s,
            "provider=fcm&topic=" + "'sports' in topics && !('news' in topics)"
                .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertEqual(Set(cond.compactMap { $0["token"] as? String }), [Self.token(2), Self.token(3)])
        XCTAssertEqual(Set(cond.compactMap { $0["name"] as? String }), [try XCTUnwrap(out["condition_send"] as? String)])
        let first = try notifications(s, "token=" + Self.token(1)).first
        XCTAssertEqual(first?["name"] as? String, name)
        let payload = try XCTUnwrap(first?["payload"] as? [String: Any])
        XCTAssertEqual((payload["data"] as? [String: String])?["_mId"], "12345")
        XCTAssertEqual((payload["android"] as? [String: Any])?["priority"] as? String, "high")
        // Nothing from the dry run or the failures was delivered.
        XCTAssertEqual(try notifications(s, "provider=fcm&limit=1000").count, 1 + 1 + 3 + 1 + 2 + 3)
        // The fid send reached token 1's device, not a new one.
        let viaFID = try notifications(s, "token=" + Self.token(1)).filter {
            (($0["payload"] as? [String: Any])?["data"] as? [String: String])?["via"] == "fid"
        }
        XCTAssertEqual(viaFID.count, 1)
        XCTAssertEqual(viaFID.first?["name"] as? String, out["fid_send"] as? String)
        XCTAssertEqual(s.stop(), 0)
    }

    func testServiceAccountAdminEndpointAndCurl() throws {
        let s = try ServerProcess()
        let base = "http://127.0.0.1:\(s.httpPort)"
        var r = try runCommand(
            "curl",
            [
                "-sS", "-w", "\n%{http_code}", "-X", "POST", base + "/emulator/v1/fcm/service-accounts",
                "-d", #"{"projectId":"curl-project"}"#,
            ], timeout: 20)
        var lines = r.stdout.split(separator: "\n")
        XCTAssertEqual(lines.last, "201")
        let sa = try json(lines.dropLast().joined(separator: "\n"))
        XCTAssertEqual(sa["type"] as? String, "service_account")
        XCTAssertEqual(sa["token_uri"] as? String, base.replacingOccurrences(of: "http://", with: "http://") + "/token")
        XCTAssertTrue((sa["private_key"] as? String)?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
        r = try runCommand(
            "curl", ["-sS", "-X", "POST", base + "/emulator/v1/fcm/service-accounts", "-d", #"{"projectId":"Bad Id"}"#], timeout: 10)
        XCTAssertTrue(r.stdout.contains("\"code\":400"), r.stdout)

        // h2c prior knowledge, a foreign bearer (lenient default).
        let token = Self.token(9)
        r = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-w", "\n%{http_code} %{http_version}",
                "-H", "authorization: Bearer fake", "-H", "content-type: application/json",
                "-d", #"{"message":{"token":"\#(token)","notification":{"title":"h2c"}}}"#,
                base + "/v1/projects/curl-project/messages:send",
            ], timeout: 10)
        lines = r.stdout.split(separator: "\n")
        XCTAssertEqual(lines.last, "200 2", r.stdout)
        XCTAssertTrue(r.stdout.contains("\"name\": \"projects/curl-project/messages/0:"), r.stdout)
        // No credentials: 401 with WWW-Authenticate.
        r = try runCommand("curl", ["-sS", "-i", "-d", "{}", base + "/v1/projects/curl-project/messages:send"], timeout: 10)
        XCTAssertTrue(r.stdout.hasPrefix("HTTP/1.1 401"), r.stdout)
        XCTAssertTrue(r.stdout.lowercased().contains("www-authenticate: bearer realm=\"https://accounts.google.com/\""), r.stdout)
        // The retired legacy send answers as Google's does since its shutdown: 200, every target
        // DeprecatedApi (JSON, or plain text for a form body); the batch endpoint is gone (404).
        r = try runCommand(
            "curl",
            [
                "-sS", "-w", "\n%{http_code}", "-H", "content-type: application/json", "-H", "authorization: key=AAAAlegacy",
                "-d", #"{"registration_ids":["a","b","c"],"data":{"k":"v"}}"#, base + "/fcm/send",
            ], timeout: 10)
        XCTAssertTrue(r.stdout.hasSuffix("\n200"), r.stdout)
        let legacy = try json(String(r.stdout.split(separator: "\n")[0]))
        XCTAssertEqual(legacy["success"] as? Int, 0)
        XCTAssertEqual(legacy["failure"] as? Int, 3)
        XCTAssertEqual(
            (legacy["results"] as? [[String: String]])?.map { $0["error"] }, ["DeprecatedApi", "DeprecatedApi", "DeprecatedApi"])
        XCTAssertNotNil(legacy["multicast_id"] as? Int)
        r = try runCommand(
            "curl", ["-sS", "-H", "authorization: key=AAAAlegacy", "-d", "registration_id=abc&data.k=v", base + "/fcm/send"], timeout: 10)
        XCTAssertEqual(r.stdout, "Error=DeprecatedApi\n")
        r = try runCommand("curl", ["-sS", "-w", "\n%{http_code}", "-d", "{}", base + "/batch"], timeout: 10)
        XCTAssertTrue(r.stdout.hasSuffix("\n404") && r.stdout.contains("shut down"), r.stdout)
        // The Instance ID API refuses a legacy server key as Google's does.
        r = try runCommand(
            "curl",
            [
                "-sS", "-w", "\n%{http_code}", "-H", "authorization: key=AAAAlegacy", "-H", "content-type: application/json",
                "-d", #"{"to":"/topics/x","registration_tokens":["\#(token)"]}"#, base + "/iid/v1:batchAdd",
            ], timeout: 10)
        XCTAssertEqual(
            r.stdout, #"{"error":"Authenticating using server key is deprecated. Please use an OAuth2 token instead."}"# + "\n401")
        // The device is visible and can be uninstalled through the admin API.
        r = try runCommand("curl", ["-sS", "-X", "DELETE", base + "/emulator/v1/devices/" + token], timeout: 10)
        let device = try json(r.stdout)
        XCTAssertEqual(device["platform"] as? String, "android")
        XCTAssertEqual(device["installed"] as? Bool, false)
        XCTAssertEqual(device["project"] as? String, "curl-project")
        XCTAssertEqual(s.stop(), 0)
    }

    func testFCMHostGetsOneHundredStreams() throws {
        let s = try ServerProcess()
        for (sni, expected) in [("fcm.googleapis.com", "100"), ("localhost", "1000")] {
            let r = try runCommand(Self.python, [Self.root + "/Tests/Clients/h2_settings.py", "\(s.httpsPort)", Self.ca, sni], timeout: 20)
            XCTAssertEqual(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "max_concurrent_streams=\(expected)", r.stderr)
        }
        let q = try ServerProcess(["--fcm-streams", "7"])
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/h2_settings.py", "\(q.httpsPort)", Self.ca, "fcm.googleapis.com"], timeout: 20)
        XCTAssertEqual(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "max_concurrent_streams=7")
    }
}
