import CNghttp2
import Glibc

/// One h2c connection (HTTP/2 with prior knowledge) of the load generator: nghttp2's client
/// session over a non-blocking socket, keeping up to `streams` requests in flight and asking
/// `next` for each new one until it has none left.
final class LoadConnection {
    /// A request to send: its path and body (the headers are the run's).
    struct Request {
        var path: [UInt8]
        var body: [UInt8]
    }

    final class Stream {
        let body: [UInt8]
        var sent = 0
        var status = 0
        init(body: [UInt8]) { self.body = body }
    }

    let fd: Int32
    private var session: OpaquePointer!
    private var streams: [Int32: Stream] = [:]
    private var pending: [UInt8] = []
    private let maxStreams: Int
    private let authority: [UInt8]
    private let headers: [([UInt8], [UInt8])]
    private let next: () -> Request?
    private let finished: (Int) -> Void
    /// Whether the connection failed (closed by the server, a protocol or socket error), and why.
    private(set) var failure: String?
    private var exhausted = false

    var inFlight: Int { streams.count }
    var done: Bool { failure != nil || (exhausted && streams.isEmpty) }
    var wantsWrite: Bool { !pending.isEmpty || nghttp2_session_want_write(session) != 0 }

    /// Connects (blocking) to 127.0.0.1 or ::1 `host` at `port`, then makes the socket
    /// non-blocking. `finished` hears each answered request's status.
    init(
        host: String, port: Int, streams: Int, headers: [([UInt8], [UInt8])],
        next: @escaping () -> Request?, finished: @escaping (Int) -> Void
    ) throws(LoadError) {
        maxStreams = streams
        authority = Array("\(host.contains(":") ? "[\(host)]" : host):\(port)".utf8)
        self.headers = headers
        self.next = next
        self.finished = finished
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let info = list else {
            throw LoadError("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LoadError("socket: errno \(errno)") }
        guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            let e = errno
            close(fd)
            throw LoadError("cannot connect to \(host):\(port) (errno \(e))")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)

        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, loadOnHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, loadOnData)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, loadOnClose)
        var created: OpaquePointer?
        let result = nghttp2_session_client_new(&created, callbacks, Unmanaged.passUnretained(self).toOpaque())
        nghttp2_session_callbacks_del(callbacks)
        guard result == 0, let created else {
            close(fd)
            throw LoadError("nghttp2_session_client_new failed")
        }
        session = created
        // A large connection window, as h2load's default (-W 30): answers never wait on it.
        var settings = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 30)
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 1 << 30)
        fill()
    }

    deinit {
        nghttp2_session_del(session)
        close(fd)
    }

    /// Submits requests until `streams` are in flight or `next` has none left.
    private func fill() {
        while !exhausted && streams.count < maxStreams {
            guard let request = next() else {
                exhausted = true
                return
            }
            submit(request)
        }
    }

    private func submit(_ request: Request) {
        let stream = Stream(body: request.body)
        let length = Array(String(request.body.count).utf8)
        var fields: [([UInt8], [UInt8])] = [
            (Array(":method".utf8), Array("POST".utf8)), (Array(":scheme".utf8), Array("http".utf8)),
            (Array(":authority".utf8), authority), (Array(":path".utf8), request.path),
        ]
        fields += headers
        fields.append((Array("content-length".utf8), length))
        var nva: [nghttp2_nv] = []
        nva.reserveCapacity(fields.count)
        for (name, value) in fields {
            nva.append(
                name.withUnsafeBufferPointer { n in
                    value.withUnsafeBufferPointer { v in pushemu_nv(n.baseAddress, n.count, v.baseAddress, v.count) }
                })
        }
        // nghttp2 copies the fields while submitting; `fields` outlives the call.
        let id: Int32 = withExtendedLifetime(fields) {
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: Unmanaged.passUnretained(stream).toOpaque()), read_callback: loadReadBody)
            return nghttp2_submit_request(session, nil, nva, nva.count, &provider, nil)
        }
        guard id > 0 else {
            failure = "nghttp2_submit_request failed: \(id)"
            return
        }
        streams[id] = stream
    }

    /// Writes what the session has to send until the socket would block.
    func write() {
        while failure == nil {
            if pending.isEmpty {
                var pointer: UnsafePointer<UInt8>?
                let count = nghttp2_session_mem_send(session, &pointer)
                if count < 0 {
                    failure = "HTTP/2 error \(count) while sending"
                    return
                }
                guard count > 0, let pointer else { return }
                let written = Glibc.write(fd, pointer, count)
                if written == count { continue }
                if written < 0 && errno != EAGAIN && errno != EINTR {
                    failure = "write: errno \(errno)"
                    return
                }
                let done = max(written, 0)
                pending.append(contentsOf: UnsafeBufferPointer(start: pointer + done, count: count - done))
                return
            }
            let written = pending.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno != EAGAIN && errno != EINTR { failure = "write: errno \(errno)" }
                return
            }
            pending.removeFirst(written)
            if !pending.isEmpty { return }
        }
    }

    /// Reads what the socket holds and feeds it to the session.
    func read(into buffer: inout [UInt8]) {
        while failure == nil {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count == 0 {
                failure = streams.isEmpty && exhausted ? nil : "the server closed the connection with \(streams.count) streams open"
                if failure == nil { exhausted = true }
                return
            }
            if count < 0 {
                if errno != EAGAIN && errno != EINTR { failure = "read: errno \(errno)" }
                return
            }
            let consumed = buffer.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, count) }
            if consumed < 0 {
                failure = "HTTP/2 error \(consumed) while receiving"
                return
            }
            fill()
            if count < buffer.count { return }
        }
    }

    fileprivate func header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard name.elementsEqual(":status".utf8), let state = streams[stream] else { return }
        var status = 0
        for byte in value where byte >= 0x30 && byte <= 0x39 { status = status * 10 + Int(byte - 0x30) }
        state.status = status
    }

    fileprivate func closed(stream: Int32) {
        guard let state = streams.removeValue(forKey: stream) else { return }
        finished(state.status)
    }
}

/// Why a connection or the run could not go on.
struct LoadError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func connection(_ userData: UnsafeMutableRawPointer?) -> LoadConnection {
    Unmanaged<LoadConnection>.fromOpaque(userData!).takeUnretainedValue()
}

private let loadOnHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    connection(userData).header(
        stream: pushemu_frame_stream_id(frame), name: UnsafeBufferPointer(start: name, count: nameLength),
        value: UnsafeBufferPointer(start: value, count: valueLength))
    return 0
}

private let loadOnData: nghttp2_on_data_chunk_recv_callback = { _, _, _, _, _, _ in 0 }

private let loadOnClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
    connection(userData).closed(stream: streamID)
    return 0
}

private let loadReadBody: nghttp2_data_source_read_callback = { _, _, buffer, length, flags, source, _ in
    let stream = Unmanaged<LoadConnection.Stream>.fromOpaque(source!.pointee.ptr).takeUnretainedValue()
    let count = min(length, stream.body.count - stream.sent)
    if count > 0 {
        stream.body.withUnsafeBytes { bytes in
            buffer!.update(from: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + stream.sent, count: count)
        }
    }
    stream.sent += count
    if stream.sent == stream.body.count { flags!.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
    return count
}
