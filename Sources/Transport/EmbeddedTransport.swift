import CSystem

/// A transport without sockets, for tests of what sits on the router (models: swift-nio's
/// `EmbeddedChannel`, Hummingbird's router test mode). A request goes through the same
/// `Dispatcher` a connection uses (routing, 404/405, the body limit, the handler) on an event
/// loop that runs on the calling thread while the test waits for the answer, so handlers that
/// answer later (from a timer, a background worker, another loop) are waited for too.
///
/// One thread: call it from the thread that made it.
public final class EmbeddedTransport {
    /// What came back for one request.
    public struct Answer: Sendable {
        public var status: Int
        public var headers: HTTPFields
        public var body: [UInt8]
        /// The handler reset the exchange instead of answering (a throw, `Exchange.reset`).
        public var wasReset = false
        /// The answer is a stream (`respondStreaming`) that has not finished yet.
        public var streaming = false

        public var text: String { String(decoding: body, as: UTF8.self) }
        public func header(_ name: String) -> String? { headers.firstString(name.lowercased()) }
    }

    /// The event loop handlers run on (its thread is the caller's while a request runs).
    public let loop: EventLoop
    private let dispatcher: Dispatcher
    private let context: ConnectionContext

    public init(router: Router, limits: ServerLimits = ServerLimits()) throws {
        loop = try EventLoop(index: 0)
        dispatcher = Dispatcher(
            router: router, limits: limits,
            budget: ConnectionBudget(maxConnections: limits.maxConnections, maxBufferedBytes: limits.maxBufferedBytes, loops: 1))
        context = ConnectionContext(
            id: connectionIDs.wrappingAdd(1, ordering: .relaxed).newValue, transport: .cleartext, remoteAddress: "embedded",
            localPort: 0, eventLoop: loop, maxConcurrentStreams: 100, parameterNames: router.parameterNames)
        context.httpVersion = .http11
    }

    /// Sends one request and waits up to `timeout` seconds for its answer (nil: none came).
    /// `until`: for a streamed answer, what the body must hold before it is returned.
    public func request(
        _ method: HTTPMethod, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [],
        timeout: Double = 5, until: ((Answer) -> Bool)? = nil
    ) -> Answer? {
        var fields = HTTPFields()
        fields.add(name: ":method", value: method.name)
        fields.add(name: ":path", value: target)
        if !headers.contains(where: { ["host", ":authority"].contains($0.0.lowercased()) }) {
            fields.add(name: ":authority", value: "127.0.0.1")
        }
        for (name, value) in headers { fields.add(name: name.lowercased(), value: value) }
        if !body.isEmpty && !headers.contains(where: { $0.0.lowercased() == "content-length" }) {
            fields.add(name: "content-length", value: String(body.count))
        }
        let session = EmbeddedSession()
        let exchange = Exchange(
            request: Request(version: .http11, method: method, headers: fields), connection: context, streamID: 0, owner: session)
        let dispatcher = self.dispatcher
        let ex = exchange
        loop.execute {
            guard dispatcher.headersComplete(ex) else { return }
            if body.count > ex.maxBodySize {
                return ex.respond(dispatcher.bodyTooLarge(ex))
            }
            ex.request.body = body
            dispatcher.dispatch(ex)
        }
        let done = loop.runEmbedded(timeoutNs: UInt64(timeout * 1e9)) {
            guard let answer = session.answer else { return false }
            if let until { return until(answer) }
            return !answer.streaming
        }
        _ = done
        return session.answer
    }

    /// Runs the loop for `seconds` (timers and tasks handlers left behind).
    public func run(for seconds: Double) {
        _ = loop.runEmbedded(timeoutNs: UInt64(seconds * 1e9)) { false }
    }
}

/// The embedded transport's side of an exchange: it keeps what the handler answered.
private final class EmbeddedSession: ExchangeOwner {
    var answer: EmbeddedTransport.Answer?

    func respond(_ exchange: Exchange, _ response: Response) {
        answer = EmbeddedTransport.Answer(status: response.status, headers: response.headers, body: response.body)
    }

    func reset(_ exchange: Exchange) {
        answer = EmbeddedTransport.Answer(status: 0, headers: HTTPFields(), body: [], wasReset: true)
    }

    func startStream(_ exchange: Exchange, _ head: Response) {
        answer = EmbeddedTransport.Answer(status: head.status, headers: head.headers, body: [], streaming: true)
    }

    func streamWrite(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer) {
        answer?.body.append(contentsOf: bytes)
    }

    func streamFinish(_ exchange: Exchange) {
        answer?.streaming = false
        exchange.endStream()
    }

    func streamUnsent(_ exchange: Exchange) -> Int { 0 }
}
