import CNghttp2
import Foundation
import TestSupport
import XCTest

@testable import Transport

/// Answers' header blocks written by pushemu (`HTTP2HeaderTail`, `HPACKResponseEncoder`) into
/// the HEADERS frames nghttp2 frames with no field: blocks decode with nghttp2's inflater, after
/// the table size updates nghttp2 owes, to the answers' fields, with the inflater's table the
/// encoder's, answer after answer; the frame walk writes a block only into whole HEADERS frames,
/// whatever the chunking of nghttp2's output; and real clients read every field, with any
/// header table size they choose.
final class HTTP2HeaderTailTests: XCTestCase {
    /// An answer's list as `HTTP2Session` keeps it.
    private func list(_ status: Int, _ fields: [([UInt8], [UInt8])]) -> [UInt8] {
        let fieldBytes = fields.reduce(0) { $0 + $1.0.count + $1.1.count }
        var out = [UInt8](repeating: 0xEE, count: HTTP2HeaderTail.listSize(fieldBytes: fieldBytes, fieldCount: fields.count))
        var at = 0
        out.withUnsafeMutableBufferPointer { p in
            HTTP2HeaderTail.writeStatus(status, p.baseAddress!, &at)
            for (name, value) in fields {
                name.withUnsafeBytes { n in
                    value.withUnsafeBytes { v in HTTP2HeaderTail.writeField(name: n, value: v, p.baseAddress!, &at) }
                }
            }
        }
        XCTAssertEqual(at, out.count, "listSize(...) must be what the list takes")
        return out
    }

    /// What nghttp2's deflater writes into a block it is given no field for.
    private func deflateNothing(_ deflater: OpaquePointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        let n = nghttp2_hd_deflate_hd(deflater, &out, out.count, nil, 0)
        XCTAssertGreaterThanOrEqual(n, 0)
        return Array(out[0..<max(0, n)])
    }

    /// Answer after answer on one connection (statuses in and out of the static table, repeated
    /// and unique values, a content-length that repeats and one that changes, long values, names
    /// in and out of the static table), with the peer's table size changed now and then: every
    /// block decodes with nghttp2's inflater to the answer's fields, within its bound, and the
    /// inflater's table is the encoder's.
    func testBlocksDecodeWithNghttp2AndTheTablesStayInStep() {
        var deflater: OpaquePointer?
        var inflater: OpaquePointer?
        XCTAssertEqual(nghttp2_hd_deflate_new(&deflater, 4096), 0)
        XCTAssertEqual(nghttp2_hd_inflate_new(&inflater), 0)
        defer {
            nghttp2_hd_deflate_del(deflater)
            nghttp2_hd_inflate_del(inflater)
        }
        var encoder = HPACKResponseEncoder()
        var rng = SplitMix(seed: 50)
        let statuses = [200, 200, 200, 204, 400, 403, 404, 410, 429, 500, 503]
        var inserted = 0
        for round in 0..<400 {
            if round % 37 == 20 {
                // The peer changed SETTINGS_HEADER_TABLE_SIZE: nghttp2's part carries the update.
                let size = [0, 64, 100, 1000, 4096].randomElement(using: &rng)!
                XCTAssertEqual(nghttp2_hd_deflate_change_table_size(deflater, size), 0)
                XCTAssertEqual(nghttp2_hd_inflate_change_table_size(inflater, size), 0)
            }
            let status = statuses.randomElement(using: &rng)!
            var fields: [([UInt8], [UInt8])] = []
            func add(_ name: String, _ value: String) { fields.append((Array(name.utf8), Array(value.utf8))) }
            if rng.next() % 2 == 0 { add("content-type", "application/json; charset=UTF-8") }
            if rng.next() % 3 == 0 { add("vary", "Origin, X-Origin, Referer") }
            if rng.next() % 2 == 0 { add("apns-id", UUID().uuidString.lowercased()) }
            if rng.next() % 4 == 0 { add("apns-unique-id", UUID().uuidString.lowercased()) }
            if rng.next() % 5 == 0 { add("location", "https://push.example/m/" + String(repeating: "a", count: Int(rng.next() % 300))) }
            if rng.next() % 7 == 0 { add("retry-after", "\(rng.next() % 3)") }
            if rng.next() % 9 == 0 { add("x-big", String(repeating: "b", count: 128 + Int(rng.next() % 2000))) }
            if rng.next() % 2 == 0 { add("content-length", rng.next() % 3 == 0 ? "\(rng.next() % 1000)" : "73") }
            let l = list(status, fields)
            let prefix = deflateNothing(deflater!)
            var block = [UInt8](repeating: 0, count: HTTP2HeaderTail.blockBound(listBytes: l.count))
            let applied = prefix.withUnsafeBytes { encoder.apply($0) }
            XCTAssertTrue(applied, "round \(round): nghttp2's part is table size updates only")
            let n = l.withUnsafeBytes { raw in
                block.withUnsafeMutableBufferPointer {
                    encoder.encode(
                        status: HTTP2HeaderTail.status(ofList: raw), fields: UnsafeRawBufferPointer(rebasing: raw[2...]),
                        into: $0.baseAddress!)
                }
            }
            XCTAssertLessThanOrEqual(n, block.count)
            guard let got = HPACKDecoderTests.nghttp2Inflate(inflater!, prefix + block[0..<n]) else {
                XCTFail("round \(round): nghttp2 refused the block")
                return
            }
            let want = [(Array(":status".utf8), Array(String(status).utf8))] + fields
            XCTAssertEqual(got.map { $0.0 }, want.map { $0.0 }, "round \(round)")
            XCTAssertEqual(got.map { $0.1 }, want.map { $0.1 }, "round \(round)")
            XCTAssertEqual(nghttp2_hd_inflate_get_dynamic_table_size(inflater), encoder.tableSize, "round \(round)")
            XCTAssertEqual(nghttp2_hd_deflate_get_dynamic_table_size(deflater), 0, "nghttp2's deflater indexes nothing")
            inserted = max(inserted, encoder.tableSize)
        }
        XCTAssertGreaterThan(inserted, 200, "repeated fields are indexed")
    }

    /// A repeated answer's block shrinks to indexes: `:status`, `content-type` and `vary` take a
    /// byte each once indexed (`content-length` stays a literal); a long value is a literal
    /// whose name is indexed after the first.
    func testRepeatedFieldsBecomeIndexes() {
        var encoder = HPACKResponseEncoder()
        func encode(_ status: Int, _ fields: [(String, String)]) -> [UInt8] {
            let l = list(status, fields.map { (Array($0.0.utf8), Array($0.1.utf8)) })
            var block = [UInt8](repeating: 0, count: HTTP2HeaderTail.blockBound(listBytes: l.count))
            let n = l.withUnsafeBytes { raw in
                block.withUnsafeMutableBufferPointer {
                    encoder.encode(
                        status: HTTP2HeaderTail.status(ofList: raw), fields: UnsafeRawBufferPointer(rebasing: raw[2...]),
                        into: $0.baseAddress!)
                }
            }
            return Array(block[0..<n])
        }
        let fcm = [("content-type", "application/json; charset=UTF-8"), ("vary", "Origin, X-Origin, Referer"), ("content-length", "73")]
        _ = encode(200, fcm)
        _ = encode(200, fcm)
        XCTAssertEqual(encode(200, fcm), [0x88, 0xBF, 0xBE, 0x0F, 0x0D, 2, 0x37, 0x33], "three indexes, content-length a literal")
        XCTAssertEqual(encode(410, []).count, 5, "a status outside the static table, first time: a literal")
        XCTAssertEqual(encode(410, []).count, 1)
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let first = encode(200, [("apns-id", id)])
        let next = encode(200, [("apns-id", id.uppercased())])
        XCTAssertEqual(first.count, 1 + 1 + 1 + 7 + 1 + 36)
        XCTAssertEqual(next.count, 1 + 2 + 1 + 36, "the name by index, the value as a literal without indexing")
        XCTAssertEqual(next[1] & 0xF0, 0x00)
    }

    private func frame(_ type: UInt8, _ flags: UInt8, _ stream: Int32, _ payload: [UInt8]) -> [UInt8] {
        [UInt8(payload.count >> 16), UInt8(payload.count >> 8 & 0xFF), UInt8(payload.count & 0xFF), type, flags]
            + [UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// Blocks from a table, each written once, recording what nghttp2's part was.
    final class Blocks: HeaderBlockWriter {
        var blocks: [Int32: [UInt8]]
        var taken: [Int32: [UInt8]] = [:]
        init(_ blocks: [Int32: [UInt8]]) { self.blocks = blocks }
        func blockBound(stream: Int32) -> Int { blocks[stream].map { $0.count + 5 } ?? 0 }
        func writeBlock(stream: Int32, after nghttp2Part: UnsafeRawBufferPointer, into p: UnsafeMutablePointer<UInt8>) -> Int {
            guard let b = blocks.removeValue(forKey: stream) else { return 0 }
            taken[stream] = Array(nghttp2Part)
            b.withUnsafeBufferPointer { p.update(from: $0.baseAddress!, count: b.count) }
            return b.count
        }
    }

    /// nghttp2's output cut anywhere: whole HEADERS frames of streams with a block get it after
    /// nghttp2's part (length rewritten, flags and stream kept, nghttp2's part handed to the
    /// writer); a cut frame, a padded or prioritised one, a frame of a stream without a block,
    /// and every other frame pass unchanged; and the walk stays on the frame boundaries after
    /// any cut, a frame header's own included.
    func testSplicesWholeHeadersFramesWhateverTheChunking() {
        let tailA: [UInt8] = [0x88, 0x0F, 0x1F, 3] + Array("abc".utf8)
        let tailB: [UInt8] = [0x89] + [UInt8](repeating: 0x62, count: 200)
        let tails: [Int32: [UInt8]] = [1: tailA, 5: tailB, 9: tailA, 11: tailB]
        struct Part {
            var bytes: [UInt8]
            var spliced: [UInt8]?
        }
        var parts: [Part] = []
        func add(_ bytes: [UInt8], spliced: [UInt8]? = nil) { parts.append(Part(bytes: bytes, spliced: spliced)) }
        add(frame(0x4, 0, 0, [0, 3, 0, 0, 0, 100])) // SETTINGS
        add(frame(0x1, 0x5, 1, []), spliced: frame(0x1, 0x5, 1, tailA)) // HEADERS, END_STREAM
        add(frame(0x0, 0x0, 3, Array(repeating: 0x30, count: 20))) // DATA
        add(frame(0x1, 0x4, 5, [0x3F, 0xE1, 0x1F]), spliced: frame(0x1, 0x4, 5, [0x3F, 0xE1, 0x1F] + tailB)) // a size update first
        add(frame(0x1, 0x4, 7, [0x88])) // a stream without a tail
        add(frame(0x1, 0x4 | 0x8, 9, [1, 0x88, 0])) // PADDED: left alone
        add(frame(0x0, 0x1, 5, [0x7B, 0x7D])) // DATA, END_STREAM
        add(frame(0x1, 0x4 | 0x20, 11, [0, 0, 0, 3, 16, 0x88])) // PRIORITY: left alone
        add(frame(0x6, 0x1, 0, Array(repeating: 7, count: 8))) // PING ACK
        add(frame(0x1, 0x1 | 0x4, 13, [0x8C])) // no tail
        let all = parts.flatMap { $0.bytes }
        var starts: [Int] = []
        var at = 0
        for p in parts {
            starts.append(at)
            at += p.bytes.count
        }

        func run(_ cuts: [Int]) -> (out: [UInt8], taken: Set<Int32>) {
            var out = OutputBuffer()
            var framing = HTTP2HeaderTail.Framing()
            let writer = Blocks(tails)
            var from = 0
            for cut in cuts + [all.count] where cut > from {
                all[from..<cut].withUnsafeBytes { HTTP2HeaderTail.append($0, to: &out, framing: &framing, writer: writer) }
                from = cut
            }
            if let part = writer.taken[5] { XCTAssertEqual(part, [0x3F, 0xE1, 0x1F], "the writer reads nghttp2's part") }
            let taken = Set(writer.taken.keys)
            var bytes: [UInt8] = []
            out.withUnconsumed { raw in
                bytes = Array(raw)
                return raw.count
            }
            return (bytes, taken)
        }

        func expected(_ cuts: [Int]) -> [UInt8] {
            var out: [UInt8] = []
            for (i, p) in parts.enumerated() {
                let whole = !cuts.contains { $0 > starts[i] && $0 < starts[i] + p.bytes.count }
                out += whole ? (p.spliced ?? p.bytes) : p.bytes
            }
            return out
        }

        // `pass` (no tail pending: the chunk goes out as it is) keeps the same place in the
        // frames: after any cuts the walk is on a boundary, and the next whole HEADERS frame of
        // a stream with a tail is spliced.
        func passThenSplice(_ cuts: [Int]) -> Bool {
            var framing = HTTP2HeaderTail.Framing()
            var from = 0
            for cut in cuts + [all.count] where cut > from {
                all[from..<cut].withUnsafeBytes { HTTP2HeaderTail.pass($0, framing: &framing) }
                from = cut
            }
            guard framing.frameLeft == 0 && framing.heldCount == 0 else { return false }
            var out = OutputBuffer()
            frame(0x1, 0x5, 1, []).withUnsafeBytes {
                HTTP2HeaderTail.append($0, to: &out, framing: &framing, writer: Blocks([1: tailA]))
            }
            var bytes: [UInt8] = []
            out.withUnconsumed { raw in
                bytes = Array(raw)
                return raw.count
            }
            return bytes == frame(0x1, 0x5, 1, tailA)
        }

        var checked = 0
        // Every single cut, then every pair of cuts.
        for a in 1..<all.count {
            let (out, _) = run([a])
            XCTAssertEqual(out, expected([a]), "cut at \(a)")
            XCTAssertTrue(passThenSplice([a]), "pass, cut at \(a)")
            checked += 1
            for b in stride(from: a + 1, to: all.count, by: 3) {
                let (out2, taken) = run([a, b])
                XCTAssertEqual(out2, expected([a, b]), "cuts at \(a), \(b)")
                XCTAssertFalse(taken.contains(9) || taken.contains(11), "a padded or prioritised frame is never asked for its tail")
                XCTAssertTrue(passThenSplice([a, b]), "pass, cuts at \(a), \(b)")
                checked += 1
            }
        }
        // One byte at a time: nothing is whole, nothing is spliced, nothing is lost.
        let (bytewise, taken) = run(Array(1..<all.count))
        XCTAssertEqual(bytewise, all)
        XCTAssertTrue(taken.isEmpty)
        XCTAssertTrue(passThenSplice(Array(1..<all.count)), "pass, one byte at a time")
        XCTAssertGreaterThan(checked, 1000)
    }

    /// Over a real server: an answer's long values (ids, a 3,000-byte one) reach nghttp (an
    /// nghttp2 client, which insists on the table size updates it is owed) intact on one
    /// connection, whatever header table size the client sets, with short fields and bodies
    /// beside them; and Python's h2 reads the same over many streams at once.
    func testRealClientsReadTheTailWithAnyHeaderTableSize() throws {
        var config = ServerConfiguration()
        config.httpPort = 0
        config.httpsPort = nil
        config.threads = 1
        var r = Router()
        r.add(.get, "/ids/{n}") { ex in
            let n = Int(String(decoding: ex.parameter("n"), as: UTF8.self)) ?? 0
            var h = HTTPFields()
            h.add(name: "apns-id", value: String(format: "%08d-e89b-12d3-a456-426614174000", n))
            h.add(name: "x-short", value: "s\(n % 4)")
            h.add(name: "apns-unique-id", value: String(format: "%08d-0000-4000-8000-000000000000", n * 7))
            if n % 5 == 0 { h.add(name: "x-long", value: String(repeating: "\(n % 10)", count: 3000)) }
            ex.respond(Response(status: n % 3 == 0 ? 410 : 200, headers: h, body: n % 2 == 0 ? Array("{\"n\":\(n)}".utf8) : []))
        }
        let server = try HTTPServer(configuration: config, router: r)
        try server.start()
        defer { server.shutdown(drainTimeout: 1) }
        let port = server.httpAddress!.port
        for tableSize in ["0", "100", "4096", "65536"] {
            let urls = (1...40).map { "http://127.0.0.1:\(port)/ids/\($0)" }
            let out = try runCommand("nghttp", ["-nv", "--header-table-size=\(tableSize)"] + urls, timeout: 30)
            XCTAssertEqual(out.status, 0, "table size \(tableSize): \(out.stderr)")
            for n in 1...40 {
                XCTAssertTrue(
                    out.stdout.contains("apns-id: " + String(format: "%08d-e89b-12d3-a456-426614174000", n)),
                    "table size \(tableSize), request \(n)")
                XCTAssertTrue(
                    out.stdout.contains("apns-unique-id: " + String(format: "%08d-0000-4000-8000-000000000000", n * 7)),
                    "table size \(tableSize), request \(n)")
            }
            // Requests 5, 15, 25 and 35 carry 3,000 fives.
            XCTAssertEqual(out.stdout.components(separatedBy: "x-long: " + String(repeating: "5", count: 3000) + "\n").count - 1, 4)
            XCTAssertFalse(out.stdout.contains("COMPRESSION_ERROR") || out.stdout.contains("recv GOAWAY"), out.stdout)
        }
        let script = """
            import socket, sys, h2.connection, h2.config, h2.events, h2.settings
            s = socket.create_connection(("127.0.0.1", \(port)), timeout=10)
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            c.initiate_connection(); s.sendall(c.data_to_send())
            got = {}
            def pump(until):
                while len(got) < until:
                    data = s.recv(65536)
                    if not data: sys.exit("closed")
                    for e in c.receive_data(data):
                        if isinstance(e, h2.events.ResponseReceived): got[e.stream_id] = dict(e.headers)
                    s.sendall(c.data_to_send())
            for wave, size in enumerate([4096, 0, 300, 4096]):
                c.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: size}); s.sendall(c.data_to_send())
                for i in range(50):
                    n = wave * 50 + i + 1
                    c.send_headers(2 * n - 1, [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/ids/%d" % n)], end_stream=True)
                s.sendall(c.data_to_send())
                pump((wave + 1) * 50)
            for sid, h in got.items():
                n = (sid + 1) // 2
                assert h["apns-id"] == "%08d-e89b-12d3-a456-426614174000" % n, (n, h)
                assert h["apns-unique-id"] == "%08d-0000-4000-8000-000000000000" % (n * 7), (n, h)
                assert h["x-short"] == "s%d" % (n % 4), (n, h)
                assert h[":status"] == ("410" if n % 3 == 0 else "200"), (n, h)
                assert (h.get("x-long") == str(n % 10) * 3000) == (n % 5 == 0), n
            print("ok", len(got))
            """
        let python = ServerProcess.repositoryRoot + "/.venv/bin/python"
        let py = try runCommand(python, ["-c", script], timeout: 60)
        XCTAssertEqual(py.status, 0, py.stderr)
        XCTAssertEqual(py.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "ok 200")
    }
}
