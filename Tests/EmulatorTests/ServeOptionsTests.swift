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
        XCTAssertEqual(message(["--in-memory=maybe"]), "--in-memory must be true or false, got 'maybe'")
        XCTAssertEqual(message(["serve"]), "unexpected argument 'serve' (see pushemu --help)")
    }

    func testHardeningFlags() throws {
        let d = try ServeOptions.parse([])
        XCTAssertEqual(d.maxBufferedBytes, 128 << 20)
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
}
