import COpenSSL
import CSystem
import Glibc

/// One accepted socket: TLS (when on the TLS listener), protocol selection (ALPN, or sniffing
/// the HTTP/2 preface when there is none), the HTTP/1.1 or HTTP/2 session, and output
/// buffering with backpressure. Owned by one event loop.
///
/// What the connection is doing lives in `state` (`ConnectionStateMachine`): this class does
/// the I/O (socket, TLS, sessions) and reports each event to it; what the machine answers
/// decides what happens next.
final class Connection: EventHandler {

    let fd: Int32
    /// The loop outlives its connections (it closes them all before it stops): no reference
    /// counting on the hot path's every `loop` access.
    unowned(unsafe) let loop: EventLoop
    let core: ServerCore
    let context: ConnectionContext
    private var ssl: OpaquePointer?
    /// What this connection counts in the memory budget while it holds a slot (its kind when
    /// accepted: a tunnel that turns TLS later keeps the cleartext figure).
    let fixedCost: Int
    /// What it is doing and may do next.
    private(set) var state: ConnectionStateMachine
    private(set) var http1: HTTP1Session?
    private(set) var http2: HTTP2Session?
    /// The first bytes while sniffing the protocol.
    private var sniffed: [UInt8] = []
    private var out = OutputBuffer()
    /// The epoll events registered (what `state.events` was last time).
    private var interest: UInt32 = 0
    /// In the loop's deferred-flush list (`requestFlush`).
    private var flushQueued = false
    /// In the loop's read-again list (TLS holds decrypted input past a turn's budget).
    private var readQueued = false
    private let createdAt: UInt64
    private(set) var lastActivity: UInt64
    /// When output last moved (or there was none): a peer that stops reading is closed after
    /// the send timeout.
    private var lastWriteProgress: UInt64
    /// Whether this connection holds one of the server's `maxConnections` slots (false: it was
    /// admitted past the limit only to be answered 503 / GOAWAY).
    private(set) var holdsSlot: Bool

    /// Draining or closing: HTTP/1.1 answers close the connection, no h2c upgrade.
    var isDraining: Bool { state.isDraining }

    init(fd: Int32, loop: EventLoop, core: ServerCore, tls: TLSContext?, localPort: Int, holdsSlot: Bool = true) {
        fixedCost = tls != nil ? ConnectionBudget.tlsCost : ConnectionBudget.cleartextCost
        self.fd = fd
        self.loop = loop
        self.core = core
        var nameBuf = [CChar](repeating: 0, count: 80)
        let remote =
            csys_peer_name(fd, &nameBuf, nameBuf.count) > 0
            ? nameBuf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : "unknown"
        context = ConnectionContext(
            id: connectionIDs.wrappingAdd(1, ordering: .relaxed).newValue,
            transport: tls == nil ? .cleartext : .tls, remoteAddress: remote,
            localPort: localPort, eventLoop: loop,
            maxConcurrentStreams: core.configuration.maxConcurrentStreams, parameterNames: core.dispatcher.router.parameterNames)
        createdAt = csys_monotonic_ns()
        state = ConnectionStateMachine(tls: tls != nil, now: createdAt)
        lastActivity = createdAt
        lastWriteProgress = createdAt
        self.holdsSlot = holdsSlot
        context.isShedding = !holdsSlot
        if let tls { ssl = SSL_new(tls.ctx) }
        context.control = self
    }

    deinit {
        if let ssl { SSL_free(ssl) }
    }

    /// Registers with the loop. Returns false (and closes, giving its slot back) when that fails.
    func start() -> Bool {
        loop.openConnections.add(1, ordering: .relaxed)
        if let ssl {
            guard SSL_set_fd(ssl, fd) == 1 else {
                close()
                return false
            }
            SSL_set_accept_state(ssl)
        }
        interest = state.events
        guard loop.register(fd: fd, handler: self, events: interest) else {
            close()
            return false
        }
        return true
    }

    // MARK: events

    func handle(events: UInt32) {
        if events & CSYS_EPOLLERR != 0 && events & CSYS_EPOLLIN == 0 {
            close()
            return
        }
        if events & CSYS_EPOLLOUT != 0 { onWritable() }
        if !state.isClosed && events & (CSYS_EPOLLIN | CSYS_EPOLLHUP | CSYS_EPOLLRDHUP) != 0 {
            onReadable()
        }
    }

    private func onReadable() {
        if state.isLingering {
            discardInput()
            return
        }
        lastActivity = csys_monotonic_ns()
        if state.isHandshaking {
            handshake()
            if state.isHandshaking || state.isClosed { return }
        }
        readLoop()
        flush()
    }

    private func onWritable() {
        if state.isHandshaking {
            handshake()
            if state.isHandshaking || state.isClosed { return }
            readLoop()
        } else if state.becameWritable() {
            readLoop()
        }
        flush()
    }

    /// Reads again after the loop served its other connections (see `readLoop`).
    func resumeReading() {
        readQueued = false
        guard !state.isClosed, !state.isLingering, !state.isHandshaking else { return }
        readLoop()
        flush()
    }

    /// Reads and processes input, at most `readPerTurn` bytes: a peer that keeps the socket
    /// full gets one turn's worth, then the loop serves its other connections (and this one's
    /// output, GOAWAY included) before reading more. Cleartext input left in the socket is
    /// reported again by epoll; decrypted input TLS holds is queued for the next iteration.
    private func readLoop() {
        let buf = loop.readBuffer
        var budget = core.configuration.limits.readPerTurn
        while state.reads {
            if budget <= 0 {
                if let ssl, SSL_pending(ssl) > 0 || SSL_has_pending(ssl) != 0, !readQueued {
                    readQueued = true
                    loop.pendingRead.append(self)
                }
                break
            }
            var n: Int
            if let ssl {
                n = Int(SSL_read(ssl, buf.baseAddress, Int32(buf.count)))
                if n <= 0 {
                    let err = SSL_get_error(ssl, Int32(n))
                    if err == SSL_ERROR_WANT_READ { break }
                    if err == SSL_ERROR_WANT_WRITE {
                        state.readWaitsForWritable()
                        updateInterest()
                        break
                    }
                    if err == SSL_ERROR_ZERO_RETURN {
                        peerDidClose()
                        break
                    }
                    ERR_clear_error()
                    close()
                    return
                }
            } else {
                n = Glibc.read(fd, buf.baseAddress, buf.count)
                if n < 0 {
                    if errno == EAGAIN || errno == EWOULDBLOCK { break }
                    if errno == EINTR { continue }
                    close()
                    return
                }
                if n == 0 {
                    peerDidClose()
                    break
                }
            }
            budget -= n
            deliver(UnsafeRawBufferPointer(rebasing: buf[0..<n]))
            // A CONNECT was accepted: what follows is TLS, read when the handshake starts.
            if state.isHandshaking { break }
            if state.speaksHTTP2, let h2 = http2 {
                if !h2.wantsRead {
                    // The session is ending (a GOAWAY it queued, a flood it detected): read no more.
                    state.sessionEnded()
                    updateInterest()
                    break
                }
                // More to read: send what this read produced first (ACKs, answers, a GOAWAY).
                if n == buf.count { flush() }
            }
            loop.noteInput(n)
            if out.count > core.configuration.limits.outputHighWater, state.setOutputBacklog(true) { updateInterest() }
            if n < buf.count {
                if let ssl {
                    if SSL_pending(ssl) == 0 && SSL_has_pending(ssl) == 0 { break }
                } else {
                    break
                }
            }
        }
    }

    private func peerDidClose() {
        // A request still being read can never complete: close now (its buffer goes with it).
        // One already dispatched is still owed its answer; HTTP/2 streams finish.
        if state.peerClosedInput(answering: http1?.isAnswering == true) { return close() }
        updateInterest()
    }

    private func deliver(_ bytes: UnsafeRawBufferPointer) {
        switch state.stage {
        case .http2:
            if !http2!.receive(bytes) { state.sessionEnded() }
        case .http1:
            http1!.receive(bytes)
        case .sniffing:
            sniffed.append(contentsOf: bytes)
            selectBySniffing()
        case .handshaking, .lingering, .closed:
            break
        }
    }

    // MARK: protocol selection

    private static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private func selectBySniffing() {
        let p = Connection.preface
        let n = min(sniffed.count, p.count)
        let matches = sniffed[0..<n].elementsEqual(p[0..<n])
        if matches && sniffed.count < p.count { return } // need more bytes to decide
        let bytes = sniffed
        sniffed = []
        if matches { startHTTP2() } else { startHTTP1() }
        bytes.withUnsafeBytes { deliver($0) }
    }

    private func handshake() {
        guard let ssl else { return }
        if state.admitHandshake(), let admit = core.configuration.acceptTLS, !admit(loop.index) { return close() }
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            handshakeDone(ssl)
            return
        }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ:
            state.handshakeWaits(write: false)
            updateInterest()
        case SSL_ERROR_WANT_WRITE:
            state.handshakeWaits(write: true)
            updateInterest()
        default:
            ERR_clear_error()
            close()
        }
    }

    private func handshakeDone(_ ssl: OpaquePointer) {
        var alpnPtr: UnsafePointer<UInt8>?
        var alpnLen: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpnPtr, &alpnLen)
        if let alpnPtr, alpnLen > 0 {
            context.alpn = String(decoding: UnsafeBufferPointer(start: alpnPtr, count: Int(alpnLen)), as: UTF8.self)
        }
        if let sni = pushemu_ssl_get_servername(ssl) { context.serverName = String(cString: sni) }
        if let v = SSL_get_version(ssl) { context.tlsVersion = String(cString: v) }
        if let cert = SSL_get1_peer_certificate(ssl) {
            if SSL_get_verify_result(ssl) == X509_V_OK { context.peerCertificate = decodePeerCertificate(cert) }
            X509_free(cert)
        }
        // No ALPN: sniffing, as Pushy and aioapns send the h2 preface anyway.
        switch state.handshakeDone(alpn: context.alpn) {
        case .http2: startHTTP2()
        case .http1: startHTTP1()
        default: break
        }
        updateInterest()
    }

    private func startHTTP1() {
        context.httpVersion = .http11
        http1 = HTTP1Session(
            connection: self, dispatcher: core.dispatcher, limits: core.configuration.limits,
            allowH2CUpgrade: ssl == nil)
        state.speak(http2: false)
    }

    private func startHTTP2() {
        context.httpVersion = .http2
        core.configuration.sessionSetup?(context)
        let streams = context.initialMaxConcurrentStreams
        context.noteInitialStreams(streams)
        http2 = HTTP2Session(
            connection: self, dispatcher: core.dispatcher, limits: core.configuration.limits,
            maxConcurrentStreams: streams)
        state.speak(http2: true)
        if state.isDraining {
            http2!.goAway(lastStreamID: nil, errorCode: 0, debugData: core.configuration.shutdownGoAwayDebugData, closeAfterSend: false)
        }
    }

    /// After `101 Switching Protocols`: the HTTP/1.1 request becomes stream 1.
    func switchToHTTP2(upgrading ex: Exchange, settings: [UInt8], remainder: [UInt8]) {
        startHTTP2()
        guard http2!.upgrade(settings: settings, exchange: ex) else {
            close()
            return
        }
        if !remainder.isEmpty { remainder.withUnsafeBytes { deliver($0) } }
    }

    // MARK: proxy tunnels

    enum TunnelDecision {
        case accept(TLSContext)
        case refuse(Response)
    }

    /// Whether `CONNECT target` opens a tunnel: only on the cleartext listener, only to an
    /// intercepted host. Nothing is ever forwarded: the tunnel ends in this server.
    func tunnelDecision(_ target: ArraySlice<UInt8>) -> TunnelDecision {
        let text = String(decoding: target, as: UTF8.self)
        guard ssl == nil, let intercept = core.intercept else {
            return .refuse(.text(405, "CONNECT is not served on this listener\n"))
        }
        guard let (host, port) = Connection.splitAuthority(text), port != nil else {
            return .refuse(.text(400, "CONNECT needs host:port, got '\(text)'\n"))
        }
        guard intercept.intercepts(host) else { return .refuse(Connection.notIntercepted(host, intercept)) }
        do {
            return .accept(try intercept.context(for: host))
        } catch {
            return .refuse(.text(502, "no certificate for \(host): \(error)\n"))
        }
    }

    /// An absolute-form request (`GET http://host/...`) through the proxy: served when the host
    /// is intercepted or names this machine; any other host is refused, never forwarded.
    func absoluteFormRefusal(_ authority: ArraySlice<UInt8>) -> Response? {
        guard ssl == nil, let intercept = core.intercept else { return nil }
        let text = String(decoding: authority, as: UTF8.self)
        guard let (host, _) = Connection.splitAuthority(text) else { return .text(400, "bad authority '\(text)'\n") }
        if intercept.intercepts(host) { return nil }
        switch InterceptAuthority.normalized(host) {
        case "localhost", "127.0.0.1", "::1", InterceptAuthority.normalized(core.configuration.host): return nil
        default: return Connection.notIntercepted(host, intercept)
        }
    }

    private static func notIntercepted(_ host: String, _ intercept: InterceptAuthority) -> Response {
        var response = Response.text(
            403,
            "pushemu does not intercept \(host) and never forwards to the internet. It intercepts: "
                + intercept.configuration.hosts.sorted().joined(separator: ", ") + ". " + intercept.configuration.refusalHint + "\n")
        response.headers.add(name: "x-pushemu-proxy", value: "refused")
        return response
    }

    /// `host[:port]` or `[v6]:port` into the host (brackets removed) and the port when given.
    static func splitAuthority(_ text: String) -> (String, Int?)? {
        var host = Substring(text)
        var port: Int? = nil
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()), (1...65535).contains(p) else { return nil }
                port = p
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            host = host[..<colon]
        }
        guard !host.isEmpty, host.utf8.count <= 253 else { return nil }
        return (String(host), port)
    }

    /// After `200 Connection Established`: that answer goes out in cleartext, then the socket
    /// speaks TLS as an accepted TLS connection does (handshake, ALPN, SNI, h2 or HTTP/1.1).
    /// Bytes the client sent before it saw the 200 cannot be TLS it meant for us: close.
    func startTunnel(_ tls: TLSContext, remainder: [UInt8]) {
        guard remainder.isEmpty else { return close() }
        while !out.isEmpty {
            var failed = false
            out.withUnconsumed { raw in
                let n = Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
                if n > 0 { return n }
                if n < 0 && errno == EINTR { return 0 }
                failed = true // a 39-byte answer that does not fit an empty socket buffer: give up
                return 0
            }
            if failed { return close() }
        }
        guard let made = SSL_new(tls.ctx) else { return close() }
        guard SSL_set_fd(made, fd) == 1 else {
            SSL_free(made)
            return close()
        }
        SSL_set_accept_state(made)
        ssl = made
        context.transport = .tls
        context.httpVersion = nil
        state.tunnelStarted(now: csys_monotonic_ns())
        updateInterest()
    }

    // MARK: output

    func enqueue(_ s: StaticString) { out.append(s) }
    /// Lets a codec serialize straight into the output buffer.
    func write(_ body: (inout OutputBuffer) -> Void) { body(&out) }

    /// Flushes at the end of this loop iteration (used for responses given outside input processing).
    func requestFlush() {
        guard !flushQueued, !state.isClosed else { return }
        flushQueued = true
        loop.pendingFlush.append(self)
    }

    func deferredFlush() {
        flushQueued = false
        flush()
    }

    func closeAfterFlush() {
        state.closeAfterFlush()
        requestFlush()
    }

    func setInputPaused(_ paused: Bool) {
        if state.setSessionPaused(paused) { updateInterest() }
    }

    private func flush() {
        guard !state.isClosed, !state.isLingering else { return }
        let highWater = core.configuration.limits.outputHighWater
        let speaksHTTP2 = state.speaksHTTP2
        while true {
            if speaksHTTP2, let h2 = http2 { h2.produce(into: &out, highWater: highWater) }
            if out.isEmpty { break }
            var blocked = false
            var failed = false
            out.withUnconsumed { raw in
                if let ssl {
                    let n = SSL_write(ssl, raw.baseAddress, Int32(min(raw.count, Int(Int32.max))))
                    if n > 0 {
                        lastWriteProgress = loop.nowNs
                        return Int(n)
                    }
                    let err = SSL_get_error(ssl, n)
                    if err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ {
                        blocked = true
                    } else {
                        ERR_clear_error()
                        failed = true
                    }
                    return 0
                } else {
                    let n = Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
                    if n > 0 { lastWriteProgress = loop.nowNs }
                    if n >= 0 { return n }
                    if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { blocked = true } else { failed = true }
                    return 0
                }
            }
            if failed {
                close()
                return
            }
            if blocked {
                if state.writeBlocked() { updateInterest() }
                return
            }
        }
        lastWriteProgress = loop.nowNs
        // Closing with unread input would send RST and could destroy the GOAWAY or the answer:
        // the machine says when to linger instead.
        let sessionDone = speaksHTTP2 && (http2.map { $0.closeAfterGoAway || !$0.wantsIO } ?? false)
        switch state.flushed(sessionDone: sessionDone, answerOwed: http1?.isBusy == true) {
        case .close:
            close()
        case .linger:
            linger()
        case .resumeReading:
            updateInterest()
            // TLS may hold decrypted input that epoll will not report again.
            if let ssl, SSL_pending(ssl) > 0 || SSL_has_pending(ssl) != 0 {
                readLoop()
                requestFlush()
            }
        case .serve:
            updateInterest()
        }
    }

    private func updateInterest() {
        guard !state.isClosed else { return }
        let ev = state.events
        if ev != interest {
            interest = ev
            loop.modify(fd: fd, events: ev)
        }
    }

    // MARK: lifecycle

    /// Closing with unread input makes the kernel send RST, which can destroy a response the
    /// client has not read yet (an early 413, a 400). So: half-close, discard input for a while, close.
    private func linger() {
        if let ssl {
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        }
        shutdown(fd, Int32(SHUT_WR))
        state.linger(now: csys_monotonic_ns())
        updateInterest()
    }

    private func discardInput() {
        let buf = loop.readBuffer
        while true {
            let n = Glibc.read(fd, buf.baseAddress, buf.count)
            if n > 0 {
                if state.dropped(n) { return close() }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n < 0 && errno == EINTR { continue }
            close()
            return
        }
    }

    func close() {
        guard state.close() else { return }
        loop.unregister(fd: fd)
        if let ssl {
            SSL_set_quiet_shutdown(ssl, 1)
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        }
        Glibc.close(fd)
        context.control = nil
        http2?.abandonAll()
        http1?.abandon()
        out.removeAll()
        sniffed = []
        loop.openConnections.subtract(1, ordering: .relaxed)
        if holdsSlot { core.budget.releaseConnection(cost: fixedCost) } else { loop.sheddingConnections -= 1 }
    }

    /// Admitted past the limit, not closed, and no slot taken since.
    var isWaitingPastLimit: Bool { !holdsSlot && !state.isClosed }

    /// Closes with a TCP reset (no FIN, nothing more sent): the cheapest answer there is.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        if let ssl { SSL_set_quiet_shutdown(ssl, 1) }
        close()
    }

    /// A connection admitted past the limit takes a slot that was given back meanwhile (an
    /// idle connection another loop closed for it): it is then served as any other.
    func takeSlotIfFree() -> Bool {
        guard !holdsSlot else { return true }
        guard core.budget.admitConnection(cost: fixedCost) else { return false }
        holdsSlot = true
        context.isShedding = false
        loop.sheddingConnections -= 1
        return true
    }

    /// Bytes this connection holds in buffers: output not yet written, sniffed bytes, and
    /// its session's request bodies, pipelined input and unsent answers.
    var bufferedBytes: Int {
        out.count + sniffed.count + (http1?.bufferedBytes ?? 0) + (http2?.bufferedBytes ?? 0)
    }

    /// Idle for a second at least: no request being read or answered, nothing buffered; or
    /// connected and silent (closed first to admit a new client at the connection limit). A
    /// connection that just connected, or was just answered, is not idle yet.
    var isIdle: Bool {
        // The clock read now: the loop's cached one can be older than a connection accepted
        // in this very iteration, and a wrapped difference would call it idle.
        let now = csys_monotonic_ns()
        guard now > lastActivity, now - lastActivity > 1_000_000_000 else { return false }
        switch state.stage {
        case .http1: return http1?.isBusy == false && out.isEmpty
        case .http2: return http2?.activeStreams == 0 && out.isEmpty
        case .sniffing: return sniffed.isEmpty
        case .handshaking, .lingering, .closed: return false
        }
    }

    func goAway(lastStreamID: Int32?, errorCode: UInt32, debugData: [UInt8], closeAfterSend: Bool) {
        switch state.stage {
        case .http2:
            http2?.goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData, closeAfterSend: closeAfterSend)
        case .http1:
            state.stopKeepAlive(closeAfterSend: closeAfterSend)
            if closeAfterSend { requestFlush() }
        default:
            close()
        }
    }

    /// Graceful shutdown: GOAWAY on HTTP/2, close idle HTTP/1.1, finish in-flight work.
    func beginDrain() {
        switch state.beginDrain() {
        case .goAway:
            http2?.finishStreams()
            http2?.goAway(lastStreamID: nil, errorCode: 0, debugData: core.configuration.shutdownGoAwayDebugData, closeAfterSend: false)
        case .finishHTTP1: http1?.beginDrain()
        case .close: close()
        case .none: break
        }
        requestFlush()
    }

    /// Closes a connection that overstayed: the handshake or first bytes, a request head or
    /// body past its deadline (each counted from its start), an answer the peer does not read,
    /// idleness. Over HTTP/2 a stream past its deadline is reset, and the connection times out
    /// as idle once no stream is left. A connection admitted past the limit gets five seconds.
    func checkTimeout(now: UInt64) {
        let t = core.configuration.timeouts
        if !holdsSlot && now &- createdAt > 5_000_000_000 { return close() }
        if !out.isEmpty && now &- lastWriteProgress > t.sendNanos && !state.isLingering { return close() }
        switch state.stage {
        case .handshaking(let startedAt, _), .sniffing(let startedAt):
            if now &- startedAt > t.handshakeNanos { close() }
        case .http1:
            guard let h1 = http1 else { return }
            if h1.deadlinePassed(now: now, timeouts: t) {
                close()
            } else if !h1.isBusy && now &- lastActivity > t.idleNanos {
                close()
            }
        case .lingering(let until, _):
            if now > until { close() }
        case .http2:
            guard let h2 = http2 else { return }
            if h2.expireStreams(now: now, timeouts: t) { requestFlush() }
            if h2.activeStreams == 0, now &- lastActivity > t.idleNanos {
                h2.goAway(lastStreamID: nil, errorCode: 0, debugData: core.configuration.idleGoAwayDebugData, closeAfterSend: true)
                flush()
            }
        case .closed:
            break
        }
    }
}
