import Foundation
import TestSupport
import XCTest

/// `pushemu-load`, the load generator of personalised pushes: every request differs, every one
/// is answered, and the journal reads each one's campaign (from the tokens its gateway parsed,
/// since no memo applies to bodies that differ).
final class LoadGeneratorTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    /// Beside the `pushemu` the tests run (a release one when CI names it), else the debug build's.
    var loadBinary: String {
        get throws {
            let beside = URL(fileURLWithPath: ServerProcess.binaryPath).deletingLastPathComponent().path + "/pushemu-load"
            if FileManager.default.isExecutableFile(atPath: beside) { return beside }
            let debug = ServerProcess.repositoryRoot + "/.build/debug/pushemu-load"
            guard FileManager.default.isExecutableFile(atPath: debug) else {
                throw XCTSkip("pushemu-load is not built (swift build builds it)")
            }
            return debug
        }
    }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func load(_ arguments: [String], body: String) throws -> CommandResult {
        let file = dir.appendingPathComponent("body-\(UUID().uuidString).json")
        try Data(body.utf8).write(to: file)
        return try runCommand(try loadBinary, ["-n", "300", "-c", "3", "-m", "16", "-d", file.path] + arguments, timeout: 60)
    }

    /// The campaign's count in `/emulator/v1/campaigns`, once the journal has it.
    func campaignCount(_ s: ServerProcess, _ name: String, expecting: Int) throws -> Int? {
        let deadline = Date().addingTimeInterval(20)
        var sent: Int?
        repeat {
            let (code, body) = try adminRequest(s, "GET", "/emulator/v1/campaigns?campaign=\(name)")
            XCTAssertEqual(code, 200, body)
            sent = (try json(body)["campaigns"] as? [[String: Any]])?.first { $0["campaign"] as? String == name }?["sent"] as? Int
            if sent == expecting { break }
            usleep(50_000)
        } while Date() < deadline
        return sent
    }

    func testPersonalisedAPNsAndFCMPushesAreEachTheirOwnAndCountedInTheirCampaign() throws {
        let s = try ServerProcess([])
        let jwt = try makeProviderToken(in: dir.path, keyStore: dir.path + "/keys")
        let apns = try load(
            [
                "-H", "authorization: bearer \(jwt)", "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                "http://127.0.0.1:\(s.httpPort)/3/device/\(String(repeating: "ab", count: 32))",
            ],
            body:
                #"{"aps":{"alert":{"title":"{name}, order {n}","body":"shipped"}},"_mId":"{hex}","_dId":"load-apns","link":"shop://o/{n}"}"#
        )
        XCTAssertEqual(apns.status, 0, apns.stderr)
        XCTAssertTrue(apns.stdout.contains("status codes: 300 2xx, 0 3xx, 0 4xx, 0 5xx"), apns.stdout)
        XCTAssertTrue(apns.stdout.contains("bodies: each request its own"), apns.stdout)

        let fcm = try load(
            ["-H", "authorization: Bearer x", "http://127.0.0.1:\(s.httpPort)/v1/projects/load-project/messages:send"],
            body:
                #"{"message":{"token":"dGhpc2lzYWZha2VmaWQxMj:APA91bHPRgkF3JUikC4ENAHEeMrd41Zxv3hVZjC9KtT8OvPVGJ-hMMoZRqdU8pAhZ0J0Y8m3kR3c2gVwq5xJb7TzYc4lZrfGw9x0k1R8S0pVv3yQe6xA2NcD9uJtWm5bZkK{hex}","notification":{"title":"{name}"},"data":{"_mId":"{hex}","_dId":"load-fcm","n":"{n}"}}}"#
        )
        XCTAssertEqual(fcm.status, 0, fcm.stderr)
        XCTAssertTrue(fcm.stdout.contains("status codes: 300 2xx"), fcm.stdout)

        // 300 different APNs payloads: a link and a message id per request.
        let (code, body) = try adminRequest(s, "GET", "/emulator/v1/notifications?provider=apns&limit=500")
        XCTAssertEqual(code, 200)
        let notifications = try XCTUnwrap(try json(body)["notifications"] as? [[String: Any]])
        XCTAssertEqual(notifications.count, 300)
        let links = Set(notifications.compactMap { ($0["payload"] as? [String: Any])?["link"] as? String })
        let ids = Set(notifications.compactMap { ($0["payload"] as? [String: Any])?["_mId"] as? String })
        XCTAssertEqual(links.count, 300)
        XCTAssertEqual(ids.count, 300)
        XCTAssertTrue(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) }, "\(ids.prefix(3))")
        // Every request in its campaign, each body's campaign read once it differs.
        XCTAssertEqual(try campaignCount(s, "load-apns", expecting: 300), 300)
        XCTAssertEqual(try campaignCount(s, "load-fcm", expecting: 300), 300)
        _ = s.stop()
    }

    func testBadArgumentsAreRefusedWithAMessage() throws {
        for (arguments, message) in [
            (["-n", "0", "http://127.0.0.1:1/"], "-n takes a whole number from 1"),
            (["-c", "x", "http://127.0.0.1:1/"], "-c takes a whole number"),
            (["https://127.0.0.1:1/"], "unknown argument"),
            (["-n", "1"], "no URL"),
        ] {
            let r = try runCommand(try loadBinary, arguments, timeout: 10)
            XCTAssertEqual(r.status, 2, "\(arguments)")
            XCTAssertTrue(r.stderr.contains(message), "\(arguments): \(r.stderr)")
        }
        // Nothing listening: a clear error, exit 1.
        let port = try freeLocalPort()
        let r = try runCommand(try loadBinary, ["-n", "1", "http://127.0.0.1:\(port)/"], timeout: 10)
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("cannot connect"), r.stderr)
    }
}
