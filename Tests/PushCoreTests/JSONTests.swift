import Foundation
import PushCore
import XCTest

final class JSONTests: XCTestCase {
    /// The vendored JSONTestSuite parsing corpus (MIT, see its LICENSE) in `Tests/Fixtures`.
    static let suite = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/JSONTestSuite/test_parsing")

    func files(_ prefix: String) throws -> [URL] {
        let all = try FileManager.default.contentsOfDirectory(at: Self.suite, includingPropertiesForKeys: nil)
        return all.filter { $0.lastPathComponent.hasPrefix(prefix) && $0.pathExtension == "json" }.sorted { $0.path < $1.path }
    }

    func parse(_ data: [UInt8]) -> JSONError? {
        var tokens: [JSONToken] = []
        return data.withUnsafeBytes { JSONParser.parse($0, into: &tokens) }
    }

    func testConformanceSuite() throws {
        let y = try files("y_")
        let n = try files("n_")
        let i = try files("i_")
        XCTAssertGreaterThan(y.count, 90, "the JSONTestSuite must be in Tests/Fixtures/JSONTestSuite")
        XCTAssertGreaterThan(n.count, 180)
        for f in y {
            let e = parse(Array(try Data(contentsOf: f)))
            XCTAssertNil(e, "\(f.lastPathComponent) must be accepted: \(String(describing: e))")
        }
        for f in n {
            XCTAssertNotNil(parse(Array(try Data(contentsOf: f))), "\(f.lastPathComponent) must be rejected")
        }
        // Implementation-defined: either answer, but never a crash.
        for f in i { _ = parse(Array(try Data(contentsOf: f))) }
    }

    func testTokensFormADOM() throws {
        let text = Array(
            #"{"aps":{"alert":{"title":"T","body":"B\n\u00e9"},"badge":3,"x":[1,2,{"y":null}]},"_mId":"m","_dId":"d","n":-1.5e3,"t":true}"#
                .utf8)
        var tokens: [JSONToken] = []
        try text.withUnsafeBytes { raw in
            XCTAssertNil(JSONParser.parse(raw, into: &tokens))
            let v = JSONView(bytes: raw, tokens: tokens)
            let aps = try XCTUnwrap(v.member(0, "aps"))
            let alert = try XCTUnwrap(v.member(aps, "alert"))
            XCTAssertEqual(v.string(try XCTUnwrap(v.member(alert, "title"))), "T")
            XCTAssertEqual(v.string(try XCTUnwrap(v.member(alert, "body"))), "B\né")
            XCTAssertEqual(v.integer(try XCTUnwrap(v.member(aps, "badge"))), 3)
            let x = try XCTUnwrap(v.member(aps, "x"))
            var kinds: [JSONToken.Kind] = []
            v.forEachElement(x) { kinds.append(v.tokens[$0].kind) }
            XCTAssertEqual(kinds, [.number, .number, .object])
            XCTAssertEqual(v.string(try XCTUnwrap(v.member(0, "_dId"))), "d")
            XCTAssertEqual(v.number(try XCTUnwrap(v.member(0, "n"))), -1500)
            XCTAssertEqual(tokens[try XCTUnwrap(v.member(0, "t"))].kind, .true)
            XCTAssertNil(v.member(0, "missing"))
            var keys: [String] = []
            v.forEachMember(0) { k, _ in keys.append(v.string(k)) }
            XCTAssertEqual(keys, ["aps", "_mId", "_dId", "n", "t"])
        }
    }

    /// A document with far more values than the buffer starts with: the buffer grows mid-parse
    /// and every token (including the containers' `next` and `count`, written after their
    /// children) lands where it belongs; a reused buffer is emptied first.
    func testTokenBufferGrowsDuringAParse() {
        let items = (0..<500).map { "{\"k\($0)\":[\($0),\"v\"]}" }.joined(separator: ",")
        let doc = Array("{\"list\":[\(items)],\"end\":true}".utf8)
        let buffer = JSONTokenBuffer(capacity: 8)
        XCTAssertNil(doc.withUnsafeBytes { JSONParser.parse($0, into: buffer) })
        // object, "list", array, 500 x (object, key, array, number, string), "end", true
        XCTAssertEqual(buffer.tokens.count, 3 + 500 * 5 + 2)
        doc.withUnsafeBytes { raw in
            let v = JSONView(bytes: raw, buffer: buffer)
            guard let list = v.member(0, "list") else { return XCTFail("list") }
            XCTAssertEqual(v.tokens[list].count, 500)
            XCTAssertEqual(Int(v.tokens[list].next), 3 + 500 * 5)
            var n = 0
            v.forEachElement(list) { e in
                v.forEachMember(e) { _, arr in
                    XCTAssertEqual(v.integer(Int(v.tokens[arr].next) - 2), n)
                }
                n += 1
            }
            XCTAssertEqual(n, 500)
            XCTAssertTrue(v.rawEquals(Int(v.tokens[0].next) - 1, "true"))
        }
        XCTAssertNil(Array("[1]".utf8).withUnsafeBytes { JSONParser.parse($0, into: buffer) })
        XCTAssertEqual(buffer.tokens.count, 2)
    }

    /// The 8-bytes-at-a-time string scan stops exactly at the first quote, backslash, control
    /// byte or non-ASCII byte wherever it falls in the word.
    func testStringScanFindsEverySpecialByteAtEveryOffset() {
        for n in 0..<24 {
            let plain = String(repeating: "a", count: n)
            for (special, valid) in [("\\\"", true), ("\\n", true), ("é", true), ("\u{01}", false), ("\u{1F}", false)] {
                let doc = Array("[\"\(plain)\(special)bcdefghijklmnop\",1]".utf8)
                let buffer = JSONTokenBuffer(capacity: 4)
                let error = doc.withUnsafeBytes { JSONParser.parse($0, into: buffer) }
                XCTAssertEqual(error == nil, valid, "offset \(n), \(special.debugDescription)")
                guard valid else { continue }
                XCTAssertEqual(buffer.tokens.count, 3)
                doc.withUnsafeBytes { raw in
                    XCTAssertEqual(
                        JSONView(bytes: raw, buffer: buffer).string(1),
                        plain + (special == "\\\"" ? "\"" : special == "\\n" ? "\n" : special) + "bcdefghijklmnop")
                }
            }
            let unterminated = Array("[\"\(plain)".utf8)
            XCTAssertNotNil(unterminated.withUnsafeBytes { JSONParser.parse($0, into: JSONTokenBuffer()) })
        }
    }

    func testSurrogatePairsAndLoneSurrogates() {
        var tokens: [JSONToken] = []
        let text = Array(#"["\ud83d\ude00", "\ud800"]"#.utf8)
        text.withUnsafeBytes { raw in
            XCTAssertNil(JSONParser.parse(raw, into: &tokens))
            let v = JSONView(bytes: raw, tokens: tokens)
            XCTAssertEqual(v.string(1), "😀")
            XCTAssertEqual(v.string(2), "\u{FFFD}")
        }
    }

    func testDepthAndRandomInputsNeverCrash() {
        XCTAssertNotNil(parse(Array(repeating: UInt8(ascii: "["), count: 100_000)))
        var rng = FastRandom(seed: 5)
        let alphabet = Array("{}[]\":,0123456789-+.eE truefalsnul\\\u{1}é".utf8)
        for _ in 0..<20_000 {
            let n = Int(rng.next(below: 40))
            _ = parse((0..<n).map { _ in alphabet[Int(rng.next(below: UInt64(alphabet.count)))] })
        }
    }

    func testWriterQuotes() {
        XCTAssertEqual(JSONWriter.quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"")
    }
}

final class IdentifierTests: XCTestCase {
    func testUUIDRoundTripAndCanonicalForm() {
        var rng = FastRandom(seed: 1)
        for _ in 0..<1000 {
            let u = UUIDValue.random(&rng)
            let s = u.description
            XCTAssertEqual(s.count, 36)
            XCTAssertEqual(Array(s)[14], "4", "version 4")
            XCTAssertTrue("89ab".contains(Array(s)[19]), "RFC 4122 variant")
            XCTAssertEqual(UUIDValue.parseCanonicalLowercase(Array(s.utf8)), u)
        }
        XCTAssertNil(UUIDValue.parseCanonicalLowercase(Array("123E4567-E89B-12D3-A456-426614174000".utf8)), "uppercase is not canonical")
        XCTAssertNil(UUIDValue.parseCanonicalLowercase(Array("123e4567e89b12d3a456426614174000".utf8)))
        XCTAssertNil(UUIDValue.parseCanonicalLowercase(Array("123e4567-e89b-12d3-a456-42661417400g".utf8)))
        XCTAssertNotNil(UUIDValue.parseCanonicalLowercase(Array("123e4567-e89b-12d3-a456-426614174000".utf8)))
        // Formatting matches a plain reference implementation bit for bit.
        for v in [
            UUIDValue(high: 0, low: 0), UUIDValue(high: .max, low: .max),
            UUIDValue(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210),
        ] {
            let hex = String(v.high, radix: 16).leftPad(16) + String(v.low, radix: 16).leftPad(16)
            let c = Array(hex)
            let expected =
                String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
            XCTAssertEqual(v.description, expected)
        }
    }

    func testTokenKeyIsStableCaseInsensitiveAndSpreads() {
        let t = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"
        XCTAssertEqual(TokenKey(t), TokenKey(Array(t.utf8)))
        XCTAssertEqual(TokenKey(t), TokenKey(t.uppercased()), "hex tokens are case-insensitive")
        XCTAssertNotEqual(TokenKey(t), TokenKey(String(t.dropLast()) + "1"))
        XCTAssertNotEqual(TokenKey("abc"), TokenKey("abd"))
        XCTAssertNotEqual(TokenKey("com.a"), TokenKey("com.a.voip"))
        var keys = Set<TokenKey>()
        var shards = [Int](repeating: 0, count: 64)
        for i in 0..<10_000 {
            let k = TokenKey(String(format: "%064x", i))
            keys.insert(k)
            shards[k.shard(64)] += 1
        }
        XCTAssertEqual(keys.count, 10_000)
        for s in shards { XCTAssertEqual(Double(s), 10_000 / 64, accuracy: 80) }
    }

    /// Keys hash by `HashMix` (no SipHash): keys that share a word still get distinct hashes,
    /// the table's seed changes them, and the low bits a table indexes by spread evenly.
    func testKeyHashesFoldTheSeedAndSpread() {
        let k = TokenKey("f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820")
        XCTAssertEqual(
            k._rawHashValue(seed: 7),
            TokenKey(Array("F0678FEBBFA4DD1C8C0B08D0B1DC227FAAADAD9686076C3755A187DF74029820".utf8))._rawHashValue(seed: 7))
        XCTAssertNotEqual(k._rawHashValue(seed: 7), k._rawHashValue(seed: 8))
        XCTAssertEqual(k.hashValue, k.hashValue)
        var hashes = Set<Int>()
        var buckets = [Int](repeating: 0, count: 256)
        for i in 0..<4096 {
            let sameHigh = UUIDValue(high: 42, low: UInt64(i))
            let sameLow = UUIDValue(high: UInt64(i), low: 42)
            hashes.insert(sameHigh._rawHashValue(seed: 1))
            hashes.insert(sameLow._rawHashValue(seed: 1))
            buckets[sameHigh._rawHashValue(seed: 1) & 255] += 1
        }
        XCTAssertEqual(hashes.count, 8191, "only (42, 42) is in both families")
        for b in buckets { XCTAssertEqual(Double(b), 16, accuracy: 16) }
        var table: [UUIDValue: Int] = [:]
        for i in 0..<10_000 { table[UUIDValue(high: UInt64(i) << 32, low: 0)] = i }
        XCTAssertEqual(table.count, 10_000)
        XCTAssertEqual(table[UUIDValue(high: 1234 << 32, low: 0)], 1234)
    }

    func testFastRandomDistribution() {
        var rng = FastRandom(seed: 9)
        var buckets = [Int](repeating: 0, count: 10)
        for _ in 0..<100_000 { buckets[Int(rng.next(below: 10))] += 1 }
        for b in buckets { XCTAssertEqual(Double(b), 10_000, accuracy: 500) }
        let d = rng.nextDouble()
        XCTAssertTrue(d >= 0 && d < 1)
    }

    /// A member of a parsed body read as a document of its own (FCM's `message`, for the
    /// journal's campaign): its tokens rebased, the same answers as parsing it alone.
    func testASubtreeCopiedOutReadsAsItsOwnDocument() throws {
        let body = Array(#" {"validate_only":false, "message":{"data":{"_dId":"c7","n":[1,2]},"token":"t"} } "#.utf8)
        let buffer = JSONTokenBuffer()
        XCTAssertNil(body.withUnsafeBytes { JSONParser.parse($0, into: buffer) })
        let start = try XCTUnwrap(body.firstIndex(of: UInt8(ascii: "{")).map { body[($0 + 1)...].firstIndex(of: UInt8(ascii: "{"))! })
        let end = try XCTUnwrap(body.lastIndex(of: UInt8(ascii: "}")).map { body[..<$0].lastIndex(of: UInt8(ascii: "}"))! + 1 })
        let message = body[start..<end]
        let parsed = ParsedJSON(bytes: message, tokens: buffer)
        let root = try XCTUnwrap(parsed.root)
        let copy = buffer.copy(subtree: root, origin: start)
        let alone = JSONTokenBuffer()
        let bytes = Array(message)
        XCTAssertNil(bytes.withUnsafeBytes { JSONParser.parse($0, into: alone) })
        XCTAssertEqual(copy.tokens.count, alone.tokens.count)
        for (a, b) in zip(copy.tokens, alone.tokens) {
            XCTAssertEqual([a.kind.rawValue], [b.kind.rawValue])
            XCTAssertEqual([a.start, a.end, a.next, a.count], [b.start, b.end, b.next, b.count])
        }
        bytes.withUnsafeBytes { raw in
            let v = JSONView(bytes: raw, buffer: copy)
            XCTAssertEqual(v.member(0, "token").map(v.string), "t")
        }
        // A slice that is no value of the document (a string's bytes) has no root.
        XCTAssertNil(ParsedJSON(bytes: body[(end - 3)..<end], tokens: buffer).root)
    }

    /// `integer` read from the bytes gives what `Int(text)` gives for every number's text: the
    /// bounds, one past them, fractions, exponents and random values of every length.
    func testIntegerIsIntOfTheText() {
        var texts = [
            "0", "-0", "1", "-1", "7", "10", "-10", "9223372036854775807", "-9223372036854775808",
            "9223372036854775808", "-9223372036854775809", "92233720368547758070", "18446744073709551616",
            "1.0", "-1.5", "1e3", "1E+3", "-0.0", "0e0", "12345678901234567890123",
        ]
        var rng = FastRandom(seed: 42)
        for length in 1...20 {
            for _ in 0..<20 {
                var digits = String(Character(Unicode.Scalar(UInt8(ascii: "1") + UInt8(rng.next() % 9))))
                for _ in 1..<length { digits.append(Character(Unicode.Scalar(UInt8(ascii: "0") + UInt8(rng.next() % 10)))) }
                texts.append(digits)
                texts.append("-" + digits)
            }
        }
        let document = Array(("[" + texts.joined(separator: ",") + "]").utf8)
        let buffer = JSONTokenBuffer()
        XCTAssertNil(document.withUnsafeBytes { JSONParser.parse($0, into: buffer) })
        var fits = 0
        document.withUnsafeBytes { raw in
            let v = JSONView(bytes: raw, buffer: buffer)
            var n = 0
            v.forEachElement(0) { e in
                XCTAssertEqual(v.integer(e), Int(texts[n]), texts[n])
                if Int(texts[n]) != nil { fits += 1 }
                n += 1
            }
            XCTAssertEqual(n, texts.count)
        }
        XCTAssertGreaterThan(fits, 700, "most texts are Ints")
        XCTAssertLessThan(fits, texts.count, "some are not")
    }
}

extension String {
    func leftPad(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
