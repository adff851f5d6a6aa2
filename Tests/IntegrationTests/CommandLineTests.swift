import Foundation
import TestSupport
import XCTest

/// The CLI as a new user meets it: one rule for where every command finds the data directory
/// and the server (flag, environment, config file, default), credentials registered with a
/// running server, the server saying when a sender names a credential it lacks, readable
/// tables with `--json` for scripts, the admin commands, and usage errors that help.
final class CommandLineTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/cwd", withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func pushemu(_ args: [String], environment: [String: String] = [:], timeout: Double = 20) throws -> CommandResult {
        try runCommand(ServerProcess.binaryPath, args, timeout: timeout, environment: environment, currentDirectory: dir + "/cwd")
    }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// `credentials`, `export` and `report` find the data directory as `serve` does: the flag,
    /// then PUSHEMU_DATA_DIR, then the config file PUSHEMU_CONFIG names, then ./.pushemu.
    func testEveryCommandFindsTheDataDirectoryAsServeDoes() throws {
        let fromEnvironment = dir + "/env-data"
        var r = try pushemu(
            ["credentials", "apns", "--out", dir, "--key-id", "KEYENV0001", "--team-id", "TEAM123456"],
            environment: ["PUSHEMU_DATA_DIR": fromEnvironment])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(exists(fromEnvironment + "/apns/keys/KEYENV0001.json"), "PUSHEMU_DATA_DIR")
        XCTAssertFalse(exists(dir + "/cwd/.pushemu"), "not ./.pushemu")
        XCTAssertEqual(try json(r.stdout)["registeredWith"] as? String, fromEnvironment + "/apns/keys", "says where")
        r = try pushemu(
            ["credentials", "fcm", "--project", "env-proj", "--out", dir + "/sa.json"], environment: ["PUSHEMU_DATA_DIR": fromEnvironment])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fromEnvironment + "/fcm/service-accounts").count, 1)
        // The config file's data-dir, when neither flag nor variable says.
        let fromConfig = dir + "/config-data"
        try "data-dir = \(fromConfig)\n".write(toFile: dir + "/pushemu.conf", atomically: true, encoding: .utf8)
        r = try pushemu(
            ["credentials", "apns", "--out", dir, "--key-id", "KEYCONF001", "--team-id", "TEAM123456"],
            environment: ["PUSHEMU_CONFIG": dir + "/pushemu.conf"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(exists(fromConfig + "/apns/keys/KEYCONF001.json"), "config file")
        // The flag beats both.
        r = try pushemu(
            ["credentials", "apns", "--out", dir, "--key-id", "KEYFLAG001", "--team-id", "TEAM123456", "--data-dir", dir + "/flag-data"],
            environment: ["PUSHEMU_DATA_DIR": fromEnvironment, "PUSHEMU_CONFIG": dir + "/pushemu.conf"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(exists(dir + "/flag-data/apns/keys/KEYFLAG001.json"))
        // export and report read the journal where serve wrote it.
        let s = try ServerProcess(["--in-memory=false", "--data-dir", fromEnvironment])
        let device = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"
        let push = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                "-d", #"{"aps":{"alert":"hi"}}"#, "http://127.0.0.1:\(s.httpPort)/3/device/\(device)",
            ], timeout: 10)
        XCTAssertEqual(push.stdout, "403", "no provider token: journaled as a rejection")
        XCTAssertEqual(s.stop(), 0)
        r = try pushemu(["export"], environment: ["PUSHEMU_DATA_DIR": fromEnvironment])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains(device), r.stdout)
        r = try pushemu(["report", "--format", "json"], environment: ["PUSHEMU_DATA_DIR": fromEnvironment])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("\"sent\":1"), r.stdout)
        // Without any, ./.pushemu under the working directory, and the error names it.
        r = try pushemu(["report"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("no journal at ./.pushemu/journal.sqlite"), r.stderr)
    }

    /// `credentials apns|fcm --server URL` registers over the admin API: a strict server that
    /// keeps nothing on disk accepts the key at once.
    func testCredentialsRegisterWithARunningServer() throws {
        let s = try ServerProcess(["--apns-auth", "strict"])
        defer { s.stop() }
        let server = "http://127.0.0.1:\(s.httpPort)"
        var r = try pushemu(["credentials", "apns", "--server", server, "--out", dir, "--key-id", "KEYSRV0001", "--team-id", "TEAM123456"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertFalse(exists(dir + "/cwd/.pushemu"), "nothing written to a data directory")
        let jwt = try pushemu([
            "token", "apns", "--key", dir + "/AuthKey_KEYSRV0001.p8", "--key-id", "KEYSRV0001", "--team-id", "TEAM123456",
        ])
        let push = try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                "-H", "authorization: bearer \(jwt.stdout.trimmingCharacters(in: .whitespacesAndNewlines))",
                "-d", #"{"aps":{"alert":"hi"}}"#,
                "http://127.0.0.1:\(s.httpPort)/3/device/f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820",
            ], timeout: 10)
        XCTAssertEqual(push.stdout, "200", "the strict server verified the key the CLI registered")
        r = try pushemu(["credentials", "fcm", "--server", server, "--project", "srv-proj", "--out", dir + "/sa.json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let file = try json(try String(contentsOfFile: dir + "/sa.json", encoding: .utf8))
        XCTAssertEqual(file["token_uri"] as? String, server + "/token", "the key file's token_uri is that server's")
        let (_, accounts) = try adminRequest(s, "GET", "/emulator/v1/fcm/service-accounts")
        XCTAssertTrue(accounts.contains(try XCTUnwrap(file["client_email"] as? String)), accounts)
        // --server and --data-dir together are a usage error.
        r = try pushemu(["credentials", "apns", "--server", server, "--data-dir", dir, "--out", dir])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("give one of them"), r.stderr)
    }

    /// The server says once per key id or account, on stderr, when a sender names a credential
    /// it does not have, and where it looked.
    func testServerSaysOnceWhenASenderNamesAMissingCredential() throws {
        let data = dir + "/server-data"
        let s = try ServerProcess(["--in-memory=false", "--data-dir", data])
        defer { s.stop() }
        // A key registered elsewhere (another directory): unknown to this server.
        let jwt = try makeProviderToken(in: dir, keyStore: dir + "/elsewhere")
        for _ in 0..<3 {
            let push = try runCommand(
                "curl",
                [
                    "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                    "-H", "authorization: bearer \(jwt)", "-d", #"{"aps":{"alert":"hi"}}"#,
                    "http://127.0.0.1:\(s.httpPort)/3/device/f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820",
                ], timeout: 10)
            XCTAssertEqual(push.stdout, "200", "lenient: accepted unverified")
        }
        // A token request naming an account the server lacks (refused before its signature is read).
        func b64(_ s: String) -> String {
            Data(s.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
        }
        let now = Int(Date().timeIntervalSince1970)
        let assertion =
            b64(#"{"alg":"RS256","typ":"JWT","kid":"abc"}"#) + "."
            + b64(
                #"{"iss":"ghost@nowhere-proj.iam.gserviceaccount.com","scope":"https://www.googleapis.com/auth/firebase.messaging","aud":"https://oauth2.googleapis.com/token","iat":\#(now),"exp":\#(now + 3600)}"#
            ) + ".c2ln"
        for _ in 0..<2 {
            let token = try runCommand(
                "curl",
                [
                    "-sS", "-d", "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)",
                    "http://127.0.0.1:\(s.httpPort)/token",
                ], timeout: 10)
            XCTAssertTrue(token.stdout.contains("account not found"), token.stdout)
        }
        s.stop()
        let err = s.stderr
        let apns = err.components(separatedBy: "names key id KEY1234567 (team TEAM123456)")
        XCTAssertEqual(apns.count - 1, 1, "once per key id: \(err)")
        XCTAssertTrue(err.contains(data + "/apns/keys/<KEY ID>.json"), "where it looked, from the root: \(err)")
        XCTAssertTrue(err.contains("pushemu credentials apns --server URL"), err)
        XCTAssertEqual(err.components(separatedBy: "names ghost@nowhere-proj.iam.gserviceaccount.com").count - 1, 1, err)
        XCTAssertTrue(err.contains(data + "/fcm/service-accounts"), err)
    }

    /// A `PUSHEMU_` variable that names no option is warned about (with the nearest that does),
    /// by serve and by every command; the known ones are not.
    func testMisspeltPushemuVariablesAreWarned() throws {
        var r = try pushemu(
            ["serve", "--print-config", "--in-memory"], environment: ["PUSHEMU_HTTP_PROT": "9090", "PUSHEMU_HTTPS_PORT": "0"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(
            r.stderr.contains("environment variable PUSHEMU_HTTP_PROT names no option (did you mean PUSHEMU_HTTP_PORT?"), r.stderr)
        XCTAssertFalse(r.stderr.contains("PUSHEMU_HTTPS_PORT"), r.stderr)
        r = try pushemu(["stats", "--server", "http://127.0.0.1:9"], environment: ["PUSHEMU_DATA_DIRR": "/x"])
        XCTAssertTrue(r.stderr.contains("PUSHEMU_DATA_DIRR names no option (did you mean PUSHEMU_DATA_DIR?"), r.stderr)
        // The variables pushemu writes itself (pushemu env) are known.
        r = try pushemu(["--version"], environment: ["PUSHEMU_CA": "/x.pem", "PUSHEMU_CONFIG": ""])
        XCTAssertEqual(r.stderr, "")
    }

    /// Readable tables by default, the admin API's JSON with --json; the admin commands.
    func testTablesByDefaultJSONForScriptsAndTheAdminCommands() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let env = ["PUSHEMU_HTTP_PORT": "\(s.httpPort)"] // the server's URL from serve's own variable
        var r = try pushemu(
            ["fleet", "create", "--platform", "ios", "--app", "com.example.app", "--count", "3", "--seed", "7"], environment: env)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("id "), "one field per line: \(r.stdout)")
        r = try pushemu(["fleet", "list"], environment: env)
        let lines = r.stdout.split(separator: "\n")
        XCTAssertTrue(lines.first?.hasPrefix("ID       PLATFORM  APP") == true, r.stdout)
        XCTAssertTrue(lines.dropFirst().first?.hasPrefix("fleet-1  ios       com.example.app  3") == true, r.stdout)
        r = try pushemu(["fleet", "list", "--json"], environment: env)
        XCTAssertEqual((try json(r.stdout)["fleets"] as? [Any])?.count, 1)
        r = try pushemu(["fleet", "show", "fleet-1", "--json"], environment: env)
        XCTAssertEqual(try json(r.stdout)["seed"] as? Int, 7)
        // Devices page with --cursor; the table's last line gives the next one.
        for _ in 0..<3 {
            XCTAssertEqual(try pushemu(["devices", "add", "--platform", "android", "--app", "com.x"], environment: env).status, 0)
        }
        r = try pushemu(["devices", "list", "--limit", "2"], environment: env)
        XCTAssertTrue(r.stdout.hasPrefix("TOKEN"), r.stdout)
        let more = try XCTUnwrap(r.stdout.split(separator: "\n").last.map(String.init))
        XCTAssertTrue(more.hasPrefix("(more: --cursor "), r.stdout)
        let cursor = String(more.dropFirst("(more: --cursor ".count).dropLast())
        r = try pushemu(["devices", "list", "--limit", "2", "--cursor", cursor, "--json"], environment: env)
        XCTAssertEqual((try json(r.stdout)["devices"] as? [Any])?.count, 1, r.stdout)
        // Faults: add (inline, @file, stdin), list, delete.
        let rule = #"{"match":{"provider":"apns","first":1},"effect":{"status":503,"reason":"ServiceUnavailable"}}"#
        r = try pushemu(["faults", "add", rule, "--json"], environment: env)
        XCTAssertEqual(r.status, 0, r.stderr)
        let id = try XCTUnwrap(try json(r.stdout)["id"] as? String)
        try rule.write(toFile: dir + "/rule.json", atomically: true, encoding: .utf8)
        XCTAssertEqual(try pushemu(["faults", "add", "@" + dir + "/rule.json"], environment: env).status, 0)
        r = try pushemu(["faults", "list"], environment: env)
        XCTAssertTrue(r.stdout.hasPrefix("ID"), r.stdout)
        XCTAssertEqual(r.stdout.split(separator: "\n").count, 3, r.stdout)
        XCTAssertTrue(r.stdout.contains(id), r.stdout)
        r = try pushemu(["faults", "delete", id], environment: env)
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try pushemu(["faults", "add", #"{"match":{"provider":"apns"},"effect":{"reason":"Sevice Unavailable"}}"#], environment: env)
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("ServiceUnavailable"), "the server's nearest reason: \(r.stderr)")
        // Stats, campaigns, notifications: tables or fields; --json the answer.
        r = try pushemu(["stats"], environment: env)
        XCTAssertTrue(r.stdout.contains("devices.records "), r.stdout)
        XCTAssertEqual(
            ((try json(try pushemu(["stats", "--json"], environment: env).stdout))["devices"] as? [String: Any])?["records"] as? Int, 3)
        r = try pushemu(["notifications", "list"], environment: env)
        XCTAssertEqual(r.stdout, "no notifications match\n")
        r = try pushemu(["campaigns"], environment: env)
        XCTAssertEqual(r.stdout, "no campaigns\n")
        // reset forgets the state.
        r = try pushemu(["reset"], environment: env)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try pushemu(["fleet", "list"], environment: env).stdout, "no fleets\n")
    }

    /// Usage errors exit 2 and say what would work; failures of a command that could run exit 1.
    func testUsageErrorsExitTwoAndHelp() throws {
        var r = try pushemu(["fleet", "create", "--platform", "ios", "--app", "x"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.hasPrefix("pushemu: fleet create needs --count N"), r.stderr)
        r = try pushemu(["devices", "list", "--limt", "3"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("unknown option '--limt' (did you mean --limit?"), r.stderr)
        r = try pushemu(["--http-prot", "3"])
        XCTAssertEqual(r.status, 2)
        XCTAssertEqual(r.stderr, "pushemu: unknown option '--http-prot' (did you mean --http-port?)\n")
        r = try pushemu(["devcies", "list"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("unknown command 'devcies' (did you mean devices?"), r.stderr)
        r = try pushemu(["devices", "lst"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("did you mean 'devices list'?"), r.stderr)
        r = try pushemu(["devices", "show"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("devices show needs TOKEN"), r.stderr)
        r = try pushemu(["fleet", "create", "--platform", "ios", "--app", "x", "--count", "many"])
        XCTAssertEqual(r.status, 2)
        // A server that cannot be reached: exit 1, and how to point at one.
        r = try pushemu(["devices", "list", "--server", "http://127.0.0.1:9"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("cannot reach the emulator at http://127.0.0.1:9") && r.stderr.contains("--server URL"), r.stderr)
        // A port in use suggests a free one, and asking the pushemu that may hold it.
        let s = try ServerProcess()
        defer { s.stop() }
        r = try pushemu(["--http-port", "\(s.httpPort)", "--https-port", "0", "--in-memory"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.hasPrefix("pushemu: cannot listen on 127.0.0.1:\(s.httpPort): Address already in use"), r.stderr)
        XCTAssertTrue(r.stderr.contains("--http-port 0"), r.stderr)
        XCTAssertTrue(r.stderr.contains("pushemu stats --server http://127.0.0.1:\(s.httpPort)"), r.stderr)
    }
}
