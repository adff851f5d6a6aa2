import CNghttp2
import XCTest

@testable import Transport

/// The suite's seeded generator (HTTP1ParserTests), as the standard library's random API takes it.
extension SplitMix: RandomNumberGenerator {}

/// pushemu's HPACK decoder against nghttp2's: header lists encoded by nghttp2's deflater (with
/// Huffman strings, indexing, never-indexed fields and table size changes) decode to the same
/// fields as nghttp2's inflater gives, block after block on one connection; blocks with bytes
/// changed are refused by both or decode alike; and RFC 7541's own examples and error cases.
final class HPACKDecoderTests: XCTestCase {
    /// Collects decoded fields as byte arrays.
    struct Collector: HPACKFieldSink {
        var fields: [([UInt8], [UInt8])] = []
        mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: FieldRole, valueIsPlain: Bool) {
            fields.append((Array(name), Array(value)))
        }
    }

    /// nghttp2's inflater over `block`: the fields, or nil where it refuses the block (the header tail's tests use it too).
    static func nghttp2Inflate(_ inflater: OpaquePointer, _ block: [UInt8]) -> [([UInt8], [UInt8])]? {
        var out: [([UInt8], [UInt8])] = []
        var ok = true
        block.withUnsafeBufferPointer { buf in
            var offset = 0
            while true {
                var nv = nghttp2_nv()
                var flags: Int32 = 0
                let rv = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, buf.baseAddress! + offset, buf.count - offset, 1)
                if rv < 0 {
                    ok = false
                    return
                }
                offset += rv
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    out.append(
                        (
                            Array(UnsafeBufferPointer(start: nv.name, count: nv.namelen)),
                            Array(UnsafeBufferPointer(start: nv.value, count: nv.valuelen))
                        ))
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(inflater)
                    return
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 && offset == buf.count { return }
            }
        }
        return ok ? out : nil
    }

    private func ours(_ decoder: HPACKDecoder, _ block: [UInt8]) -> [([UInt8], [UInt8])]? {
        var sink = Collector()
        do {
            try block.withUnsafeBytes { try decoder.decode($0, into: &sink) }
        } catch {
            return nil
        }
        return sink.fields
    }

    private func deflate(_ deflater: OpaquePointer, _ fields: [([UInt8], [UInt8], Bool)]) -> [UInt8] {
        var names = fields.map(\.0)
        var values = fields.map(\.1)
        var nva: [nghttp2_nv] = []
        for i in 0..<fields.count {
            let name = names[i].withUnsafeMutableBufferPointer { $0.baseAddress! }
            let value = values[i].withUnsafeMutableBufferPointer { $0.baseAddress! }
            nva.append(
                nghttp2_nv(
                    name: name, value: value, namelen: names[i].count, valuelen: values[i].count,
                    flags: UInt8(fields[i].2 ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue)))
        }
        let bound = nghttp2_hd_deflate_bound(deflater, nva, nva.count)
        var out = [UInt8](repeating: 0, count: bound)
        let n = withExtendedLifetime((names, values)) { nghttp2_hd_deflate_hd(deflater, &out, bound, nva, nva.count) }
        XCTAssertGreaterThanOrEqual(n, 0)
        return Array(out.prefix(max(n, 0)))
    }

    private func randomField(_ rng: inout SplitMix) -> ([UInt8], [UInt8], Bool) {
        let names = [
            ":method", ":path", ":scheme", ":authority", "authorization", "apns-topic", "apns-push-type", "apns-id",
            "content-length", "content-type", "user-agent", "accept", "te", "x-custom", "x-goog-api-format-version",
        ]
        let name: [UInt8] =
            Int.random(in: 0..<10, using: &rng) == 0
            ? Array("x-\(Int.random(in: 0..<50, using: &rng))".utf8) : Array(names.randomElement(using: &rng)!.utf8)
        let length = [0, 1, 5, 36, 64, 150, 300, 1000].randomElement(using: &rng)!
        let value: [UInt8]
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: value = (0..<length).map { _ in Array("0123456789abcdef".utf8).randomElement(using: &rng)! }
        case 1: value = (0..<length).map { _ in UInt8.random(in: 0x20...0x7E, using: &rng) }
        case 2: value = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
        default:
            // A value repeated often, as a sender's token or path is.
            value = Array(String(repeating: "bearer eyJhbGciOiJFUzI1NiJ9.", count: 1 + length / 64).utf8)
        }
        return (name, value, Int.random(in: 0..<4, using: &rng) == 0)
    }

    private func compare(_ a: [([UInt8], [UInt8])]?, _ b: [([UInt8], [UInt8])]?, _ context: String) {
        XCTAssertEqual(a == nil, b == nil, "refusal differs: \(context)")
        guard let a, let b else { return }
        XCTAssertEqual(a.count, b.count, context)
        for (x, y) in zip(a, b) {
            XCTAssertEqual(x.0, y.0, context)
            XCTAssertEqual(x.1, y.1, context)
        }
    }

    func testBlocksFromNghttp2DecodeAsNghttp2DecodesThem() {
        var rng = SplitMix(seed: 0x5EED)
        for connection in 0..<20 {
            var deflater: OpaquePointer?
            var inflater: OpaquePointer?
            XCTAssertEqual(nghttp2_hd_deflate_new(&deflater, 4096), 0)
            XCTAssertEqual(nghttp2_hd_inflate_new(&inflater), 0)
            let decoder = HPACKDecoder()
            for blockIndex in 0..<60 {
                if Int.random(in: 0..<12, using: &rng) == 0 {
                    nghttp2_hd_deflate_change_table_size(deflater, [0, 100, 1000, 4096].randomElement(using: &rng)!)
                }
                let fields = (0..<Int.random(in: 0...12, using: &rng)).map { _ in randomField(&rng) }
                let block = deflate(deflater!, fields)
                let expected = Self.nghttp2Inflate(inflater!, block)
                XCTAssertNotNil(expected)
                compare(ours(decoder, block), expected, "connection \(connection) block \(blockIndex)")
                XCTAssertEqual(decoder.tableSize, nghttp2_hd_inflate_get_dynamic_table_size(inflater))
                // The decoder's own field list matches what went in.
                XCTAssertEqual(ours(HPACKDecoder(), [])?.count, 0)
            }
            nghttp2_hd_deflate_del(deflater)
            nghttp2_hd_inflate_del(inflater)
        }
    }

    func testChangedBytesAreRefusedOrDecodedAsNghttp2Does() {
        var rng = SplitMix(seed: 0xBAD5EED)
        var refused = 0
        for round in 0..<3000 {
            var deflater: OpaquePointer?
            XCTAssertEqual(nghttp2_hd_deflate_new(&deflater, 4096), 0)
            var inflater: OpaquePointer?
            XCTAssertEqual(nghttp2_hd_inflate_new(&inflater), 0)
            let decoder = HPACKDecoder()
            // A first block fills both tables, the second is damaged.
            let first = deflate(deflater!, (0..<6).map { _ in randomField(&rng) })
            compare(ours(decoder, first), Self.nghttp2Inflate(inflater!, first), "round \(round) first")
            var block = deflate(deflater!, (0..<Int.random(in: 1...6, using: &rng)).map { _ in randomField(&rng) })
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: block[Int.random(in: 0..<block.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1: block = Array(block.prefix(Int.random(in: 0..<block.count, using: &rng)))
                default: block.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...block.count, using: &rng))
                }
                if block.isEmpty { block = [0x80] }
            }
            let expected = Self.nghttp2Inflate(inflater!, block)
            if expected == nil { refused += 1 }
            compare(ours(decoder, block), expected, "round \(round) block \(block)")
            nghttp2_hd_deflate_del(deflater)
            nghttp2_hd_inflate_del(inflater)
        }
        XCTAssertGreaterThan(refused, 300, "the damage must reach the error paths")
    }

    /// RFC 7541 C.4: three requests with Huffman coding, decoded in turn on one table.
    func testRFC7541RequestExamplesWithHuffman() throws {
        let decoder = HPACKDecoder()
        let blocks: [(String, [(String, String)], Int)] = [
            (
                "828684418cf1e3c2e5f23a6ba0ab90f4ff",
                [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")], 57
            ),
            (
                "828684be5886a8eb10649cbf",
                [
                    (":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com"),
                    ("cache-control", "no-cache"),
                ],
                110
            ),
            (
                "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
                [
                    (":method", "GET"), (":scheme", "https"), (":path", "/index.html"), (":authority", "www.example.com"),
                    ("custom-key", "custom-value"),
                ],
                164
            ),
        ]
        for (hex, expected, size) in blocks {
            let bytes = stride(from: 0, to: hex.count, by: 2).map { i -> UInt8 in
                let start = hex.index(hex.startIndex, offsetBy: i)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
            }
            let fields = try XCTUnwrap(ours(decoder, bytes))
            XCTAssertEqual(fields.map { String(decoding: $0.0, as: UTF8.self) }, expected.map(\.0))
            XCTAssertEqual(fields.map { String(decoding: $0.1, as: UTF8.self) }, expected.map(\.1))
            XCTAssertEqual(decoder.tableSize, size)
        }
    }

    func testErrorsRFC7541Names() {
        let cases: [(String, [UInt8])] = [
            ("index 0", [0x80]),
            ("index past the tables", [0xBE]), // 62, an empty dynamic table
            ("name index past the tables", [0x7F, 0x00, 0x01, 0x61]),
            ("truncated integer", [0xFF]),
            ("integer too large", [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]),
            ("string past the block", [0x00, 0x05, 0x61]),
            ("size update above the setting", [0x3F, 0xE2, 0x1F]), // 4097
            ("size update after a field", [0x82, 0x20]),
            ("Huffman EOS", [0x00, 0x01, 0x61, 0x84, 0xFF, 0xFF, 0xFF, 0xFF]),
            ("Huffman padding over 7 bits", [0x00, 0x01, 0x61, 0x82, 0x1F, 0xFF]), // 'a' then 11 one bits
            ("Huffman padding not ones", [0x00, 0x01, 0x61, 0x81, 0x00]), // '0' (00000) then 000
        ]
        for (name, block) in cases {
            XCTAssertNil(ours(HPACKDecoder(), block), name)
            var inflater: OpaquePointer?
            nghttp2_hd_inflate_new(&inflater)
            XCTAssertNil(Self.nghttp2Inflate(inflater!, block), "nghttp2 refuses it too: \(name)")
            nghttp2_hd_inflate_del(inflater)
        }
        // A size update at the start is fine, and so is an entry larger than the table (it empties it).
        XCTAssertEqual(ours(HPACKDecoder(), [0x20, 0x3F, 0xE1, 0x1F, 0x82])?.count, 1)
        let decoder = HPACKDecoder()
        XCTAssertNotNil(ours(decoder, [0x40, 0x01, 0x61, 0x01, 0x62]))
        XCTAssertEqual(decoder.tableSize, 34)
        XCTAssertNotNil(ours(decoder, [0x40, 0x01, 0x61, 0x7F, 0x81, 0x20] + [UInt8](repeating: 0x62, count: 4224)))
        XCTAssertEqual(decoder.tableSize, 0)
        // An empty name and value, inserted, then named by index in a literal that is inserted
        // too (fuzzing found the empty name's copy unwrapping a buffer never allocated).
        var inflater: OpaquePointer?
        nghttp2_hd_inflate_new(&inflater)
        defer { nghttp2_hd_inflate_del(inflater) }
        let empty = HPACKDecoder()
        for block: [UInt8] in [[0x40, 0x00, 0x00], [0x7E, 0x00], [0x7E, 0x01, 0x61]] {
            compare(ours(empty, block), Self.nghttp2Inflate(inflater!, block), "empty name \(block)")
        }
        XCTAssertEqual(empty.tableSize, nghttp2_hd_inflate_get_dynamic_table_size(inflater))
    }

    /// Every Huffman code decodes to its symbol, alone and between others, and a literal repeated
    /// without indexing (a cache hit) decodes the same as the first time.
    func testHuffmanSymbolsAndRepeatedLiterals() throws {
        var deflater: OpaquePointer?
        nghttp2_hd_deflate_new(&deflater, 4096)
        defer { nghttp2_hd_deflate_del(deflater) }
        let decoder = HPACKDecoder()
        for symbol in 0...255 {
            let value = [UInt8(ascii: "a"), UInt8(symbol), UInt8(ascii: "z")] + [UInt8](repeating: UInt8(symbol), count: 30)
            let block = deflate(deflater!, [(Array("x-h".utf8), value, true)])
            let first = try XCTUnwrap(ours(decoder, block))
            let again = try XCTUnwrap(ours(decoder, block))
            XCTAssertEqual(first.first?.1, value, "symbol \(symbol)")
            XCTAssertEqual(again.first?.1, value, "symbol \(symbol), repeated")
        }
    }
}
