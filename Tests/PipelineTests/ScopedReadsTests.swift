import EmulatorTesting
import Foundation
import TestSupport
import XCTest

/// `scope=` on the admin reads beyond the notifications: `/stats`, `/fleets`, `/apns/keys`,
/// `/fcm/service-accounts`, `/scenarios` (made in a scope with `POST ?scope=`) and
/// `/apns/channels`; a form that is not a scope is a 400 on each.
final class ScopedReadsTests: XCTestCase {
    static let token = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"

    func object(_ r: TestResponse) throws -> [String: Any] {
        XCTAssertEqual(r.status, 200, r.text)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any], r.text)
    }

    func names(_ emulator: TestEmulator, _ path: String, _ list: String, _ field: String) throws -> [String] {
        let items = try XCTUnwrap(try object(try emulator.get(path))[list] as? [[String: Any]], path)
        return items.map { ($0[field] as? String) ?? "\($0[field] ?? "")" }
    }

    func testScopedReads() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        // Team TEAM123456's key may push to every app; TEAMBBBBBB's only to com.b.app.
        let authorization = try PipelineTests.apnsAuthorization(emulator)
        var r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/apns/keys", body: #"{"teamId":"TEAMBBBBBB","keyId":"KEYBBBBBBB","topics":["com.b.app"]}"#))
        XCTAssertEqual(r.status, 201, r.text)
        for project in ["project-a", "project-b"] {
            r = try emulator.http1(TestRequest("POST", "/emulator/v1/fcm/service-accounts", body: #"{"projectId":"\#(project)"}"#))
            XCTAssertEqual(r.status, 201, r.text)
        }
        for body in [
            #"{"platform":"ios","app":"com.a.app","count":10,"labels":["job-a"]}"#,
            #"{"platform":"ios","app":"com.b.app","count":5}"#,
            #"{"platform":"android","app":"com.a.app","environment":"project-a","count":7,"labels":["job-b"]}"#,
        ] {
            r = try emulator.http1(TestRequest("POST", "/emulator/v1/fleets", body: body))
            XCTAssertEqual(r.status, 201, r.text)
        }
        XCTAssertEqual(try names(emulator, "/emulator/v1/apns/keys?scope=team:TEAMBBBBBB", "keys", "keyId"), ["KEYBBBBBBB"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/apns/keys?scope=project:project-a", "keys", "keyId"), [])
        XCTAssertEqual(
            try names(emulator, "/emulator/v1/fcm/service-accounts?scope=project:project-b", "serviceAccounts", "projectId"), ["project-b"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/fleets?scope=label:job-a", "fleets", "id"), ["fleet-1"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/fleets?scope=project:project-a", "fleets", "id"), ["fleet-3"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/fleets?scope=team:TEAM123456", "fleets", "id"), ["fleet-1", "fleet-2"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/fleets?scope=team:TEAMBBBBBB", "fleets", "id"), ["fleet-2"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/fleets?scope=team:NOSUCHTEAM", "fleets", "id"), [])

        // A scenario made in a scope: every step's rule is the scope's (its steps start in an hour).
        r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/scenarios?scope=team:TEAM123456",
                body:
                    #"{"name":"later","steps":[{"at":"3600s","effect":{"status":503}},{"at":"7200s","match":{"provider":"apns"},"effect":{"status":500}}]}"#
            ))
        XCTAssertEqual(r.status, 201, r.text)
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/scenarios", body: #"{"name":"everyone","steps":[{"at":"3600s","effect":{"status":503}}]}"#))
        XCTAssertEqual(r.status, 201, r.text)
        r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/scenarios?scope=team:TEAM123456",
                body: #"{"steps":[{"at":"3600s","match":{"scope":"project:other"},"effect":{"status":503}}]}"#))
        XCTAssertEqual(r.status, 400, "a step naming another scope: \(r.text)")
        XCTAssertEqual(try names(emulator, "/emulator/v1/scenarios?scope=team:TEAM123456", "scenarios", "name"), ["later"])
        XCTAssertEqual(try names(emulator, "/emulator/v1/scenarios", "scenarios", "name"), ["later", "everyone"])
        let scoped = try names(emulator, "/emulator/v1/faults?scope=team:TEAM123456", "faults", "id")
        XCTAssertEqual(scoped.count, 2, "the scenario's two steps are the scope's rules")

        // The team's pushes: a rule of its own fires on the first; three are held.
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/faults?scope=team:TEAM123456", body: #"{"match":{"first":1},"effect":{"status":503}}"#))
        XCTAssertEqual(r.status, 201, r.text)
        var statuses: [Int] = []
        for i in 0..<4 {
            let push = try emulator.h2([
                TestRequest(
                    "POST", "/3/device/\(Self.token)",
                    headers: [("authorization", authorization), ("apns-push-type", "alert"), ("apns-topic", "com.a.app")],
                    body: #"{"aps":{"alert":"n\#(i)"}}"#)
            ])[0]
            statuses.append(push.status)
        }
        XCTAssertEqual(statuses, [503, 200, 200, 200])
        var stats = try object(try emulator.get("/emulator/v1/stats?scope=team:TEAM123456"))
        XCTAssertEqual(stats["scope"] as? String, "team:TEAM123456")
        XCTAssertTrue(stats["resetAt"] is NSNull, "\(stats)")
        XCTAssertEqual((stats["notifications"] as? [String: Any])?["kept"] as? Int, 3, "\(stats)")
        let faults = try XCTUnwrap(stats["faults"] as? [String: Any], "\(stats)")
        XCTAssertEqual(faults["rules"] as? Int, 3)
        XCTAssertEqual(faults["fired"] as? Int, 1)
        XCTAssertEqual(faults["seen"] as? Int, 4, "the rule saw the four pushes; the scenario's steps have not begun")
        XCTAssertEqual(faults["scenarios"] as? Int, 1)
        XCTAssertEqual((stats["fleets"] as? [String: Any])?["count"] as? Int, 2)
        XCTAssertEqual((stats["fleets"] as? [String: Any])?["members"] as? Int, 15)
        XCTAssertEqual((stats["credentials"] as? [String: Any])?["apnsKeys"] as? Int, 1)
        stats = try object(try emulator.get("/emulator/v1/stats?scope=project:project-a"))
        XCTAssertEqual((stats["notifications"] as? [String: Any])?["kept"] as? Int, 0)
        XCTAssertEqual((stats["fleets"] as? [String: Any])?["members"] as? Int, 7)
        XCTAssertEqual((stats["credentials"] as? [String: Any])?["fcmServiceAccounts"] as? Int, 1)
        // A reset of the scope: its notifications and rules go, and its stats say when.
        r = try emulator.http1(TestRequest("POST", "/emulator/v1/reset?scope=team:TEAM123456"))
        XCTAssertEqual(try object(r)["faults"] as? Int, 3, r.text)
        stats = try object(try emulator.get("/emulator/v1/stats?scope=team:TEAM123456"))
        XCTAssertNotNil(stats["resetAt"] as? Int, "\(stats)")
        XCTAssertEqual((stats["notifications"] as? [String: Any])?["kept"] as? Int, 0, "\(stats)")
        XCTAssertEqual((stats["faults"] as? [String: Any])?["rules"] as? Int, 0, "\(stats)")
        // Its scenario went with its steps' rules; the other stays.
        XCTAssertEqual(try names(emulator, "/emulator/v1/scenarios?scope=team:TEAM123456", "scenarios", "name"), [])
        XCTAssertEqual(try names(emulator, "/emulator/v1/scenarios", "scenarios", "name"), ["everyone"])

        // Channels: an app's, for the team that manages them (none manages com.a.app's yet).
        XCTAssertEqual(try names(emulator, "/emulator/v1/apns/channels?app=com.a.app&scope=team:TEAM123456", "channels", "id"), [])

        for path in ["stats", "fleets", "apns/keys", "fcm/service-accounts", "scenarios", "apns/channels?app=com.a.app&x=1"] {
            let separator = path.contains("?") ? "&" : "?"
            let bad = try emulator.get("/emulator/v1/\(path)\(separator)scope=fleet:1")
            XCTAssertEqual(bad.status, 400, "\(path): \(bad.text)")
            XCTAssertTrue(bad.text.contains("team:TEAMID, project:PROJECTID or label:NAME"), bad.text)
        }
    }

    /// A scenario lasts as long as one of its steps' rules: one step removed leaves the rest
    /// (across a restart too), every step removed ends it, and a restart starts cleanly.
    func testScenarioStepsRemovedAcrossARestart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-scenarios-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arguments = ["--data-dir", dir]
        do {
            let emulator = try TestEmulator(.inProcess, arguments: arguments)
            defer { emulator.stop() }
            for name in ["two", "one"] {
                let r = try emulator.http1(
                    TestRequest(
                        "POST", "/emulator/v1/scenarios",
                        body:
                            #"{"name":"\#(name)","steps":[{"at":"3600s","effect":{"status":503}},{"at":"7200s","effect":{"status":500}}]}"#)
                )
                XCTAssertEqual(r.status, 201, r.text)
            }
            let rules = try names(emulator, "/emulator/v1/faults", "faults", "id")
            XCTAssertEqual(rules.count, 4)
            for id in [rules[0], rules[2], rules[3]] {
                XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/faults/\(id)")).status, 200)
            }
            XCTAssertEqual(try names(emulator, "/emulator/v1/scenarios", "scenarios", "name"), ["two"])
            let r = try emulator.http1(TestRequest("POST", "/emulator/v1/state/snapshot"))
            XCTAssertEqual(r.status, 200, "a snapshot holds the scenario with its one step left: \(r.text)")
        }
        let restarted = try TestEmulator(.inProcess, arguments: arguments)
        defer { restarted.stop() }
        let scenarios = try XCTUnwrap(try object(try restarted.get("/emulator/v1/scenarios"))["scenarios"] as? [[String: Any]])
        XCTAssertEqual(scenarios.map { $0["name"] as? String }, ["two"])
        XCTAssertEqual((scenarios.first?["steps"] as? [Any])?.count, 1, "\(scenarios)")
        let state = try object(try restarted.get("/emulator/v1/stats"))["state"] as? [String: Any]
        XCTAssertEqual(state?["droppedAtStart"] as? Int, 0, "\(String(describing: state))")
    }
}
