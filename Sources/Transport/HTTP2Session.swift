import CH2Memory
import CNghttp2

/// HTTP/2 over nghttp2 for one connection. Stream state is owned here, in `live`: nghttp2
/// only ever holds unretained pointers, so `nghttp2_session_del` (which does not call
/// on_stream_close) leaks nothing.
///
/// What a peer can make it hold is bounded: request bodies by the connection's flow-control
/// window (credit is given back only when a request is dispatched or dropped, never just for
/// arriving), unsent answers by `maxUnsentPerConnection` (new streams are refused past it),
/// header lists by the advertised limit (a list four times over it resets its stream before
/// more of it is validated), streams by their deadlines (head, body, answer). Floods end in
/// GOAWAY: nghttp2's own rapid-reset and outbound-ACK limits, and a credit of cheap frames
/// (WINDOW_UPDATE, PING, SETTINGS, PRIORITY, RST_STREAM, empty DATA, unknown types) earned by
/// requests, answers and time, past which the session ends with ENHANCE_YOUR_CALM.
final class HTTP2Session: ExchangeOwner, HeaderBlockWriter {
    /// The connection owns this session; `close()` detaches every exchange before it goes.
    unowned(unsafe) let connection: Connection
    private(set) var session: OpaquePointer!
    /// The session's allocator (CH2Memory: free lists for nghttp2's per-stream blocks).
    private let memory: OpaquePointer
    /// Live exchanges (ownership). nghttp2's stream user data points at them, unretained, for lookup.
    private var live: [Exchange] = []
    private var lastID: Int32 = 0
    private var last: Exchange?
    /// Finished exchanges nobody else references, reused with their buffers' capacity.
    private var pool: [Exchange] = []
    /// The HPACK encoder of the answers' header blocks, and the peer's dynamic table.
    private var encoder = HPACKResponseEncoder()
    /// Answers waiting for their block (see `HTTP2HeaderTail`) whose HEADERS frame has not gone out.
    private var tailsPending = 0
    /// The stream closed inside `mem_send` with its answer's list not yet written. nghttp2
    /// closes a stream whose END_STREAM frame it has just framed before it hands the frame over
    /// (one stream a frame), so the list of an answer without a body is found here, for the
    /// chunk that holds its frame; dropped after each chunk. The bytes are swapped out of the
    /// exchange (a reference to it would keep it from the pool).
    private var closedTailStream: Int32 = 0
    private var closedTailCount = 0
    private var closedTailBytes: [UInt8] = []
    /// Where the frames leaving the session stand between two chunks of nghttp2's output.
    private var outFraming = HTTP2HeaderTail.Framing()
    private var inReceive = false
    /// True inside nghttp2's `mem_send` (see `closedTailStream`).
    private var inSend = false
    /// Header blocks are decoded here, ahead of nghttp2.
    private let inbound: HTTP2Inbound
    /// The stream and verdict of the decoded block nghttp2 is reading now, set only inside
    /// `feed` (stream 0: nghttp2 reads bytes as received, no block of ours). Callbacks ask
    /// `verdict(for:)` with their stream.
    private var readingStream: Int32 = 0
    private var readingVerdict = HTTP2Inbound.BlockVerdict.full
    private let dispatcher: Dispatcher
    private let limits: ServerLimits
    var closeAfterGoAway = false
    /// Response body bytes submitted but not yet handed to nghttp2's framing.
    private var unsentBytes = 0
    /// Request body bytes received and not yet given back to the flow-control window.
    private var bodyBytes = 0
    /// Cheap frames the peer may still send (see the type's comment).
    private var controlCredit: Int

    init(connection: Connection, dispatcher: Dispatcher, limits: ServerLimits, maxConcurrentStreams: UInt32) {
        self.connection = connection
        self.dispatcher = dispatcher
        self.limits = limits
        controlCredit = limits.http2ControlFrameAllowance
        inbound = HTTP2Inbound(maxHeaderListSize: limits.maxHeaderListSize)
        var cbs: OpaquePointer?
        nghttp2_session_callbacks_new(&cbs)
        nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, h2OnBeginFrame)
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, h2OnBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(cbs, h2OnHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, h2OnFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, h2OnDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, h2OnStreamClose)
        var opt: OpaquePointer?
        nghttp2_option_new(&opt)
        // Lets us see (and refuse) oversized header lists ourselves, with a 431.
        nghttp2_option_set_max_send_header_block_length(opt, 64 * 1024)
        // No RFC 7540 priority tree: closed streams need not be kept around for it.
        nghttp2_option_set_no_closed_streams(opt, 1)
        // Body credit goes back when a request is dispatched, not when its bytes arrive: the
        // connection window bounds what a peer can make this session buffer.
        nghttp2_option_set_no_auto_window_update(opt, 1)
        // Rapid reset (CVE-2023-44487): a burst of 1,000 resets, then 33 a second, as nghttpd.
        nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33)
        nghttp2_option_set_max_continuations(opt, 8)
        guard let m = pushemu_h2_memory_new() else { fatalError("out of memory") }
        memory = m
        var s: OpaquePointer?
        let rv = nghttp2_session_server_new3(&s, cbs, Unmanaged.passUnretained(self).toOpaque(), opt, pushemu_h2_memory_mem(m))
        nghttp2_option_del(opt)
        nghttp2_session_callbacks_del(cbs)
        precondition(rv == 0, "nghttp2_session_server_new3 failed")
        session = s
        var iv = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(limits.http2InitialWindowSize)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(limits.maxHeaderListSize)),
            // RFC 9218: no RFC 7540 priorities (APNs ignores PRIORITY frames too).
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES.rawValue), value: 1),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &iv, iv.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(limits.http2ConnectionWindowSize))
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        pushemu_h2_memory_free(memory)
    }

    /// Turns an HTTP/1.1 `Upgrade: h2c` request into stream 1 and dispatches it.
    func upgrade(settings: [UInt8], exchange: Exchange) -> Bool {
        let head: Int32 = exchange.request.method == .head ? 1 : 0
        let rv = settings.withUnsafeBufferPointer {
            nghttp2_session_upgrade2(session, $0.baseAddress, $0.count, head, nil)
        }
        guard rv == 0 else { return false }
        inbound.upgraded()
        exchange.streamID = 1
        exchange.owner = self
        exchange.request.version = .http2
        adopt(exchange)
        dispatcher.dispatch(exchange)
        return true
    }

    /// Hands nghttp2 what `inbound` emitted (a re-encoded header block, or frame bytes held
    /// back). Only during this call do nghttp2's callbacks for `block`'s stream see its verdict.
    @inline(__always)
    private func feed(_ block: HTTP2Inbound.DecodedBlock?) -> Int {
        readingStream = block?.stream ?? 0
        readingVerdict = block?.verdict ?? .full
        defer { readingStream = 0 }
        let bytes = inbound.output
        return nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    /// The verdict on stream `id`'s header block when nghttp2 is reading one `inbound` decoded
    /// (nil: nghttp2 decodes the block itself, and the per-field callbacks do the work).
    @inline(__always)
    private func verdict(for id: Int32) -> HTTP2Inbound.BlockVerdict? {
        id == readingStream ? readingVerdict : nil
    }

    /// Feeds received bytes. Returns false on a fatal protocol error.
    ///
    /// The bytes go through `inbound` first: frames pass to nghttp2 as they are, header blocks
    /// are decoded there and nghttp2 is given them re-encoded (see `HTTP2Inbound`).
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        inReceive = true
        defer { inReceive = false }
        var position = 0
        while true {
            var rv: Int
            switch inbound.step(bytes, &position) {
            case .done:
                return true
            case .pass(let range):
                rv = nghttp2_session_mem_recv(
                    session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + range.lowerBound, range.count)
            case .emit(let block):
                rv = feed(block)
            case .tooManyContinuations:
                rv = Int(NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue)
            }
            if rv == Int(NGHTTP2_ERR_FLOODED.rawValue) || rv == Int(NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue) {
                // Too many ACKs owed to a peer that sends faster than it reads, or a header block
                // split into too many CONTINUATION frames: say so before closing.
                nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
            }
            if rv < 0 { return false }
        }
    }

    /// Serializes pending frames into `out`, stopping at `highWater` bytes.
    func produce(into out: inout OutputBuffer, highWater: Int) {
        while out.count < highWater {
            var ptr: UnsafePointer<UInt8>?
            inSend = true
            let n = nghttp2_session_mem_send(session, &ptr)
            inSend = false
            if n <= 0 { break }
            let chunk = UnsafeRawBufferPointer(start: ptr, count: n)
            if tailsPending == 0 {
                out.append(chunk)
                HTTP2HeaderTail.pass(chunk, framing: &outFraming)
            } else {
                HTTP2HeaderTail.append(chunk, to: &out, framing: &outFraming, writer: self)
            }
            if closedTailCount > 0 { dropClosedTail() }
        }
    }

    /// Forgets the list of a stream closed without its HEADERS frame (an RST_STREAM framed instead).
    private func dropClosedTail() {
        closedTailCount = 0
        tailsPending -= 1
    }

    /// Stream `id`'s waiting answer list (see `HTTP2HeaderTail`), or an empty buffer; and the
    /// exchange that holds it (nil: the closed stream's, in `closedTailBytes`). The exchange is
    /// not retained: the live list or the pool holds it for as long as the frame is written.
    private func list(_ id: Int32) -> (UnsafeRawBufferPointer, Unmanaged<Exchange>?) {
        guard tailsPending > 0 else { return (UnsafeRawBufferPointer(start: nil, count: 0), nil) }
        if closedTailCount > 0 && closedTailStream == id {
            let n = closedTailCount
            return (closedTailBytes.withUnsafeBytes { UnsafeRawBufferPointer(start: $0.baseAddress, count: n) }, nil)
        }
        guard let p = nghttp2_session_get_stream_user_data(session, id) else { return (UnsafeRawBufferPointer(start: nil, count: 0), nil) }
        let ex = Unmanaged<Exchange>.fromOpaque(p)
        return ex._withUnsafeGuaranteedRef { ex in
            let n = ex.headerTailCount
            return (
                ex.headerTail.withUnsafeBytes { UnsafeRawBufferPointer(start: $0.baseAddress, count: n) },
                n > 0 ? Unmanaged.passUnretained(ex) : nil
            )
        }
    }

    /// The list `blockBound` found, for `writeBlock` to write without a second lookup.
    private var foundStream: Int32 = 0
    private var foundList = UnsafeRawBufferPointer(start: nil, count: 0)
    private var foundExchange: Unmanaged<Exchange>?

    func blockBound(stream: Int32) -> Int {
        let (l, ex) = list(stream)
        foundStream = stream
        foundList = l
        foundExchange = ex
        return l.count > 0 ? HTTP2HeaderTail.blockBound(listBytes: l.count) : 0
    }

    func writeBlock(stream: Int32, after nghttp2Part: UnsafeRawBufferPointer, into p: UnsafeMutablePointer<UInt8>) -> Int {
        if stream != foundStream { _ = blockBound(stream: stream) }
        let l = foundList
        guard l.count > 0 else { return 0 }
        // nghttp2 was given no field: its part is the table size updates it owes, nothing else.
        let onlyUpdates = encoder.apply(nghttp2Part)
        assert(onlyUpdates, "nghttp2 wrote fields into a block pushemu writes")
        let n = encoder.encode(
            status: HTTP2HeaderTail.status(ofList: l), fields: UnsafeRawBufferPointer(rebasing: l[2...]), into: p)
        if let ex = foundExchange {
            ex._withUnsafeGuaranteedRef { $0.headerTailCount = 0 }
        } else {
            closedTailCount = 0
        }
        foundStream = 0
        foundList = UnsafeRawBufferPointer(start: nil, count: 0)
        foundExchange = nil
        tailsPending -= 1
        return n
    }

    var wantsIO: Bool {
        nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// False once the session is ending (GOAWAY queued for a flood or a protocol error).
    var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }

    var activeStreams: Int { live.count }

    /// Request bodies not yet dispatched and answers not yet framed.
    var bufferedBytes: Int { bodyBytes + unsentBytes + inbound.bufferedBytes }

    /// Gives a stream's received body bytes back to the peer's windows.
    private func giveBack(_ ex: Exchange) {
        guard ex.unconsumed > 0 else { return }
        nghttp2_session_consume(session, ex.streamID, ex.unconsumed)
        bodyBytes -= ex.unconsumed
        ex.unconsumed = 0
    }

    /// Resets streams past their deadline: a head or body not finished in time (counted from
    /// its start), an answer the peer has not taken (its window kept shut). Also earns the
    /// second's share of cheap-frame credit. Returns true when something was submitted.
    func expireStreams(now: UInt64, timeouts: ServerTimeouts) -> Bool {
        controlCredit = min(controlCredit + 100, 10 * limits.http2ControlFrameAllowance)
        var reset = false
        for ex in live {
            let limit: UInt64
            switch ex.state {
            case .reading: limit = ex.headComplete ? timeouts.requestBodyNanos : timeouts.requestHeadNanos
            case .responded:
                // An event stream may stay quiet; what it holds is bounded by its producer.
                if ex.stream != nil { continue }
                limit = timeouts.sendNanos
            case .dispatched, .closed: continue
            }
            if now &- ex.phaseNs > limit {
                ex.phaseNs = now // once per deadline
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ex.streamID, NGHTTP2_CANCEL.rawValue)
                reset = true
            }
        }
        return reset
    }

    /// Charges one cheap frame; past the credit, ends the session (GOAWAY ENHANCE_YOUR_CALM).
    fileprivate func chargeControlFrame() {
        controlCredit -= 1
        if controlCredit == -1 {
            nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        }
    }

    fileprivate func framed(_ n: Int) { unsentBytes -= n }

    private func adopt(_ ex: Exchange) {
        ex.liveIndex = live.count
        live.append(ex)
        connection.loop.openStreams.add(1, ordering: .relaxed)
        nghttp2_session_set_stream_user_data(session, ex.streamID, Unmanaged.passUnretained(ex).toOpaque())
    }

    // MARK: handler-facing operations

    func respond(_ ex: Exchange, _ response: Response) { submit(ex, response, streaming: false) }

    func startStream(_ ex: Exchange, _ head: Response) {
        var head = head
        head.body = []
        submit(ex, head, streaming: true)
        if ex.liveIndex < 0 { ex.endStream() }
    }

    func streamWrite(_ ex: Exchange, _ bytes: UnsafeRawBufferPointer) {
        guard ex.liveIndex >= 0 else { return }
        if ex.responseOffset > 0 && ex.responseOffset == ex.responseBody.count {
            ex.responseBody.removeAll(keepingCapacity: true)
            ex.responseOffset = 0
        } else if ex.responseOffset >= 1 << 16, ex.responseOffset >= ex.responseBody.count / 2 {
            // A stream whose reader never quite catches up: the sent prefix goes, so the body
            // holds only what is unsent (bounded by the stream's own limit), not all it ever sent.
            ex.responseBody.removeFirst(ex.responseOffset)
            ex.responseOffset = 0
        }
        let n = bytes.count
        ex.responseBody.append(contentsOf: bytes)
        unsentBytes += n
        controlCredit = min(controlCredit + 1 + n >> 13, 10 * limits.http2ControlFrameAllowance)
        nghttp2_session_resume_data(session, ex.streamID)
        if !inReceive { connection.requestFlush() }
    }

    func streamFinish(_ ex: Exchange) {
        guard ex.liveIndex >= 0 else { return }
        nghttp2_session_resume_data(session, ex.streamID)
        if !inReceive { connection.requestFlush() }
    }

    func streamUnsent(_ ex: Exchange) -> Int { ex.responseBody.count - ex.responseOffset }

    /// Ends every event stream (the server is draining).
    func finishStreams() {
        for ex in live { ex.stream?.finish() }
    }

    private func submit(_ ex: Exchange, _ response: Response, streaming: Bool) {
        guard ex.streamID > 0, ex.owner === self, ex.liveIndex >= 0 else { return }
        let statusCode = (response.status >= 100 && response.status < 600) ? response.status : 500
        let hasBody = !response.body.isEmpty && ex.request.method != .head
        let fields = response.headers
        var rv: Int32 = 0
        withDecimalDigits(response.body.count) { clRaw in
            let cl = response.body.isEmpty ? UnsafeRawBufferPointer(start: nil, count: 0) : clRaw
            if writeList(ex, statusCode, fields, contentLength: cl) {
                // nghttp2 frames the HEADERS frame; the block is written into it (HTTP2HeaderTail).
                rv = submitHead(ex, nil, 0, response, streaming: streaming, hasBody: hasBody)
                return
            }
            // Too large to write here: nghttp2 encodes it, every field never-indexed, so that its
            // deflater leaves the dynamic table to `encoder`.
            let never = UInt8(truncatingIfNeeded: NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            let noCopy = UInt8(truncatingIfNeeded: NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
            let count = fields.count + 2
            fields.storage.withUnsafeBufferPointer { store in
                withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: count) { nva in
                    var k = 0
                    nva[k] = pushemu_nv_flags(h2StatusName, 7, h2StatusDigits + statusCode * 3, 3, never | noCopy)
                    k += 1
                    for e in fields.entries {
                        let name = store.baseAddress! + Int(e.nameStart)
                        let value = store.baseAddress! + Int(e.valueStart)
                        nva[k] = pushemu_nv_flags(name, Int(e.nameLength), value, Int(e.valueLength), never)
                        k += 1
                    }
                    if cl.count > 0 {
                        let noCopyName = UInt8(truncatingIfNeeded: NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
                        nva[k] = pushemu_nv_flags(
                            h2ContentLengthName, 14, cl.baseAddress!.assumingMemoryBound(to: UInt8.self), cl.count,
                            never | noCopyName)
                        k += 1
                    }
                    rv = submitHead(ex, nva.baseAddress, k, response, streaming: streaming, hasBody: hasBody)
                }
            }
        }
        ex.phaseNs = connection.loop.nowNs
        giveBack(ex)
        if rv != 0 { nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ex.streamID, NGHTTP2_INTERNAL_ERROR.rawValue) }
        if !inReceive { connection.requestFlush() }
    }

    /// nghttp2_submit_response with the answer's body (or event stream) as its data source.
    @inline(__always)
    private func submitHead(
        _ ex: Exchange, _ nva: UnsafePointer<nghttp2_nv>?, _ k: Int, _ response: Response, streaming: Bool, hasBody: Bool
    ) -> Int32 {
        if streaming {
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: Unmanaged.passUnretained(ex).toOpaque()), read_callback: h2ReadStream)
            return nghttp2_submit_response(session, ex.streamID, nva, k, &provider)
        } else if hasBody {
            unsentBytes += response.body.count
            controlCredit = min(controlCredit + 1 + response.body.count >> 13, 10 * limits.http2ControlFrameAllowance)
            ex.responseBody = response.body
            ex.responseOffset = 0
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: Unmanaged.passUnretained(ex).toOpaque()), read_callback: h2ReadBody)
            return nghttp2_submit_response(session, ex.streamID, nva, k, &provider)
        }
        return nghttp2_submit_response(session, ex.streamID, nva, k, nil)
    }

    /// Keeps the answer's status and fields in the exchange, for its block to be written into
    /// its HEADERS frame (see `HTTP2HeaderTail`), when they fit; returns whether they did.
    private func writeList(_ ex: Exchange, _ status: Int, _ fields: borrowing HTTPFields, contentLength cl: UnsafeRawBufferPointer) -> Bool
    {
        let fieldBytes = fields.used + (cl.count > 0 ? 14 + cl.count : 0)
        let fieldCount = fields.count + (cl.count > 0 ? 1 : 0)
        guard HTTP2HeaderTail.fits(fieldBytes: fieldBytes, fieldCount: fieldCount) else { return false }
        let bytes = HTTP2HeaderTail.listSize(fieldBytes: fieldBytes, fieldCount: fieldCount)
        if ex.headerTail.count < bytes { ex.headerTail = [UInt8](repeating: 0, count: max(bytes, 128)) }
        if ex.headerTailCount == 0 { tailsPending += 1 }
        ex.headerTailCount = bytes
        fields.storage.withUnsafeBytes { store in
            ex.headerTail.withUnsafeMutableBufferPointer { list in
                let p = list.baseAddress!
                var at = 0
                HTTP2HeaderTail.writeStatus(status, p, &at)
                for e in fields.entries {
                    HTTP2HeaderTail.writeField(
                        store.baseAddress!, nameAt: Int(e.nameStart), nameCount: Int(e.nameLength), valueAt: Int(e.valueStart),
                        valueCount: Int(e.valueLength), p, &at)
                }
                if cl.count > 0 {
                    HTTP2HeaderTail.writeField(name: UnsafeRawBufferPointer(start: h2ContentLengthName, count: 14), value: cl, p, &at)
                }
            }
        }
        return true
    }

    func reset(_ ex: Exchange) {
        guard ex.streamID > 0, ex.owner === self, ex.liveIndex >= 0 else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ex.streamID, NGHTTP2_INTERNAL_ERROR.rawValue)
        if !inReceive { connection.requestFlush() }
    }

    func submitMaxConcurrentStreams(_ n: UInt32) {
        var iv = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: n)
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &iv, 1)
        if !inReceive { connection.requestFlush() }
    }

    /// A GOAWAY asked for while answers are still going out. nghttp2 sends GOAWAY ahead of queued
    /// DATA, and clients built on Python's h2 (aioapns, httpx, hyper) stop at GOAWAY and fail on
    /// the DATA after it, so the answer that ended the connection (a wrong-environment
    /// certificate, a spent error budget, a fault's `goaway`) would never be read. It waits until
    /// every answered stream has sent its END_STREAM (its stream closed), then goes out.
    private struct PendingGoAway {
        /// nil: the last stream processed when it is sent.
        var lastStreamID: Int32?
        var errorCode: UInt32
        var debugData: [UInt8]
        var closeAfterSend: Bool
    }
    private var pendingGoAway: PendingGoAway?

    func goAway(lastStreamID: Int32?, errorCode: UInt32, debugData: [UInt8], closeAfterSend: Bool) {
        if pendingGoAway != nil {
            // The first reason stands; a later caller may still ask for the close.
            if closeAfterSend { pendingGoAway?.closeAfterSend = true }
            return
        }
        let waiting = PendingGoAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData, closeAfterSend: closeAfterSend)
        if answersInFlight { pendingGoAway = waiting } else { submitGoAway(waiting) }
    }

    /// Whether a stream has its answer submitted but not yet all sent.
    private var answersInFlight: Bool { live.contains { $0.state == .responded && $0.stream == nil } }

    private func submitGoAway(_ goAway: PendingGoAway) {
        let last = goAway.lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        _ = goAway.debugData.withUnsafeBufferPointer {
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, goAway.errorCode, $0.baseAddress, $0.count)
        }
        if goAway.closeAfterSend { closeAfterGoAway = true }
        if !inReceive { connection.requestFlush() }
    }

    /// Marks every stream closed (the connection is going away).
    func abandonAll() {
        for ex in live {
            ex.state = .closed
            ex.owner = nil
            ex.liveIndex = -1
            ex.endStream()
        }
        if !live.isEmpty { connection.loop.openStreams.subtract(live.count, ordering: .relaxed) }
        live.removeAll()
        pool.removeAll()
        closedTailCount = 0
        closedTailBytes = []
        tailsPending = 0
        last = nil
        unsentBytes = 0
        bodyBytes = 0
    }

    // MARK: callbacks

    fileprivate func beginStream(_ id: Int32) {
        // A peer that does not take its answers gets no new streams until it does.
        if unsentBytes > limits.maxUnsentPerConnection {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        controlCredit = min(controlCredit + 100, 10 * limits.http2ControlFrameAllowance)
        let ex: Exchange
        if let reused = pool.popLast() {
            reused.recycle(streamID: id, owner: self)
            ex = reused
        } else {
            let req = Request(version: .http2, method: .get, headers: HTTPFields())
            ex = Exchange(request: req, connection: connection.context, streamID: id, owner: self)
            ex.request.headers.reserveCapacity(bytes: 512, fields: 12)
        }
        if verdict(for: id) == .plain {
            // The fields were decoded and checked ahead of nghttp2 (`HTTP2Inbound`).
            ex.request.method = inbound.block.method
            ex.request.pathIndex = inbound.block.pathIndex
            ex.headerListSize = inbound.block.listSize
            inbound.takeFields(into: &ex.request.headers)
        }
        ex.phaseNs = connection.loop.nowNs
        adopt(ex)
        last = ex
        lastID = id
    }

    @inline(__always)
    fileprivate func exchange(_ id: Int32) -> Exchange? {
        if id == lastID, let last { return last }
        guard let p = nghttp2_session_get_stream_user_data(session, id) else { return nil }
        let ex = Unmanaged<Exchange>.fromOpaque(p).takeUnretainedValue()
        last = ex
        lastID = id
        return ex
    }

    fileprivate func header(_ id: Int32, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Int32 {
        switch verdict(for: id) {
        case .plain: return 0 // the request's fields came from `inbound` already
        case .reset: return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue // over four times the limit
        case .full, nil: break
        }
        // The live list keeps the exchange alive: use it without retaining (this runs per header).
        guard
            let p = id == lastID && last != nil
                ? Unmanaged.passUnretained(last!).toOpaque()
                : nghttp2_session_get_stream_user_data(session, id)
        else { return 0 }
        return Unmanaged<Exchange>.fromOpaque(p)._withUnsafeGuaranteedRef { ex in header(ex, name, value) }
    }

    @inline(__always)
    private func header(_ ex: Exchange, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Int32 {
        guard ex.state == .reading else { return 0 }
        ex.headerListSize += name.count + value.count + 32
        if ex.headerListSize > limits.maxHeaderListSize {
            ex.headersTooLarge = true
            // Four times over what SETTINGS allows (an HPACK reference bomb, say): reset the
            // stream, so nghttp2 decodes the rest of the block without validating each field.
            return ex.headerListSize > 4 * limits.maxHeaderListSize ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue : 0
        }
        if name.count == 5 && name.equals(":path") {
            ex.request.pathIndex = Int32(ex.request.headers.count)
        }
        if name.count == 7 && name.equals(":method") {
            ex.request.method = HTTPMethod(bytes: value)
        }
        ex.request.headers.addLowercase(name: name, value: value)
        return 0
    }

    fileprivate func headersDone(_ id: Int32, endStream: Bool, isRequest: Bool) {
        guard let ex = exchange(id) else { return }
        if isRequest {
            ex.headComplete = true
            ex.phaseNs = connection.loop.nowNs
            guard dispatcher.headersComplete(ex) else { return }
        }
        if endStream { dispatcher.dispatch(ex) }
    }

    fileprivate func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let ex = exchange(id), ex.state == .reading else {
            // Not kept (the stream was answered already, or is unknown): credit goes back now.
            nghttp2_session_consume(session, id, bytes.count)
            return
        }
        if ex.request.body.count + bytes.count > ex.maxBodySize {
            nghttp2_session_consume(session, id, bytes.count)
            ex.respond(dispatcher.bodyTooLarge(ex))
            return
        }
        ex.request.body.append(contentsOf: bytes.typedBytes)
        ex.unconsumed += bytes.count
        bodyBytes += bytes.count
    }

    fileprivate func dataDone(_ id: Int32) {
        guard let ex = exchange(id) else { return }
        giveBack(ex)
        dispatcher.dispatch(ex)
    }

    fileprivate func streamClosed(_ id: Int32) {
        if lastID == id {
            last = nil
            lastID = 0
        }
        guard let p = nghttp2_session_get_stream_user_data(session, id) else { return }
        var ex = Unmanaged<Exchange>.fromOpaque(p).takeUnretainedValue()
        let i = ex.liveIndex
        if i >= 0 && i < live.count && live[i] === ex {
            let moved = live.removeLast()
            if moved !== ex {
                live[i] = moved
                moved.liveIndex = i
            }
            connection.loop.openStreams.subtract(1, ordering: .relaxed)
        }
        ex.liveIndex = -1
        ex.state = .closed
        ex.owner = nil
        if ex.unconsumed > 0 {
            // The stream is gone: its bytes are given back to the connection's window only.
            nghttp2_session_consume_connection(session, ex.unconsumed)
            bodyBytes -= ex.unconsumed
            ex.unconsumed = 0
        }
        // Closed as its answer's last frame is framed (see `closedTailStream`).
        if ex.headerTailCount > 0 && !inSend {
            // Closed while receiving (reset by the peer, say): its HEADERS frame never goes out.
            ex.headerTailCount = 0
            tailsPending -= 1
        } else if ex.headerTailCount > 0 {
            if closedTailCount > 0 { dropClosedTail() }
            closedTailStream = id
            closedTailCount = ex.headerTailCount
            swap(&closedTailBytes, &ex.headerTail)
            ex.headerTailCount = 0
        }
        if !ex.responseBody.isEmpty {
            unsentBytes -= ex.responseBody.count - ex.responseOffset
            ex.responseBody = []
        }
        ex.endStream()
        // Only an exchange no handler or task still holds can be reused.
        if pool.count < 64 && isKnownUniquelyReferenced(&ex) { pool.append(ex) }
        // The last answer in flight is out (its END_STREAM sent): a waiting GOAWAY follows it.
        if let waiting = pendingGoAway, !answersInFlight {
            pendingGoAway = nil
            submitGoAway(waiting)
        }
    }
}

/// ":status", "content-length", then ":status" values 0...599 as three ASCII digits each, in
/// memory allocated once and never freed: nghttp2 is given them without copying (NO_COPY).
/// Never written after it is made, so every loop may read it (`nonisolated(unsafe)`).
nonisolated(unsafe) private let h2Constants: UnsafePointer<UInt8> = {
    let bytes = Array(":status".utf8) + Array("content-length".utf8) + (0..<600).flatMap { Array(String(format3($0)).utf8) }
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count)
    p.initialize(from: bytes, count: bytes.count)
    return UnsafePointer(p)
}()
nonisolated(unsafe) private let h2StatusName = h2Constants
nonisolated(unsafe) private let h2ContentLengthName = h2Constants + 7
nonisolated(unsafe) private let h2StatusDigits = h2Constants + 21

private func format3(_ n: Int) -> String {
    let s = String(n)
    return String(repeating: "0", count: max(0, 3 - s.count)) + s
}

/// The session behind nghttp2's user data, used without a retain (the connection owns it).
@inline(__always)
private func h2<R>(_ ud: UnsafeMutableRawPointer?, _ body: (HTTP2Session) -> R) -> R {
    Unmanaged<HTTP2Session>.fromOpaque(ud!)._withUnsafeGuaranteedRef(body)
}

private let h2OnBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, ud in
    guard let frame, UInt32(pushemu_frame_type(frame)) == NGHTTP2_HEADERS.rawValue,
        UInt32(pushemu_frame_headers_category(frame)) == NGHTTP2_HCAT_REQUEST.rawValue
    else { return 0 }
    h2(ud) { $0.beginStream(pushemu_frame_stream_id(frame)) }
    return 0
}

private let h2OnHeader: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, ud in
    guard let frame else { return 0 }
    return h2(ud) {
        $0.header(
            pushemu_frame_stream_id(frame), UnsafeRawBufferPointer(start: name, count: namelen),
            UnsafeRawBufferPointer(start: value, count: valuelen))
    }
}

private let h2OnFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, ud in
    guard let frame else { return 0 }
    let type = UInt32(pushemu_frame_type(frame))
    let endStream = (UInt32(pushemu_frame_flags(frame)) & NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    if type == NGHTTP2_HEADERS.rawValue {
        let isRequest = UInt32(pushemu_frame_headers_category(frame)) == NGHTTP2_HCAT_REQUEST.rawValue
        h2(ud) { $0.headersDone(pushemu_frame_stream_id(frame), endStream: endStream, isRequest: isRequest) }
    } else if type == NGHTTP2_DATA.rawValue && endStream {
        h2(ud) { $0.dataDone(pushemu_frame_stream_id(frame)) }
    }
    return 0
}

/// Every frame header, before its payload: the cheap ones are charged (nghttp2 reports no
/// PRIORITY without RFC 7540 priorities, nor unknown frame types, to on_frame_recv).
private let h2OnBeginFrame: nghttp2_on_begin_frame_callback = { _, hd, ud in
    guard let hd else { return 0 }
    let type = UInt32(pushemu_hd_type(hd))
    let cheap: Bool
    switch type {
    case NGHTTP2_HEADERS.rawValue, NGHTTP2_CONTINUATION.rawValue, NGHTTP2_GOAWAY.rawValue, NGHTTP2_PUSH_PROMISE.rawValue:
        cheap = false
    case NGHTTP2_DATA.rawValue:
        cheap = pushemu_hd_length(hd) == 0 && UInt32(pushemu_hd_flags(hd)) & NGHTTP2_FLAG_END_STREAM.rawValue == 0
    default:
        // WINDOW_UPDATE, PING, SETTINGS, PRIORITY, RST_STREAM, and types nghttp2 ignores.
        cheap = true
    }
    if cheap { h2(ud) { $0.chargeControlFrame() } }
    return 0
}

private let h2OnDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, ud in
    h2(ud) { $0.data(streamID, UnsafeRawBufferPointer(start: data, count: len)) }
    return 0
}

private let h2OnStreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, ud in
    h2(ud) { $0.streamClosed(streamID) }
    return 0
}

private let h2ReadBody: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, ud in
    guard let source, let ptr = source.pointee.ptr, let buf, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let ex = Unmanaged<Exchange>.fromOpaque(ptr).takeUnretainedValue()
    let remaining = ex.responseBody.count - ex.responseOffset
    let n = min(remaining, length)
    ex.responseBody.withUnsafeBytes { raw in
        UnsafeMutableRawPointer(buf).copyMemory(from: raw.baseAddress! + ex.responseOffset, byteCount: n)
    }
    ex.responseOffset += n
    h2(ud) { $0.framed(n) }
    if ex.responseOffset == ex.responseBody.count {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        ex.responseBody = []
    }
    return n
}

/// An event stream's body: what was written so far, then DEFERRED until more is (or EOF once
/// `finish` was called and all of it is sent).
private let h2ReadStream: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, ud in
    guard let source, let ptr = source.pointee.ptr, let buf, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let ex = Unmanaged<Exchange>.fromOpaque(ptr).takeUnretainedValue()
    let remaining = ex.responseBody.count - ex.responseOffset
    let n = min(remaining, length)
    if n > 0 {
        ex.responseBody.withUnsafeBytes { raw in
            UnsafeMutableRawPointer(buf).copyMemory(from: raw.baseAddress! + ex.responseOffset, byteCount: n)
        }
        ex.responseOffset += n
        h2(ud) { $0.framed(n) }
    }
    if ex.responseOffset == ex.responseBody.count {
        if ex.stream?.finishing ?? true {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            ex.responseBody = []
            ex.responseOffset = 0
        } else if n == 0 {
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
    }
    return n
}
