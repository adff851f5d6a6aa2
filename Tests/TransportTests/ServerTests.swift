import Foundation
import Synchronization
import TestSupport
import XCTest

@testable import Transport

/// Drives a real `HTTPServer` in-process over real sockets, with test routes, and real clients.
final class ServerTests: XCTestCase {
    static let certs = ServerProcess.repositoryRoot + "/Certs"
    static let smallBodyCalls = Atomic<Int>(0)

    func makeServer(_ tweak: (inout ServerConfiguration) -> Void = { _ in }) throws -> HTTPServer {
        var config = ServerConfiguration()
        config.httpPort = 0
        config.httpsPort = 0
        config.threads = 2
        config.tls = TLSConfiguration(
            certificateChainPEM: Array(try Data(contentsOf: URL(fileURLWithPath: Self.certs + "/server.pem"))),
            privateKeyPEM: Array(try Data(contentsOf: URL(fileURLWithPath: Self.certs + "/server-key.pem"))),
            clientCAPEM: Array(try Data(contentsOf: URL(fileURLWithPath: Self.certs + "/ca.pem"))))
        tweak(&config)
        var r = Router()
        r.add(.get, "/echo") { ex in
            let c = ex.connection
            let cert = c.peerCertificate
            let env =
                cert.map {
                    $0.hasExtension("1.2.840.113635.100.6.3.1")
                        ? "sandbox" : ($0.hasExtension("1.2.840.113635.100.6.3.2") ? "production" : "none")
                } ?? "-"
            let text = """
                version=\(ex.request.version) method=\(ex.request.method.name) path=\(ex.request.target.utf8String)
                authority=\(ex.request.authority?.utf8String ?? "-") sni=\(c.serverName ?? "-") alpn=\(c.alpn ?? "-") tls=\(c.tlsVersion ?? "-")
                uid=\(cert?.subjectValue("UID") ?? "-") env=\(env) topics=\(cert?.extensionValue("1.2.840.113635.100.6.3.6")?.count ?? 0)
                """
            ex.respond(.text(200, text + "\n"))
        }
        r.add(
            .post, "/small", maxBodySize: 4096, bodyTooLarge: { _ in .json(413, "{\"reason\":\"PayloadTooLarge\"}") },
            handler: { ex in
                ServerTests.smallBodyCalls.add(1, ordering: .relaxed)
                ex.respond(.text(200, "got \(ex.request.body.count)\n"))
            })
        r.add(.get, "/async") { ex in
            let ms = UInt64(ex.request.queryParameter("ms") ?? "10") ?? 10
            ex.eventLoop.schedule(afterNanoseconds: ms * 1_000_000) {
                ex.respond(.text(200, "slept \(ms)\n"))
            }
        }
        r.add(.get, "/offthread") { ex in
            Thread.detachNewThread {
                usleep(20_000)
                ex.respond(.text(200, "from another thread\n"))
            }
        }
        r.add(.get, "/throw") { _ in throw TestSupportError("handler failed") }
        r.add(.get, "/streams") { ex in
            let n = UInt32(ex.request.queryParameter("n") ?? "1") ?? 1
            ex.connection.setMaxConcurrentStreams(n)
            ex.respond(.text(200, "streams \(n)\n"))
        }
        r.add(.get, "/goaway") { ex in
            ex.respond(.text(200, "bye\n"))
            ex.connection.goAway(errorCode: 0, debugData: Array("{\"reason\":\"Shutdown\"}".utf8))
        }
        r.add(.get, "/big") { ex in
            let n = Int(ex.request.queryParameter("bytes") ?? "1048576") ?? 0
            ex.respond(Response(status: 200, body: (0..<n).map { UInt8(truncatingIfNeeded: $0 % 251) }))
        }
        r.add(.get, "/empty") { ex in
            var h = HTTPFields()
            h.add(name: "apns-id", value: "123e4567-e89b-12d3-a456-426614174000")
            ex.respond(Response(status: 200, headers: h))
        }
        let server = try HTTPServer(configuration: config, router: r)
        try server.start()
        return server
    }

    func h2frames(_ args: [String]) throws -> String {
        let r = try runCommand("python3", [ServerProcess.repositoryRoot + "/Tests/Clients/h2_frames.py"] + args, timeout: 20)
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdout
    }

    func curl(_ args: [String], timeout: Double = 20) throws -> CommandResult {
        try runCommand("curl", ["-sS", "--max-time", "15"] + args, timeout: timeout)
    }

    func testClientCertificateSNIAndALPNVisibleToHandlers() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let port = s.httpsAddress!.port
        let r = try curl([
            "--http2", "--cacert", Self.certs + "/ca.pem",
            "--cert", Self.certs + "/apns-sandbox-client.pem", "--key", Self.certs + "/apns-sandbox-client-key.pem",
            "--resolve", "api.sandbox.push.apple.com:\(port):127.0.0.1",
            "https://api.sandbox.push.apple.com:\(port)/echo",
        ])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("version=http2 method=GET path=/echo"), r.stdout)
        XCTAssertTrue(r.stdout.contains("sni=api.sandbox.push.apple.com alpn=h2"), r.stdout)
        XCTAssertTrue(r.stdout.contains("uid=com.example.app env=sandbox"), r.stdout)
        XCTAssertFalse(r.stdout.contains("topics=0"), r.stdout)

        let prod = try curl([
            "--http1.1", "--cacert", Self.certs + "/ca.pem",
            "--cert", Self.certs + "/apns-production-client.pem", "--key", Self.certs + "/apns-production-client-key.pem",
            "https://localhost:\(port)/echo",
        ])
        XCTAssertTrue(prod.stdout.contains("version=http11"), prod.stdout)
        XCTAssertTrue(prod.stdout.contains("alpn=http/1.1"), prod.stdout)
        XCTAssertTrue(prod.stdout.contains("env=production"), prod.stdout)

        let none = try curl(["--http2", "--cacert", Self.certs + "/ca.pem", "https://localhost:\(port)/echo"])
        XCTAssertTrue(none.stdout.contains("uid=- env=-"), none.stdout)
    }

    func testUntrustedClientCertificateFailsHandshake() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let gen = try runCommand(
            "openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", dir.path + "/k.pem", "-out", dir.path + "/c.pem", "-days", "1", "-subj", "/UID=evil",
            ])
        XCTAssertEqual(gen.status, 0, gen.stderr)
        let r = try curl([
            "--http2", "--cacert", Self.certs + "/ca.pem", "--cert", dir.path + "/c.pem", "--key", dir.path + "/k.pem",
            "https://localhost:\(s.httpsAddress!.port)/echo",
        ])
        XCTAssertNotEqual(r.status, 0, "a certificate from an unknown CA must not be accepted")
    }

    func testEmptyBodyIsHeadersOnlyWithEndStream() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let r = try runCommand("nghttp", ["-nv", "http://127.0.0.1:\(s.httpAddress!.port)/empty"], timeout: 15)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("recv HEADERS frame <length="), r.stdout)
        XCTAssertTrue(r.stdout.contains("apns-id: 123e4567-e89b-12d3-a456-426614174000"), r.stdout)
        XCTAssertFalse(r.stdout.contains("recv DATA frame"), "an empty response must carry no DATA frame (aioapns)")
    }

    func testBodyLimitRefusedWithoutBuffering() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        Self.smallBodyCalls.store(0, ordering: .relaxed)
        let big = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-1mb-\(UUID().uuidString)")
        try Data(repeating: 0x41, count: 1 << 20).write(to: big)
        defer { try? FileManager.default.removeItem(at: big) }
        let port = s.httpAddress!.port
        for mode in [["--http1.1"], ["--http2-prior-knowledge"], ["--http1.1", "-H", "Transfer-Encoding: chunked"]] {
            let r = try curl(mode + ["-w", "\n%{http_code}", "--data-binary", "@" + big.path, "http://127.0.0.1:\(port)/small"])
            XCTAssertTrue(r.stdout.hasSuffix("413"), "\(mode): \(r.stdout) \(r.stderr)")
            XCTAssertTrue(r.stdout.contains("PayloadTooLarge"), "\(mode): \(r.stdout)")
        }
        let tls = try curl([
            "--http2", "--cacert", Self.certs + "/ca.pem", "-w", "\n%{http_code}", "--data-binary", "@" + big.path,
            "https://localhost:\(s.httpsAddress!.port)/small",
        ])
        XCTAssertTrue(tls.stdout.hasSuffix("413"), tls.stdout + tls.stderr)
        XCTAssertEqual(Self.smallBodyCalls.load(ordering: .relaxed), 0, "the handler must never see an oversized body")
        // A body within the limit is accepted.
        let ok = try curl([
            "--http2-prior-knowledge", "--data-binary", String(repeating: "x", count: 4096), "http://127.0.0.1:\(port)/small",
        ])
        XCTAssertEqual(ok.stdout, "got 4096\n")
    }

    func testPipelinedRequestsAnsweredInOrderWithAsyncHandlers() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let c = try RawClient(port: s.httpAddress!.port)
        try c.send(
            "GET /async?ms=80 HTTP/1.1\r\nHost: a\r\n\r\nGET /echo HTTP/1.1\r\nHost: a\r\n\r\nGET /async?ms=5 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        )
        let all = c.readAll()
        let a = all.range(of: "slept 80")!.lowerBound
        let b = all.range(of: "path=/echo")!.lowerBound
        let d = all.range(of: "slept 5")!.lowerBound
        XCTAssertTrue(a < b && b < d, all)
        XCTAssertEqual(all.components(separatedBy: "HTTP/1.1 200 OK").count - 1, 3)
        XCTAssertTrue(all.contains("connection: close"))
    }

    func testExpectContinueAndHalfClose() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let c = try RawClient(port: s.httpAddress!.port)
        try c.send("POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        XCTAssertTrue(c.read(until: "\r\n\r\n").hasPrefix("HTTP/1.1 100 Continue\r\n"))
        try c.send("hello")
        c.shutdownWrite()
        let rest = c.readAll()
        XCTAssertTrue(rest.hasPrefix("HTTP/1.1 200 OK"), rest)
        XCTAssertTrue(rest.hasSuffix("got 5\n"), rest)
        // Expect with an oversized Content-Length: refused before the body, no 100.
        let c2 = try RawClient(port: s.httpAddress!.port)
        try c2.send("POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n")
        let r2 = c2.readAll()
        XCTAssertTrue(r2.hasPrefix("HTTP/1.1 413"), r2)
        XCTAssertTrue(r2.contains("connection: close"), r2)
    }

    func testOffThreadResponseAndHandlerFailure() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let port = s.httpAddress!.port
        XCTAssertEqual(try curl(["--http2-prior-knowledge", "http://127.0.0.1:\(port)/offthread"]).stdout, "from another thread\n")
        XCTAssertEqual(try curl(["--http1.1", "http://127.0.0.1:\(port)/offthread"]).stdout, "from another thread\n")
        // HTTP/2: RST_STREAM; the connection stays usable.
        let nr = try runCommand("nghttp", ["-nv", "http://127.0.0.1:\(port)/throw", "http://127.0.0.1:\(port)/echo"], timeout: 15)
        XCTAssertTrue(nr.stdout.contains("recv RST_STREAM frame"), nr.stdout)
        XCTAssertTrue(nr.stdout.contains("error_code=INTERNAL_ERROR"), nr.stdout)
        XCTAssertTrue(nr.stdout.contains(":status: 200"), nr.stdout)
        // HTTP/1.1: 500 and close.
        let c = try RawClient(port: port)
        try c.send("GET /throw HTTP/1.1\r\nHost: a\r\n\r\n")
        let r = c.readAll()
        XCTAssertTrue(r.hasPrefix("HTTP/1.1 500"), r)
    }

    func testSettingsChangeAndGoAwayFromHandlers() throws {
        let s = try makeServer { $0.maxConcurrentStreams = 7 }
        defer { s.shutdown(drainTimeout: 1) }
        let port = s.httpAddress!.port
        let r = try runCommand("nghttp", ["-nv", "http://127.0.0.1:\(port)/streams?n=1"], timeout: 15)
        XCTAssertTrue(r.stdout.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):7"), r.stdout)
        XCTAssertTrue(r.stdout.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1"), r.stdout)
        let g = try runCommand("nghttp", ["-nv", "http://127.0.0.1:\(port)/goaway"], timeout: 15)
        XCTAssertTrue(g.stdout.contains("recv GOAWAY frame"), g.stdout)
        XCTAssertTrue(g.stdout.contains("{\"reason\":\"Shutdown\"}"), g.stdout)
    }

    func testSessionSetupHookSetsStreamsBySNI() throws {
        let s = try makeServer { c in
            c.sessionSetup = { ctx in
                if ctx.serverName == "fcm.googleapis.com" { ctx.initialMaxConcurrentStreams = 100 }
            }
        }
        defer { s.shutdown(drainTimeout: 1) }
        let port = s.httpsAddress!.port
        let fcm = try h2frames(["\(port)", "--tls", "--sni", "fcm.googleapis.com", "--alpn", "h2", "--cafile", Self.certs + "/ca.pem"])
        XCTAssertTrue(fcm.contains("SETTINGS flags=0 3=100 "), fcm)
        let other = try h2frames(["\(port)", "--tls", "--sni", "api.push.apple.com", "--alpn", "h2", "--cafile", Self.certs + "/ca.pem"])
        XCTAssertTrue(other.contains("SETTINGS flags=0 3=1000 "), other)
    }

    func testPingIsAcknowledged() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let out = try h2frames(["\(s.httpAddress!.port)", "--ping"])
        XCTAssertTrue(out.contains("PING flags=1 data=pushemu!"), out)
    }

    func testLargeResponsesRespectFlowControl() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        // 8 MiB through curl's 64 KiB-ish stream windows: only WINDOW_UPDATEs let it through.
        for args in [
            ["--http2-prior-knowledge", "http://127.0.0.1:\(s.httpAddress!.port)/big?bytes=8388608"],
            ["--http2", "--cacert", Self.certs + "/ca.pem", "https://localhost:\(s.httpsAddress!.port)/big?bytes=8388608"],
            ["--http1.1", "http://127.0.0.1:\(s.httpAddress!.port)/big?bytes=8388608"],
        ] {
            let r = try curl(["-o", "/dev/null", "-w", "%{http_code} %{size_download}"] + args)
            XCTAssertEqual(r.stdout, "200 8388608", "\(args): \(r.stderr)")
        }
        // Many concurrent large streams on one connection.
        let urls = (0..<20).map { "http://127.0.0.1:\(s.httpAddress!.port)/big?bytes=\(100_000 + $0)" }
        let n = try runCommand("nghttp", ["-n", "-s"] + urls, timeout: 30)
        XCTAssertEqual(n.status, 0, n.stderr)
    }

    func testOversizedHeaderListGets431() throws {
        let s = try makeServer { $0.limits.maxHeaderListSize = 4096 }
        defer { s.shutdown(drainTimeout: 1) }
        let big = String(repeating: "v", count: 6000)
        let r = try curl([
            "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "x-big: \(big)",
            "http://127.0.0.1:\(s.httpAddress!.port)/echo",
        ])
        XCTAssertEqual(r.stdout, "431", r.stderr)
        // The connection's other streams are unaffected.
        let ok = try curl([
            "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(s.httpAddress!.port)/echo",
        ])
        XCTAssertEqual(ok.stdout, "200")
        // HTTP/1.1 heads over the limit are 400 and closed.
        let h1 = try curl([
            "--http1.1", "-o", "/dev/null", "-w", "%{http_code}", "-H", "x-big: \(String(repeating: "v", count: 40_000))",
            "http://127.0.0.1:\(s.httpAddress!.port)/echo",
        ])
        XCTAssertEqual(h1.stdout, "400", h1.stderr)
    }

    func testTLSWithoutALPNStillSpeaksHTTP2() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let out = try h2frames([
            "\(s.httpsAddress!.port)", "--tls", "--sni", "api.sandbox.push.apple.com", "--cafile", Self.certs + "/ca.pem",
            "--path", "/echo", "--path", "/empty",
        ])
        XCTAssertTrue(out.contains("ALPN None"), out)
        XCTAssertTrue(out.contains("HEADERS stream=1 flags=4 status=200"), out)
        XCTAssertTrue(out.contains("alpn=- "), out)
        XCTAssertTrue(out.contains("HEADERS stream=3 flags=5 status=200"), "empty body: HEADERS with END_STREAM, no DATA\n" + out)
    }

    func testGracefulShutdownDrainsInFlightRequests() throws {
        let s = try makeServer()
        let port = s.httpAddress!.port
        let result = Mutex<CommandResult?>(nil)
        let t = Thread {
            let r = try? runCommand("curl", ["-sS", "--http2-prior-knowledge", "http://127.0.0.1:\(port)/async?ms=700"], timeout: 20)
            result.withLock { $0 = r }
        }
        t.start()
        usleep(250_000)
        let start = Date()
        s.shutdown(drainTimeout: 5)
        let took = Date().timeIntervalSince(start)
        for _ in 0..<200 where result.withLock({ $0 == nil }) { usleep(20_000) }
        let r = try XCTUnwrap(result.withLock { $0 })
        XCTAssertEqual(r.stdout, "slept 700\n", r.stderr)
        XCTAssertLessThan(took, 4, "drain finished when the last stream did")
        XCTAssertEqual(s.openConnections, 0)
        // The port is closed now.
        XCTAssertThrowsError(try RawClient(port: port))
    }

    /// Connections opened together (a load generator's) are spread evenly over the event loops,
    /// though whichever loop epoll wakes accepts everything queued; handed-off ones answer.
    func testConnectionBurstIsSpreadOverTheLoops() throws {
        let s = try makeServer { $0.threads = 4 }
        defer { s.shutdown(drainTimeout: 1) }
        let port = s.httpAddress!.port
        let clients = try (0..<32).map { _ in try RawClient(port: port, timeout: 5) }
        for _ in 0..<250 where s.openConnections < 32 { usleep(20_000) }
        XCTAssertEqual(s.openConnections, 32)
        let perLoop = s.connectionsPerLoop
        XCTAssertEqual(perLoop.count, 4)
        XCTAssertLessThanOrEqual(perLoop.max()! - perLoop.min()!, 2, "connections per loop: \(perLoop)")
        for c in clients {
            try c.send("GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
            XCTAssertTrue(c.read(until: "tls=-").contains("200 OK"))
        }
    }

    func testSlowHeadTimesOutAndGarbageTLSIsDropped() throws {
        let s = try makeServer {
            $0.timeouts.requestHead = 1
            $0.timeouts.handshake = 1
        }
        defer { s.shutdown(drainTimeout: 1) }
        let c = try RawClient(port: s.httpAddress!.port, timeout: 5)
        try c.send("GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ")
        let start = Date()
        XCTAssertTrue(c.peerClosed())
        XCTAssertLessThan(Date().timeIntervalSince(start), 4.5)
        let t = try RawClient(port: s.httpsAddress!.port, timeout: 5)
        try t.send("this is not a TLS ClientHello\r\n\r\n")
        XCTAssertTrue(t.peerClosed())
    }

    func testH2CUpgradeWithBodyAndPriorKnowledge() throws {
        let s = try makeServer()
        defer { s.shutdown(drainTimeout: 1) }
        let port = s.httpAddress!.port
        let up = try curl(["--http2", "-v", "http://127.0.0.1:\(port)/echo"])
        XCTAssertTrue(up.stderr.contains("101 Switching Protocols"), up.stderr)
        XCTAssertTrue(up.stdout.contains("version=http2"), up.stdout)
        let post = try curl(["--http2", "-v", "--data-binary", "hello", "http://127.0.0.1:\(port)/small"])
        XCTAssertEqual(post.stdout, "got 5\n", post.stderr)
    }
}
