import Glibc

/// An answer's unique-per-response header fields (ids, a message's URL), HPACK-encoded here and
/// appended to the HEADERS frame nghttp2 framed for the rest of the answer.
///
/// nghttp2 has no way to take an encoded block, and its deflater costs an APNs answer about
/// 3,000 instructions for two 36-character ids: the field list copied, the table searched,
/// each value measured and Huffman-coded. Written here they cost a copy.
///
/// Why the two encoders stay in step: every field here is a literal without indexing with a
/// literal name (RFC 7541 §6.2.2), so the peer's dynamic table is not touched by it and nothing
/// in it refers to the table; nghttp2's deflater is left with the table as it believes it to be.
/// Its part of the block comes first, so a dynamic table size update it owes the peer (§4.2)
/// still opens the block.
///
/// Why the frame can be extended: nghttp2 frames an answer's header block in a HEADERS frame
/// of its own, split into CONTINUATION frames only past 16,384 bytes, with no padding (pushemu
/// sets no padding callback) and no priority. `HTTP2Session.submit` gives a tail only to an
/// answer whose fields are small enough (see `fits`) that nghttp2's block and the tail together
/// stay under 16,384 bytes, the least SETTINGS_MAX_FRAME_SIZE a peer may set; the frame's
/// length is rewritten to include the tail.
enum HTTP2HeaderTail {
    /// Values this long or longer go in the tail (shorter ones repeat: nghttp2 indexes them).
    static let minValueLength = 32
    /// The most bytes a tail may have.
    static let maxBytes = 4096
    /// The most bytes (names and values) an answer's fields may have for its tail to be used.
    static let maxFieldBytes = 8192
    /// HEADERS frame type and the flags that matter here (RFC 9113 §6.2).
    static let headersType: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    static let paddedOrPriority: UInt8 = 0x8 | 0x20
    static let maxFrameLength = 16384

    /// The bytes of an HPACK integer with a 7-bit prefix (a string's length, H clear).
    @inline(__always)
    static func integerSize(_ x: Int) -> Int {
        if x < 127 { return 1 }
        var n = 2
        var rest = (x - 127) >> 7
        while rest > 0 {
            n += 1
            rest >>= 7
        }
        return n
    }

    /// The encoded size of one field.
    @inline(__always)
    static func size(nameLength: Int, valueLength: Int) -> Int {
        1 + integerSize(nameLength) + nameLength + integerSize(valueLength) + valueLength
    }

    /// Whether an answer whose fields take `fieldBytes` bytes in `fieldCount` fields, and
    /// `tailBytes` of which would go in the tail, gets one: nghttp2's part (at most every field
    /// as a literal with two length prefixes of three bytes, `:status` and `content-length`,
    /// and a table size update) plus the tail stays within one frame.
    static func fits(tailBytes: Int, fieldBytes: Int, fieldCount: Int) -> Bool {
        tailBytes > 0 && tailBytes <= maxBytes && fieldBytes <= maxFieldBytes && fieldCount <= 256
    }

    @inline(__always)
    private static func writeInteger(_ x: Int, _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int) {
        if x < 127 {
            p[at] = UInt8(x)
            at += 1
            return
        }
        p[at] = 127
        at += 1
        var rest = x - 127
        while rest >= 128 {
            p[at] = UInt8(truncatingIfNeeded: rest) | 0x80
            at += 1
            rest >>= 7
        }
        p[at] = UInt8(rest)
        at += 1
    }

    /// Writes one field at `at` (room for `size(...)` bytes is the caller's) and moves `at` past it.
    static func write(
        name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, into p: UnsafeMutablePointer<UInt8>, at: inout Int
    ) {
        p[at] = 0x00 // literal without indexing, new name
        at += 1
        writeInteger(name.count, p, &at)
        if name.count > 0 { memcpy(p + at, name.baseAddress!, name.count) }
        at += name.count
        writeInteger(value.count, p, &at)
        if value.count > 0 { memcpy(p + at, value.baseAddress!, value.count) }
        at += value.count
    }

    /// Where the frames leaving a session stand between two chunks of nghttp2's output: the
    /// bytes still owed to a frame begun earlier, or the first bytes of a frame header cut by
    /// the chunk's end.
    struct Framing {
        var frameLeft = 0
        var heldCount = 0
        var held: (UInt8, UInt8, UInt8) = (0, 0, 0)
    }

    /// Appends `chunk` (nghttp2's output, in order) to `out`, with a tail after the header
    /// block of each whole HEADERS frame whose stream `tail` gives one. `tail(stream)` returns
    /// the stream's tail (empty for none) and forgets it.
    static func append(
        _ chunk: UnsafeRawBufferPointer, to out: inout OutputBuffer, framing: inout Framing,
        tail: (Int32) -> UnsafeRawBufferPointer
    ) {
        let n = chunk.count
        var p = 0
        // A frame header cut by the last chunk's end: its length comes from both.
        if framing.heldCount > 0 {
            let need = 9 - framing.heldCount
            guard n >= need else {
                // Still short (a chunk of under nine bytes): keep what the length needs.
                for i in 0..<n where framing.heldCount + i < 3 { hold(chunk[i], at: framing.heldCount + i, &framing) }
                framing.heldCount += n
                out.append(chunk)
                return
            }
            for i in 0..<max(0, 3 - framing.heldCount) { hold(chunk[i], at: framing.heldCount + i, &framing) }
            let length = Int(framing.held.0) << 16 | Int(framing.held.1) << 8 | Int(framing.held.2)
            framing.heldCount = 0
            framing.frameLeft = length
            p = need
        }
        let skip = min(framing.frameLeft, n - p)
        p += skip
        framing.frameLeft -= skip
        var run = 0 // the first byte of chunk not yet appended
        while p < n {
            guard n - p >= 9 else {
                for i in 0..<min(3, n - p) { hold(chunk[p + i], at: i, &framing) }
                framing.heldCount = n - p
                break
            }
            let length = Int(chunk[p]) << 16 | Int(chunk[p + 1]) << 8 | Int(chunk[p + 2])
            let end = p + 9 + length
            let flags = chunk[p + 4]
            if chunk[p + 3] == headersType && flags & endHeaders != 0 && flags & paddedOrPriority == 0 && end <= n {
                let stream =
                    Int32(chunk[p + 5] & 0x7f) << 24 | Int32(chunk[p + 6]) << 16 | Int32(chunk[p + 7]) << 8
                    | Int32(chunk[p + 8])
                let extra = tail(stream)
                if extra.count > 0 && length + extra.count <= maxFrameLength {
                    // The bytes before the frame, the frame with its new length, then the tail.
                    let total = length + extra.count
                    let base = chunk.baseAddress!
                    out.append(count: end - run + extra.count) { to in
                        memcpy(to, base + run, end - run)
                        let head = to + (p - run)
                        head.storeBytes(of: UInt8(truncatingIfNeeded: total >> 16), as: UInt8.self)
                        head.storeBytes(of: UInt8(truncatingIfNeeded: total >> 8), toByteOffset: 1, as: UInt8.self)
                        head.storeBytes(of: UInt8(truncatingIfNeeded: total), toByteOffset: 2, as: UInt8.self)
                        memcpy(to + (end - run), extra.baseAddress!, extra.count)
                    }
                    run = end
                }
            }
            if end > n {
                framing.frameLeft = end - n
                break
            }
            p = end
        }
        if run < n { out.append(UnsafeRawBufferPointer(rebasing: chunk[run..<n])) }
    }

    /// Moves `framing` past `chunk` (appended as it is, no stream having a tail).
    @inline(__always)
    static func pass(_ chunk: UnsafeRawBufferPointer, framing: inout Framing) {
        let n = chunk.count
        guard framing.heldCount == 0 else {
            passCut(chunk, &framing)
            return
        }
        var p = min(framing.frameLeft, n)
        framing.frameLeft -= p
        let bytes = chunk.baseAddress!.assumingMemoryBound(to: UInt8.self)
        while p + 9 <= n {
            p += 9 + (Int(bytes[p]) << 16 | Int(bytes[p + 1]) << 8 | Int(bytes[p + 2]))
        }
        if p > n {
            framing.frameLeft = p - n
        } else if p < n {
            passCut(UnsafeRawBufferPointer(rebasing: chunk[p...]), &framing)
        }
    }

    /// The rare chunk that cuts a frame header (the general walk, without tails).
    @inline(never)
    private static func passCut(_ chunk: UnsafeRawBufferPointer, _ framing: inout Framing) {
        var sink = OutputBuffer()
        append(chunk, to: &sink, framing: &framing) { _ in UnsafeRawBufferPointer(start: nil, count: 0) }
    }

    @inline(__always)
    private static func hold(_ byte: UInt8, at i: Int, _ framing: inout Framing) {
        switch i {
        case 0: framing.held.0 = byte
        case 1: framing.held.1 = byte
        case 2: framing.held.2 = byte
        default: break
        }
    }
}
