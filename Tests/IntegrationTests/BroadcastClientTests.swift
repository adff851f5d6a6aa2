import Foundation
import TestSupport
import XCTest

/// Live Activity channels and broadcasts over TLS with client certificates (curl), on the
/// channel-management listeners of `--apns-manage-ports` and on the push port by host name.
final class BroadcastClientTests: XCTestCase {
    static let certs = ServerProcess.repositoryRoot + "/Certs"
    static let manageHost = "api-manage-broadcast.sandbox.push.apple.com"

    /// curl over HTTP/2 and TLS with a client certificate; the status line, headers and body.
    func curl(_ url: String, host: String, port: Int, certificate: String = "sandbox", _ extra: [String] = []) throws -> String {
        let r = try runCommand(
            "curl",
            [
                "-sS", "-i", "--http2", "--cacert", Self.certs + "/ca.pem",
                "--cert", Self.certs + "/apns-\(certificate)-client.pem", "--key", Self.certs + "/apns-\(certificate)-client-key.pem",
                "--resolve", "\(host):\(port):127.0.0.1",
            ] + extra + [url], timeout: 15)
        return r.stdout + r.stderr
    }

    func header(_ name: String, in response: String) -> String? {
        response.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name + ":") }
            .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
    }

    func testCertificateConnectionsManageChannelsAndBroadcast() throws {
        let sandboxPort = try freeLocalPort()
        var productionPort = try freeLocalPort()
        while productionPort == sandboxPort { productionPort = try freeLocalPort() }
        let s = try ServerProcess(["--apns-manage-ports=\(sandboxPort),\(productionPort)"])
        defer { s.stop() }
        let create = ["-X", "POST", "-d", #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#]
        var r = try curl(
            "https://\(Self.manageHost):\(sandboxPort)/1/apps/com.example.app/channels", host: Self.manageHost, port: sandboxPort, create)
        XCTAssertTrue(r.hasPrefix("HTTP/2 201"), r)
        let channel = try XCTUnwrap(header("apns-channel-id", in: r), r)
        XCTAssertNotNil(header("apns-request-id", in: r))

        // The sandbox listener serves the sandbox without a host name; production is another environment.
        r = try curl("https://127.0.0.1:\(sandboxPort)/1/apps/com.example.app/all-channels", host: "127.0.0.1", port: sandboxPort)
        XCTAssertTrue(r.contains("HTTP/2 200") && r.contains(channel), r)
        r = try curl(
            "https://localhost:\(productionPort)/1/apps/com.example.app/all-channels", host: "localhost", port: productionPort,
            certificate: "production")
        XCTAssertTrue(r.contains("HTTP/2 200") && r.contains(#"{"channels":[]}"#), r)

        // A certificate for another environment is read as a 403 answer, not a broken connection.
        r = try curl(
            "https://\(Self.manageHost):\(sandboxPort)/1/apps/com.example.app/all-channels", host: Self.manageHost, port: sandboxPort,
            certificate: "production")
        XCTAssertTrue(r.hasPrefix("HTTP/2 403"), r)
        XCTAssertTrue(r.contains(#"{"reason":"BadCertificateEnvironment"}"#), r)
        // A certificate for another app.
        r = try curl(
            "https://\(Self.manageHost):\(sandboxPort)/1/apps/com.other.app/all-channels", host: Self.manageHost, port: sandboxPort)
        XCTAssertTrue(r.hasPrefix("HTTP/2 403") && r.contains(#"{"reason":"TopicMismatch"}"#), r)

        // An activity on a device listens to the channel; a broadcast on the push port reaches it.
        let device = try adminRequest(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.example.app"}"#)
        XCTAssertEqual(device.0, 201, device.1)
        let token = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: Data(device.1.utf8)) as? [String: Any])?["token"] as? String)
        let started = try adminRequest(
            s, "POST", "/emulator/v1/devices/\(token)/activities",
            #"{"attributesType":"ScoreAttributes","contentState":{"score":0},"channel":"\#(channel)"}"#)
        XCTAssertEqual(started.0, 201, started.1)
        let broadcastHost = "api-broadcast.sandbox.push.apple.com"
        let now = Int(Date().timeIntervalSince1970)
        r = try curl(
            "https://\(broadcastHost):\(s.httpsPort)/4/broadcasts/apps/com.example.app", host: broadcastHost, port: s.httpsPort,
            [
                "-H", "apns-channel-id: \(channel)", "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 10",
                "-d", #"{"aps":{"timestamp":\#(now),"event":"update","content-state":{"score":3}}}"#,
            ])
        XCTAssertTrue(r.hasPrefix("HTTP/2 200"), r)
        XCTAssertNotNil(header("apns-request-id", in: r))
        XCTAssertNotNil(header("apns-unique-id", in: r))
        let inbox = try adminRequest(s, "GET", "/emulator/v1/notifications?token=\(token)")
        XCTAssertEqual(inbox.0, 200)
        let activities = try adminRequest(s, "GET", "/emulator/v1/devices/\(token)/activities")
        XCTAssertTrue(activities.1.contains(#""contentState":{"score":3}"#), activities.1)

        // Push-to-start is a liveactivity push: token auth only, so a certificate is refused.
        let start = try adminRequest(s, "POST", "/emulator/v1/devices/\(token)/push-to-start", #"{"attributesType":"ScoreAttributes"}"#)
        let startToken = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: Data(start.1.utf8)) as? [String: Any])?["token"] as? String, start.1)
        let pushHost = "api.sandbox.push.apple.com"
        r = try curl(
            "https://\(pushHost):\(s.httpsPort)/3/device/\(startToken)", host: pushHost, port: s.httpsPort,
            [
                "-H", "apns-push-type: liveactivity", "-H", "apns-topic: com.example.app.push-type.liveactivity",
                "-d",
                #"{"aps":{"timestamp":\#(now),"event":"start","attributes-type":"ScoreAttributes","attributes":{},"content-state":{}}}"#,
            ])
        XCTAssertTrue(r.hasPrefix("HTTP/2 400") && r.contains(#"{"reason":"TopicDisallowed"}"#), r)

        // Read and delete with the certificate.
        let channelURL = "https://\(Self.manageHost):\(sandboxPort)/1/apps/com.example.app/channels"
        r = try curl(channelURL, host: Self.manageHost, port: sandboxPort, ["-H", "apns-channel-id: \(channel)"])
        XCTAssertTrue(r.hasPrefix("HTTP/2 200") && r.contains(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#), r)
        r = try curl(channelURL, host: Self.manageHost, port: sandboxPort, ["-X", "DELETE", "-H", "apns-channel-id: \(channel)"])
        XCTAssertTrue(r.hasPrefix("HTTP/2 204"), r)
        r = try curl(channelURL, host: Self.manageHost, port: sandboxPort, ["-H", "apns-channel-id: \(channel)"])
        XCTAssertTrue(r.hasPrefix("HTTP/2 400") && r.contains("ChannelNotRegistered"), r)
    }

    /// A token connection to the management host starts with one stream (as APNs does for
    /// token connections) and gets the full limit after its first valid token, read by Python's h2.
    func testTokenConnectionToTheManagementHostGetsItsStreams() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-manage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let jwt = try makeProviderToken(in: dir, keyStore: dir + "/data")
        let s = try ServerProcess(["--data-dir", dir + "/data", "--in-memory=false", "--apns-auth", "strict"])
        defer { s.stop() }
        let python = ServerProcess.repositoryRoot + "/.venv/bin/python"
        let r = try runCommand(
            python,
            [
                ServerProcess.repositoryRoot + "/Tests/Clients/manage_streams.py", "\(s.httpsPort)", Self.certs + "/ca.pem",
                Self.manageHost, "com.example.app", jwt,
            ], timeout: 20)
        XCTAssertEqual(
            r.stdout.trimmingCharacters(in: .whitespacesAndNewlines), #"limits=1,1000 status=200 body={"channels":[]}"#, r.stderr)
    }

    func testActivityCommands() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let server = ["--server", "http://127.0.0.1:\(s.httpPort)"]
        func pushemu(_ args: [String]) throws -> [String: Any] {
            let r = try runCommand(ServerProcess.binaryPath, args + server + ["--json"], timeout: 10)
            XCTAssertEqual(r.status, 0, r.stderr)
            return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], r.stdout)
        }
        let device = try pushemu([
            "devices", "add", "--platform", "ios", "--app", "com.example.app", "--fcm-token", "new", "--project", "p1",
        ])
        let token = try XCTUnwrap(device["token"] as? String)
        XCTAssertNotNil(device["fcmToken"] as? String)
        let started = try pushemu(["activity", "start", token, "--type", "ScoreAttributes", "--content-state", #"{"score":1}"#])
        XCTAssertEqual((started["pushToken"] as? String)?.count, 160)
        let id = try XCTUnwrap(started["id"] as? String)
        let start = try pushemu(["activity", "push-to-start", token, "--type", "ScoreAttributes"])
        XCTAssertEqual(start["attributesType"] as? String, "ScoreAttributes")
        XCTAssertEqual((try pushemu(["activity", "list", token])["activities"] as? [Any])?.count, 1)
        XCTAssertEqual(try pushemu(["activity", "end", token, "--activity", id])["state"] as? String, "ended")
        // A channel that does not exist is refused.
        let r = try runCommand(
            ServerProcess.binaryPath, ["activity", "subscribe", token, "--activity", id, "--channel", "AAAAAAAAAAAAAAAAAAAAAA=="] + server,
            timeout: 10)
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("404"), r.stderr)
    }
}
