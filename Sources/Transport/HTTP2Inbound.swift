import Glibc

/// The receive side of an HTTP/2 connection, in front of nghttp2: frames pass through to
/// nghttp2 unchanged, except header blocks, which are decoded here (`HPACKDecoder`) and handed
/// to nghttp2 re-encoded.
///
/// Why: nghttp2 decodes every field of every request, Huffman four bits a step, validates each
/// one and calls back per field. A sender's `authorization` (never indexed) and `:path`
/// (unindexed, from nghttp2-based clients) are decoded again on every request; that was the
/// largest single cost of an APNs request. Here a repeated literal is recognised by its bytes,
/// and checks are remembered per dynamic-table entry.
///
/// What nghttp2 is given for a request's block (`RequestHeaderBlock.verdict`):
/// - **plain** (a new request, every field one nghttp2 would accept and pass on unchanged, within the header
///   list limit): only `:method`, `:scheme`, `:authority` and the fields nghttp2 gives meaning
///   to (`host`, `content-length`, `te`, `priority`), with the values sent, and `:path` as `/`
///   (the real path passed `nghttp2_check_path` here). nghttp2 keeps the stream's state, the
///   pseudo-header rules and `content-length` against DATA; the request's fields, in block
///   order, come from here (`takeFields`), and nghttp2's per-field callbacks for them are ignored.
/// - **full** (anything else: trailers, a block split over CONTINUATION frames, a field nghttp2
///   would drop or refuse, a list over the limit): every field, re-encoded as plain literals, so nghttp2 applies its own rules to
///   each and the session's per-field callback sees them as before.
/// - **reset** (a list over four times the limit, an HPACK bomb say): one field whose callback
///   resets the stream, as before, without materialising the rest.
/// - A block RFC 7541 rejects becomes a block nghttp2 rejects the same way (COMPRESSION_ERROR).
///
/// Frame structure nghttp2 would refuse (padding past the payload, an oversized header frame,
/// HEADERS on stream 0, a CONTINUATION out of place, PUSH_PROMISE from a client) is passed to
/// it as received, and everything after it too (`poisoned`): nghttp2 ends the connection there.
/// A block split over CONTINUATION frames opens its stream in nghttp2 at once (an empty HEADERS
/// fragment, so the stream's head deadline runs as before) and follows, decoded, when it ends.
/// More than `maxContinuations` CONTINUATION frames in one block is reported to the session,
/// which ends the connection as nghttp2's own limit did. A block is at most
/// `(1 + maxContinuations)` frames of `maxFrameSize`, so what is buffered is bounded (and
/// counted in the session's `bufferedBytes`).
final class HTTP2Inbound {
    static let maxFrameSize = 16_384
    static let maxContinuations = 8

    enum Step {
        /// Hand `input[range]` to nghttp2 as it is.
        case pass(Range<Int>)
        /// Hand `output` to nghttp2 (a re-encoded header block, or frame bytes held back).
        case emit(DecodedBlock?)
        /// Too many CONTINUATION frames: the session ends the connection.
        case tooManyContinuations
        /// Everything given has been handed on or buffered.
        case done
    }

    enum BlockVerdict: Equatable {
        case plain
        case full
        case reset
    }

    /// A header block decoded here, as `.emit` hands it to the session: which stream it opens or
    /// continues and what nghttp2 is given for it. The session passes it to nghttp2's callbacks
    /// for that stream (`HTTP2Session.feed`).
    struct DecodedBlock: Equatable {
        let stream: Int32
        let verdict: BlockVerdict
    }

    let decoder = HPACKDecoder()
    /// What `.emit` hands nghttp2.
    private var writer = FrameWriter()
    /// What the plain blocks handed to nghttp2 put in its HPACK decoder's table.
    private var forwardedTable = HPACKForwardedTable()
    /// The decoded fields of the last plain block, until the session takes them.
    private(set) var block: RequestHeaderBlock
    /// The highest stream a request's HEADERS opened; a block on a stream at or below it is
    /// trailers (or a protocol error nghttp2 reports), given in full.
    var highestStream: Int32 = 0

    private var prefaceLeft = 24
    /// A frame header held back (raw: an array's subscript checks uniqueness at every byte).
    private let head = UnsafeMutablePointer<UInt8>.allocate(capacity: 9)
    private var headCount = 0
    /// Payload bytes of a passed-through frame still to come.
    private var passLeft = 0
    /// A header-block frame (HEADERS or CONTINUATION) whose payload spans reads: what came so far.
    private var frame: [UInt8] = []
    private var frameLeft = 0
    private var frameType: UInt8 = 0
    private var frameFlags: UInt8 = 0
    private var frameStream: Int32 = 0
    /// An open header block (HEADERS without END_HEADERS, then CONTINUATIONs).
    private var fragments: [UInt8] = []
    private var blockOpen = false
    /// The stream of the block last decoded (and of the one being read).
    private(set) var blockStream: Int32 = 0
    private var blockFlags: UInt8 = 0
    private let priority = UnsafeMutablePointer<UInt8>.allocate(capacity: 5)
    private var continuations = 0
    private var blockIsNewRequest = false
    private var poisoned = false

    init(maxHeaderListSize: Int) {
        block = RequestHeaderBlock(limit: maxHeaderListSize)
        head.initialize(repeating: 0, count: 9)
        priority.initialize(repeating: 0, count: 5)
    }

    deinit {
        writer.free()
        block.free()
        head.deallocate()
        priority.deallocate()
    }

    private var headBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: head, count: 9) }
    private var priorityBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: priority, count: 5) }

    /// The bytes `.emit` hands nghttp2, valid until the next `step`.
    var output: UnsafeRawBufferPointer { writer.bytes }

    /// The next step for `input` from `position` (advanced past what it consumes).
    func step(_ input: UnsafeRawBufferPointer, _ position: inout Int) -> Step {
        let n = input.count
        if poisoned {
            guard position < n else { return .done }
            defer { position = n }
            return .pass(position..<n)
        }
        var start = position
        while position < n {
            if prefaceLeft > 0 {
                let k = min(prefaceLeft, n - position)
                position += k
                prefaceLeft -= k
                continue
            }
            if passLeft > 0 {
                let k = min(passLeft, n - position)
                position += k
                passLeft -= k
                continue
            }
            if frameLeft > 0 {
                if position > start { return .pass(start..<position) }
                let k = min(frameLeft, n - position)
                frame.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[position..<(position + k)]))
                position += k
                frameLeft -= k
                start = position
                if frameLeft == 0, let s = frame.withUnsafeBytes({ payloadComplete($0) }) { return s }
                continue
            }
            // A frame header starts here (or continues one held back).
            if headCount == 0 && n - position >= 9 {
                let h = UnsafeRawBufferPointer(rebasing: input[position..<(position + 9)])
                let type = h[3]
                if !blockOpen && !isHeaderBlockType(type) {
                    passLeft = Self.length(h[0], h[1], h[2])
                    position += 9
                    continue
                }
                if position > start { return .pass(start..<position) }
                for i in 0..<9 { head[i] = h[i] }
                position += 9
                start = position
                if let s = headerBlockFrameHeader() { return s }
                if frameLeft > 0 && frameLeft <= n - position {
                    // The whole payload is here: read in place.
                    let payload = UnsafeRawBufferPointer(rebasing: input[position..<(position + frameLeft)])
                    position += frameLeft
                    frameLeft = 0
                    start = position
                    if let s = payloadComplete(payload) { return s }
                }
                continue
            }
            if position > start { return .pass(start..<position) }
            while headCount < 9 && position < n {
                head[headCount] = input[position]
                headCount += 1
                position += 1
            }
            start = position
            guard headCount == 9 else { return .done }
            headCount = 0
            if !blockOpen && !isHeaderBlockType(head[3]) {
                passLeft = Self.length(head[0], head[1], head[2])
                writer.reset()
                writer.append(headBytes)
                return .emit(nil)
            }
            if let s = headerBlockFrameHeader() { return s }
        }
        if position > start { return .pass(start..<position) }
        return .done
    }

    /// After a h2c upgrade: stream 1 exists already.
    func upgraded() { highestStream = 1 }

    /// Hands the last plain block's fields over: copied into `fields` (emptied first) at once.
    func takeFields(into fields: inout HTTPFields) {
        block.copyFields(into: &fields)
    }

    /// Bytes of a header block held here until it is complete.
    var bufferedBytes: Int { frame.count + (blockOpen ? fragments.count : 0) }

    // MARK: frames

    @inline(__always)
    private func isHeaderBlockType(_ type: UInt8) -> Bool {
        type == 0x1 || type == 0x9 || type == 0x5
    }

    /// A frame header's 24-bit payload length.
    @inline(__always)
    private static func length(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8) -> Int { Int(b0) << 16 | Int(b1) << 8 | Int(b2) }

    /// `head` holds a frame header that starts or continues a header block, or interrupts one.
    private func headerBlockFrameHeader() -> Step? {
        let length = Self.length(head[0], head[1], head[2])
        let type = head[3]
        let stream = Int32(
            bitPattern: UInt32(head[5] & 0x7F) << 24 | UInt32(head[6]) << 16 | UInt32(head[7]) << 8 | UInt32(head[8]))
        if blockOpen {
            guard type == 0x9, stream == blockStream, length <= Self.maxFrameSize else {
                // nghttp2 has the open HEADERS: this frame ends the connection there.
                return poison(head: true, payload: nil)
            }
            continuations += 1
            if continuations > Self.maxContinuations {
                poisoned = true
                return .tooManyContinuations
            }
        } else if type != 0x1 || stream == 0 || length > Self.maxFrameSize {
            // PUSH_PROMISE, an unexpected CONTINUATION, HEADERS on stream 0, an oversized frame.
            return poison(head: true, payload: nil)
        }
        frameType = type
        frameFlags = head[4]
        frameStream = stream
        frame.removeAll(keepingCapacity: true)
        frameLeft = length
        return length == 0 ? payloadComplete(UnsafeRawBufferPointer(start: nil, count: 0)) : nil
    }

    /// From here on nghttp2 gets the bytes as received (it ends the connection on them).
    private func poison(head withHead: Bool, payload: UnsafeRawBufferPointer?) -> Step {
        writer.reset()
        if withHead { writer.append(headBytes) }
        if let payload { writer.append(payload) }
        poisoned = true
        return .emit(nil)
    }

    /// The header-block frame whose header is in `head` has its whole payload in `payload`.
    private func payloadComplete(_ payload: UnsafeRawBufferPointer) -> Step? {
        if frameType == 0x9 {
            fragments.append(contentsOf: payload)
            guard frameFlags & 0x4 != 0 else { return nil }
            blockOpen = false
            let s = fragments.withUnsafeBytes { finishBlock($0, split: true) }
            if fragments.capacity > Self.maxFrameSize { fragments = [] } else { fragments.removeAll(keepingCapacity: true) }
            if frame.capacity > Self.maxFrameSize { frame = [] }
            return s
        }
        var start = 0
        var end = payload.count
        if frameFlags & 0x8 != 0 {
            // PADDED: the pad length must leave the rest of the payload.
            guard end >= 1, Int(payload[0]) < end else { return poison(head: true, payload: payload) }
            end -= Int(payload[0])
            start = 1
        }
        if frameFlags & 0x20 != 0 {
            guard end - start >= 5 else { return poison(head: true, payload: payload) }
            for i in 0..<5 { priority[i] = payload[start + i] }
            start += 5
        }
        blockStream = frameStream
        blockFlags = frameFlags & (0x1 | 0x20) // END_STREAM, PRIORITY
        continuations = 0
        blockIsNewRequest = blockStream > highestStream
        if blockIsNewRequest { highestStream = blockStream }
        let fragment = UnsafeRawBufferPointer(rebasing: payload[start..<end])
        if frameFlags & 0x4 != 0 { return finishBlock(fragment, split: false) }
        // The block goes on in CONTINUATION frames. nghttp2 opens the stream now (its head
        // deadline runs from here), with an empty fragment; the block follows it decoded.
        fragments.removeAll(keepingCapacity: true)
        fragments.append(contentsOf: fragment)
        blockOpen = true
        writer.reset()
        writer.appendFrames(type: 0x1, stream: blockStream, flags: blockFlags, priority: priorityBytes, endHeaders: false) { _ in }
        return .emit(nil)
    }

    /// Decodes a finished block and emits what nghttp2 is given for it: a HEADERS frame, or
    /// for a block that came in CONTINUATION frames (`split`), CONTINUATION after the open HEADERS.
    private func finishBlock(_ fragment: UnsafeRawBufferPointer, split: Bool) -> Step {
        block.reset()
        let type: UInt8 = split ? 0x9 : 0x1
        let flags: UInt8 = split ? 0 : blockFlags
        writer.reset()
        do {
            try decoder.decode(fragment, into: &block)
        } catch {
            // An indexed field with index 0: nghttp2 ends the connection with COMPRESSION_ERROR.
            writer.appendFrames(type: type, stream: blockStream, flags: flags, priority: priorityBytes, endHeaders: true) {
                $0.append(0x80)
            }
            poisoned = true
            return .emit(nil)
        }
        var verdict = block.verdict(isNewRequest: blockIsNewRequest)
        // A split block's stream exists already: its fields go through nghttp2's callbacks.
        if split && verdict == .plain { verdict = .full }
        writer.appendFrames(type: type, stream: blockStream, flags: flags, priority: priorityBytes, endHeaders: true) { out in
            switch verdict {
            case .plain: block.encodeForwarded(into: &out, table: &forwardedTable)
            case .full: block.encodeAll(into: &out)
            case .reset: out.append(0x82) // :method GET, whose callback resets the stream
            }
        }
        return .emit(DecodedBlock(stream: blockStream, verdict: verdict))
    }
}

/// The bytes `HTTP2Inbound` hands nghttp2 in place of a header block: frames written through a
/// raw pointer (header blocks are rebuilt for every request; arrays cost a check a byte).
struct FrameWriter {
    private var base: UnsafeMutablePointer<UInt8>?
    private var capacity = 0
    private(set) var count = 0

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    mutating func free() {
        base?.deallocate()
        base = nil
    }

    mutating func reset() {
        if capacity > 4 * HTTP2Inbound.maxFrameSize {
            free()
            capacity = 0
        }
        count = 0
    }

    @inline(__always)
    private mutating func reserve(_ n: Int) {
        guard count + n > capacity else { return }
        let size = max(1024, count + n, capacity * 2)
        let fresh = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        if let base { fresh.update(from: base, count: count) }
        base?.deallocate()
        base = fresh
        capacity = size
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base![count] = byte
        count += 1
    }

    mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard raw.count > 0 else { return }
        reserve(raw.count)
        memcpy(base! + count, raw.baseAddress!, raw.count)
        count += raw.count
    }

    mutating func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// An HPACK string literal without Huffman coding (RFC 7541 5.2).
    mutating func appendString(_ s: UnsafeRawBufferPointer) {
        var n = s.count
        if n < 127 {
            append(UInt8(n))
        } else {
            append(127)
            n -= 127
            while n >= 128 {
                append(UInt8(n & 0x7F | 0x80))
                n >>= 7
            }
            append(UInt8(n))
        }
        append(s)
    }

    /// A frame of `type` (HEADERS or CONTINUATION) for `stream` carrying the block `body` writes,
    /// split into CONTINUATIONs past `maxFrameSize`; `flags` (END_STREAM, PRIORITY, with its
    /// five bytes) go on the first frame, END_HEADERS on the last when `endHeaders`.
    mutating func appendFrames(
        type: UInt8, stream: Int32, flags: UInt8, priority: UnsafeRawBufferPointer, endHeaders: Bool, _ body: (inout FrameWriter) -> Void
    ) {
        let frameStart = count
        let hasPriority = flags & 0x20 != 0
        reserve(9)
        count += 9
        if hasPriority { append(priority) }
        let blockStart = count
        body(&self)
        let blockLength = count - blockStart
        let firstRoom = HTTP2Inbound.maxFrameSize - (hasPriority ? 5 : 0)
        if blockLength <= firstRoom {
            writeHeader(at: frameStart, length: count - frameStart - 9, type: type, flags: flags | (endHeaders ? 0x4 : 0), stream: stream)
            return
        }
        // Past one frame: the block moves aside and comes back in pieces.
        let block = Array(UnsafeRawBufferPointer(start: base! + blockStart, count: blockLength))
        count = blockStart
        block.withUnsafeBytes { append(UnsafeRawBufferPointer(rebasing: $0[0..<firstRoom])) }
        writeHeader(at: frameStart, length: count - frameStart - 9, type: type, flags: flags, stream: stream)
        var offset = firstRoom
        while offset < block.count {
            let chunk = min(HTTP2Inbound.maxFrameSize, block.count - offset)
            let last = offset + chunk == block.count
            let at = count
            reserve(9)
            count += 9
            block.withUnsafeBytes { append(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + chunk)])) }
            writeHeader(at: at, length: chunk, type: 0x9, flags: last && endHeaders ? 0x4 : 0, stream: stream)
            offset += chunk
        }
    }

    private func writeHeader(at i: Int, length: Int, type: UInt8, flags: UInt8, stream: Int32) {
        let p = base! + i
        let id = UInt32(bitPattern: stream)
        p[0] = UInt8(truncatingIfNeeded: length >> 16)
        p[1] = UInt8(truncatingIfNeeded: length >> 8)
        p[2] = UInt8(truncatingIfNeeded: length)
        p[3] = type
        p[4] = flags
        p[5] = UInt8(truncatingIfNeeded: id >> 24)
        p[6] = UInt8(truncatingIfNeeded: id >> 16)
        p[7] = UInt8(truncatingIfNeeded: id >> 8)
        p[8] = UInt8(truncatingIfNeeded: id)
    }
}

/// One request header block as decoded: its fields in block order (all of them, up to four
/// times the header list limit), which of them nghttp2 must see, and the verdict on what
/// nghttp2 is given of it (`HTTP2Inbound`).
///
/// The fields are kept in raw buffers (names and values back to back, and an entry per field)
/// that the owner frees (`free`), and copied into the request's `HTTPFields` at once
/// (`copyFields`): appending to the list field by field checked both of its arrays' uniqueness
/// at every field (callgrind: 22 runtime calls per APNs request).
struct RequestHeaderBlock: HPACKFieldSink {
    /// SETTINGS_MAX_HEADER_LIST_SIZE as advertised.
    let limit: Int
    private var bytes: UnsafeMutableRawPointer
    private var byteCapacity: Int
    private var used = 0
    private var entries: UnsafeMutablePointer<HTTPFields.Entry>
    private var entryCapacity: Int
    /// Fields kept.
    private(set) var count = 0
    /// Fields (by position, the first 64) that nghttp2 is given in a plain block, and `:path`'s.
    private var forwarded: UInt64 = 0
    /// RFC 9113's size of the whole list (name + value + 32 a field), materialised or not.
    private(set) var listSize = 0
    private(set) var method: HTTPMethod = .get
    private(set) var pathIndex: Int32 = -1
    private var pseudoSeen: UInt8 = 0
    private var regularSeen = false
    /// Every field so far is one nghttp2 accepts and passes on unchanged.
    private var plain = true

    init(limit: Int) {
        // Four times the limit must fit an Int32 offset (`field`); the CLI allows 1 MiB.
        precondition(limit >= 0 && limit <= 1 << 28, "header list limit out of range")
        self.limit = limit
        byteCapacity = 512
        bytes = UnsafeMutableRawPointer.allocate(byteCount: byteCapacity, alignment: 8)
        entryCapacity = 16
        entries = UnsafeMutablePointer<HTTPFields.Entry>.allocate(capacity: entryCapacity)
    }

    mutating func free() {
        bytes.deallocate()
        entries.deallocate()
    }

    mutating func reset() {
        used = 0
        count = 0
        forwarded = 0
        listSize = 0
        method = .get
        pathIndex = -1
        pseudoSeen = 0
        regularSeen = false
        plain = true
        // A block of an unusual size does not keep its buffers.
        if byteCapacity > 4 * 4096 { reallocateBytes(512, keep: 0) }
        if entryCapacity > 256 { reallocateEntries(16, keep: 0) }
    }

    private mutating func reallocateBytes(_ n: Int, keep: Int) {
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 8)
        if keep > 0 { fresh.copyMemory(from: bytes, byteCount: keep) }
        bytes.deallocate()
        bytes = fresh
        byteCapacity = n
    }

    private mutating func reallocateEntries(_ n: Int, keep: Int) {
        let fresh = UnsafeMutablePointer<HTTPFields.Entry>.allocate(capacity: n)
        if keep > 0 { fresh.moveInitialize(from: entries, count: keep) }
        entries.deallocate()
        entries = fresh
        entryCapacity = n
    }

    /// The field at `i`: name and value.
    @inline(__always)
    private func parts(_ i: Int) -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer) {
        let e = entries[i]
        return (
            UnsafeRawBufferPointer(start: bytes + Int(e.nameStart), count: Int(e.nameLength)),
            UnsafeRawBufferPointer(start: bytes + Int(e.valueStart), count: Int(e.valueLength))
        )
    }

    /// Replaces `fields` with this block's fields.
    func copyFields(into fields: inout HTTPFields) {
        fields.replaceAll(
            bytes: UnsafeRawBufferPointer(start: bytes, count: used), entries: UnsafeBufferPointer(start: entries, count: count))
    }

    /// Keeps one decoded field. Its arithmetic is unchecked: a list over four times the limit
    /// (at most 4 MiB: `--max-header-list-size` is at most 1 MiB) is dropped before anything
    /// is kept, so every offset kept fits an `Int32` (the checked version cost about 25
    /// instructions a field in overflow tests).
    mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: FieldRole, valueIsPlain: Bool) {
        let nameCount = name.count
        let valueCount = value.count
        // Lengths of buffers in memory: their sum with 32 cannot overflow an Int.
        listSize &+= nameCount &+ valueCount &+ 32
        guard listSize <= 4 * limit else { return }
        let position = count
        switch role {
        case .regular:
            regularSeen = true
            if !valueIsPlain { plain = false }
        case .method, .scheme, .path, .authority:
            let bit: UInt8 = 1 << role.rawValue
            if regularSeen || pseudoSeen & bit != 0 { plain = false }
            pseudoSeen |= bit
            if role == .path {
                if !valueIsPlain { plain = false }
                pathIndex = Int32(truncatingIfNeeded: position)
            } else if role == .method {
                method = HTTPMethod(bytes: value)
                if valueCount == 7 && value.equals("CONNECT") { plain = false }
            }
            if position < 64 { forwarded |= 1 &<< UInt64(truncatingIfNeeded: position) }
        case .forwarded:
            regularSeen = true
            if position < 64 { forwarded |= 1 &<< UInt64(truncatingIfNeeded: position) }
        case .otherPseudo, .forbidden, .invalidName:
            plain = false
        }
        if position >= 64 { plain = false }
        let start = used
        let end = start &+ nameCount &+ valueCount
        if end > byteCapacity { reallocateBytes(max(end, byteCapacity &* 2), keep: start) }
        if position == entryCapacity { reallocateEntries(entryCapacity &* 2, keep: position) }
        if nameCount > 0 { copyBytes(bytes + start, name.baseAddress!, nameCount) }
        if valueCount > 0 { copyBytes(bytes + start + nameCount, value.baseAddress!, valueCount) }
        (entries + position).initialize(
            to: HTTPFields.Entry(
                nameStart: Int32(truncatingIfNeeded: start), nameLength: Int32(truncatingIfNeeded: nameCount),
                valueStart: Int32(truncatingIfNeeded: start &+ nameCount), valueLength: Int32(truncatingIfNeeded: valueCount)))
        used = end
        count = position &+ 1
    }

    /// What nghttp2 is given (see `HTTP2Inbound`).
    func verdict(isNewRequest: Bool) -> HTTP2Inbound.BlockVerdict {
        if listSize > 4 * limit { return .reset }
        let required: UInt8 = 1 << FieldRole.method.rawValue | 1 << FieldRole.scheme.rawValue | 1 << FieldRole.path.rawValue
        guard isNewRequest, plain, listSize <= limit, pseudoSeen & required == required else { return .full }
        return .plain
    }

    /// The fields nghttp2 needs of a plain block, `:path` as `/`, by static index where one fits
    /// and from `table` where it holds them.
    func encodeForwarded(into out: inout FrameWriter, table: inout HPACKForwardedTable) {
        var mask = forwarded
        while mask != 0 {
            let i = mask.trailingZeroBitCount
            mask &= mask - 1
            let (name, value) = parts(i)
            if Int32(i) == pathIndex {
                out.append(0x84) // :path "/"
            } else if name.count == 7 && name[1] == UInt8(ascii: "m") {
                // :method: GET and POST are static entries 2 and 3.
                if value.equals("POST") {
                    out.append(0x83)
                } else if value.equals("GET") {
                    out.append(0x82)
                } else {
                    out.append(0x02)
                    out.appendString(value)
                }
            } else if name.count == 7 && name[1] == UInt8(ascii: "s") {
                // :scheme https and http are static entries 7 and 6.
                if value.equals("https") {
                    out.append(0x87)
                } else if value.equals("http") {
                    out.append(0x86)
                } else {
                    literal(name, value, into: &out)
                }
            } else if name.count == 10 && name[0] == UInt8(ascii: ":") {
                table.encode(.authority, value, into: &out)
            } else if name.count == 14 {
                table.encode(.contentLength, value, into: &out)
            } else {
                literal(name, value, into: &out)
            }
        }
    }

    /// Every field, as literals without indexing.
    func encodeAll(into out: inout FrameWriter) {
        for i in 0..<count {
            let (name, value) = parts(i)
            literal(name, value, into: &out)
        }
    }

    private func literal(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, into out: inout FrameWriter) {
        out.append(0x00)
        out.appendString(name)
        out.appendString(value)
    }
}
