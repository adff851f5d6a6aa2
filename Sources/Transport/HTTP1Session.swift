/// HTTP/1.1 for one connection: keep-alive, pipelining (one request at a time, in order),
/// Content-Length and chunked bodies, `Expect: 100-continue`, and `Upgrade: h2c`.
/// Anything the parser refuses gets its status (400, 417, 505) and the connection closes.
final class HTTP1Session: ExchangeOwner {
    /// The connection owns this session; `abandon()` detaches the exchange before it goes.
    unowned(unsafe) let connection: Connection
    private let dispatcher: Dispatcher
    private let limits: ServerLimits
    private let allowH2CUpgrade: Bool

    private enum State {
        case head
        case body(Exchange, HTTP1RequestHead, remaining: Int)
        case chunkedBody(Exchange, HTTP1RequestHead)
        case waiting(Exchange, HTTP1RequestHead)
        /// An event stream is being sent; the connection closes when it ends.
        case streaming(Exchange)
        case closing
    }
    private var state: State = .head
    private var chunked = ChunkedDecoder()
    /// Unparsed input (only when a request straddles reads, or while one is being answered).
    private var pending: [UInt8] = []
    private var processing = false
    /// The head of the exchange being answered (keep-alive, upgrade decisions).
    private var currentKeepAlive = true

    /// Set when an h2c upgrade was accepted: the bytes after the request go to HTTP/2.
    private var pendingUpgrade: (Exchange, [UInt8])? = nil
    /// Set when a CONNECT was accepted: the bytes after it are the tunnel's (TLS).
    private var pendingTunnel: TLSContext? = nil
    /// When the head being read got its first byte, and when the body being read began
    /// (monotonic ns; 0: none). Their deadlines count from there, not from the last byte.
    private var headStartedNs: UInt64 = 0
    private var bodyStartedNs: UInt64 = 0

    init(connection: Connection, dispatcher: Dispatcher, limits: ServerLimits, allowH2CUpgrade: Bool) {
        self.connection = connection
        self.dispatcher = dispatcher
        self.limits = limits
        self.allowH2CUpgrade = allowH2CUpgrade
    }

    /// True while a request is being read or answered (used to decide idle close on shutdown).
    var isBusy: Bool {
        switch state {
        case .head: return !pending.isEmpty
        case .closing: return false
        default: return true
        }
    }

    var isWaitingForHead: Bool {
        if case .head = state { return true }
        return false
    }

    /// True once the request in progress was read whole and handed to its handler.
    var isAnswering: Bool {
        if case .waiting = state { return true }
        return false
    }

    /// Request bytes held: pipelined or partial input, and the body being read.
    var bufferedBytes: Int {
        switch state {
        case .body(let ex, _, _), .chunkedBody(let ex, _): return pending.count + ex.request.body.count
        default: return pending.count
        }
    }

    /// True when the head being read, or the body, is past its deadline.
    func deadlinePassed(now: UInt64, timeouts: ServerTimeouts) -> Bool {
        switch state {
        case .head: return headStartedNs != 0 && now &- headStartedNs > timeouts.requestHeadNanos
        case .body, .chunkedBody: return now &- bodyStartedNs > timeouts.requestBodyNanos
        case .waiting, .streaming, .closing: return false
        }
    }

    func receive(_ bytes: UnsafeRawBufferPointer) {
        if isClosing { return }
        if headStartedNs == 0, case .head = state { headStartedNs = connection.loop.nowNs }
        if pending.isEmpty {
            let used = process(bytes)
            afterProcess(UnsafeRawBufferPointer(rebasing: bytes[used...]))
        } else {
            pending.append(contentsOf: bytes)
            resumePending()
        }
    }

    /// Closing, or sending an event stream: input is ignored from there on.
    private var isClosing: Bool {
        switch state {
        case .closing, .streaming: return true
        default: return false
        }
    }

    private func resumePending() {
        guard !pending.isEmpty, !processing, !isClosing else { return }
        let buf = pending
        pending = []
        buf.withUnsafeBytes { raw in
            let used = process(raw)
            afterProcess(UnsafeRawBufferPointer(rebasing: raw[used...]))
        }
    }

    /// Keeps what `process` left over, or hands it to HTTP/2 after an accepted upgrade.
    private func afterProcess(_ rest: UnsafeRawBufferPointer) {
        if let (ex, settings) = pendingUpgrade {
            pendingUpgrade = nil
            connection.switchToHTTP2(upgrading: ex, settings: settings, remainder: Array(rest))
            return
        }
        if let tls = pendingTunnel {
            pendingTunnel = nil
            connection.startTunnel(tls, remainder: Array(rest))
            return
        }
        if isClosing {
            pending = []
            return
        }
        if !rest.isEmpty { pending.append(contentsOf: rest) }
        // Pipelined input waiting behind an unanswered request: stop reading past a bound.
        connection.setInputPaused(pending.count > limits.maxPendingInput)
    }

    /// Parses and handles as much of `buf` as possible; returns bytes consumed.
    private func process(_ buf: UnsafeRawBufferPointer) -> Int {
        processing = true
        defer { processing = false }
        var pos = 0
        loop: while pos < buf.count {
            switch state {
            case .closing, .streaming:
                return buf.count
            case .waiting:
                break loop
            case .head:
                let rest = UnsafeRawBufferPointer(rebasing: buf[pos...])
                switch HTTP1Parser.parseHead(rest, limits: limits.http1) {
                case .incomplete:
                    break loop
                case .failure(let e):
                    fail(e)
                    return buf.count
                case .complete(let head, let consumed):
                    pos += consumed
                    // The next head (pipelined) starts now, if any of it is here.
                    headStartedNs = pos < buf.count ? connection.loop.nowNs : 0
                    bodyStartedNs = connection.loop.nowNs
                    startRequest(head)
                }
            case .body(let ex, let head, let remaining):
                let take = min(remaining, buf.count - pos)
                ex.request.body.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[pos..<(pos + take)]).typedBytes)
                pos += take
                if remaining - take == 0 {
                    finishBody(ex, head)
                } else {
                    state = .body(ex, head, remaining: remaining - take)
                }
            case .chunkedBody(let ex, let head):
                let rest = UnsafeRawBufferPointer(rebasing: buf[pos...])
                switch chunked.decode(rest, into: &ex.request.body, maxBody: ex.maxBodySize) {
                case .needMore:
                    pos = buf.count
                case .done(let consumed):
                    pos += consumed
                    finishBody(ex, head)
                case .tooLarge:
                    ex.respond(dispatcher.bodyTooLarge(ex))
                    state = .closing
                    return buf.count
                case .failure(let e):
                    ex.state = .closed
                    fail(e)
                    return buf.count
                }
            }
            if pendingUpgrade != nil || pendingTunnel != nil { break loop }
        }
        return pos
    }

    private func startRequest(_ head: HTTP1RequestHead) {
        if head.method == .connect { return connect(head) }
        if let authority = head.fields.first(":authority"), let refusal = connection.absoluteFormRefusal(authority) {
            return refuse(refusal)
        }
        var req = Request(version: head.version, method: head.method, headers: head.fields)
        req.pathIndex = head.fields.first(":authority") == nil ? 0 : 1
        let ex = Exchange(request: req, connection: connection.context, streamID: 0, owner: self)
        currentKeepAlive = head.keepAlive && !connection.isDraining
        guard dispatcher.headersComplete(ex) else { return }
        switch head.framing {
        case .none:
            finishBody(ex, head)
        case .contentLength(let n):
            if n > ex.maxBodySize {
                ex.respond(dispatcher.bodyTooLarge(ex))
                state = .closing
                return
            }
            if head.expectContinue { connection.enqueue("HTTP/1.1 100 Continue\r\n\r\n") }
            ex.request.body.reserveCapacity(n)
            state = .body(ex, head, remaining: n)
        case .chunked:
            if head.expectContinue { connection.enqueue("HTTP/1.1 100 Continue\r\n\r\n") }
            chunked = ChunkedDecoder()
            state = .chunkedBody(ex, head)
        }
    }

    private func finishBody(_ ex: Exchange, _ head: HTTP1RequestHead) {
        state = .waiting(ex, head)
        if head.upgradeToH2C && allowH2CUpgrade && !connection.isDraining {
            connection.enqueue("HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: h2c\r\n\r\n")
            state = .closing
            pendingUpgrade = (ex, head.http2Settings)
            return
        }
        dispatcher.dispatch(ex)
    }

    /// `CONNECT host:port`: a tunnel to an intercepted host (200, then TLS as that host), or a
    /// refusal. A CONNECT carries no body; one that announces one is refused.
    private func connect(_ head: HTTP1RequestHead) {
        guard head.framing == .none || head.framing == .contentLength(0) else {
            return refuse(.text(400, "a CONNECT request has no body\n"))
        }
        switch connection.tunnelDecision(head.fields.first(":authority") ?? []) {
        case .refuse(let response):
            refuse(response)
        case .accept(let tls):
            connection.enqueue("HTTP/1.1 200 Connection Established\r\n\r\n")
            state = .closing
            pendingTunnel = tls
        }
    }

    /// Answers `response` and closes: the request is not served.
    private func refuse(_ response: Response) {
        state = .closing
        pending = []
        connection.write { HTTP1Session.serialize(response, method: .get, closing: true, into: &$0) }
        connection.closeAfterFlush()
    }

    private func fail(_ error: HTTP1ParseError) {
        state = .closing
        pending = []
        connection.write { HTTP1Session.serialize(.text(error.status, "bad request: \(error)\n"), method: .get, closing: true, into: &$0) }
        connection.closeAfterFlush()
    }

    /// The status line and the handler's header fields.
    static func serializeHead(_ response: Response, into out: inout OutputBuffer) {
        out.append("HTTP/1.1 ")
        out.appendDecimal(response.status)
        out.append(" ")
        out.append(reasonPhrase(response.status))
        out.append("\r\n")
        response.headers.forEachField { name, value in
            out.append(name)
            out.append(": ")
            out.append(value)
            out.append("\r\n")
        }
    }

    /// Appends the response as HTTP/1.1 bytes: status line, headers, framing, body.
    static func serialize(_ response: Response, method: HTTPMethod, closing: Bool, into out: inout OutputBuffer) {
        serializeHead(response, into: &out)
        let noBody = response.status == 204 || response.status == 304 || response.status < 200
        if !noBody {
            out.append("content-length: ")
            out.appendDecimal(response.body.count)
            out.append("\r\n")
        }
        if closing { out.append("connection: close\r\n") }
        out.append("\r\n")
        if !noBody && method != .head { out.append(response.body) }
    }

    // MARK: ExchangeOwner

    func respond(_ ex: Exchange, _ response: Response) {
        if response.status == Response.verbatimStatus {
            ex.owner = nil
            state = .closing
            pending = []
            connection.write { $0.append(response.body) }
            connection.closeAfterFlush()
            return
        }
        var bodyRead = false
        if case .waiting(let w, _) = state, w === ex { bodyRead = true }
        // Answered before its body was read (413, 431): the connection cannot be reused.
        let closing = isClosing || !currentKeepAlive || connection.isDraining || !bodyRead
        connection.write { HTTP1Session.serialize(response, method: ex.request.method, closing: closing, into: &$0) }
        ex.owner = nil

        if closing {
            state = .closing
            pending = []
            connection.closeAfterFlush()
        } else {
            state = .head
            headStartedNs = pending.isEmpty ? 0 : connection.loop.nowNs
        }
        if !processing {
            resumePending()
            connection.requestFlush()
        }
    }

    func startStream(_ ex: Exchange, _ head: Response) {
        pending = []
        state = .streaming(ex)
        connection.write { out in
            HTTP1Session.serializeHead(head, into: &out)
            // No length: the body ends when the connection does.
            out.append("connection: close\r\n\r\n")
        }
        if !processing { connection.requestFlush() }
    }

    func streamWrite(_ ex: Exchange, _ bytes: UnsafeRawBufferPointer) {
        guard case .streaming(let s) = state, s === ex else { return }
        connection.write { $0.append(bytes) }
        connection.requestFlush()
    }

    func streamFinish(_ ex: Exchange) {
        guard case .streaming(let s) = state, s === ex else { return }
        state = .closing
        ex.owner = nil
        ex.endStream()
        connection.closeAfterFlush()
    }

    func streamUnsent(_ ex: Exchange) -> Int { connection.bufferedBytes }

    func reset(_ ex: Exchange) {
        if case .streaming(let s) = state, s === ex { return streamFinish(ex) }
        respond(ex, .text(500, "internal error\n"))
        state = .closing
        connection.closeAfterFlush()
    }

    /// The connection closed: detach whatever exchange is in progress.
    func abandon() {
        switch state {
        case .body(let ex, _, _), .chunkedBody(let ex, _), .waiting(let ex, _), .streaming(let ex):
            ex.state = .closed
            ex.owner = nil
            ex.endStream()
        default:
            break
        }
        state = .closing
        pending = []
    }

    /// Graceful shutdown: close now if idle, else after the current response.
    func beginDrain() {
        if case .streaming(let ex) = state { return ex.stream?.finish() ?? () }
        if !isBusy {
            state = .closing
            connection.closeAfterFlush()
        }
    }
}
