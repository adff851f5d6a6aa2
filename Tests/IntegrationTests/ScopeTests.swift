import Foundation
import TestSupport
import XCTest

/// Scopes: parallel CI jobs sharing one emulator, each with its own APNs key (team) or FCM
/// project, through the real aioapns and firebase-admin (Tests/Clients/scoped_jobs.py): each
/// job's scoped rule fires on its own pushes only, and its notifications, event stream,
/// campaign totals and rules read through `scope=` are its own; a reset of one scope leaves
/// the others'. Then a restart: the team a notification was sent with is kept in the journal.
final class ScopeTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func testParallelScopedJobsSeeOnlyTheirOwn() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-scopes-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var server = try ServerProcess(["--in-memory=false", "--data-dir", dir + "/data"])
        defer { _ = server.stop() }
        let base = "http://127.0.0.1:\(server.httpPort)"
        var jobs: [[String: Any]] = []
        for (i, team) in ["TEAMJOB001", "TEAMJOB002"].enumerated() {
            let made = try runCommand(
                ServerProcess.binaryPath,
                ["credentials", "apns", "--server", base, "--out", dir, "--team-id", team, "--topics", "com.example.ci"], timeout: 20)
            XCTAssertEqual(made.status, 0, made.stderr)
            let key = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(made.stdout.utf8)) as? [String: Any])
            let kid = try XCTUnwrap(key["keyId"] as? String)
            jobs.append([
                "name": "apns-job-\(i + 1)", "scope": "team:\(team)",
                "apns": ["key": dir + "/AuthKey_\(kid).p8", "keyId": kid, "team": team],
            ])
        }
        for i in 1...2 {
            let project = "ci-project-\(i)"
            let made = try runCommand(
                ServerProcess.binaryPath,
                ["credentials", "fcm", "--server", base, "--project", project, "--out", dir + "/\(project).json"],
                timeout: 20)
            XCTAssertEqual(made.status, 0, made.stderr)
            jobs.append([
                "name": "fcm-job-\(i)", "scope": "project:\(project)",
                "fcm": ["credentials": dir + "/\(project).json", "project": project],
            ])
        }
        let ca = dir + "/ca.pem"
        XCTAssertEqual(try runCommand(ServerProcess.binaryPath, ["ca", "--out", ca], timeout: 20).status, 0)
        let spec = String(decoding: try JSONSerialization.data(withJSONObject: jobs), as: UTF8.self)
        let r = try runCommand(
            Self.root + "/.venv/bin/python", [Self.root + "/Tests/Clients/scoped_jobs.py", base, "\(server.httpsPort)", spec],
            timeout: 240, environment: ["SSL_CERT_FILE": ca])
        XCTAssertEqual(r.status, 0, "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "")
        let results = try XCTUnwrap(out["jobs"] as? [String: [String: Any]], r.stdout)
        XCTAssertEqual(results.count, 4, r.stdout)
        for (name, job) in results {
            XCTAssertEqual(job["notifications"] as? Int, 19, "\(name): \(job)")
            XCTAssertEqual(job["events"] as? Int, 20, "\(name): \(job)")
            XCTAssertEqual(job["sent"] as? Int, 20, "\(name): \(job)")
        }
        // The team is kept with each request: after a restart the second job's scope still holds its pushes.
        XCTAssertEqual(server.stop(), 0)
        server = try ServerProcess(["--in-memory=false", "--data-dir", dir + "/data"])
        let page = try json(
            try runCommand("curl", ["-sS", "http://127.0.0.1:\(server.httpPort)/emulator/v1/campaigns?scope=team:TEAMJOB002"], timeout: 20)
                .stdout)
        XCTAssertEqual((page["totals"] as? [String: Any])?["sent"] as? Int, 20, "\(page)")
    }
}
