import Foundation
import TestSupport
import XCTest

/// The state log's failure cases through the real binary: a log cut short by a crash, a data
/// directory from before the state log, a disk that refuses writes; and the export format's
/// round trip through the CLI and `serve --import-state`.
final class StateFaultsTests: XCTestCase {
    var dir = ""
    var data: String { dir + "/data" }

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-state-faults-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func serve(_ directory: String? = nil, _ extra: [String] = []) throws -> ServerProcess {
        try ServerProcess(["--in-memory=false", "--data-dir", directory ?? data] + extra)
    }

    @discardableResult
    func admin(_ s: ServerProcess, _ method: String, _ path: String, _ body: String? = nil, expect: Int? = nil) throws -> String {
        let (code, text) = try adminRequest(s, method, path, body)
        if let expect { XCTAssertEqual(code, expect, "\(method) \(path): \(text)") }
        return text
    }

    func logFile(_ directory: String? = nil) throws -> String {
        let state = (directory ?? data) + "/state"
        let name = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix("log-") }.sorted().last)
        return state + "/" + name
    }

    func size(_ path: String) throws -> Int { try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) }

    /// A crash in the middle of writing a record: the next start keeps every whole record, says on
    /// stderr how many it dropped, and goes on writing after them.
    func testALogCutShortStartsWithWhatIsWholeAndSaysSo() throws {
        var s = try serve()
        for i in 0..<5 { try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.cut.\#(i)"}"#, expect: 201) }
        s.stop(signal: SIGKILL, timeout: 5)
        // Half of a record's frame at the end: its header says 200 bytes, 10 follow.
        let path = try logFile()
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data([200, 0, 0, 0, 1, 2, 3, 4] + [UInt8](repeating: 7, count: 10)))
        handle.closeFile()
        s = try serve()
        XCTAssertTrue(s.stderr.contains("is damaged at byte"), s.stderr)
        XCTAssertTrue(s.stderr.contains("1 record(s) dropped; started with the"), s.stderr)
        let devices = try admin(s, "GET", "/emulator/v1/devices", expect: 200)
        for i in 0..<5 { XCTAssertTrue(devices.contains("com.cut.\(i)"), devices) }
        try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.after"}"#, expect: 201)
        XCTAssertEqual(s.stop(), 0)
        s = try serve()
        defer { s.stop() }
        XCTAssertFalse(s.stderr.contains("damaged"), s.stderr)
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/devices").contains("com.after"))
    }

    /// A data directory an earlier pushemu left (a journal, key files, no state log): it starts
    /// with its journal and credentials and says that no saved state was found.
    func testADataDirectoryFromBeforeTheStateLog() throws {
        let jwt = try makeProviderToken(in: dir, keyStore: data)
        let account = try runCommand(
            ServerProcess.binaryPath, ["credentials", "fcm", "--project", "old-proj", "--data-dir", data, "--out", dir + "/sa.json"],
            timeout: 30)
        XCTAssertEqual(account.status, 0, account.stderr)
        var s = try serve(nil, ["--apns-auth", "strict"])
        for _ in 0..<3 {
            let r = try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.old",
                    "-H", "authorization: bearer \(jwt)", "-d", #"{"aps":{"alert":"old"}}"#,
                    "http://127.0.0.1:\(s.httpPort)/3/device/\(String(repeating: "ab", count: 32))",
                ], timeout: 10)
            XCTAssertEqual(r.stdout, "200")
        }
        XCTAssertEqual(s.stop(), 0)
        // What an earlier version's directory holds: the journal and the key files, no state/.
        try FileManager.default.removeItem(atPath: data + "/state")
        s = try serve(nil, ["--apns-auth", "strict"])
        defer { s.stop() }
        XCTAssertTrue(s.stderr.contains("no saved state was found in \(data)/state"), s.stderr)
        let stats = try admin(s, "GET", "/emulator/v1/stats", expect: 200)
        XCTAssertTrue(stats.contains(#""storedRequests":3"#), stats)
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/apns/keys").contains("KEY1234567"))
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/fcm/service-accounts").contains("old-proj"))
        let r = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.old",
                "-H", "authorization: bearer \(jwt)", "-d", #"{"aps":{"alert":"again"}}"#,
                "http://127.0.0.1:\(s.httpPort)/3/device/\(String(repeating: "ab", count: 32))",
            ], timeout: 10)
        XCTAssertEqual(r.stdout, "200", "the key file was registered")
        // Only once: the next start has a state log.
        let again = try serve(dir + "/other")
        XCTAssertFalse(again.stderr.contains("no saved state"), "a new directory is not an earlier version's: \(again.stderr)")
        again.stop()
    }

    /// A disk that refuses the state log's writes (a file-size limit on the running server):
    /// under strict the change is answered 503 and not acknowledged, further changes are
    /// refused before they are made, the failure shows in /stats, /metrics and on stderr, and
    /// once writes work again nothing acknowledged is lost and the refused change is kept.
    func testAFullDiskRefusesChangesAndLosesNothingAcknowledged() throws {
        let s = try serve()
        defer { s.stop() }
        try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.before"}"#, expect: 201)
        let pid = "\(s.process.processIdentifier)"
        let limit = try size(try logFile())
        XCTAssertEqual(try runCommand("prlimit", ["--pid", pid, "--fsize=\(limit):unlimited"], timeout: 10).status, 0)
        let refused = try adminRequest(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.refused"}"#)
        XCTAssertEqual(refused.0, 503, refused.1)
        XCTAssertTrue(refused.1.contains("could not be written to the state log"), refused.1)
        let second = try adminRequest(s, "POST", "/emulator/v1/faults", #"{"match":{"provider":"apns"},"effect":{"status":500}}"#)
        XCTAssertEqual(second.0, 503, second.1)
        XCTAssertTrue(second.1.contains("cannot be written"), second.1)
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/faults").contains(#"{"faults":[]}"#), "refused before it was made")
        let stats = try admin(s, "GET", "/emulator/v1/stats")
        XCTAssertTrue(stats.contains(#""failing":true"#), stats)
        let metrics = try admin(s, "GET", "/metrics")
        XCTAssertTrue(metrics.contains("pushemu_state_failing 1"), metrics)
        XCTAssertTrue(s.stderr.contains("cannot write the state log"), s.stderr)
        // The disk has room again.
        XCTAssertEqual(try runCommand("prlimit", ["--pid", pid, "--fsize=unlimited:unlimited"], timeout: 10).status, 0)
        var written = 0
        for _ in 0..<50 where written == 0 {
            let r = try adminRequest(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.after"}"#)
            if r.0 == 201 { written = 1 } else { usleep(100_000) }
        }
        XCTAssertEqual(written, 1, "writes work again")
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/stats").contains(#""failing":false"#))
        s.stop(signal: SIGKILL, timeout: 5)
        let again = try serve()
        defer { again.stop() }
        let devices = try admin(again, "GET", "/emulator/v1/devices")
        XCTAssertTrue(devices.contains("com.before") && devices.contains("com.after"), devices)
        XCTAssertTrue(devices.contains("com.refused"), "the refused change stayed queued and was written with the next: \(devices)")
    }

    /// Export, import into a fresh emulator (over HTTP, with serve --import-state, and into a
    /// stopped one's directory), export again: the same bytes every way.
    func testExportImportExportIsByteIdentical() throws {
        let a = try serve()
        try admin(a, "POST", "/emulator/v1/apns/keys", "{}", expect: 201)
        try admin(a, "POST", "/emulator/v1/fcm/service-accounts", #"{"projectId":"export-test"}"#, expect: 201)
        try admin(
            a, "POST", "/emulator/v1/fleets",
            #"{"platform":"android","app":"com.x","project":"export-test","count":50,"seed":18446744073709551615,"labels":["l"],"permission":{"authorized":0.5,"denied":0.5}}"#,
            expect: 201)
        let d = try admin(
            a, "POST", "/emulator/v1/devices",
            #"{"platform":"ios","app":"com.x","labels":["a","b"],"tracking":{"preset":"webhook","url":"http://127.0.0.1:9/{device.token}","headers":{"x-k":"v"}},"behavior":{"openRate":0.5}}"#,
            expect: 201)
        let token = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(d.utf8)) as? [String: Any])?["token"] as? String)
        try admin(
            a, "POST", "/emulator/v1/devices/\(token)/activities", #"{"attributesType":"T","contentState":{"a":[1,"x"]}}"#, expect: 201)
        try admin(
            a, "POST", "/emulator/v1/devices", #"{"platform":"android","app":"com.x","project":"export-test","topics":["t1","t2"]}"#,
            expect: 201)
        try admin(
            a, "POST", "/emulator/v1/faults", #"{"match":{"provider":"fcm","every":3},"effect":{"errorCode":"INTERNAL"}}"#, expect: 201)
        let first = dir + "/first.jsonl"
        var r = try runCommand(ServerProcess.binaryPath, ["state", "export", "--server", "http://127.0.0.1:\(a.httpPort)", "--out", first])
        XCTAssertEqual(r.status, 0, r.stderr)
        let original = try String(contentsOfFile: first, encoding: .utf8)
        XCTAssertTrue(original.hasPrefix(#"{"pushemu":"state","format":1}"#), original)
        XCTAssertTrue(original.contains(#""seed":18446744073709551615"#), "a seed past 2^63, exactly")
        XCTAssertEqual(a.stop(), 0)

        func export(_ s: ServerProcess) throws -> String {
            let r = try runCommand(ServerProcess.binaryPath, ["state", "export", "--server", "http://127.0.0.1:\(s.httpPort)"])
            XCTAssertEqual(r.status, 0, r.stderr)
            return r.stdout
        }
        // serve --import-state, in memory.
        let b = try ServerProcess(["--import-state", first])
        XCTAssertEqual(try export(b), original)
        b.stop()
        // pushemu state import --server into a running emulator.
        let c = try ServerProcess([])
        r = try runCommand(ServerProcess.binaryPath, ["state", "import", first, "--server", "http://127.0.0.1:\(c.httpPort)", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains(#""imported":"#), r.stdout)
        XCTAssertEqual(try export(c), original)
        c.stop()
        // pushemu state import --data-dir into a stopped one; exported offline, then served.
        let other = dir + "/other"
        r = try runCommand(ServerProcess.binaryPath, ["state", "import", first, "--data-dir", other])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try runCommand(ServerProcess.binaryPath, ["state", "export", "--data-dir", other])
        XCTAssertEqual(r.stdout, original)
        let e = try serve(other)
        XCTAssertEqual(try export(e), original)
        // A running emulator's directory is not written offline.
        r = try runCommand(ServerProcess.binaryPath, ["state", "import", first, "--data-dir", other])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("another pushemu (pid \(e.process.processIdentifier)) is using"), r.stderr)
        e.stop()
        // A newer format is refused with a clear message.
        let newer = dir + "/newer.jsonl"
        try #"{"pushemu":"state","format":2}"#.write(toFile: newer, atomically: true, encoding: .utf8)
        r = try runCommand(ServerProcess.binaryPath, ["state", "import", newer, "--data-dir", dir + "/third"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("newer than this pushemu reads"), r.stderr)
    }
}
