import Glibc

/// An answer's header block, written by pushemu into the HEADERS frame nghttp2 frames for it.
///
/// nghttp2 has no way to take an encoded block, and its deflater cost an APNs answer about
/// 3,000 instructions for two 36-character ids (the field list copied, the table searched, each
/// value measured and Huffman-coded) and an FCM answer about 1,100 for four repeated fields.
/// So nghttp2 is given an answer with no fields: it frames the stream's HEADERS frame (and
/// keeps the stream's state, flow control and END_STREAM) around a block that holds only the
/// table size updates it owes the peer, and `HTTP2Session.produce`, walking nghttp2's output
/// frame by frame, appends the block `HPACKResponseEncoder` writes for the answer's `:status`
/// and fields (the frame's length rewritten). The encoder's dynamic table is the peer's (see
/// its comment): nghttp2's deflater indexes nothing.
///
/// Why the frame can be extended: nghttp2 frames a header block in a HEADERS frame of its own,
/// split into CONTINUATION frames only past 16,384 bytes, with no padding (pushemu sets no
/// padding callback) and no priority. Only an answer whose fields are small enough (`fits`)
/// is written here, so that its block stays under 16,384 bytes, the least SETTINGS_MAX_FRAME_SIZE
/// a peer may set. A larger answer goes to nghttp2 whole, every field never-indexed.
///
/// The answer waits in its exchange as a list: its status (two bytes), then each field as a
/// name length and a value length (two bytes each, big-endian), the name and the value.
enum HTTP2HeaderTail {
    /// The most bytes (names and values) an answer's fields may have to be written here.
    static let maxFieldBytes = 4096
    /// HEADERS frame type and the flags that matter here (RFC 9113 §6.2).
    static let headersType: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    static let paddedOrPriority: UInt8 = 0x8 | 0x20
    static let maxFrameLength = 16384

    /// Whether an answer with `fieldBytes` bytes of names and values in `fieldCount` fields is
    /// written here.
    @inline(__always)
    static func fits(fieldBytes: Int, fieldCount: Int) -> Bool {
        fieldBytes <= maxFieldBytes && fieldCount <= 128
    }

    /// The list's size for an answer with `fieldBytes` bytes of names and values in `fieldCount` fields.
    @inline(__always)
    static func listSize(fieldBytes: Int, fieldCount: Int) -> Int { 2 + fieldBytes + 4 * fieldCount }

    /// The most bytes the block of a list of `listBytes` encodes to: a field's encoding adds at
    /// most 9 bytes to its name and value (a representation's index and two string lengths), its
    /// list entry 4; `:status` at most 6.
    @inline(__always)
    static func blockBound(listBytes: Int) -> Int { 3 * listBytes + 16 }

    @inline(__always)
    static func writeStatus(_ status: Int, _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int) {
        p[at] = UInt8(truncatingIfNeeded: status >> 8)
        p[at + 1] = UInt8(truncatingIfNeeded: status)
        at += 2
    }

    /// Writes one field of a list at `at` and moves `at` past it.
    @inline(__always)
    static func writeField(
        name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int
    ) {
        p[at] = UInt8(truncatingIfNeeded: name.count >> 8)
        p[at + 1] = UInt8(truncatingIfNeeded: name.count)
        p[at + 2] = UInt8(truncatingIfNeeded: value.count >> 8)
        p[at + 3] = UInt8(truncatingIfNeeded: value.count)
        at += 4
        if name.count > 0 { memcpy(p + at, name.baseAddress!, name.count) }
        at += name.count
        if value.count > 0 { memcpy(p + at, value.baseAddress!, value.count) }
        at += value.count
    }

    /// The same from a field store (HTTPFields's): one copy when the value follows the name.
    @inline(__always)
    static func writeField(
        _ store: UnsafeRawPointer, nameAt: Int, nameCount: Int, valueAt: Int, valueCount: Int,
        _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int
    ) {
        p[at] = UInt8(truncatingIfNeeded: nameCount >> 8)
        p[at + 1] = UInt8(truncatingIfNeeded: nameCount)
        p[at + 2] = UInt8(truncatingIfNeeded: valueCount >> 8)
        p[at + 3] = UInt8(truncatingIfNeeded: valueCount)
        at += 4
        if valueAt == nameAt + nameCount {
            memcpy(p + at, store + nameAt, nameCount + valueCount)
        } else {
            if nameCount > 0 { memcpy(p + at, store + nameAt, nameCount) }
            if valueCount > 0 { memcpy(p + at + nameCount, store + valueAt, valueCount) }
        }
        at += nameCount + valueCount
    }

    /// A list's status.
    static func status(ofList list: UnsafeRawBufferPointer) -> Int { Int(list[0]) << 8 | Int(list[1]) }

    /// Where the frames leaving a session stand between two chunks of nghttp2's output: the
    /// bytes still owed to a frame begun earlier, or the first bytes of a frame header cut by
    /// the chunk's end.
    struct Framing {
        var frameLeft = 0
        var heldCount = 0
        var held: (UInt8, UInt8, UInt8) = (0, 0, 0)
    }

    /// Appends `chunk` (nghttp2's output, in order) to `out`, with the block `writer` writes
    /// after nghttp2's part of each whole HEADERS frame whose stream it has one for.
    static func append(
        _ chunk: UnsafeRawBufferPointer, to out: inout OutputBuffer, framing: inout Framing,
        writer: some HeaderBlockWriter
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
                let bound = writer.blockBound(stream: stream)
                if bound > 0 && length + bound <= maxFrameLength {
                    // The bytes before the frame, the frame with its new length, then the block.
                    let base = chunk.baseAddress!
                    let from = run
                    let frameStart = p
                    let nghttp2Part = UnsafeRawBufferPointer(rebasing: chunk[(p + 9)..<end])
                    out.append(atMost: end - from + bound) { to in
                        memcpy(to, base + from, end - from)
                        let n = writer.writeBlock(stream: stream, after: nghttp2Part, into: to + (end - from))
                        let total = length + n
                        let head = to + (frameStart - from)
                        head[0] = UInt8(truncatingIfNeeded: total >> 16)
                        head[1] = UInt8(truncatingIfNeeded: total >> 8)
                        head[2] = UInt8(truncatingIfNeeded: total)
                        return end - from + n
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

    /// Moves `framing` past `chunk` (appended as it is, no stream waiting for its block).
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

    /// The rare chunk that cuts a frame header (the general walk, with no block to write).
    @inline(never)
    private static func passCut(_ chunk: UnsafeRawBufferPointer, _ framing: inout Framing) {
        var sink = OutputBuffer()
        append(chunk, to: &sink, framing: &framing, writer: NoHeaderBlocks())
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

/// Where `HTTP2HeaderTail.append` gets the blocks it writes into HEADERS frames.
protocol HeaderBlockWriter {
    /// The most bytes stream `stream`'s block may take (0: the stream has none).
    func blockBound(stream: Int32) -> Int
    /// Writes stream `stream`'s block at `p` (room for `blockBound`) after reading `nghttp2Part`,
    /// what nghttp2 wrote into the frame (table size updates); forgets it; returns its size.
    func writeBlock(stream: Int32, after nghttp2Part: UnsafeRawBufferPointer, into p: UnsafeMutablePointer<UInt8>) -> Int
}

struct NoHeaderBlocks: HeaderBlockWriter {
    func blockBound(stream: Int32) -> Int { 0 }
    func writeBlock(stream: Int32, after nghttp2Part: UnsafeRawBufferPointer, into p: UnsafeMutablePointer<UInt8>) -> Int { 0 }
}
