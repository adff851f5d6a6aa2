import CH2Memory
import CNghttp2

/// HTTP/2 over nghttp2 for one connection. Stream state is owned here, in `streams`: nghttp2
/// only ever holds unretained pointers, so `nghttp2_session_del` (which does not call
/// on_stream_close) leaks nothing.
final class HTTP2Session: ExchangeOwner {
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
    /// The first response is HPACK-indexed in full, so later never-indexed values of the same
    /// header names refer to the names by index instead of spelling them out each time.
    private var firstResponseSent = false
    private var inReceive = false
    private let dispatcher: Dispatcher
    private let limits: ServerLimits
    var closeAfterGoAway = false

    init(connection: Connection, dispatcher: Dispatcher, limits: ServerLimits, maxConcurrentStreams: UInt32) {
        self.connection = connection
        self.dispatcher = dispatcher
        self.limits = limits
        var cbs: OpaquePointer?
        nghttp2_session_callbacks_new(&cbs)
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
        exchange.streamID = 1
        exchange.owner = self
        exchange.request.version = .http2
        adopt(exchange)
        dispatcher.dispatch(exchange)
        return true
    }

    /// Feeds received bytes. Returns false on a fatal protocol error.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        inReceive = true
        let rv = nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        inReceive = false
        return rv >= 0
    }

    /// Serializes pending frames into `out`, stopping at `highWater` bytes.
    func produce(into out: inout OutputBuffer, highWater: Int) {
        while out.count < highWater {
            var ptr: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &ptr)
            if n <= 0 { break }
            out.append(UnsafeRawBufferPointer(start: ptr, count: n))
        }
    }

    var wantsIO: Bool {
        nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    var activeStreams: Int { live.count }

    private func adopt(_ ex: Exchange) {
        ex.liveIndex = live.count
        live.append(ex)
        connection.loop.openStreams.add(1, ordering: .relaxed)
        nghttp2_session_set_stream_user_data(session, ex.streamID, Unmanaged.passUnretained(ex).toOpaque())
    }

    // MARK: handler-facing operations

    func respond(_ ex: Exchange, _ response: Response) {
        guard ex.streamID > 0, ex.owner === self, ex.liveIndex >= 0 else { return }
        let statusCode = (response.status >= 100 && response.status < 600) ? response.status : 500
        let hasBody = !response.body.isEmpty && ex.request.method != .head
        let fields = response.headers
        let count = fields.count + 2
        var rv: Int32 = 0
        h2StatusDigits.withUnsafeBufferPointer { table in
            let st = UnsafeBufferPointer(rebasing: table[(statusCode * 3)..<(statusCode * 3 + 3)])
            withDecimalDigits(response.body.count) { clRaw in
                let cl = response.body.isEmpty ? UnsafeRawBufferPointer(start: nil, count: 0) : clRaw
                fields.storage.withUnsafeBufferPointer { store in
                    withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: count) { nva in
                        var k = 0
                        nva[k] = pushemu_nv(h2StatusName, 7, st.baseAddress, st.count)
                        k += 1
                        for e in fields.entries {
                            let name = store.baseAddress! + Int(e.nameStart)
                            let value = store.baseAddress! + Int(e.valueStart)
                            // Long values (ids, dates) are rarely repeated: indexing them only churns the table.
                            nva[k] =
                                e.valueLength >= 32 && firstResponseSent
                                ? pushemu_nv_no_index(name, Int(e.nameLength), value, Int(e.valueLength))
                                : pushemu_nv(name, Int(e.nameLength), value, Int(e.valueLength))
                            k += 1
                        }
                        if cl.count > 0 {
                            nva[k] = pushemu_nv(h2ContentLengthName, 14, cl.baseAddress!.assumingMemoryBound(to: UInt8.self), cl.count)
                            k += 1
                        }
                        if hasBody {
                            ex.responseBody = response.body
                            ex.responseOffset = 0
                            var provider = nghttp2_data_provider(
                                source: nghttp2_data_source(ptr: Unmanaged.passUnretained(ex).toOpaque()),
                                read_callback: h2ReadBody)
                            rv = nghttp2_submit_response(session, ex.streamID, nva.baseAddress, k, &provider)
                        } else {
                            rv = nghttp2_submit_response(session, ex.streamID, nva.baseAddress, k, nil)
                        }
                    }
                }
            }
        }
        firstResponseSent = true
        if rv != 0 { nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ex.streamID, NGHTTP2_INTERNAL_ERROR.rawValue) }
        if !inReceive { connection.requestFlush() }
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
    private var answersInFlight: Bool { live.contains { $0.state == .responded } }

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
        }
        if !live.isEmpty { connection.loop.openStreams.subtract(live.count, ordering: .relaxed) }
        live.removeAll()
        last = nil
    }

    // MARK: callbacks

    fileprivate func beginStream(_ id: Int32) {
        let ex: Exchange
        if let reused = pool.popLast() {
            reused.recycle(streamID: id, owner: self)
            ex = reused
        } else {
            let req = Request(version: .http2, method: .get, headers: HTTPFields())
            ex = Exchange(request: req, connection: connection.context, streamID: id, owner: self)
            ex.request.headers.reserveCapacity(bytes: 512, fields: 12)
        }
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

    fileprivate func header(_ id: Int32, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        // The live list keeps the exchange alive: use it without retaining (this runs per header).
        guard
            let p = id == lastID && last != nil
                ? Unmanaged.passUnretained(last!).toOpaque()
                : nghttp2_session_get_stream_user_data(session, id)
        else { return }
        Unmanaged<Exchange>.fromOpaque(p)._withUnsafeGuaranteedRef { ex in header(ex, name, value) }
    }

    @inline(__always)
    private func header(_ ex: Exchange, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard ex.state == .reading else { return }
        ex.headerListSize += name.count + value.count + 32
        if ex.headerListSize > limits.maxHeaderListSize {
            ex.headersTooLarge = true
            return
        }
        if name.count == 5 && name.equals(":path") {
            ex.request.pathIndex = Int32(ex.request.headers.count)
        }
        if name.count == 7 && name.equals(":method") {
            ex.request.method = HTTPMethod(bytes: value)
        }
        ex.request.headers.addLowercase(name: name, value: value)
    }

    fileprivate func headersDone(_ id: Int32, endStream: Bool, isRequest: Bool) {
        guard let ex = exchange(id) else { return }
        if isRequest {
            guard dispatcher.headersComplete(ex) else { return }
        }
        if endStream { dispatcher.dispatch(ex) }
    }

    fileprivate func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let ex = exchange(id), ex.state == .reading else { return }
        if ex.request.body.count + bytes.count > ex.maxBodySize {
            ex.respond(dispatcher.bodyTooLarge(ex))
            return
        }
        ex.request.body.append(contentsOf: bytes.typedBytes)
    }

    fileprivate func dataDone(_ id: Int32) {
        guard let ex = exchange(id) else { return }
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
        // Only an exchange no handler or task still holds can be reused.
        if pool.count < 64 && isKnownUniquelyReferenced(&ex) { pool.append(ex) }
        // The last answer in flight is out (its END_STREAM sent): a waiting GOAWAY follows it.
        if let waiting = pendingGoAway, !answersInFlight {
            pendingGoAway = nil
            submitGoAway(waiting)
        }
    }
}

private let h2StatusName: [UInt8] = Array(":status".utf8)
private let h2ContentLengthName: [UInt8] = Array("content-length".utf8)
/// ":status" values 100...599 as three ASCII digits each, in one flat table.
private let h2StatusDigits: [UInt8] = (0..<600).flatMap { Array(String(format3($0)).utf8) }

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
    h2(ud) {
        $0.header(
            pushemu_frame_stream_id(frame), UnsafeRawBufferPointer(start: name, count: namelen),
            UnsafeRawBufferPointer(start: value, count: valuelen))
    }
    return 0
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

private let h2OnDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, ud in
    h2(ud) { $0.data(streamID, UnsafeRawBufferPointer(start: data, count: len)) }
    return 0
}

private let h2OnStreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, ud in
    h2(ud) { $0.streamClosed(streamID) }
    return 0
}

private let h2ReadBody: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, _ in
    guard let source, let ptr = source.pointee.ptr, let buf, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let ex = Unmanaged<Exchange>.fromOpaque(ptr).takeUnretainedValue()
    let remaining = ex.responseBody.count - ex.responseOffset
    let n = min(remaining, length)
    ex.responseBody.withUnsafeBytes { raw in
        UnsafeMutableRawPointer(buf).copyMemory(from: raw.baseAddress! + ex.responseOffset, byteCount: n)
    }
    ex.responseOffset += n
    if ex.responseOffset == ex.responseBody.count {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        ex.responseBody = []
    }
    return n
}
