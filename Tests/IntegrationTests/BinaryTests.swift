import Foundation
import TestSupport
import XCTest

/// Starts the real `pushemu` binary and drives it with real clients: curl, nghttp, h2load,
/// a raw HTTP/2 client without ALPN, and raw sockets for malformed HTTP/1.1.
final class BinaryTests: XCTestCase {
    static let ca = ServerProcess.repositoryRoot + "/Certs/ca.pem"

    func curl(_ args: [String]) throws -> CommandResult {
        try runCommand("curl", ["-sS", "--max-time", "15"] + args, timeout: 20)
    }

    func testListeningLineAndHealthzOverEveryProtocol() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        XCTAssertTrue(s.stdout.hasPrefix("pushemu listening http=127.0.0.1:\(s.httpPort) https=127.0.0.1:\(s.httpsPort)\n"), s.stdout)
        let ok = "{\"status\":\"ok\"}"
        // curl --http2 over TLS, trusting the development CA.
        let tls = try curl(["--http2", "--cacert", Self.ca, "-w", " %{http_version}", "https://localhost:\(s.httpsPort)/healthz"])
        XCTAssertEqual(tls.stdout, ok + " 2", tls.stderr)
        // h2c with prior knowledge.
        XCTAssertEqual(
            try curl(["--http2-prior-knowledge", "-w", " %{http_version}", "http://127.0.0.1:\(s.httpPort)/healthz"]).stdout, ok + " 2")
        // Upgrade: h2c.
        let up = try curl(["--http2", "-v", "-w", " %{http_version}", "http://127.0.0.1:\(s.httpPort)/healthz"])
        XCTAssertEqual(up.stdout, ok + " 2")
        XCTAssertTrue(up.stderr.contains("101 Switching Protocols"), up.stderr)
        // HTTP/1.1 over TLS.
        XCTAssertEqual(
            try curl(["--http1.1", "--cacert", Self.ca, "-w", " %{http_version}", "https://localhost:\(s.httpsPort)/healthz"]).stdout,
            ok + " 1.1")
        // Under a real host name the certificate covers.
        let apple = try curl([
            "--http2", "--cacert", Self.ca, "--resolve", "api.push.apple.com:\(s.httpsPort):127.0.0.1",
            "https://api.push.apple.com:\(s.httpsPort)/healthz",
        ])
        XCTAssertEqual(apple.stdout, ok, apple.stderr)
        // IPv6 loopback is in the certificate too (when the host has ::1).
        XCTAssertEqual(s.stop(), 0)
    }

    func testTLS12AndTLS13() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        for (args, version) in [(["--tlsv1.2", "--tls-max", "1.2"], "TLSv1.2"), (["--tlsv1.3"], "TLSv1.3")] {
            let r = try curl(["--http2", "-v", "--cacert", Self.ca] + args + ["https://localhost:\(s.httpsPort)/healthz"])
            XCTAssertEqual(r.stdout, "{\"status\":\"ok\"}", r.stderr)
            XCTAssertTrue(r.stderr.contains("SSL connection using \(version)"), r.stderr)
            XCTAssertTrue(r.stderr.contains("ALPN: server accepted h2"), r.stderr)
        }
        // TLS 1.1 and older are refused.
        let old = try curl(["--tlsv1.1", "--tls-max", "1.1", "--cacert", Self.ca, "https://localhost:\(s.httpsPort)/healthz"])
        XCTAssertNotEqual(old.status, 0)
    }

    func testHTTP11KeepAliveReusesOneConnection() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)/healthz"
        let r = try curl(["--http1.1", "-v", url, url, url, url])
        XCTAssertEqual(r.stdout, String(repeating: "{\"status\":\"ok\"}", count: 4))
        XCTAssertEqual(r.stderr.components(separatedBy: "Re-using existing connection").count - 1, 3, r.stderr)
    }

    func testNghttpClient() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        for url in ["http://127.0.0.1:\(s.httpPort)/healthz", "https://127.0.0.1:\(s.httpsPort)/healthz"] {
            let r = try runCommand("nghttp", ["-v", url], timeout: 15)
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stdout.contains(":status: 200"), r.stdout)
            XCTAssertTrue(r.stdout.contains("{\"status\":\"ok\"}"), r.stdout)
        }
        // Upgrade from HTTP/1.1 with nghttp -u.
        let u = try runCommand("nghttp", ["-uv", "http://127.0.0.1:\(s.httpPort)/healthz"], timeout: 15)
        XCTAssertTrue(u.stdout.contains("HTTP Upgrade success"), u.stdout)
    }

    func testTLSClientWithoutALPNThatSendsThePreface() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let r = try runCommand(
            "python3",
            [
                ServerProcess.repositoryRoot + "/Tests/Clients/h2_frames.py", "\(s.httpsPort)", "--tls",
                "--sni", "api.development.push.apple.com", "--cafile", Self.ca, "--path", "/healthz",
            ], timeout: 20)
        XCTAssertTrue(r.stdout.contains("ALPN None"), r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("HEADERS stream=1 flags=4 status=200"), r.stdout)
        XCTAssertTrue(r.stdout.contains("{\"status\":\"ok\"}"), r.stdout)
    }

    func testOneMegabyteBodyRefusedWith413() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let big = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-1mb-\(UUID().uuidString)")
        try Data(repeating: 0x7B, count: 1 << 20).write(to: big)
        defer { try? FileManager.default.removeItem(at: big) }
        for args in [
            ["--http2", "--cacert", Self.ca, "https://localhost:\(s.httpsPort)/anything"],
            ["--http2-prior-knowledge", "http://127.0.0.1:\(s.httpPort)/anything"],
            ["--http1.1", "http://127.0.0.1:\(s.httpPort)/anything"],
        ] {
            let r = try curl(["-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + big.path] + args)
            XCTAssertEqual(r.stdout, "413", "\(args): \(r.stderr)")
        }
        // Still serving afterwards.
        XCTAssertEqual(try curl(["http://127.0.0.1:\(s.httpPort)/healthz"]).stdout, "{\"status\":\"ok\"}")
    }

    func testMalformedHTTP11RefusedWith400AndClosed() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let cases: [(String, String)] = [
            ("CL and TE", "POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ("conflicting CL", "POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"),
            ("obs-fold", "GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n"),
            ("bad chunk size", "POST /healthz HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"),
            ("chunk size with space", "POST /healthz HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n"),
            ("bare CR", "GET /healthz HTTP/1.1\r\nHost: a\rX: y\r\n\r\n"),
            ("bare LF", "GET /healthz HTTP/1.1\nHost: a\n\n"),
            ("long request line", "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n"),
            (
                "long headers",
                "GET /healthz HTTP/1.1\r\nHost: a\r\n"
                    + String(repeating: "X-Pad: " + String(repeating: "p", count: 1000) + "\r\n", count: 40) + "\r\n"
            ),
            ("no host", "GET /healthz HTTP/1.1\r\n\r\n"),
            ("space before colon", "GET /healthz HTTP/1.1\r\nHost : a\r\n\r\n"),
            (
                "smuggled second request",
                "POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
            ),
        ]
        for (name, raw) in cases {
            let c = try RawClient(port: s.httpPort)
            try c.send(raw)
            let answer = c.readAll()
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(name): \(answer.prefix(200))")
            XCTAssertTrue(answer.contains("connection: close"), name)
            XCTAssertEqual(answer.components(separatedBy: "HTTP/1.1").count - 1, 1, "\(name): exactly one response")
        }
        // A good request after a bad one, on a new connection, is fine.
        let c = try RawClient(port: s.httpPort)
        try c.send("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(c.readAll().hasPrefix("HTTP/1.1 200 OK"))
    }

    func testSIGTERMUnderLoadDrainsAndExitsZero() throws {
        let s = try ServerProcess()
        let load = Process()
        load.executableURL = URL(fileURLWithPath: try resolveExecutable("h2load"))
        load.arguments = ["-n", "3000000", "-c", "8", "-m", "32", "-t", "1", "http://127.0.0.1:\(s.httpPort)/healthz"]
        load.standardOutput = FileHandle.nullDevice
        load.standardError = FileHandle.nullDevice
        try load.run()
        defer { if load.isRunning { load.terminate() } }
        usleep(800_000)
        XCTAssertTrue(load.isRunning, "load should still be running when the signal arrives")
        let start = Date()
        let status = s.stop(signal: SIGTERM, timeout: 15)
        XCTAssertEqual(status, 0, s.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(start), 12)
        XCTAssertTrue(s.stderr.contains("draining"), s.stderr)
        // The load generator sees the server go away and finishes on its own.
        let deadline = Date().addingTimeInterval(15)
        while load.isRunning && Date() < deadline { usleep(20_000) }
        XCTAssertFalse(load.isRunning)
    }

    func testSIGINTIdleExitsZeroQuickly() throws {
        let s = try ServerProcess()
        let start = Date()
        XCTAssertEqual(s.stop(signal: SIGINT), 0)
        XCTAssertLessThan(Date().timeIntervalSince(start), 2)
    }

    func testStartupErrorsAreOneClearLine() throws {
        let bin = ServerProcess.binaryPath
        let running = try ServerProcess()
        defer { running.stop() }
        let inUse = try runCommand(bin, ["--http-port", "\(running.httpPort)", "--https-port", "0", "--in-memory"], timeout: 10)
        XCTAssertNotEqual(inUse.status, 0)
        XCTAssertTrue(
            inUse.stderr.hasPrefix("pushemu: cannot listen on 127.0.0.1:\(running.httpPort): Address already in use ("), inUse.stderr)
        XCTAssertEqual(inUse.stderr.filter { $0 == "\n" }.count, 1, "one line")
        XCTAssertEqual(inUse.stdout, "")

        let noCert = try runCommand(bin, ["--cert", "/nonexistent.pem", "--key", "/nonexistent-key.pem", "--in-memory"], timeout: 10)
        XCTAssertNotEqual(noCert.status, 0)
        XCTAssertTrue(noCert.stderr.hasPrefix("pushemu: cannot read certificate file '/nonexistent.pem'"), noCert.stderr)
        XCTAssertEqual(noCert.stderr.filter { $0 == "\n" }.count, 1)

        let notPEM = try runCommand(
            bin,
            [
                "--cert", ServerProcess.repositoryRoot + "/Package.swift",
                "--key", ServerProcess.repositoryRoot + "/Certs/server-key.pem", "--in-memory",
            ], timeout: 10)
        XCTAssertNotEqual(notPEM.status, 0)
        XCTAssertTrue(notPEM.stderr.contains("certificate is not a readable PEM certificate"), notPEM.stderr)

        let mismatch = try runCommand(
            bin,
            [
                "--cert", ServerProcess.repositoryRoot + "/Certs/server.pem",
                "--key", ServerProcess.repositoryRoot + "/Certs/apns-sandbox-client-key.pem",
                "--http-port", "0", "--https-port", "0", "--in-memory",
            ], timeout: 10)
        XCTAssertNotEqual(mismatch.status, 0)
        XCTAssertTrue(mismatch.stderr.contains("does not match"), mismatch.stderr)

        let unknown = try runCommand(bin, ["--frobnicate"], timeout: 10)
        XCTAssertEqual(unknown.status, 2)
        XCTAssertEqual(unknown.stderr, "pushemu: unknown option '--frobnicate' (see pushemu --help)\n")
    }

    func testHelpAndVersion() throws {
        let bin = ServerProcess.binaryPath
        let help = try runCommand(bin, ["--help"], timeout: 10)
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.contains("--https-port"), help.stdout)
        XCTAssertTrue(help.stdout.contains("--in-memory"))
        let version = try runCommand(bin, ["--version"], timeout: 10)
        XCTAssertEqual(version.status, 0)
        XCTAssertTrue(version.stdout.hasPrefix("pushemu 0."), version.stdout)
    }

    func testDataDirectoryCreatedUnlessInMemory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-data-\(UUID().uuidString)/nested")
        defer { try? FileManager.default.removeItem(at: dir.deletingLastPathComponent()) }
        let s = try ServerProcess(["--in-memory=false", "--data-dir", dir.path])
        var isDir: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.path, isDirectory: &isDir) && isDir.boolValue)
        XCTAssertEqual(s.stop(), 0)
    }

    func testStartsWellUnderASecond() throws {
        let start = Date()
        let s = try ServerProcess()
        let took = Date().timeIntervalSince(start)
        XCTAssertLessThan(took, 1.0, "listening line after \(took)s")
        s.stop()
    }
}

extension BinaryTests {
    /// Every command's `--help` lists its own options, and the parser accepts exactly those: each
    /// listed option is taken (the command then fails for other reasons: no server, no file),
    /// and an option another command has is refused as unknown.
    func testEveryCommandsHelpListsWhatItsParserAccepts() throws {
        let bin = ServerProcess.binaryPath
        let scratch = "/tmp/pushemu-cli-help-\(getpid())"
        mkdir(scratch, 0o755)
        defer { _ = try? runCommand("rm", ["-rf", scratch], timeout: 10) }
        let overview = try runCommand(bin, ["--help"], timeout: 10).stdout
        let commands: [[String]] = [
            ["credentials", "apns"], ["credentials", "fcm"], ["token", "apns"], ["devices", "add"], ["devices", "list"],
            ["devices", "show", "T"], ["devices", "uninstall", "T"], ["fleet", "create"], ["fleet", "tokens", "fleet-1"], ["export"],
            ["report"], ["notifications", "list"], ["notifications", "latest"], ["notifications", "show", "T"],
            ["notifications", "delete"], ["campaigns"], ["fleet", "list"], ["fleet", "show", "T"], ["faults", "list"],
            ["faults", "add", "T"], ["faults", "delete", "T"], ["reset"], ["stats"],
        ]
        for words in commands {
            let name = words.filter { $0 != "T" && $0 != "fleet-1" }.joined(separator: " ")
            XCTAssertTrue(overview.contains("pushemu \(name)"), "\(name) missing from pushemu --help")
            let help = try runCommand(bin, words + ["--help"], timeout: 10)
            XCTAssertEqual(help.status, 0, "\(name) --help: \(help.stderr)")
            XCTAssertTrue(help.stdout.hasPrefix("usage: pushemu \(name)"), help.stdout)
            let listed = help.stdout.split(separator: "\n").filter { $0.hasPrefix("  --") }
                .map { String($0.dropFirst(4).prefix { $0 != " " }) }
            for option in listed {
                // Files go to a scratch directory, requests to a port nobody listens on, journals
                // are read from a directory that has none: each run fails or writes only there,
                // but never because of the option.
                let value =
                    ["out": scratch + "/out", "data-dir": scratch, "server": "http://127.0.0.1:9", "key": "/nonexistent.p8"][option] ?? "x"
                let base: [String] =
                    switch words.first {
                    case "credentials": ["--data-dir", scratch, "--out", scratch + "/out"]
                    case "token": []
                    case "export", "report": ["--data-dir", "/nonexistent-pushemu"]
                    default: ["--server", "http://127.0.0.1:9"]
                    }
                let run = try runCommand(bin, words + ["--\(option)", value] + base, timeout: 20)
                XCTAssertFalse(run.stderr.contains("unknown option"), "\(name) --\(option): \(run.stderr)")
            }
            let refused = try runCommand(bin, words + ["--bogus-option", "x"], timeout: 10)
            XCTAssertNotEqual(refused.status, 0)
            XCTAssertTrue(refused.stderr.contains("unknown option '--bogus-option'"), "\(name): \(refused.stderr)")
        }
        let serve = try runCommand(bin, ["serve", "--help"], timeout: 10).stdout
        XCTAssertTrue(serve.hasPrefix("usage: pushemu serve [options]") && serve.contains("--apns-token-rate"), serve)
        XCTAssertFalse(serve.contains("pushemu fleet create"), "serve --help lists serve's options only")
        // The options the issue found out of step: fleet create takes --project and --labels,
        // credentials fcm --data-dir.
        let fleet = try runCommand(bin, ["fleet", "create", "--help"], timeout: 10).stdout
        XCTAssertTrue(fleet.contains("--project P") && fleet.contains("--labels a,b"), fleet)
        XCTAssertTrue(try runCommand(bin, ["credentials", "fcm", "--help"], timeout: 10).stdout.contains("--data-dir DIR"))
    }
}
