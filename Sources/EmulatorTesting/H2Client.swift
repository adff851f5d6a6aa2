import CNghttp2

/// A small h2c (HTTP/2 with prior knowledge) client for tests, over nghttp2's client session:
/// one connection, requests sent concurrently as streams, every answer read before it returns.
/// A connection's state (its SETTINGS, a gateway's per-connection auth cache) lives as long as
/// the client, so a test can send on one connection in several calls.
package final class H2Client {
    private let socket: TestSocket
    private var session: OpaquePointer!
    private var streams: [Int32: StreamState] = [:]
    /// GOAWAY's debug data, once the server sent one.
    package private(set) var goAwayDebugData: [UInt8]?

    final class StreamState {
        var status = 0
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var requestBody: [UInt8]
        var sent = 0
        var closed = false
        init(requestBody: [UInt8]) { self.requestBody = requestBody }
    }

    package init(port: Int) throws {
        socket = try TestSocket(port: port)
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, h2ClientOnHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, h2ClientOnData)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, h2ClientOnClose)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, h2ClientOnFrame)
        var created: OpaquePointer?
        let result = nghttp2_session_client_new(&created, callbacks, Unmanaged.passUnretained(self).toOpaque())
        nghttp2_session_callbacks_del(callbacks)
        guard result == 0, let created else { throw TestClientError("nghttp2_session_client_new failed") }
        session = created
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil, 0)
    }

    deinit { nghttp2_session_del(session) }

    /// Sends every request as its own stream and returns the answers in the same order.
    package func send(_ requests: [TestRequest], authority: String = "127.0.0.1") throws -> [TestResponse] {
        var ids: [Int32] = []
        for request in requests {
            let state = StreamState(requestBody: request.body)
            var fields = [(":method", request.method), (":scheme", "http"), (":authority", authority), (":path", request.path)]
            fields += request.headers.map { ($0.0.lowercased(), $0.1) }
            let names = fields.map { Array($0.0.utf8) }
            let values = fields.map { Array($0.1.utf8) }
            var nva: [nghttp2_nv] = []
            for index in fields.indices {
                nva.append(
                    names[index].withUnsafeBufferPointer { name in
                        values[index].withUnsafeBufferPointer { value in
                            pushemu_nv(name.baseAddress, name.count, value.baseAddress, value.count)
                        }
                    })
            }
            // nghttp2 copies the fields while submitting; the arrays outlive the call.
            let id: Int32 = withExtendedLifetime((names, values)) {
                if request.body.isEmpty && !["POST", "PUT", "PATCH"].contains(request.method) {
                    return nghttp2_submit_request(session, nil, nva, nva.count, nil, Unmanaged.passUnretained(state).toOpaque())
                }
                var provider = nghttp2_data_provider(
                    source: nghttp2_data_source(ptr: Unmanaged.passUnretained(state).toOpaque()),
                    read_callback: h2ClientReadBody)
                return nghttp2_submit_request(session, nil, nva, nva.count, &provider, Unmanaged.passUnretained(state).toOpaque())
            }
            guard id > 0 else { throw TestClientError("nghttp2_submit_request failed: \(id)") }
            streams[id] = state
            ids.append(id)
        }
        try pump { ids.allSatisfy { self.streams[$0]?.closed ?? true } }
        return ids.map { id in
            let state = streams.removeValue(forKey: id)!
            return TestResponse(status: state.status, headers: state.headers, body: state.body)
        }
    }

    /// One request on this connection.
    package func send(_ request: TestRequest, authority: String = "127.0.0.1") throws -> TestResponse {
        try send([request], authority: authority)[0]
    }

    /// Writes what the session has to send and reads until `done` (bounded by the socket's
    /// timeout and a count of reads).
    private func pump(until done: () -> Bool) throws {
        var buffer = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<100_000 {
            try flush()
            if done() { return }
            let count = try socket.receive(into: &buffer)
            if count == 0 {
                if done() { return }
                throw TestClientError("the server closed the connection")
            }
            let consumed = buffer.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, count) }
            guard consumed >= 0 else { throw TestClientError("HTTP/2 protocol error \(consumed)") }
        }
        throw TestClientError("no answer after 100,000 reads")
    }

    private func flush() throws {
        while true {
            var pointer: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &pointer)
            guard count > 0, let pointer else { return }
            try socket.send(UnsafeRawBufferPointer(start: pointer, count: count))
        }
    }

    fileprivate func header(stream: Int32, name: String, value: String) {
        guard let state = streams[stream] else { return }
        if name == ":status" { state.status = Int(value) ?? 0 } else { state.headers.append((name, value)) }
    }

    fileprivate func data(stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>) { streams[stream]?.body.append(contentsOf: bytes) }
    fileprivate func closed(stream: Int32) { streams[stream]?.closed = true }
    fileprivate func goAway(_ debugData: [UInt8]) { goAwayDebugData = debugData }
}

private func client(_ userData: UnsafeMutableRawPointer?) -> H2Client {
    Unmanaged<H2Client>.fromOpaque(userData!).takeUnretainedValue()
}

private let h2ClientOnHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    client(userData).header(
        stream: pushemu_frame_stream_id(frame),
        name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
        value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self))
    return 0
}

private let h2ClientOnData: nghttp2_on_data_chunk_recv_callback = { session, _, streamID, data, length, userData in
    client(userData).data(stream: streamID, UnsafeBufferPointer(start: data, count: length))
    nghttp2_session_consume(session, streamID, length)
    return 0
}

private let h2ClientOnClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
    client(userData).closed(stream: streamID)
    return 0
}

private let h2ClientOnFrame: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame, pushemu_frame_type(frame) == UInt8(NGHTTP2_GOAWAY.rawValue) else { return 0 }
    let goAway = frame.pointee.goaway
    client(userData).goAway(Array(UnsafeBufferPointer(start: goAway.opaque_data, count: goAway.opaque_data_len)))
    return 0
}

private let h2ClientReadBody: nghttp2_data_source_read_callback = { _, _, buffer, length, flags, source, _ in
    let state = Unmanaged<H2Client.StreamState>.fromOpaque(source!.pointee.ptr).takeUnretainedValue()
    let count = min(length, state.requestBody.count - state.sent)
    if count > 0 {
        state.requestBody.withUnsafeBytes { bytes in
            buffer!.update(from: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + state.sent, count: count)
        }
    }
    state.sent += count
    if state.sent == state.requestBody.count { flags!.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
    return count
}
