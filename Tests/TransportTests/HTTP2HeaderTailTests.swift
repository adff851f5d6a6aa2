import CNghttp2
import Foundation
import TestSupport
import XCTest

@testable import Transport

/// The header tail (`HTTP2HeaderTail`): long, unique values encoded here and appended to the
/// HEADERS frame nghttp2 framed for the rest of an answer. Its fields decode with nghttp2's
/// inflater after a block from nghttp2's deflater, leaving both tables as the deflater left
/// them; the frame walk splices only whole HEADERS frames, whatever the chunking of nghttp2's
/// output; and real clients read every field, with any header table size they choose.
final class HTTP2HeaderTailTests: XCTestCase {
    private func encode(_ fields: [([UInt8], [UInt8])]) -> [UInt8] {
        let size = fields.reduce(0) { $0 + HTTP2HeaderTail.size(nameLength: $1.0.count, valueLength: $1.1.count) }
        var out = [UInt8](repeating: 0xEE, count: size + 8)
        var at = 0
        out.withUnsafeMutableBufferPointer { p in
            for (name, value) in fields {
                name.withUnsafeBytes { n in
                    value.withUnsafeBytes { v in HTTP2HeaderTail.write(name: n, value: v, into: p.baseAddress!, at: &at) }
                }
            }
        }
        XCTAssertEqual(at, size, "size(...) must be what write(...) writes")
        return Array(out[0..<at])
    }

    private func deflate(_ deflater: OpaquePointer, _ fields: [([UInt8], [UInt8])]) -> [UInt8] {
        var names = fields.map { $0.0 }
        var values = fields.map { $0.1 }
        var nva: [nghttp2_nv] = []
        for i in fields.indices {
            let n = names[i].withUnsafeMutableBufferPointer { $0.baseAddress! }
            let v = values[i].withUnsafeMutableBufferPointer { $0.baseAddress! }
            nva.append(nghttp2_nv(name: n, value: v, namelen: names[i].count, valuelen: values[i].count, flags: 0))
        }
        let bound = nghttp2_hd_deflate_bound(deflater, nva, nva.count)
        var out = [UInt8](repeating: 0, count: bound)
        let n = withExtendedLifetime((names, values)) { nghttp2_hd_deflate_hd(deflater, &out, bound, nva, nva.count) }
        XCTAssertGreaterThanOrEqual(n, 0)
        names.removeAll()
        values.removeAll()
        return Array(out[0..<max(0, n)])
    }

    /// Blocks made of nghttp2's part (indexed, Huffman-coded, with table size changes owed)
    /// and a tail decode to the whole field list, and the tables stay in step block after block.
    func testTailDecodesAfterTheDeflatersBlockAndLeavesTheTableAlone() {
        var deflater: OpaquePointer?
        var inflater: OpaquePointer?
        XCTAssertEqual(nghttp2_hd_deflate_new(&deflater, 4096), 0)
        XCTAssertEqual(nghttp2_hd_inflate_new(&inflater), 0)
        defer {
            nghttp2_hd_deflate_del(deflater)
            nghttp2_hd_inflate_del(inflater)
        }
        var rng = SplitMix(seed: 50)
        // Lengths around the 7-bit prefix's edges, and the largest a tail may hold.
        let lengths = [0, 1, 32, 36, 126, 127, 128, 254, 255, 256, 300, 2000, 4000]
        for round in 0..<60 {
            if round % 7 == 3 {
                // The peer changed SETTINGS_HEADER_TABLE_SIZE: nghttp2's part opens with the update.
                let size = [0, 64, 1000, 4096].randomElement(using: &rng)!
                XCTAssertEqual(nghttp2_hd_deflate_change_table_size(deflater, size), 0)
                XCTAssertEqual(nghttp2_hd_inflate_change_table_size(inflater, size), 0)
            }
            let head: [([UInt8], [UInt8])] = [
                (Array(":status".utf8), Array(["200", "400", "410"].randomElement(using: &rng)!.utf8)),
                (Array("content-type".utf8), Array("application/json".utf8)),
                (Array("x-short".utf8), Array("v\(round % 3)".utf8)),
            ]
            var tail: [([UInt8], [UInt8])] = []
            var budget = HTTP2HeaderTail.maxBytes
            for k in 0..<Int.random(in: 1...3, using: &rng) {
                let length = lengths[(round + k) % lengths.count]
                let name = Array("apns-id-\(k)".utf8) + (k == 2 ? [UInt8](repeating: 0x61, count: 130) : [])
                let value = (0..<length).map { _ in UInt8.random(in: 0x21...0x7E, using: &rng) }
                let size = HTTP2HeaderTail.size(nameLength: name.count, valueLength: value.count)
                if size > budget { continue }
                budget -= size
                tail.append((name, value))
            }
            let block = deflate(deflater!, head) + encode(tail)
            guard let got = HPACKDecoderTests.nghttp2Inflate(inflater!, block) else {
                XCTFail("round \(round): nghttp2 refused the block")
                return
            }
            XCTAssertEqual(got.map { $0.0 }, (head + tail).map { $0.0 }, "round \(round)")
            XCTAssertEqual(got.map { $0.1 }, (head + tail).map { $0.1 }, "round \(round)")
            XCTAssertEqual(
                nghttp2_hd_inflate_get_dynamic_table_size(inflater), nghttp2_hd_deflate_get_dynamic_table_size(deflater),
                "round \(round): the tail must leave the table as the deflater believes it")
        }
    }

    private func frame(_ type: UInt8, _ flags: UInt8, _ stream: Int32, _ payload: [UInt8]) -> [UInt8] {
        [UInt8(payload.count >> 16), UInt8(payload.count >> 8 & 0xFF), UInt8(payload.count & 0xFF), type, flags]
            + [UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// nghttp2's output cut anywhere: whole HEADERS frames of streams with a tail are spliced
    /// (length rewritten, flags and stream kept); a cut frame, a padded or prioritised one, a
    /// frame of a stream without a tail, and every other frame pass unchanged; and the walk
    /// stays on the frame boundaries after any cut, a frame header's own included.
    func testSplicesWholeHeadersFramesWhateverTheChunking() {
        let tailA: [UInt8] = encode([(Array("apns-id".utf8), Array("aaaaaaaa-1111-2222-3333-444444444444".utf8))])
        let tailB: [UInt8] = encode([(Array("location".utf8), [UInt8](repeating: 0x62, count: 200))])
        let tails: [Int32: [UInt8]] = [1: tailA, 5: tailB, 9: tailA, 11: tailB]
        struct Part {
            var bytes: [UInt8]
            var spliced: [UInt8]?
        }
        var parts: [Part] = []
        func add(_ bytes: [UInt8], spliced: [UInt8]? = nil) { parts.append(Part(bytes: bytes, spliced: spliced)) }
        add(frame(0x4, 0, 0, [0, 3, 0, 0, 0, 100])) // SETTINGS
        add(frame(0x1, 0x5, 1, [0x88]), spliced: frame(0x1, 0x5, 1, [0x88] + tailA)) // HEADERS, END_STREAM
        add(frame(0x0, 0x0, 3, Array(repeating: 0x30, count: 20))) // DATA
        add(frame(0x1, 0x4, 5, [0x88, 0x5C, 0x01, 0x30]), spliced: frame(0x1, 0x4, 5, [0x88, 0x5C, 0x01, 0x30] + tailB))
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
            var taken = Set<Int32>()
            var from = 0
            for cut in cuts + [all.count] where cut > from {
                all[from..<cut].withUnsafeBytes { chunk in
                    HTTP2HeaderTail.append(chunk, to: &out, framing: &framing) { id in
                        guard let t = tails[id], !taken.contains(id) else { return UnsafeRawBufferPointer(start: nil, count: 0) }
                        taken.insert(id)
                        return t.withUnsafeBytes { UnsafeRawBufferPointer(start: $0.baseAddress, count: $0.count) }
                    }
                }
                from = cut
            }
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
            frame(0x1, 0x5, 1, [0x88]).withUnsafeBytes { chunk in
                HTTP2HeaderTail.append(chunk, to: &out, framing: &framing) { id in
                    id == 1
                        ? tailA.withUnsafeBytes { UnsafeRawBufferPointer(start: $0.baseAddress, count: $0.count) }
                        : UnsafeRawBufferPointer(start: nil, count: 0)
                }
            }
            var bytes: [UInt8] = []
            out.withUnconsumed { raw in
                bytes = Array(raw)
                return raw.count
            }
            return bytes == frame(0x1, 0x5, 1, [0x88] + tailA)
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
