import CSystem

/// What a connection is doing and what it may do next, as values: no socket, no TLS, no clock
/// of its own (models: swift-nio's `HTTPServerPipelineHandler` and
/// `NIOTypedHTTPServerUpgraderStateMachine`). `Connection` reports what happened (bytes read,
/// the peer's FIN, a blocked write, a flushed buffer, a drain) through the transitions below,
/// the only way to change it, and does what they answer. Each state carries its own data, so a
/// combination the code never meant (lingering while waiting to write for a read, a handshake
/// time on an HTTP/2 connection) cannot be written down.
struct ConnectionStateMachine: Sendable {
    /// Which protocol the connection speaks, or how far it is from speaking one.
    enum Stage: Equatable, Sendable {
        /// The TLS handshake: at accept on a TLS listener, or when a CONNECT tunnel's TLS starts.
        /// `admitted`: the server's handshake admission (a fault rule's) was asked already.
        case handshaking(startedAt: UInt64, admitted: Bool)
        /// Choosing the protocol from the first bytes: cleartext, or TLS without ALPN (Pushy and
        /// aioapns send the HTTP/2 preface anyway). Counted from `startedAt` like a handshake.
        case sniffing(startedAt: UInt64)
        case http1
        case http2
        /// Half-closed after the last answer: input is read and dropped (closing with unread
        /// input would send RST and could destroy the answer) until the peer closes, `until`
        /// passes, or `budget` bytes were dropped.
        case lingering(until: UInt64, budget: Int)
        case closed
    }

    /// Why input is not read for now (empty: it is).
    struct ReadStops: OptionSet, Sendable {
        let rawValue: UInt8
        /// The output passed its high-water mark: the peer must read before it may send more.
        static let outputBacklog = ReadStops(rawValue: 1)
        /// The session asked (an HTTP/1.1 request is being answered, pipelining held back).
        static let sessionPaused = ReadStops(rawValue: 2)
    }

    /// The input side.
    enum Input: Equatable, Sendable {
        /// Read when nothing in `ReadStops` holds it back.
        case open(ReadStops)
        /// The peer sent its FIN (or TLS close_notify): nothing more will come.
        case peerClosed
        /// The session is ending (it queued a GOAWAY for an error or a flood): read no more.
        case ended
    }

    /// The output side.
    enum Output: Equatable, Sendable {
        /// Writes go to the socket as they come.
        case flowing
        /// The socket (or TLS) cannot take more now: waiting for EPOLLOUT. `forRead`: TLS wanted
        /// to write during a read, which runs again once the socket is writable.
        case waiting(forRead: Bool)
    }

    /// How the connection ends.
    enum Ending: Equatable, Sendable {
        case serving
        /// No new work: HTTP/1.1 answers close the connection, HTTP/2 sent GOAWAY; in-flight
        /// work finishes (a server shutdown, a GOAWAY without close).
        case draining
        /// Close (or linger, when the peer may still be sending) once the output is written.
        case closingAfterFlush
    }

    private(set) var stage: Stage
    private(set) var input: Input = .open([])
    private(set) var output: Output = .flowing
    private(set) var ending: Ending = .serving

    /// A connection accepted on a TLS listener starts with its handshake; a cleartext one by
    /// sniffing its first bytes.
    init(tls: Bool, now: UInt64) {
        stage = tls ? .handshaking(startedAt: now, admitted: false) : .sniffing(startedAt: now)
    }

    // MARK: what it may do

    /// Whether the connection reads now.
    var reads: Bool {
        guard case .open(let stops) = input, stops.isEmpty else { return false }
        switch stage {
        case .lingering, .closed: return false
        default: return true
        }
    }

    /// The epoll events it waits for.
    var events: UInt32 {
        var ev: UInt32 = 0
        if case .lingering = stage {
            ev = CSYS_EPOLLIN | CSYS_EPOLLRDHUP
        } else if reads {
            ev = CSYS_EPOLLIN | CSYS_EPOLLRDHUP
        }
        if case .waiting = output { ev |= CSYS_EPOLLOUT }
        return ev
    }

    var isClosed: Bool { if case .closed = stage { true } else { false } }
    var speaksHTTP2: Bool { if case .http2 = stage { true } else { false } }
    var isLingering: Bool { if case .lingering = stage { true } else { false } }
    var isHandshaking: Bool { if case .handshaking = stage { true } else { false } }
    var peerClosed: Bool { input == .peerClosed }
    var isDraining: Bool { ending != .serving }
    /// Whether a read waits for the socket to be writable (TLS wanted to write).
    var readWaitsForWrite: Bool { output == .waiting(forRead: true) }
    /// Whether output is paused for the peer to read.
    var hasOutputBacklog: Bool {
        if case .open(let stops) = input { stops.contains(.outputBacklog) } else { false }
    }

    // MARK: the handshake and the protocol

    /// The first time the handshake runs: true when admission must be asked now.
    mutating func admitHandshake() -> Bool {
        guard case .handshaking(let startedAt, false) = stage else { return false }
        stage = .handshaking(startedAt: startedAt, admitted: true)
        return true
    }

    /// The handshake needs the socket readable (`write: false`) or writable.
    mutating func handshakeWaits(write: Bool) {
        output = write ? .waiting(forRead: false) : .flowing
    }

    /// The handshake finished: ALPN decides, or the first bytes do.
    mutating func handshakeDone(alpn: String?) -> Stage {
        precondition(isHandshaking, "handshakeDone outside a handshake")
        output = .flowing
        switch alpn {
        case "h2": stage = .http2
        case "http/1.1": stage = .http1
        default:
            guard case .handshaking(let startedAt, _) = stage else { return stage }
            stage = .sniffing(startedAt: startedAt)
        }
        return stage
    }

    /// The protocol is known (sniffed, or an h2c upgrade from HTTP/1.1).
    mutating func speak(http2: Bool) {
        guard !isClosed, !isLingering else { return }
        stage = http2 ? .http2 : .http1
    }

    /// A CONNECT tunnel's `200` went out: TLS starts over this socket.
    mutating func tunnelStarted(now: UInt64) {
        stage = .handshaking(startedAt: now, admitted: false)
        output = .flowing
    }

    // MARK: input

    /// The peer closed its side. Answers whether to close now; otherwise the connection closes
    /// once what it owes is written (`answering`: an HTTP/1.1 request already dispatched is
    /// still owed its answer; HTTP/2 streams finish).
    mutating func peerClosedInput(answering: Bool) -> Bool {
        input = .peerClosed
        switch stage {
        case .http1 where answering, .http2:
            ending = .closingAfterFlush
            return false
        default:
            return true
        }
    }

    /// The session will read no more (its GOAWAY is queued): close once it is written.
    mutating func sessionEnded() {
        if input != .peerClosed { input = .ended }
        ending = .closingAfterFlush
    }

    /// Pauses or resumes reading for the output's backlog. Answers whether that changed.
    mutating func setOutputBacklog(_ on: Bool) -> Bool { setStop(.outputBacklog, on) }

    /// Pauses or resumes reading at the session's request. Answers whether that changed.
    mutating func setSessionPaused(_ on: Bool) -> Bool { setStop(.sessionPaused, on) }

    private mutating func setStop(_ stop: ReadStops, _ on: Bool) -> Bool {
        guard case .open(var stops) = input, stops.contains(stop) != on else { return false }
        if on { stops.insert(stop) } else { stops.remove(stop) }
        input = .open(stops)
        return true
    }

    /// TLS must write before it can read on: wait for the socket to be writable.
    mutating func readWaitsForWritable() { output = .waiting(forRead: true) }

    /// The socket became writable: answers whether a read was waiting for it.
    mutating func becameWritable() -> Bool {
        guard output == .waiting(forRead: true) else { return false }
        output = .waiting(forRead: false)
        return true
    }

    // MARK: output

    /// The socket took less than offered. Answers whether the events to wait for changed.
    mutating func writeBlocked() -> Bool {
        guard output == .flowing else { return false }
        output = .waiting(forRead: false)
        return true
    }

    /// What to do once everything queued was written.
    enum AfterFlush: Equatable {
        /// Keep serving.
        case serve
        /// Reading was paused for the backlog and may resume.
        case resumeReading
        /// Half-close and drop input for a while (the peer may still be sending).
        case linger
        case close
    }

    /// Everything queued was written. `sessionDone`: the HTTP/2 session sent its GOAWAY and
    /// closes (or has nothing left to do); `answerOwed`: HTTP/1.1 still owes an answer.
    mutating func flushed(sessionDone: Bool, answerOwed: Bool) -> AfterFlush {
        if output == .waiting(forRead: false) { output = .flowing }
        let peerGone = input == .peerClosed
        if stage == .http2 && sessionDone { return peerGone ? .close : .linger }
        // A client that half-closed after its request still gets the answer it is owed.
        if ending == .closingAfterFlush && !(stage == .http1 && peerGone && answerOwed) {
            return (stage == .http1 || stage == .http2) && !peerGone ? .linger : .close
        }
        return setOutputBacklog(false) ? .resumeReading : .serve
    }

    // MARK: ending

    /// Close once the output is written.
    mutating func closeAfterFlush() { ending = .closingAfterFlush }

    /// What a drain asks of each stage.
    enum DrainAction: Equatable {
        /// Drained already, or closed.
        case none
        /// HTTP/2: finish the streams and send GOAWAY.
        case goAway
        /// HTTP/1.1: answer what is in flight, then close.
        case finishHTTP1
        /// Nothing served yet (a handshake, sniffing) or lingering: close now.
        case close
    }

    /// Graceful shutdown begins.
    mutating func beginDrain() -> DrainAction {
        guard ending == .serving, !isClosed else { return .none }
        ending = .draining
        switch stage {
        case .http2: return .goAway
        case .http1: return .finishHTTP1
        case .handshaking, .sniffing, .lingering: return .close
        case .closed: return .none
        }
    }

    /// HTTP/1.1 is sent GOAWAY's equivalent: no more keep-alive (and close after this answer
    /// with `closeAfterSend`).
    mutating func stopKeepAlive(closeAfterSend: Bool) {
        if closeAfterSend {
            ending = .closingAfterFlush
        } else if ending == .serving {
            ending = .draining
        }
    }

    /// Half-closes: from now on input is dropped.
    mutating func linger(now: UInt64) {
        stage = .lingering(until: now &+ 2_000_000_000, budget: 4 * 1024 * 1024)
        input = .open([])
        output = .flowing
    }

    /// `n` bytes were dropped while lingering. Answers whether the budget is spent.
    mutating func dropped(_ n: Int) -> Bool {
        guard case .lingering(let until, let budget) = stage else { return true }
        stage = .lingering(until: until, budget: budget - n)
        return budget - n <= 0
    }

    /// Closes. Answers false when it was closed already.
    mutating func close() -> Bool {
        guard !isClosed else { return false }
        stage = .closed
        return true
    }
}
