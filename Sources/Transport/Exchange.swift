/// The protocol session that carries an exchange (HTTP/1.1 or HTTP/2).
protocol ExchangeOwner: AnyObject {
    func respond(_ exchange: Exchange, _ response: Response)
    func reset(_ exchange: Exchange)
    /// Sends `head` and keeps the body open (see `ResponseStream`).
    func startStream(_ exchange: Exchange, _ head: Response)
    func streamWrite(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer)
    func streamFinish(_ exchange: Exchange)
    func streamUnsent(_ exchange: Exchange) -> Int
}

/// A middleware that may hold an answer back (until what the request changed is durable, say)
/// or replace it. Called on the exchange's event loop with the response the handler gave.
public protocol ResponseGate: AnyObject, Sendable {
    /// Returns true to keep `response`: the gate then sends it (or another) with
    /// `exchange.release(_:)`, now or later, from any thread. False lets it go as it is.
    func hold(_ response: Response, of exchange: Exchange) -> Bool
}

/// One request and its (future) response: what a handler receives.
///
/// Confined to the event loop that owns the connection; `respond` may be called from any
/// thread and hops to that loop. Responding twice, or after the client reset the stream,
/// does nothing.
public final class Exchange: @unchecked Sendable {
    public internal(set) var request: Request
    public let connection: ConnectionContext
    public internal(set) var parameters = RouteParameters()
    public var eventLoop: EventLoop { connection.eventLoop }

    /// HTTP/2 stream id (1 for an upgraded HTTP/1.1 request; 0 on HTTP/1.1).
    public internal(set) var streamID: Int32

    /// Strong while the exchange is live; the session clears it when the stream or connection ends
    /// (a weak reference would put every retain of the session on the slow path).
    var owner: (any ExchangeOwner)?
    /// Index of the matched route in the router (-1: none).
    var routeIndex = -1
    /// Position in the HTTP/2 session's live list; -1 once the stream is gone.
    var liveIndex = -1

    enum State { case reading, dispatched, responded, closed }
    var state: State = .reading
    /// Body bytes beyond this are refused with the route's 413.
    var maxBodySize = 0
    /// Header bytes counted as HTTP/2 does (name + value + 32 each).
    var headerListSize = 0
    var headersTooLarge = false

    // HTTP/2 response body being sent through the data provider.
    var responseBody: [UInt8] = []
    var responseOffset = 0
    /// HTTP/2: the answer's status and fields as a list, until `HTTP2Session` writes their
    /// header block into the HEADERS frame nghttp2 frames (see `HTTP2HeaderTail`). The first
    /// `headerTailCount` bytes; the buffer is kept for the next stream (up to 1 KiB).
    var headerTail: [UInt8] = []
    var headerTailCount = 0
    /// HTTP/2 body bytes received but not yet given back to the peer's flow-control window.
    var unconsumed = 0
    /// HTTP/2: when the stream's current phase began (head, body, answer), for its deadline.
    var phaseNs: UInt64 = 0
    var headComplete = false
    /// Set when the answer is a stream (`respondStreaming`).
    var stream: ResponseStream?
    /// A middleware's hold on the answer: `respond` hands it the response first (see
    /// `ResponseGate`). Set by the middleware before the handler runs; cleared once used.
    public var gate: (any ResponseGate)?
    /// The middleware's own note about this exchange (what it saw before the handler ran).
    public var gateMark: UInt64 = 0

    init(request: Request, connection: ConnectionContext, streamID: Int32, owner: any ExchangeOwner) {
        self.request = request
        self.connection = connection
        self.streamID = streamID
        self.owner = owner
    }

    /// Resets a finished, unreferenced exchange for a new stream, keeping buffer capacity.
    func recycle(streamID: Int32, owner: any ExchangeOwner) {
        self.streamID = streamID
        self.owner = owner
        request.method = .get
        request.pathIndex = -1
        request.headers.removeAll()
        // Keep a small body's capacity for the next stream; a large one goes back to the heap.
        if request.body.capacity > 64 * 1024 {
            request.body = []
        } else if !request.body.isEmpty {
            request.body.removeAll(keepingCapacity: true)
        }
        if parameters.count > 0 { parameters = RouteParameters() }
        routeIndex = -1
        state = .reading
        maxBodySize = 0
        headerListSize = 0
        headersTooLarge = false
        if !responseBody.isEmpty { responseBody = [] }
        responseOffset = 0
        headerTailCount = 0
        if headerTail.count > 1024 { headerTail = [] }
        unconsumed = 0
        headComplete = false
        liveIndex = -1
        stream = nil
        gate = nil
        gateMark = 0
    }

    /// The captured path parameter `i` as bytes.
    public func parameter(_ i: Int) -> ArraySlice<UInt8> {
        parameters.value(i, in: request.path)
    }

    /// The path parameter the route's pattern names `name` (`{token}`: "token"; a trailing
    /// `*`: "*"), as bytes, not percent-decoded. A name the route does not have is a programming
    /// error.
    public func parameter(_ name: String) -> ArraySlice<UInt8> {
        guard routeIndex >= 0, let i = connection.parameterNames[routeIndex].firstIndex(of: name), i < parameters.count else {
            preconditionFailure("the route has no parameter \(name)")
        }
        return parameters.value(i, in: request.path)
    }

    /// The route's answer for a request the server cannot take now (503 in the route's format:
    /// APNs's ServiceUnavailable, FCM's UNAVAILABLE, the admin API's error), for a handler
    /// that must not acknowledge a request (its record could not be stored, say).
    public var unavailableAnswer: Response {
        guard let core = connection.control?.core else { return .text(503, "service unavailable\n") }
        return core.dispatcher.router.unavailable(route: routeIndex, request)
    }

    /// True once a response was given or the stream is gone.
    public var isFinished: Bool { state == .responded || state == .closed }

    /// Sends the response. Safe from any thread.
    public func respond(_ response: Response) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.respond(response) }
            return
        }
        guard state == .reading || state == .dispatched, let owner else { return }
        if let gate {
            self.gate = nil
            if gate.hold(response, of: self) { return }
        }
        state = .responded
        owner.respond(self, response)
    }

    /// Sends a response a `ResponseGate` held (or any response, past the gate). Safe from any
    /// thread.
    public func release(_ response: Response) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.release(response) }
            return
        }
        guard state == .reading || state == .dispatched, let owner else { return }
        state = .responded
        owner.respond(self, response)
    }

    /// Sends `head` (its body is ignored) and answers with a body written as it is produced.
    /// Must be called on the exchange's event loop; nil when the exchange was answered already
    /// or the peer is gone.
    public func respondStreaming(_ head: Response) -> ResponseStream? {
        precondition(eventLoop.inEventLoop, "respondStreaming off the exchange's event loop")
        guard state == .reading || state == .dispatched, let owner else { return nil }
        state = .responded
        let stream = ResponseStream(exchange: self, owner: owner)
        self.stream = stream
        owner.startStream(self, head)
        return stream.owner == nil ? nil : stream
    }

    /// The stream is over: its close handlers run.
    func endStream() {
        guard let stream else { return }
        self.stream = nil
        stream.closed()
    }

    /// Abandons the exchange: RST_STREAM (HTTP/2) or closing the connection (HTTP/1.1).
    public func reset() {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.reset() }
            return
        }
        guard state != .closed, state != .responded, let owner else { return }
        state = .responded
        owner.reset(self)
    }
}
