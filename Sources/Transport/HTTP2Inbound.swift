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
        case emit(BlockVerdict?)
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

    let decoder = HPACKDecoder()
    /// What `.emit` hands nghttp2.
    private(set) var output: [UInt8] = []
    /// The decoded fields of the last plain block, until the session takes them.
    private(set) var block: RequestHeaderBlock
    /// The highest stream a request's HEADERS opened; a block on a stream at or below it is
    /// trailers (or a protocol error nghttp2 reports), given in full.
    var highestStream: Int32 = 0

    private var prefaceLeft = 24
    private var head = [UInt8](repeating: 0, count: 9)
    private var headCount = 0
    /// Payload bytes of a passed-through frame still to come.
    private var passLeft = 0
    /// The header-block frame being read (HEADERS or CONTINUATION): its payload so far.
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
    private var priority = [UInt8](repeating: 0, count: 5)
    private var continuations = 0
    private var blockIsNewRequest = false
    private var poisoned = false

    init(maxHeaderListSize: Int) {
        block = RequestHeaderBlock(limit: maxHeaderListSize)
    }

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
                if frameLeft == 0, let s = frameComplete() { return s }
                continue
            }
            // A frame header starts here (or continues one held back).
            if headCount == 0 && n - position >= 9 {
                let h = UnsafeRawBufferPointer(rebasing: input[position..<(position + 9)])
                let type = h[3]
                if !blockOpen && !isHeaderBlockType(type) {
                    passLeft = Int(h[0]) << 16 | Int(h[1]) << 8 | Int(h[2])
                    position += 9
                    continue
                }
                if position > start { return .pass(start..<position) }
                for i in 0..<9 { head[i] = h[i] }
                position += 9
                start = position
                if let s = headerBlockFrameHeader() { return s }
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
                passLeft = length(of: head)
                output.removeAll(keepingCapacity: true)
                output.append(contentsOf: head)
                return .emit(nil)
            }
            if let s = headerBlockFrameHeader() { return s }
        }
        if position > start { return .pass(start..<position) }
        return .done
    }

    /// After a h2c upgrade: stream 1 exists already.
    func upgraded() { highestStream = 1 }

    /// Hands the last plain block's fields over (swapping buffers, so neither side allocates).
    func takeFields(into fields: inout HTTPFields) {
        swap(&fields, &block.fields)
        block.fields.removeAll()
    }

    /// Forgets a block nobody took (nghttp2 refused its stream).
    func discardBlock() { block.fields.removeAll() }

    // MARK: frames

    private func isHeaderBlockType(_ type: UInt8) -> Bool {
        type == 0x1 || type == 0x9 || type == 0x5
    }

    private func length(of h: [UInt8]) -> Int { Int(h[0]) << 16 | Int(h[1]) << 8 | Int(h[2]) }

    /// `head` holds a frame header that starts or continues a header block, or interrupts one.
    private func headerBlockFrameHeader() -> Step? {
        let length = length(of: head)
        let type = head[3]
        let stream = Int32(bitPattern: UInt32(head[5] & 0x7F) << 24 | UInt32(head[6]) << 16 | UInt32(head[7]) << 8 | UInt32(head[8]))
        if blockOpen {
            guard type == 0x9, stream == blockStream, length <= Self.maxFrameSize else {
                // nghttp2 has the open HEADERS: this frame ends the connection there.
                output.removeAll(keepingCapacity: true)
                output.append(contentsOf: head)
                poisoned = true
                return .emit(nil)
            }
            continuations += 1
            if continuations > Self.maxContinuations {
                poisoned = true
                return .tooManyContinuations
            }
        } else if type != 0x1 || stream == 0 || length > Self.maxFrameSize {
            // PUSH_PROMISE, an unexpected CONTINUATION, HEADERS on stream 0, an oversized frame.
            output.removeAll(keepingCapacity: true)
            output.append(contentsOf: head)
            poisoned = true
            return .emit(nil)
        }
        frameType = type
        frameFlags = head[4]
        frameStream = stream
        frame.removeAll(keepingCapacity: true)
        frameLeft = length
        return length == 0 ? frameComplete() : nil
    }

    /// The header-block frame in `frame` is complete.
    private func frameComplete() -> Step? {
        if frameType == 0x9 {
            fragments.append(contentsOf: frame)
            return frameFlags & 0x4 != 0 ? finishBlock(split: true) : nil
        }
        var start = 0
        var end = frame.count
        if frameFlags & 0x8 != 0 {
            // PADDED: the pad length must leave the rest of the payload.
            guard end >= 1, Int(frame[0]) < end else { return passRaw() }
            end -= Int(frame[0])
            start = 1
        }
        if frameFlags & 0x20 != 0 {
            guard end - start >= 5 else { return passRaw() }
            for i in 0..<5 { priority[i] = frame[start + i] }
            start += 5
        }
        fragments.removeAll(keepingCapacity: true)
        fragments.append(contentsOf: frame[start..<end])
        blockStream = frameStream
        blockFlags = frameFlags & (0x1 | 0x20) // END_STREAM, PRIORITY
        continuations = 0
        blockIsNewRequest = blockStream > highestStream
        if blockIsNewRequest { highestStream = blockStream }
        if frameFlags & 0x4 != 0 { return finishBlock(split: false) }
        // The block goes on in CONTINUATION frames. nghttp2 opens the stream now (its head
        // deadline runs from here), with an empty fragment; the block follows it decoded.
        blockOpen = true
        output.removeAll(keepingCapacity: true)
        appendFrames(type: 0x1, stream: blockStream, flags: blockFlags, block: [], endHeaders: false)
        return .emit(nil)
    }

    /// A HEADERS frame this layer cannot take apart: nghttp2 gets it as received.
    private func passRaw() -> Step {
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: head)
        output.append(contentsOf: frame)
        poisoned = true
        return .emit(nil)
    }

    /// Decodes the finished block and emits what nghttp2 is given for it: a HEADERS frame, or
    /// for a block that came in CONTINUATION frames (`split`), CONTINUATION after the open HEADERS.
    private func finishBlock(split: Bool) -> Step {
        blockOpen = false
        block.reset()
        let type: UInt8 = split ? 0x9 : 0x1
        let flags: UInt8 = split ? 0 : blockFlags
        defer { releaseLargeBuffers() }
        do {
            try fragments.withUnsafeBytes { try decoder.decode($0, into: &block) }
        } catch {
            output.removeAll(keepingCapacity: true)
            // An indexed field with index 0: nghttp2 ends the connection with COMPRESSION_ERROR.
            appendFrames(type: type, stream: blockStream, flags: flags, block: [0x80], endHeaders: true)
            poisoned = true
            block.fields.removeAll()
            return .emit(nil)
        }
        var verdict = block.verdict(isNewRequest: blockIsNewRequest)
        // A split block's stream exists already: its fields go through nghttp2's callbacks.
        if split && verdict == .plain { verdict = .full }
        var encoded: [UInt8] = []
        swap(&encoded, &scratchBlock)
        encoded.removeAll(keepingCapacity: true)
        switch verdict {
        case .plain: block.encodeForwarded(into: &encoded)
        case .full: block.encodeAll(into: &encoded)
        case .reset: encoded.append(0x82) // :method GET, whose callback resets the stream
        }
        if verdict != .plain { block.fields.removeAll() }
        output.removeAll(keepingCapacity: true)
        appendFrames(type: type, stream: blockStream, flags: flags, block: encoded, endHeaders: true)
        swap(&encoded, &scratchBlock)
        return .emit(verdict)
    }

    /// Header-block buffers past a normal request's size go back to the heap once used.
    private func releaseLargeBuffers() {
        if fragments.capacity > Self.maxFrameSize { fragments = [] }
        if frame.capacity > Self.maxFrameSize { frame = [] }
        if scratchBlock.capacity > Self.maxFrameSize { scratchBlock = [] }
    }

    /// Bytes of a header block held here until it is complete.
    var bufferedBytes: Int { frame.count + (blockOpen ? fragments.count : 0) }

    private var scratchBlock: [UInt8] = []

    /// A frame of `type` (HEADERS or CONTINUATION), then CONTINUATIONs past `maxFrameSize`,
    /// carrying `block` for `stream`; `flags` (END_STREAM, PRIORITY) go on the first.
    private func appendFrames(type: UInt8, stream: Int32, flags: UInt8, block: [UInt8], endHeaders: Bool) {
        let hasPriority = flags & 0x20 != 0
        var offset = 0
        var first = true
        repeat {
            let room = Self.maxFrameSize - (first && hasPriority ? 5 : 0)
            let chunk = min(room, block.count - offset)
            let last = offset + chunk == block.count
            let length = chunk + (first && hasPriority ? 5 : 0)
            var frameFlags: UInt8 = first ? flags & (0x1 | 0x20) : 0
            if last && endHeaders { frameFlags |= 0x4 }
            output.append(UInt8(truncatingIfNeeded: length >> 16))
            output.append(UInt8(truncatingIfNeeded: length >> 8))
            output.append(UInt8(truncatingIfNeeded: length))
            output.append(first ? type : 0x9)
            output.append(frameFlags)
            let id = UInt32(bitPattern: stream)
            output.append(UInt8(truncatingIfNeeded: id >> 24))
            output.append(UInt8(truncatingIfNeeded: id >> 16))
            output.append(UInt8(truncatingIfNeeded: id >> 8))
            output.append(UInt8(truncatingIfNeeded: id))
            if first && hasPriority { output.append(contentsOf: priority) }
            output.append(contentsOf: block[offset..<(offset + chunk)])
            offset += chunk
            first = false
        } while offset < block.count
    }
}

/// One request header block as decoded: its fields in block order (all of them, up to four
/// times the header list limit), what each is to nghttp2's rules, and the verdict on what
/// nghttp2 must see of it (`HTTP2Inbound`).
struct RequestHeaderBlock: HPACKFieldSink {
    /// SETTINGS_MAX_HEADER_LIST_SIZE as advertised.
    let limit: Int
    var fields = HTTPFields()
    private var roles: [FieldRole] = []
    /// RFC 9113's size of the whole list (name + value + 32 a field), materialised or not.
    private(set) var listSize = 0
    private(set) var method: HTTPMethod = .get
    private(set) var pathIndex: Int32 = -1
    private var pseudoSeen: UInt8 = 0
    private var regularSeen = false
    /// Every field so far is one nghttp2 accepts and passes on unchanged.
    private var plain = true

    init(limit: Int) {
        self.limit = limit
        fields.reserveCapacity(bytes: 512, fields: 12)
        roles.reserveCapacity(12)
    }

    mutating func reset() {
        fields.removeAll()
        roles.removeAll(keepingCapacity: true)
        listSize = 0
        method = .get
        pathIndex = -1
        pseudoSeen = 0
        regularSeen = false
        plain = true
    }

    mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: FieldRole, valueIsPlain: Bool) {
        listSize += name.count + value.count + 32
        guard listSize <= 4 * limit else { return }
        switch role {
        case .method, .scheme, .path, .authority:
            let bit: UInt8 = 1 << role.rawValue
            if regularSeen || pseudoSeen & bit != 0 { plain = false }
            pseudoSeen |= bit
            if role == .path {
                if !valueIsPlain { plain = false }
                pathIndex = Int32(fields.count)
            } else if role == .method {
                method = HTTPMethod(bytes: value)
                if value.equals("CONNECT") { plain = false }
            }
        case .forwarded:
            regularSeen = true
        case .regular:
            regularSeen = true
            if !valueIsPlain { plain = false }
        case .otherPseudo, .forbidden, .invalidName:
            plain = false
        }
        fields.addLowercase(name: name, value: value)
        roles.append(role)
    }

    /// What nghttp2 is given (see `HTTP2Inbound`).
    func verdict(isNewRequest: Bool) -> HTTP2Inbound.BlockVerdict {
        if listSize > 4 * limit { return .reset }
        let required: UInt8 = 1 << FieldRole.method.rawValue | 1 << FieldRole.scheme.rawValue | 1 << FieldRole.path.rawValue
        guard isNewRequest, plain, listSize <= limit, pseudoSeen & required == required else { return .full }
        return .plain
    }

    /// The fields nghttp2 needs of a plain block, `:path` as `/`.
    func encodeForwarded(into out: inout [UInt8]) {
        fields.forEachFieldIndexed { i, name, value in
            switch roles[i] {
            case .path: out.append(0x84) // :path "/", static index 4
            case .method, .scheme, .authority, .forwarded: appendLiteral(name, value, into: &out)
            default: break
            }
        }
    }

    /// Every field, as literals without indexing.
    func encodeAll(into out: inout [UInt8]) {
        fields.forEachFieldIndexed { _, name, value in appendLiteral(name, value, into: &out) }
    }

    private func appendLiteral(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        out.append(0x00)
        appendString(name, into: &out)
        appendString(value, into: &out)
    }

    private func appendString(_ s: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        var n = s.count
        if n < 127 {
            out.append(UInt8(n))
        } else {
            out.append(127)
            n -= 127
            while n >= 128 {
                out.append(UInt8(n & 0x7F | 0x80))
                n >>= 7
            }
            out.append(UInt8(n))
        }
        out.append(contentsOf: s)
    }
}
