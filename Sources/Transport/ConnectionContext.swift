import Synchronization

/// What a handler may know about, and do to, the connection a request came on.
///
/// Owned by one event loop; read and call it only from handlers running on that loop
/// (`exchange.eventLoop`). Providers keep per-connection state (auth caches, bindings) in
/// `storage`, which needs no lock because only the owning loop touches it.
public final class ConnectionContext: @unchecked Sendable {
    public enum Transport: Sendable { case cleartext, tls }

    public let id: UInt64
    /// `.tls` also for a proxy tunnel once its TLS starts (`CONNECT` on the cleartext listener).
    public internal(set) var transport: Transport
    let remoteAddress: String
    public let localPort: Int
    /// Loops outlive every connection they own.
    public unowned(unsafe) let eventLoop: EventLoop

    /// The negotiated ALPN protocol ("h2", "http/1.1"), or nil when the client offered none.
    public internal(set) var alpn: String?
    /// The TLS SNI host name, or nil.
    public internal(set) var serverName: String?
    /// The TLS version ("TLSv1.3"), or nil for cleartext.
    public internal(set) var tlsVersion: String?
    /// The verified client certificate, when the client presented one.
    public internal(set) var peerCertificate: PeerCertificate?
    /// HTTP version spoken on this connection once known.
    public internal(set) var httpVersion: HTTPVersion?

    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised at session start (HTTP/2). A `sessionSetup`
    /// hook may change it before the session starts; handlers use `setMaxConcurrentStreams`.
    public var initialMaxConcurrentStreams: UInt32
    public private(set) var maxConcurrentStreams: UInt32

    /// The last path this connection's requests were routed by (`Dispatcher`).
    var routeMemo = RouteMemo()

    /// Per-connection state for the layers above, keyed by a type.
    public var storage: [ObjectIdentifier: AnyObject] = [:]
    /// Direct slots for the hottest per-connection state (no hashing, no dynamic cast), indexed
    /// by the layer above (the push pipeline uses its gateway's provider index).
    public static let slotCount = 4
    private var slots: (AnyObject?, AnyObject?, AnyObject?, AnyObject?) = (nil, nil, nil, nil)

    /// Slot `index` (0..<slotCount).
    public subscript(slot index: Int) -> AnyObject? {
        get {
            switch index {
            case 0: return slots.0
            case 1: return slots.1
            case 2: return slots.2
            default: return slots.3
            }
        }
        set {
            switch index {
            case 0: slots.0 = newValue
            case 1: slots.1 = newValue
            case 2: slots.2 = newValue
            default: slots.3 = newValue
            }
        }
    }

    /// The router's parameter names by route (`Exchange.parameter(_:)` looks names up here).
    let parameterNames: [[String]]
    /// Cleared when the connection closes.
    var control: Connection?
    /// Admitted past the connection limit: its first request is answered 503, then it closes.
    var isShedding = false

    init(
        id: UInt64, transport: Transport, remoteAddress: String, localPort: Int, eventLoop: EventLoop,
        maxConcurrentStreams: UInt32, parameterNames: [[String]]
    ) {
        self.parameterNames = parameterNames
        self.id = id
        self.transport = transport
        self.remoteAddress = remoteAddress
        self.localPort = localPort
        self.eventLoop = eventLoop
        self.initialMaxConcurrentStreams = maxConcurrentStreams
        self.maxConcurrentStreams = maxConcurrentStreams
    }

    /// Sends SETTINGS with a new MAX_CONCURRENT_STREAMS (HTTP/2 only; no-op on HTTP/1.1).
    public func setMaxConcurrentStreams(_ n: UInt32) {
        guard n != maxConcurrentStreams else { return }
        maxConcurrentStreams = n
        control?.http2?.submitMaxConcurrentStreams(n)
    }

    func noteInitialStreams(_ n: UInt32) { maxConcurrentStreams = n }

    /// Sends GOAWAY (HTTP/2). `lastStreamID` nil means the last stream processed so far; with
    /// `closeAfterSend` the TCP connection closes once the frame is out instead of draining.
    /// On HTTP/1.1 the connection closes after the current response.
    public func goAway(
        lastStreamID: Int32? = nil, errorCode: UInt32 = 0, debugData: [UInt8] = [],
        closeAfterSend: Bool = false
    ) {
        control?.goAway(
            lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData,
            closeAfterSend: closeAfterSend)
    }

    /// Closes the TCP connection now, without GOAWAY.
    public func close() {
        control?.close()
    }

    /// Typed access to `storage`.
    public subscript<T: AnyObject>(_ type: T.Type) -> T? {
        get { storage[ObjectIdentifier(type)] as? T }
        set { storage[ObjectIdentifier(type)] = newValue }
    }
}

/// Process-wide connection id source.
let connectionIDs = Atomic<UInt64>(0)
