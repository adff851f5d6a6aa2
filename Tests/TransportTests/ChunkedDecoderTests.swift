import XCTest

@testable import Transport

final class ChunkedDecoderTests: XCTestCase {
    func decode(_ s: String, max: Int = 1 << 20) -> (ChunkedDecoder.Outcome, [UInt8]) {
        var d = ChunkedDecoder()
        var body: [UInt8] = []
        let r = Array(s.utf8).withUnsafeBytes { d.decode($0, into: &body, maxBody: max) }
        return (r, body)
    }

    func testSimpleBody() {
        let s = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\nNEXT"
        let (r, body) = decode(s)
        XCTAssertEqual(r, .done(consumed: s.utf8.count - 4))
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "hello, world")
    }

    func testTrailers() {
        let s = "3\r\nabc\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n"
        let (r, body) = decode(s)
        XCTAssertEqual(r, .done(consumed: s.utf8.count))
        XCTAssertEqual(body, Array("abc".utf8))
    }

    func testUppercaseHexAndLeadingZeros() {
        let s = "000A\r\n0123456789\r\n0\r\n\r\n"
        XCTAssertEqual(decode(s).0, .done(consumed: s.utf8.count))
    }

    func testChunkExtensionsAreBounded() {
        let fine = "1;" + String(repeating: "e", count: 1024) + "\r\na\r\n0\r\n\r\n"
        XCTAssertEqual(decode(fine).0, .done(consumed: fine.utf8.count))
        XCTAssertEqual(decode("1;" + String(repeating: "e", count: 1025) + "\r\na\r\n").0, .failure(.chunkExtensionTooLong))
        // The bound is per chunk line: many lines, each under it, are fine.
        let many = String(repeating: "1;" + String(repeating: "x", count: 1000) + "\r\na\r\n", count: 5) + "0\r\n\r\n"
        XCTAssertEqual(decode(many).0, .done(consumed: many.utf8.count))
    }

    func testMalformedRefused() {
        XCTAssertEqual(decode("\r\nabc").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("g\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode(" 5\r\nhello\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("5 \r\nhello\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("-5\r\nhello\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("0x5\r\nhello\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("1000000000000000\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("5\nhello\r\n").0, .failure(.badChunkSize))
        XCTAssertEqual(decode("5\rhello\r\n").0, .failure(.bareCR))
        XCTAssertEqual(decode("5\r\nhelloX\r\n").0, .failure(.badChunkFraming))
        XCTAssertEqual(decode("5\r\nhello\rX").0, .failure(.bareCR))
        XCTAssertEqual(decode("0\r\n X: 1\r\n\r\n").0, .failure(.obsFold))
        XCTAssertEqual(decode("0\r\nX: 1\n\r\n").0, .failure(.bareLF))
        XCTAssertEqual(decode("5;a\nb\r\nhello\r\n").0, .failure(.badChunkSize))
    }

    func testLimitEnforcedBeforeBuffering() {
        let (r, body) = decode("100000\r\n" + String(repeating: "x", count: 10), max: 4096)
        XCTAssertEqual(r, .tooLarge)
        XCTAssertTrue(body.isEmpty)
    }

    /// Splitting the input at every possible point gives the same body and total consumption.
    func testEverySplitPointGivesSameResult() {
        let s = Array("4\r\nWiki\r\n5;name=v\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: x\r\n\r\n".utf8)
        for cut in 0...s.count {
            var d = ChunkedDecoder()
            var body: [UInt8] = []
            let r1 = s[0..<cut].withUnsafeBytes { d.decode($0, into: &body, maxBody: 1000) }
            var total = cut
            if case .done(let c) = r1 {
                total = c
            } else {
                XCTAssertEqual(r1, .needMore, "cut \(cut)")
                let r2 = s[cut...].withUnsafeBytes { d.decode($0, into: &body, maxBody: 1000) }
                guard case .done(let c2) = r2 else {
                    XCTFail("cut \(cut): \(r2)")
                    return
                }
                total = cut + c2
            }
            XCTAssertEqual(total, s.count, "cut \(cut)")
            XCTAssertEqual(String(decoding: body, as: UTF8.self), "Wikipedia in\r\n\r\nchunks.", "cut \(cut)")
        }
    }

    /// Random bodies chunked randomly and fed in random pieces decode to the original.
    func testRandomChunkingRoundTrip() {
        var rng = SplitMix(seed: 99)
        for _ in 0..<300 {
            let body = (0..<Int(rng.next() % 3000)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            var wire: [UInt8] = []
            var i = 0
            while i < body.count {
                let n = min(body.count - i, 1 + Int(rng.next() % 700))
                wire += Array(String(n, radix: 16, uppercase: rng.next() % 2 == 0).utf8) + [13, 10]
                wire += body[i..<(i + n)] + [13, 10]
                i += n
            }
            wire += Array("0\r\n\r\n".utf8)
            var d = ChunkedDecoder()
            var out: [UInt8] = []
            var pos = 0
            var finished = false
            while pos < wire.count && !finished {
                let n = min(wire.count - pos, 1 + Int(rng.next() % 400))
                let r = wire[pos..<(pos + n)].withUnsafeBytes { d.decode($0, into: &out, maxBody: 1 << 20) }
                switch r {
                case .needMore: pos += n
                case .done(let c):
                    pos += c
                    finished = true
                default:
                    XCTFail("\(r)")
                    return
                }
            }
            XCTAssertTrue(finished)
            XCTAssertEqual(pos, wire.count)
            XCTAssertEqual(out, body)
        }
    }
}
