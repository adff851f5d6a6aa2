/// A response whose body is sent as it is produced, for as long as both sides keep the
/// stream open: Server-Sent Events. `Exchange.respondStreaming` sends the head (no
/// content-length: over HTTP/2 the body ends with END_STREAM, over HTTP/1.1 with the
/// connection, which is then not reused); `write` adds body bytes, `finish` ends it.
///
/// Confined to the exchange's event loop: every method must be called there. The stream
/// buffers what the peer has not taken yet (`unsentBytes`), without a bound of its own: the
/// producer decides what to drop past its budget, so a slow reader never makes the loop wait.
/// A stream is exempt from the answer deadline (an idle event stream is normal); a
/// connection that stops reading is still closed by the send timeout, and a draining server
/// finishes its streams.
public final class ResponseStream: @unchecked Sendable {
    unowned(unsafe) let exchange: Exchange
    /// The owner's session, held while the stream is open.
    var owner: (any ExchangeOwner)?
    /// Set by `finish`: the body ends once what was written is sent.
    var finishing = false
    private var closeHandlers: [@Sendable () -> Void] = []

    init(exchange: Exchange, owner: any ExchangeOwner) {
        self.exchange = exchange
        self.owner = owner
    }

    public var eventLoop: EventLoop { exchange.eventLoop }

    /// False once the peer went away or `finish` was called.
    public var isOpen: Bool { owner != nil && !finishing }

    /// Body bytes written and not yet handed to the socket.
    public var unsentBytes: Int {
        guard let owner else { return 0 }
        return owner.streamUnsent(exchange)
    }

    /// Adds `bytes` to the body. Returns false (and drops them) once the stream is closed.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { write(contentsOf: $0) } }

    /// Adds `bytes` to the body, copied once into the connection's output (which keeps its
    /// storage between writes: nothing is allocated per write).
    @discardableResult
    public func write(contentsOf bytes: UnsafeRawBufferPointer) -> Bool {
        precondition(eventLoop.inEventLoop, "ResponseStream.write off its event loop")
        guard isOpen, let owner else { return false }
        if !bytes.isEmpty { owner.streamWrite(exchange, bytes) }
        return true
    }

    /// Ends the body after what was written.
    public func finish() {
        precondition(eventLoop.inEventLoop, "ResponseStream.finish off its event loop")
        guard isOpen, let owner else { return }
        finishing = true
        owner.streamFinish(exchange)
    }

    /// Runs `handler` on the loop when the stream ends (the peer reset it or closed the
    /// connection, `finish` completed, the server drained); at once if it has ended.
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        precondition(eventLoop.inEventLoop, "ResponseStream.onClose off its event loop")
        if owner == nil { return handler() }
        closeHandlers.append(handler)
    }

    /// The session is done with the stream.
    func closed() {
        guard owner != nil else { return }
        owner = nil
        let handlers = closeHandlers
        closeHandlers = []
        for h in handlers { h() }
    }
}
