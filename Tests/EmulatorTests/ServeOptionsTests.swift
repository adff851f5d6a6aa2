import APNs
import XCTest

@testable import Emulator

final class ServeOptionsTests: XCTestCase {
    func testDefaultsAreWhatCIWants() throws {
        let c = try ServeOptions.parse([])
        XCTAssertEqual(c.host, "127.0.0.1")
        XCTAssertEqual(c.httpPort, 8080)
        XCTAssertEqual(c.httpsPort, 8443)
        XCTAssertEqual(c.dataDirectory, "./.pushemu")
        XCTAssertFalse(c.inMemory)
        XCTAssertGreaterThanOrEqual(c.threads, 1)
        XCTAssertNil(c.certificatePath)
    }

    func testFlagsBothSpellings() throws {
        let c = try ServeOptions.parse([
            "--host", "::1", "--http-port=0", "--https-port", "9443", "--threads", "3",
            "--in-memory", "--data-dir", "/tmp/x", "--drain-timeout", "2.5",
            "--max-concurrent-streams", "500", "--cert", "a.pem", "--key", "b.pem",
        ])
        XCTAssertEqual(c.host, "::1")
        XCTAssertEqual(c.httpPort, 0)
        XCTAssertEqual(c.httpsPort, 9443)
        XCTAssertEqual(c.threads, 3)
        XCTAssertTrue(c.inMemory)
        XCTAssertEqual(c.dataDirectory, "/tmp/x")
        XCTAssertEqual(c.drainTimeout, 2.5)
        XCTAssertEqual(c.maxConcurrentStreams, 500)
        XCTAssertEqual(c.certificatePath, "a.pem")
        XCTAssertEqual(c.keyPath, "b.pem")
        XCTAssertFalse(try ServeOptions.parse(["--in-memory=false"]).inMemory)
    }

    func testAPNsFlags() throws {
        let c = try ServeOptions.parse([
            "--apns-environment", "production", "--apns-auth", "strict", "--strict-payload",
            "--apns-token-length", "64-160", "--apns-streams", "500", "--apns-max-errors", "20",
            "--apns-bad-environment-reason", "BadEnvironmentKeyInToken", "--notification-log-size", "50",
        ])
        XCTAssertEqual(c.apns.defaultEnvironment, .production)
        XCTAssertEqual(c.apns.authMode, .strict)
        XCTAssertTrue(c.apns.strictPayload)
        XCTAssertEqual(c.apns.tokenLength, 64...160)
        XCTAssertEqual(c.apns.streamsAfterAuth, 500)
        XCTAssertEqual(c.apns.maxConnectionErrors, 20)
        XCTAssertEqual(c.apns.badEnvironmentReason, "BadEnvironmentKeyInToken")
        XCTAssertEqual(c.notificationLogSize, 50)
        let d = try ServeOptions.parse([])
        XCTAssertEqual(d.apns.defaultEnvironment, .sandbox)
        XCTAssertEqual(d.apns.authMode, .lenient)
        XCTAssertFalse(d.apns.strictPayload)
        XCTAssertEqual(d.apns.tokenLength, 64...200)
        XCTAssertThrowsError(try ServeOptions.parse(["--apns-environment", "staging"]))
        XCTAssertThrowsError(try ServeOptions.parse(["--apns-auth", "maybe"]))
        XCTAssertThrowsError(try ServeOptions.parse(["--apns-token-length", "200-64"]))
        XCTAssertThrowsError(try ServeOptions.parse(["--apns-bad-environment-reason", "Bad Reason"]))
    }

    func testBadInputGetsOneClearError() {
        func message(_ args: [String]) -> String {
            do {
                _ = try ServeOptions.parse(args)
                return "no error"
            } catch { return "\(error)" }
        }
        XCTAssertEqual(message(["--nope"]), "unknown option '--nope' (see pushemu --help)")
        XCTAssertEqual(message(["--http-port"]), "option '--http-port' needs a value")
        XCTAssertEqual(message(["--http-port", "70000"]), "--http-port must be an integer in 0...65535, got '70000'")
        XCTAssertEqual(message(["--threads", "0"]), "--threads must be an integer in 1...1024, got '0'")
        XCTAssertEqual(message(["--tracking-lanes", "0"]), "--tracking-lanes must be an integer in 1...1024, got '0'")
        XCTAssertEqual(
            message(["--tracking-lanes", "99999999999999999999"]),
            "--tracking-lanes must be an integer in 1...1024, got '99999999999999999999'")
        XCTAssertEqual(message(["--in-memory=maybe"]), "--in-memory must be true or false, got 'maybe'")
        XCTAssertEqual(message(["serve"]), "unexpected argument 'serve' (see pushemu --help)")
    }

    func testHardeningFlags() throws {
        let d = try ServeOptions.parse([])
        XCTAssertEqual(d.maxBufferedBytes, 512 << 20)
        XCTAssertEqual(d.maxStateMemory, 2 << 30)
        XCTAssertEqual(d.headTimeout, 30)
        XCTAssertEqual(d.bodyTimeout, 60)
        XCTAssertEqual(d.adminRate, 10_000)
        let c = try ServeOptions.parse(["--max-memory", "256MiB", "--head-timeout", "2", "--body-timeout=5", "--admin-rate", "0"])
        XCTAssertEqual(c.maxBufferedBytes, 256 << 20)
        XCTAssertEqual(c.headTimeout, 2)
        XCTAssertEqual(c.bodyTimeout, 5)
        XCTAssertEqual(c.adminRate, 0)
        XCTAssertEqual(try ServeOptions.parse(["--max-memory", "2g"]).maxBufferedBytes, 2 << 30)
        XCTAssertEqual(try ServeOptions.parse(["--max-memory", "33554432"]).maxBufferedBytes, 32 << 20)
        // Sizes that overflow, or are out of range, or are not sizes: one clear error, no trap.
        for bad in ["99999999999999999999", "9223372036854775807k", "1e9", "1MiB", "2T", "-5m", "5 m", "m", ""] {
            XCTAssertThrowsError(try ServeOptions.parse(["--max-memory", bad]), bad)
        }
        // Timeouts as huge or tiny numbers are clamped where they become nanoseconds, not trapped.
        let huge = try ServeOptions.parse(["--idle-timeout", "1e300", "--head-timeout", "1e300"])
        XCTAssertEqual(huge.idleTimeout, 1e300)
    }

    func testConfigFileWithFlagsWinning() throws {
        let file = """
            # pushemu.conf
            http-port = 1234
            https-port = "2345"   # quoted values are fine
            --in-memory = true
            threads=2

            """
        let c = try ServeOptions.parse(["--config", "pushemu.conf", "--threads", "4"]) { path in
            XCTAssertEqual(path, "pushemu.conf")
            return file
        }
        XCTAssertEqual(c.httpPort, 1234)
        XCTAssertEqual(c.httpsPort, 2345)
        XCTAssertTrue(c.inMemory)
        XCTAssertEqual(c.threads, 4, "command-line flags override the file")
        XCTAssertThrowsError(try ServeOptions.parse(["--config", "f"]) { _ in "nonsense line" })
        XCTAssertThrowsError(try ServeOptions.parse(["--config", "f"]) { _ in "bogus = 1" })
    }

    func testUsageListsEveryOption() {
        for o in ServeOptions.options { XCTAssertTrue(ServeOptions.optionsHelp.contains("--\(o.name)"), o.name) }
        XCTAssertTrue(ServeOptions.optionsHelp.contains("--config FILE"))
    }

    func testTLSConfigurationErrors() {
        var c = EmulatorConfiguration()
        c.certificatePath = "/nonexistent/cert.pem"
        c.keyPath = "/nonexistent/key.pem"
        XCTAssertThrowsError(try Emulator(configuration: c)) { e in
            XCTAssertTrue("\(e)".contains("cannot read certificate file '/nonexistent/cert.pem'"), "\(e)")
        }
        c.keyPath = nil
        XCTAssertThrowsError(try Emulator(configuration: c)) { e in XCTAssertEqual("\(e)", "--cert needs --key") }
    }

    func testEveryOptionComesFromTheEnvironmentBelowFlags() throws {
        XCTAssertEqual(ServeOptions.environmentName("http-port"), "PUSHEMU_HTTP_PORT")
        XCTAssertEqual(ServeOptions.environmentName("apns-bad-environment-reason"), "PUSHEMU_APNS_BAD_ENVIRONMENT_REASON")
        let env = [
            "PUSHEMU_HTTP_PORT": "9001", "PUSHEMU_THREADS": "5", "PUSHEMU_IN_MEMORY": "true", "PUSHEMU_DATA_DIR": "", "PUSHEMU_BIN": "/x",
        ]
        let c = try ServeOptions.parse(["--threads", "3"], environment: env)
        XCTAssertEqual(c.httpPort, 9001)
        XCTAssertEqual(c.threads, 3, "a flag wins over the environment")
        XCTAssertTrue(c.inMemory)
        XCTAssertEqual(c.dataDirectory, "./.pushemu", "an empty variable is unset; unknown PUSHEMU_ variables are ignored")
        // environment > config file > default
        let file = "http-port = 7000\nhttps-port = 7443\n"
        let d = try ServeOptions.parse(["--config", "f"], environment: env) { _ in file }
        XCTAssertEqual(d.httpPort, 9001)
        XCTAssertEqual(d.httpsPort, 7443)
        let e = try ServeOptions.parse([], environment: ["PUSHEMU_CONFIG": "f"]) { _ in file }
        XCTAssertEqual(e.httpPort, 7000, "PUSHEMU_CONFIG names the config file")
        // A repeatable option is taken whole from its winning source.
        let keys = try ServeOptions.parse(["--campaign-key", "data.a"], environment: ["PUSHEMU_CAMPAIGN_KEY": "data.b"])
        XCTAssertEqual(keys.campaignKeys, ["data.a"])
        XCTAssertThrowsError(try ServeOptions.parse([], environment: ["PUSHEMU_HTTP_PORT": "abc"])) { e in
            XCTAssertTrue("\(e)".contains("(from environment PUSHEMU_HTTP_PORT)"), "\(e)")
        }
    }

    func testPrintConfigNamesEachValuesSource() throws {
        let text = try ServeOptions.printConfig(
            ["--threads", "3", "--config", "f", "--print-config"], environment: ["PUSHEMU_HTTP_PORT": "9001"]
        ) { _ in "https-port = 7443\nthreads = 9\n" }
        XCTAssertTrue(text.contains("threads = 3    # flag\n"), text)
        XCTAssertTrue(text.contains("http-port = 9001    # environment PUSHEMU_HTTP_PORT\n"), text)
        XCTAssertTrue(text.contains("https-port = 7443    # config file f\n"), text)
        XCTAssertTrue(text.contains("# host: default (default 127.0.0.1)\n"), text)
        XCTAssertFalse(text.contains("threads = 9"), text)
        for o in ServeOptions.options { XCTAssertTrue(text.contains(o.name), o.name) }
        XCTAssertThrowsError(try ServeOptions.printConfig([], environment: ["PUSHEMU_THREADS": "0"]))
    }

    func testInterceptHosts() throws {
        let c = try ServeOptions.parse(["--intercept-host", "Push.Example.com", "--intercept-host", "a.b,c-d.e"])
        XCTAssertEqual(c.interceptHosts, ["push.example.com", "a.b", "c-d.e"])
        for bad in ["", "a..b", "-a.b", "a_b.c", "a:443", String(repeating: "a", count: 64) + ".com"] {
            XCTAssertThrowsError(try ServeOptions.parse(["--intercept-host", bad]), bad)
        }
        let intercept = Emulator.interceptConfiguration(c, clientCA: nil)
        XCTAssertTrue(
            intercept.hosts.isSuperset(of: [
                "api.sandbox.push.apple.com", "fcm.googleapis.com", "oauth2.googleapis.com", "push.example.com",
            ]))
    }

    func testEnvScriptsQuoteForEachShell() {
        let vars = ProxyEnvironment.variables(
            proxy: "http://127.0.0.1:8080", noProxy: ["internal.example"], ca: "/a/ca.pem", bundle: "/a/it's.pem")
        XCTAssertEqual(vars.first { $0.0 == "NO_PROXY" }?.1, "localhost,127.0.0.1,::1,internal.example")
        let sh = ProxyEnvironment.script(vars, shell: .sh, comment: "c")
        XCTAssertTrue(sh.contains("export SSL_CERT_FILE='/a/it'\\''s.pem'\n"), sh)
        let fish = ProxyEnvironment.script(vars, shell: .fish, comment: "c")
        XCTAssertTrue(fish.contains("set -gx SSL_CERT_FILE '/a/it\\'s.pem'\n"), fish)
        let ps = ProxyEnvironment.script(vars, shell: .powershell, comment: "c")
        XCTAssertTrue(ps.contains("$env:SSL_CERT_FILE = '/a/it''s.pem'\n"), ps)
        XCTAssertTrue(ProxyEnvironment.absolute("./x").hasPrefix("/"))
        XCTAssertEqual(ProxyEnvironment.absolute("/abs"), "/abs")
    }

    /// One tracking lane per event loop unless told: with one loop, a second lane only wakes
    /// more often (measured: about 5 µs of CPU a push more on two CPUs).
    func testTrackingLanesFollowTheLoopsUnlessTold() throws {
        var c = try ServeOptions.parse(["--in-memory", "--threads", "3"])
        XCTAssertNil(c.trackingLanes)
        XCTAssertEqual(try Emulator(configuration: c).stores.dispatcher.laneCount, 3)
        c = try ServeOptions.parse(["--in-memory", "--threads", "3", "--tracking-lanes", "1"])
        XCTAssertEqual(c.trackingLanes, 1)
        XCTAssertEqual(try Emulator(configuration: c).stores.dispatcher.laneCount, 1)
        c = try ServeOptions.parse(["--in-memory", "--threads", "1", "--tracking-lanes=4"])
        XCTAssertEqual(try Emulator(configuration: c).stores.dispatcher.laneCount, 4)
        c = try ServeOptions.parse(["--in-memory", "--threads", "100"])
        XCTAssertEqual(try Emulator(configuration: c).stores.dispatcher.laneCount, 64, "one per loop, at most 64 unless told")
        c = try ServeOptions.parse(["--in-memory", "--threads", "2", "--tracking-lanes", "100"])
        XCTAssertEqual(try Emulator(configuration: c).stores.dispatcher.laneCount, 100)
    }
}
