import CNghttp2
import XCTest

@testable import Transport

/// The receive path ahead of nghttp2: what it hands nghttp2 does not depend on how the bytes
/// were split into reads; plain requests are given to nghttp2 as their pseudo-headers and the
/// fields nghttp2 acts on, with every field kept here in order; anything unusual goes to
/// nghttp2 in full; structure nghttp2 refuses reaches it as sent.
final class HTTP2InboundTests: XCTestCase {
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [
            UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags, UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF),
            UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF),
        ] + payload
    }

    /// nghttp2's deflater for one connection's request blocks.
    final class Encoder {
        var deflater: OpaquePointer?
        init() { nghttp2_hd_deflate_new(&deflater, 4096) }
        deinit { nghttp2_hd_deflate_del(deflater) }

        func block(_ fields: [(String, String)], neverIndex: Set<String> = []) -> [UInt8] {
            var names = fields.map { Array($0.0.utf8) }
            var values = fields.map { Array($0.1.utf8) }
            var nva: [nghttp2_nv] = []
            for i in 0..<fields.count {
                nva.append(
                    nghttp2_nv(
                        name: names[i].withUnsafeMutableBufferPointer { $0.baseAddress! },
                        value: values[i].withUnsafeMutableBufferPointer { $0.baseAddress },
                        namelen: names[i].count, valuelen: values[i].count,
                        flags: UInt8(neverIndex.contains(fields[i].0) ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : 0)))
            }
            let bound = nghttp2_hd_deflate_bound(deflater, nva, nva.count)
            var out = [UInt8](repeating: 0, count: bound)
            let n = withExtendedLifetime((names, values)) { nghttp2_hd_deflate_hd(deflater, &out, bound, nva, nva.count) }
            return Array(out.prefix(n))
        }
    }

    private func request(_ path: String, token: String = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9.eyJpc3MiOiJERUYifQ.sig") -> [(
        String, String
    )] {
        [
            (":method", "POST"), (":scheme", "https"), (":path", path), (":authority", "127.0.0.1:8443"),
            ("apns-topic", "com.example.app"), ("authorization", token), ("content-length", "2"),
        ]
    }

    struct Fed: Equatable {
        var bytes: [UInt8] = []
        var verdicts: [HTTP2Inbound.BlockVerdict] = []
        /// The stream each decoded block was for, in order.
        var streams: [Int32] = []
        var fields: [[String]] = []
        var tooManyContinuations = false
    }

    /// Feeds `input` in the given read sizes; collects what nghttp2 would receive.
    private func feed(_ input: [UInt8], reads: [Int]) -> Fed {
        let inbound = HTTP2Inbound(maxHeaderListSize: 16 * 1024)
        var fed = Fed()
        var offset = 0
        var readIndex = 0
        while offset < input.count {
            let size = min(reads[readIndex % reads.count], input.count - offset)
            readIndex += 1
            let chunk = Array(input[offset..<(offset + size)])
            offset += size
            chunk.withUnsafeBytes { raw in
                var position = 0
                loop: while true {
                    switch inbound.step(raw, &position) {
                    case .done: break loop
                    case .pass(let r): fed.bytes += raw[r]
                    case .emit(let block):
                        fed.bytes += inbound.output
                        if let block {
                            fed.verdicts.append(block.verdict)
                            fed.streams.append(block.stream)
                        }
                        if block?.verdict == .plain {
                            var fields = HTTPFields()
                            inbound.takeFields(into: &fields)
                            fed.fields.append(fields.pairs.map { "\($0.0): \($0.1)" })
                        }
                    case .tooManyContinuations:
                        fed.tooManyContinuations = true
                        break loop
                    }
                }
            }
        }
        return fed
    }

    /// A connection: preface, SETTINGS, requests of every shape, DATA, PING, trailers.
    private func connectionBytes() -> [UInt8] {
        let encoder = Encoder()
        var bytes = Self.preface + frame(0x4, 0, 0, [0, 3, 0, 0, 0, 100])
        for i in 0..<3 {
            let path = "/3/device/" + String(repeating: "ab", count: 32)
            bytes += frame(0x1, 0x4, UInt32(1 + 2 * i), encoder.block(request(path), neverIndex: ["authorization"]))
            bytes += frame(0x0, 0x1, UInt32(1 + 2 * i), Array("{}".utf8))
        }
        // PADDED and PRIORITY, END_STREAM on the HEADERS.
        let padded = encoder.block([(":method", "GET"), (":scheme", "https"), (":path", "/healthz"), (":authority", "x")])
        bytes += frame(0x1, 0x4 | 0x1 | 0x8 | 0x20, 7, [3] + [0, 0, 0, 0, 16] + padded + [0, 0, 0])
        bytes += frame(0x6, 0, 0, [UInt8](repeating: 7, count: 8))
        // A block in three pieces.
        let split = encoder.block(request("/3/device/" + String(repeating: "cd", count: 32)))
        let third = split.count / 3
        bytes += frame(0x1, 0, 9, Array(split[0..<third]))
        bytes += frame(0x9, 0, 9, Array(split[third..<(2 * third)]))
        bytes += frame(0x9, 0x4, 9, Array(split[(2 * third)...]))
        bytes += frame(0x0, 0, 9, Array("{".utf8))
        // Trailers on stream 9.
        bytes += frame(0x0, 0, 9, Array("}".utf8))
        bytes += frame(0x1, 0x4 | 0x1, 9, encoder.block([("x-trailer", "done")]))
        // A field nghttp2 drops (a value with a trailing space): the block goes in full.
        bytes += frame(
            0x1, 0x5, 11, encoder.block([(":method", "GET"), (":scheme", "https"), (":path", "/"), (":authority", "x"), ("x-bad", "v ")]))
        return bytes
    }

    func testWhatNghttp2GetsDoesNotDependOnHowReadsSplitTheBytes() {
        let input = connectionBytes()
        let whole = feed(input, reads: [input.count])
        XCTAssertEqual(
            whole.verdicts,
            [.plain, .plain, .plain, .plain, .full, .full, .full])
        XCTAssertEqual(whole.streams, [1, 3, 5, 7, 9, 9, 11], "each verdict names the stream its block is for")
        XCTAssertEqual(whole.fields.count, 4)
        XCTAssertEqual(whole.fields[0].first, ":method: POST")
        XCTAssertTrue(whole.fields[0].contains(":path: /3/device/" + String(repeating: "ab", count: 32)))
        XCTAssertEqual(whole.fields[1], whole.fields[0], "the repeated never-indexed authorization decodes the same")
        XCTAssertEqual(whole.fields[3], [":method: GET", ":scheme: https", ":path: /healthz", ":authority: x"])
        for reads in [[1], [2], [3], [7], [9], [10], [64], [1000], [5, 1, 17, 2]] {
            XCTAssertEqual(feed(input, reads: reads), whole, "reads of \(reads)")
        }
    }

    /// What nghttp2 receives for a plain request, decoded: the pseudo-headers with `:path` as
    /// `/`, and `content-length`; nothing else.
    func testPlainBlockGivesNghttp2OnlyWhatItActsOn() throws {
        let encoder = Encoder()
        let input = Self.preface + frame(0x1, 0x4, 1, encoder.block(request("/3/device/ff"), neverIndex: ["authorization"]))
        let fed = feed(input, reads: [input.count])
        XCTAssertEqual(fed.verdicts, [.plain])
        let headers = Array(fed.bytes[(Self.preface.count)...])
        XCTAssertEqual(headers[3], 0x1)
        XCTAssertEqual(headers[4], 0x4)
        var inflater: OpaquePointer?
        nghttp2_hd_inflate_new(&inflater)
        defer { nghttp2_hd_inflate_del(inflater) }
        let decoded = inflate(headers, inflater).first ?? []
        XCTAssertEqual(decoded, [":method: POST", ":scheme: https", ":path: /", ":authority: 127.0.0.1:8443", "content-length: 2"])
        XCTAssertEqual(fed.fields.first?.count, 7)
    }

    func testUnusualBlocksGoInFull() {
        let shapes: [(String, [(String, String)])] = [
            ("a pseudo-header after a field", [(":method", "GET"), (":scheme", "https"), ("x-a", "1"), (":path", "/")]),
            ("an unknown pseudo-header", [(":method", "GET"), (":scheme", "https"), (":path", "/"), (":protocol", "websocket")]),
            ("a connection-specific field", [(":method", "GET"), (":scheme", "https"), (":path", "/"), ("connection", "close")]),
            ("an uppercase name", [(":method", "GET"), (":scheme", "https"), (":path", "/"), ("X-Up", "1")]),
            ("no :path", [(":method", "GET"), (":scheme", "https")]),
            ("a path that is not origin-form", [(":method", "OPTIONS"), (":scheme", "https"), (":path", "*")]),
            ("CONNECT", [(":method", "CONNECT"), (":authority", "x:1")]),
            ("two :path", [(":method", "GET"), (":scheme", "https"), (":path", "/"), (":path", "/a")]),
            ("a NUL in a value", [(":method", "GET"), (":scheme", "https"), (":path", "/"), ("x-a", "a\u{0}b")]),
        ]
        for (name, fields) in shapes {
            let input = Self.preface + frame(0x1, 0x5, 1, Encoder().block(fields))
            XCTAssertEqual(feed(input, reads: [input.count]).verdicts, [.full], name)
        }
        // Over the list limit: in full (nghttp2's callbacks answer 431); over four times: reset.
        let big =
            [(":method", "GET"), (":scheme", "https"), (":path", "/")] + (0..<17).map { ("x-\($0)", String(repeating: "v", count: 1000)) }
        let input = Self.preface + frame(0x1, 0x5, 1, Encoder().block(big))
        XCTAssertEqual(feed(input, reads: [input.count]).verdicts, [.full])
        let bomb =
            [(":method", "GET"), (":scheme", "https"), (":path", "/")] + (0..<70).map { ("x-\($0)", String(repeating: "v", count: 1000)) }
        let encoded = Encoder().block(bomb)
        var bytes = Self.preface + frame(0x1, 0, 1, Array(encoded[0..<16_000]))
        var offset = 16_000
        while offset < encoded.count {
            let end = min(offset + 16_000, encoded.count)
            bytes += frame(0x9, end == encoded.count ? 0x4 : 0, 1, Array(encoded[offset..<end]))
            offset = end
        }
        XCTAssertEqual(feed(bytes, reads: [1000]).verdicts, [.reset])
    }

    func testStructureNghttp2RefusesReachesItAsSent() {
        let encoder = Encoder()
        let block = encoder.block(request("/"))
        let cases: [(String, [UInt8])] = [
            ("padding past the payload", frame(0x1, 0x4 | 0x8, 1, [200] + block)),
            ("HEADERS on stream 0", frame(0x1, 0x4, 0, block)),
            ("a CONTINUATION out of place", frame(0x9, 0x4, 1, block)),
            ("PUSH_PROMISE", frame(0x5, 0x4, 1, [0, 0, 0, 2] + block)),
            ("an oversized frame", frame(0x1, 0x4, 1, [UInt8](repeating: 0x82, count: 16_385))),
        ]
        for (name, bad) in cases {
            let tail = frame(0x6, 0, 0, [UInt8](repeating: 1, count: 8))
            let input = Self.preface + bad + tail
            let fed = feed(input, reads: [3])
            XCTAssertEqual(fed.bytes, input, name)
        }
        // Interleaving a frame in an open block: nghttp2 has the open HEADERS, then the frame as sent.
        let ping = frame(0x6, 0, 0, [UInt8](repeating: 1, count: 8))
        let input = Self.preface + frame(0x1, 0x1, 1, Array(block.prefix(4))) + ping
        let fed = feed(input, reads: [input.count])
        XCTAssertEqual(fed.bytes, Self.preface + frame(0x1, 0x1, 1, []) + ping)
    }

    func testTooManyContinuationsIsReported() {
        var input = Self.preface + frame(0x1, 0, 1, [0x82])
        for _ in 0..<9 { input += frame(0x9, 0, 1, [0x86]) }
        XCTAssertTrue(feed(input, reads: [input.count]).tooManyContinuations)
        var eight = Self.preface + frame(0x1, 0, 1, [0x82])
        for i in 0..<8 { eight += frame(0x9, i == 7 ? 0x4 : 0, 1, i == 7 ? [0x84] : [0x86]) }
        XCTAssertFalse(feed(eight, reads: [eight.count]).tooManyContinuations)
    }

    /// An HPACK error becomes a block nghttp2 refuses with COMPRESSION_ERROR, and nothing after it is rewritten.
    func testBadBlockBecomesOneNghttp2Refuses() {
        let ping = frame(0x6, 0, 0, [UInt8](repeating: 1, count: 8))
        let input = Self.preface + frame(0x1, 0x5, 1, [0xBE]) + ping
        let fed = feed(input, reads: [input.count])
        XCTAssertEqual(fed.bytes, Self.preface + frame(0x1, 0x5, 1, [0x80]) + ping)
    }

    /// Decodes the header blocks of the frames in `bytes` with one nghttp2 inflater (kept across
    /// calls, as a session keeps it): each block's fields.
    private func inflate(_ bytes: [UInt8], _ inflater: OpaquePointer?) -> [[String]] {
        var blocks: [[String]] = []
        var at = 0
        while at + 9 <= bytes.count {
            let n = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let type = bytes[at + 3]
            var block = Array(bytes[(at + 9)..<(at + 9 + n)])
            at += 9 + n
            guard type == 0x1 else { continue }
            var fields: [String] = []
            var offset = 0
            while true {
                var nv = nghttp2_nv()
                var flags: Int32 = 0
                let rv = block.withUnsafeMutableBufferPointer {
                    nghttp2_hd_inflate_hd2(inflater, &nv, &flags, $0.baseAddress! + offset, $0.count - offset, 1)
                }
                XCTAssertGreaterThanOrEqual(rv, 0, "nghttp2 decodes what it is handed")
                if rv < 0 { return blocks }
                offset += rv
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    fields.append(
                        String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self) + ": "
                            + String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self))
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 { break }
            }
            nghttp2_hd_inflate_end_headers(inflater)
            blocks.append(fields)
        }
        return blocks
    }

    /// A plain block's `:authority` and `content-length` are handed to nghttp2 from its own
    /// table once it holds them (`HPACKForwardedTable`): over a long connection whose requests
    /// change host and body size, come with trailers and fields nghttp2 drops, and push entries
    /// out of the table, nghttp2's own decoder reads every block as sent.
    func testForwardedFieldsIndexedFromTheTableDecodeAsSent() {
        let encoder = Encoder()
        var inflater: OpaquePointer?
        nghttp2_hd_inflate_new(&inflater)
        defer { nghttp2_hd_inflate_del(inflater) }
        let inbound = HTTP2Inbound(maxHeaderListSize: 64 * 1024)
        var seed: UInt64 = 5
        func random() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33)
        }
        var stream: UInt32 = 1
        var sentBytes = 0
        func send(_ bytes: [UInt8]) -> [UInt8] {
            var out: [UInt8] = []
            bytes.withUnsafeBytes { raw in
                var position = 0
                loop: while true {
                    switch inbound.step(raw, &position) {
                    case .done: break loop
                    case .pass(let r): out += raw[r]
                    case .emit: out += inbound.output
                    case .tooManyContinuations: break loop
                    }
                }
            }
            sentBytes += bytes.count
            return out
        }
        _ = send(Self.preface + frame(0x4, 0, 0, []))
        let hosts = ["api.push.apple.com", "api.sandbox.push.apple.com", "fcm.googleapis.com", "127.0.0.1:8443"]
        let longHost = String(repeating: "h", count: 4_060) // larger than the table with its name: never indexed
        let midHost = String(repeating: "m", count: 2_000) // half the table: pushes older entries out
        for i in 0..<400 {
            let host: String
            switch random() % 10 {
            case 0: host = longHost
            case 1: host = midHost
            default: host = hosts[random() % 4]
            }
            let length = String([2, 2, 2, 17, 300, 4096][random() % 6])
            let scheme = i % 3 == 0 ? "http" : "https"
            let fields = [
                (":method", "POST"), (":scheme", scheme), (":path", "/3/device/\(i)"), (":authority", host), ("content-length", length),
            ]
            let out = send(frame(0x1, 0x4, stream, encoder.block(fields)))
            XCTAssertEqual(
                inflate(out, inflater),
                [[":method: POST", ":scheme: \(scheme)", ":path: /", ":authority: \(host)", "content-length: \(length)"]],
                "request \(i)")
            stream += 2
            if i % 37 == 0 {
                // Trailers on the last stream, and a block nghttp2 is given in full: literals, the table untouched.
                let trailers = send(frame(0x1, 0x5, stream - 2, encoder.block([("x-trailer", "t")])))
                XCTAssertEqual(inflate(trailers, inflater), [["x-trailer: t"]])
                let full = send(
                    frame(
                        0x1, 0x5, stream,
                        encoder.block([(":method", "GET"), (":scheme", "https"), (":path", "/"), (":authority", host), ("x-bad", "v ")])))
                XCTAssertEqual(
                    inflate(full, inflater), [[":method: GET", ":scheme: https", ":path: /", ":authority: \(host)", "x-bad: v "]])
                stream += 2
            }
        }
        XCTAssertGreaterThan(sentBytes, 0)
        // At the table's edge: two hosts whose entries come to `edge` bytes together. The last
        // request's host is handed to nghttp2 as one indexed byte exactly when both fit the
        // table's 4,096 bytes; past that nghttp2 dropped it, and it goes as a literal again.
        for edge in 4_090...4_100 {
            let a = String(repeating: "a", count: 2_000)
            let b = String(repeating: "b", count: edge - 2 * (10 + 32) - 2_000)
            var last: [UInt8] = []
            for (host, length) in [(a, "1"), (b, "1"), (b, "5"), (b, "5"), (a, "5"), (b, "9"), (a, "9")] {
                let fields = [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":authority", host), ("content-length", length)]
                last = send(frame(0x1, 0x4, stream, encoder.block(fields)))
                XCTAssertEqual(
                    inflate(last, inflater),
                    [[":method: POST", ":scheme: https", ":path: /", ":authority: \(host)", "content-length: \(length)"]],
                    "table edge \(edge), host of \(host.count)")
                stream += 2
            }
            XCTAssertEqual(last.count < 64, edge <= 4_096, "table edge \(edge): the host indexed (\(last.count) bytes)")
        }
    }
}
