/// HPACK's Huffman code (RFC 7541, Appendix B) and a decoder that reads a byte a step.
///
/// The decoder is a table of 256 states (the code tree's inner nodes) by 256 input bytes: each
/// entry gives the state after the byte, the zero, one or two symbols the byte completes, and
/// whether the byte ran into EOS (an error: RFC 7541 5.2). A string ends well only in a state
/// that is a run of at most seven 1 bits from the root (EOS's prefix, the padding). nghttp2
/// reads four bits a step; a byte a step halves the table walks. The table (256 KiB) is built
/// the first time a Huffman string is decoded.
enum HPACKHuffman {
    /// (code, length in bits) for symbols 0...255 and EOS (256), from RFC 7541 Appendix B.
    static let codes: [(UInt32, UInt8)] = [
        (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), (0xfffffe4, 28),
        (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28), (0xfffffe8, 28), (0xffffea, 24),
        (0x3fff_fffc, 30), (0xfffffe9, 28), (0xfffffea, 28), (0x3fff_fffd, 30), (0xfffffeb, 28),
        (0xfffffec, 28), (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
        (0xffffff1, 28), (0xffffff2, 28), (0x3fff_fffe, 30), (0xffffff3, 28), (0xffffff4, 28),
        (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), (0xffffff8, 28), (0xffffff9, 28),
        (0xffffffa, 28), (0xffffffb, 28), (0x14, 6), (0x3f8, 10), (0x3f9, 10),
        (0xffa, 12), (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),
        (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11), (0xfa, 8),
        (0x16, 6), (0x17, 6), (0x18, 6), (0x0, 5), (0x1, 5),
        (0x2, 5), (0x19, 6), (0x1a, 6), (0x1b, 6), (0x1c, 6),
        (0x1d, 6), (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
        (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), (0x1ffa, 13),
        (0x21, 6), (0x5d, 7), (0x5e, 7), (0x5f, 7), (0x60, 7),
        (0x61, 7), (0x62, 7), (0x63, 7), (0x64, 7), (0x65, 7),
        (0x66, 7), (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),
        (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7), (0x6f, 7),
        (0x70, 7), (0x71, 7), (0x72, 7), (0xfc, 8), (0x73, 7),
        (0xfd, 8), (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14),
        (0x22, 6), (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5),
        (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6), (0x27, 6),
        (0x6, 5), (0x74, 7), (0x75, 7), (0x28, 6), (0x29, 6),
        (0x2a, 6), (0x7, 5), (0x2b, 6), (0x76, 7), (0x2c, 6),
        (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
        (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11),
        (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28), (0xfffe6, 20), (0x3fffd2, 22),
        (0xfffe7, 20), (0xfffe8, 20), (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22),
        (0x7fffd9, 23), (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23),
        (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23), (0xffffec, 24),
        (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23),
        (0x7fffe2, 23), (0x7fffe3, 23), (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22),
        (0x7fffe5, 23), (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),
        (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22),
        (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21), (0x7fffea, 23), (0x3fffdd, 22),
        (0x3fffde, 22), (0xfffff0, 24), (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23),
        (0x7fffec, 23), (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
        (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23), (0xfffea, 20),
        (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22),
        (0x3fffe6, 22), (0x7ffff1, 23), (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20),
        (0x7fff1, 19), (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),
        (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27), (0x7ffffdf, 27),
        (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25), (0x7fff2, 19), (0x1fffe3, 21),
        (0x3ffffe6, 26), (0x7ffffe0, 27), (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27),
        (0xfffff2, 24), (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26),
        (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27), (0xfffec, 20),
        (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21), (0x3fffe9, 22), (0x1fffe7, 21),
        (0x1fffe8, 21), (0x7ffff3, 23), (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25),
        (0x1ffffef, 25), (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
        (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27),
        (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27), (0x7ffffeb, 27), (0xffffffe, 28),
        (0x7ffffec, 27), (0x7ffffed, 27), (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27),
        (0x3ffffee, 26), (0x3fff_ffff, 30),
    ]

    /// Entry bits: 0-7 next state, 8-9 symbols emitted, 10 EOS seen (fail), 11 the next state
    /// may end a string, 16-23 the first symbol, 24-31 the second.
    nonisolated(unsafe) static let decodeTable: UnsafeMutablePointer<UInt32> = buildDecodeTable()

    /// Decodes `input` into `output`, which must hold `input.count * 2` bytes (a byte completes at
    /// most two symbols: codes are five bits or longer). Returns the decoded length, or nil for
    /// a string RFC 7541 calls an error (EOS in it, padding longer than seven bits or not all 1s).
    @inline(__always)
    static func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<UInt8>) -> Int? {
        let table = decodeTable
        var state: UInt32 = 0
        var entry: UInt32 = 1 << 11 // the root ends a string (empty input)
        var n = 0
        for byte in input {
            entry = table[Int(state << 8 | UInt32(byte))]
            if entry & (1 << 10) != 0 { return nil }
            output[n] = UInt8(truncatingIfNeeded: entry >> 16)
            output[n + 1] = UInt8(truncatingIfNeeded: entry >> 24)
            n += Int((entry >> 8) & 3)
            state = entry & 0xFF
        }
        return entry & (1 << 11) != 0 ? n : nil
    }

    private static func buildDecodeTable() -> UnsafeMutablePointer<UInt32> {
        // The code tree: inner nodes 0..<256 (0 is the root); a child >= 256 is the leaf of
        // symbol (child - 256).
        var children = [(Int, Int)](repeating: (-1, -1), count: 256)
        var nodes = 1
        for (symbol, (code, length)) in codes.enumerated() {
            var node = 0
            for bit in stride(from: Int(length) - 1, through: 0, by: -1) {
                let one = (code >> UInt32(bit)) & 1 == 1
                let child = one ? children[node].1 : children[node].0
                if bit == 0 {
                    if one { children[node].1 = 256 + symbol } else { children[node].0 = 256 + symbol }
                } else if child >= 0 {
                    node = child
                } else {
                    let fresh = nodes
                    nodes += 1
                    if one { children[node].1 = fresh } else { children[node].0 = fresh }
                    node = fresh
                }
            }
        }
        precondition(nodes == 256, "the HPACK Huffman tree has 256 inner nodes")
        // The nodes a string may end in: the root, and the first seven steps of all-1 bits.
        var endsWell = [Bool](repeating: false, count: 256)
        var onesNode = 0
        endsWell[0] = true
        for _ in 0..<7 {
            onesNode = children[onesNode].1
            endsWell[onesNode] = true
        }
        let table = UnsafeMutablePointer<UInt32>.allocate(capacity: 256 * 256)
        for state in 0..<256 {
            for byte in 0..<256 {
                var node = state
                var emitted: [UInt32] = []
                var failed = false
                for bit in stride(from: 7, through: 0, by: -1) {
                    let child = (byte >> bit) & 1 == 1 ? children[node].1 : children[node].0
                    if child >= 256 {
                        if child - 256 == 256 { failed = true }
                        emitted.append(UInt32(child - 256) & 0xFF)
                        node = 0
                    } else {
                        node = child
                    }
                }
                var entry = UInt32(node) | UInt32(emitted.count) << 8
                if failed { entry |= 1 << 10 }
                if endsWell[node] { entry |= 1 << 11 }
                if emitted.count > 0 { entry |= emitted[0] << 16 }
                if emitted.count > 1 { entry |= emitted[1] << 24 }
                table[state << 8 | byte] = entry
            }
        }
        return table
    }
}

/// RFC 7541 Appendix A: the static table, index 1 first.
let hpackStaticTable: [(name: StaticString, value: StaticString)] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
]
