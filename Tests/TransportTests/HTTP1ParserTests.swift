import XCTest

@testable import Transport

final class HTTP1ParserTests: XCTestCase {
    func parse(_ s: String, limits: HTTP1Limits = HTTP1Limits()) -> HTTP1HeadResult {
        Array(s.utf8).withUnsafeBytes { HTTP1Parser.parseHead($0, limits: limits) }
    }

    func head(_ s: String, file: StaticString = #filePath, line: UInt = #line) -> (HTTP1RequestHead, Int)? {
        switch parse(s) {
        case .complete(let h, let consumed): return (h, consumed)
        case .incomplete: XCTFail("incomplete", file: file, line: line)
        case .failure(let e): XCTFail("failed: \(e)", file: file, line: line)
        }
        return nil
    }

    func error(_ s: String, file: StaticString = #filePath, line: UInt = #line) -> HTTP1ParseError? {
        if case .failure(let e) = parse(s) { return e }
        XCTFail("expected a failure for \(s.debugDescription)", file: file, line: line)
        return nil
    }

    func testSimpleGet() throws {
        let (h, consumed) = try XCTUnwrap(head("GET /healthz?x=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: t\r\n\r\nEXTRA"))
        XCTAssertEqual(consumed, 61)
        XCTAssertEqual(h.method, .get)
        XCTAssertEqual(h.version, .http11)
        XCTAssertEqual(h.framing, .none)
        XCTAssertTrue(h.keepAlive)
        XCTAssertEqual(h.fields.first(":path")?.utf8String, "/healthz?x=1")
        XCTAssertEqual(h.fields.first("host")?.utf8String, "localhost")
        XCTAssertEqual(h.fields.first("user-agent")?.utf8String, "t")
    }

    func testHeaderNamesAreLowercasedAndValuesTrimmed() throws {
        let (h, _) = try XCTUnwrap(head("POST /x HTTP/1.1\r\nHOST: a\r\nContent-LENGTH: 5\r\nX-Thing: \t  padded value \t\r\n\r\n"))
        XCTAssertEqual(h.fields.first("x-thing")?.utf8String, "padded value")
        XCTAssertEqual(h.framing, .contentLength(5))
    }

    func testEmptyValueAndDuplicatesKept() throws {
        let (h, _) = try XCTUnwrap(head("GET / HTTP/1.1\r\nHost: a\r\nX-A:\r\nX-A: two\r\n\r\n"))
        XCTAssertEqual(h.fields.count(of: "x-a"), 2)
        XCTAssertEqual(h.fields.first("x-a")?.utf8String, "")
    }

    func testConnectionSemantics() throws {
        XCTAssertFalse(try XCTUnwrap(head("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")).0.keepAlive)
        XCTAssertFalse(try XCTUnwrap(head("GET / HTTP/1.0\r\n\r\n")).0.keepAlive)
        XCTAssertTrue(try XCTUnwrap(head("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")).0.keepAlive)
        XCTAssertTrue(try XCTUnwrap(head("GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, foo\r\n\r\n")).0.keepAlive)
    }

    func testChunkedAndExpect() throws {
        let (h, _) = try XCTUnwrap(head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n\r\n"))
        XCTAssertEqual(h.framing, .chunked)
        XCTAssertTrue(h.expectContinue)
    }

    func testAbsoluteFormAndAsterisk() throws {
        let (h, _) = try XCTUnwrap(head("GET http://example.com:8080/a/b?c HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"))
        XCTAssertEqual(h.fields.first(":authority")?.utf8String, "example.com:8080")
        XCTAssertEqual(h.fields.first(":path")?.utf8String, "/a/b?c")
        let (h2, _) = try XCTUnwrap(head("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"))
        XCTAssertEqual(h2.fields.first(":path")?.utf8String, "*")
        let (h3, _) = try XCTUnwrap(head("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        XCTAssertEqual(h3.fields.first(":path")?.utf8String, "/")
    }

    func testLeadingEmptyLineIgnored() throws {
        XCTAssertNotNil(head("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
    }

    func testH2CUpgrade() throws {
        // SETTINGS_MAX_CONCURRENT_STREAMS=100, SETTINGS_INITIAL_WINDOW_SIZE=65535 (curl's), base64url.
        let (h, _) = try XCTUnwrap(
            head(
                "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
            ))
        XCTAssertTrue(h.upgradeToH2C)
        XCTAssertEqual(h.http2Settings, [0, 3, 0, 0, 0, 100, 0, 4, 0, 0, 0xFF, 0xFF])
        // Without Connection: HTTP2-Settings the upgrade is ignored (request served as HTTP/1.1).
        XCTAssertFalse(
            try XCTUnwrap(
                head("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
            ).0.upgradeToH2C)
        // A settings payload that is not a whole number of entries is ignored too.
        XCTAssertFalse(
            try XCTUnwrap(
                head("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMA\r\n\r\n")
            ).0.upgradeToH2C)
    }

    // MARK: every malformed case refused

    func testAmbiguousFramingRefused() {
        XCTAssertEqual(
            error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            .contentLengthWithTransferEncoding)
        XCTAssertEqual(
            error("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
            .contentLengthWithTransferEncoding)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), .conflictingContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n"), .conflictingContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n"), .badContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n"), .badContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n"), .badContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n"), .badContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n"), .badContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n"), .badContentLength)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), .badTransferEncoding)
        XCTAssertEqual(
            error("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), .badTransferEncoding)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n"), .badTransferEncoding)
        XCTAssertEqual(error("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), .badTransferEncoding)
    }

    func testIdenticalContentLengthsAccepted() throws {
        XCTAssertEqual(
            try XCTUnwrap(head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n")).0.framing, .contentLength(5)
        )
        XCTAssertEqual(try XCTUnwrap(head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7, 7\r\n\r\n")).0.framing, .contentLength(7))
    }

    func testLineFoldingAndBareLineEndingsRefused() {
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n"), .obsFold)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n\ttwo\r\n\r\n"), .obsFold)
        XCTAssertEqual(error("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), .obsFold)
        XCTAssertEqual(error("GET / HTTP/1.1\rHost: a\r\n\r\n"), .bareCR)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), .bareCR)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\n\rX"), .bareCR)
        XCTAssertEqual(error("GET / HTTP/1.1\nHost: a\r\n\r\n"), .bareLF)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n"), .bareLF)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\n\n"), .bareLF)
    }

    func testBadRequestLinesRefused() {
        XCTAssertEqual(error("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("GET / HTTP/1.x\r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("GET / HTTX/1.1\r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("GET /\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(error("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), .unsupportedVersion)
        XCTAssertEqual(error("GET a/b HTTP/1.1\r\nHost: a\r\n\r\n"), .badTarget)
        XCTAssertEqual(error("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), .badTarget)
        XCTAssertEqual(error("GET /\u{7F} HTTP/1.1\r\nHost: a\r\n\r\n"), .badRequestLine)
        XCTAssertEqual(HTTP1ParseError.unsupportedVersion.status, 505)
    }

    func testBadHeadersRefused() {
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), .badHeaderName)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\n: empty\r\n\r\n"), .badHeaderName)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n"), .badHeaderName)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\u{0}b\r\n\r\n"), .badHeaderValue)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\u{1}b\r\n\r\n"), .badHeaderValue)
        XCTAssertEqual(error("GET / HTTP/1.1\r\n\r\n"), .missingHost)
        XCTAssertEqual(error("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), .duplicateHost)
        XCTAssertEqual(error("POST / HTTP/1.1\r\nHost: a\r\nExpect: something-else\r\n\r\n"), .unsupportedExpectation)
        XCTAssertEqual(HTTP1ParseError.unsupportedExpectation.status, 417)
    }

    func testLimits() {
        var limits = HTTP1Limits()
        limits.maxRequestLineLength = 64
        limits.maxHeadLength = 256
        limits.maxHeaderCount = 3
        let longLine = "GET /" + String(repeating: "a", count: 100) + " HTTP/1.1\r\nHost: a\r\n\r\n"
        if case .failure(let e) = parse(longLine, limits: limits) { XCTAssertEqual(e, .requestLineTooLong) } else { XCTFail() }
        // Too long even before the line ends: refused without waiting for more.
        if case .failure(let e) = parse("GET /" + String(repeating: "a", count: 100), limits: limits) {
            XCTAssertEqual(e, .requestLineTooLong)
        } else {
            XCTFail()
        }
        let manyHeaders = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"
        if case .failure(let e) = parse(manyHeaders, limits: limits) { XCTAssertEqual(e, .tooManyHeaders) } else { XCTFail() }
        let bigHeader = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 300) + "\r\n\r\n"
        if case .failure(let e) = parse(bigHeader, limits: limits) { XCTAssertEqual(e, .headTooLarge) } else { XCTFail() }
        // An unterminated oversized head is refused, not buffered forever.
        if case .failure(let e) = parse("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 300), limits: limits) {
            XCTAssertEqual(e, .headTooLarge)
        } else {
            XCTFail()
        }
    }

    // MARK: property-style

    /// Every strict prefix of a valid head is `.incomplete`; the whole is `.complete` with the exact length.
    func testEveryPrefixIsIncomplete() {
        let requests = [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "POST /3/device/abc HTTP/1.1\r\nHost: api.push.apple.com\r\nContent-Length: 10\r\napns-topic: com.x\r\n\r\n",
            "\r\nPUT /x?y=z HTTP/1.0\r\nX: \t\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        ]
        for r in requests {
            let bytes = Array(r.utf8)
            for cut in 0..<bytes.count {
                let result = bytes[0..<cut].withUnsafeBytes { HTTP1Parser.parseHead($0) }
                guard case .incomplete = result else {
                    XCTFail("prefix \(cut) of \(r.debugDescription) gave \(result)")
                    return
                }
            }
            let full = bytes.withUnsafeBytes { HTTP1Parser.parseHead($0) }
            guard case .complete(_, let consumed) = full else {
                XCTFail("full \(r.debugDescription) gave \(full)")
                return
            }
            XCTAssertEqual(consumed, bytes.count)
        }
    }

    /// Random well-formed heads parse back to what was generated.
    func testRandomValidHeadsRoundTrip() throws {
        var rng = SplitMix(seed: 42)
        let tchars = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~".utf8)
        let vchars = Array("abcdefghijklmnopqrstuvwxyz0123456789 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\t".utf8)
        for _ in 0..<500 {
            var expected: [(String, String)] = [("host", "h")]
            var s = "POST /p\(rng.next() % 1000) HTTP/1.1\r\nHost: h\r\n"
            for _ in 0..<Int(rng.next() % 20) {
                var name = String(
                    decoding: (0..<(1 + Int(rng.next() % 12))).map { _ in tchars[Int(rng.next() % UInt64(tchars.count))] }, as: UTF8.self)
                if ["host", "content-length", "transfer-encoding", "expect", "connection", "upgrade", "http2-settings"].contains(
                    name.lowercased())
                {
                    name = "x-" + name
                }
                var value = String(
                    decoding: (0..<Int(rng.next() % 30)).map { _ in vchars[Int(rng.next() % UInt64(vchars.count))] }, as: UTF8.self)
                s += "\(name):\(rng.next() % 2 == 0 ? " " : "")\(value)\r\n"
                while value.first == " " || value.first == "\t" { value.removeFirst() }
                while value.last == " " || value.last == "\t" { value.removeLast() }
                expected.append((name.lowercased(), value))
            }
            s += "\r\n"
            let (h, consumed) = try XCTUnwrap(head(s))
            XCTAssertEqual(consumed, s.utf8.count)
            let got = h.fields.pairs.filter { !$0.0.hasPrefix(":") }
            XCTAssertEqual(got.map(\.0), expected.map(\.0))
            XCTAssertEqual(got.map(\.1), expected.map(\.1))
        }
    }

    /// Random corruption never crashes and never yields a head longer than the input.
    func testRandomCorruptionNeverCrashes() {
        var rng = SplitMix(seed: 7)
        let base = Array(
            "POST /3/device/abcdef HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nTransfer-Encoding: chunked\r\nX-Y: z\r\n\r\n".utf8)
        let specials: [UInt8] = [0, 9, 10, 13, 32, 58, 0x7F, 0x80, 0xFF, 44]
        for _ in 0..<5000 {
            var b = base
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let i = Int(rng.next() % UInt64(b.count))
                switch rng.next() % 3 {
                case 0: b[i] = specials[Int(rng.next() % UInt64(specials.count))]
                case 1: b.insert(specials[Int(rng.next() % UInt64(specials.count))], at: i)
                default: b.remove(at: i)
                }
            }
            let r = b.withUnsafeBytes { HTTP1Parser.parseHead($0) }
            if case .complete(let h, let consumed) = r {
                XCTAssertLessThanOrEqual(consumed, b.count)
                // Whatever is accepted has unambiguous framing.
                XCTAssertFalse(h.fields.count(of: "content-length") > 0 && h.fields.count(of: "transfer-encoding") > 0)
            }
        }
    }

    func testBase64URL() {
        XCTAssertEqual(Base64URL.decode(Array("AAMAAABk".utf8)), [0, 3, 0, 0, 0, 100])
        XCTAssertEqual(Base64URL.decode(Array("_-8".utf8)), [0xFF, 0xEF])
        XCTAssertNil(Base64URL.decode(Array("A!".utf8)))
        XCTAssertNil(Base64URL.decode(Array("A".utf8)))
    }

    func testConnectTakesAuthorityFormOnly() throws {
        let (h, _) = try XCTUnwrap(head("CONNECT fcm.googleapis.com:443 HTTP/1.1\r\n\r\n"))
        XCTAssertEqual(h.method, .connect)
        XCTAssertEqual(h.fields.first(":authority")?.utf8String, "fcm.googleapis.com:443")
        XCTAssertNil(h.fields.first(":path"))
        XCTAssertNotNil(head("CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n"))
        XCTAssertEqual(error("CONNECT fcm.googleapis.com HTTP/1.1\r\n\r\n"), .badTarget, "no port")
        XCTAssertEqual(error("CONNECT a@b:443 HTTP/1.1\r\n\r\n"), .badTarget, "userinfo")
        XCTAssertEqual(error("CONNECT a/b:443 HTTP/1.1\r\n\r\n"), .badTarget)
        XCTAssertEqual(error("GET fcm.googleapis.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"), .badTarget, "authority-form is CONNECT's alone")
    }

    func testAuthoritySplitting() {
        XCTAssertEqual(Connection.splitAuthority("api.push.apple.com:443").map { "\($0.0)|\($0.1 ?? -1)" }, "api.push.apple.com|443")
        XCTAssertEqual(Connection.splitAuthority("[::1]:8443").map { "\($0.0)|\($0.1 ?? -1)" }, "::1|8443")
        XCTAssertEqual(Connection.splitAuthority("localhost").map { "\($0.0)|\($0.1 ?? -1)" }, "localhost|-1")
        XCTAssertNil(Connection.splitAuthority("host:0"))
        XCTAssertNil(Connection.splitAuthority("host:65536"))
        XCTAssertNil(Connection.splitAuthority("host:99999999999999999999999"))
        XCTAssertNil(Connection.splitAuthority(":443"))
        XCTAssertNil(Connection.splitAuthority("[::1"))
        XCTAssertEqual(InterceptAuthority.normalized("FCM.GoogleAPIs.com.."), "fcm.googleapis.com")
    }
}

/// A small deterministic generator for property-style tests.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

}
