import CSystem

/// Bounds on everything a client controls.
public struct ServerLimits: Sendable {
    /// Open connections, process-wide. At the limit an idle connection is closed to admit a new
    /// client; when none is idle, the new client is answered 503 (HTTP/1.1) or GOAWAY (HTTP/2).
    public var maxConnections = 10_000
    /// Bytes all connections together may hold in buffers (request bodies being read, answers
    /// not yet sent, pipelined input). Past it new requests are answered 503 in their route's
    /// format and the connections holding the most are closed until it fits again.
    public var maxBufferedBytes = 512 * 1024 * 1024
    /// Answers one HTTP/2 connection may hold unsent (a peer that stops reading, or keeps its
    /// window shut); past it its new streams are refused (RST_STREAM REFUSED_STREAM).
    var maxUnsentPerConnection = 16 * 1024 * 1024
    /// Bytes read from one connection per loop turn before the loop serves its others.
    var readPerTurn = 256 * 1024
    /// Cheap HTTP/2 frames (WINDOW_UPDATE, PING, SETTINGS, PRIORITY, RST_STREAM, empty DATA) a
    /// connection may send beyond what its requests and answers earn, before GOAWAY
    /// ENHANCE_YOUR_CALM.
    var http2ControlFrameAllowance = 10_000
    /// HTTP/2 header list (name + value + 32 per field), advertised in SETTINGS and enforced (431).
    public var maxHeaderListSize = 16 * 1024
    /// HTTP/1.1 request line and head limits.
    public var http1 = HTTP1Limits()
    /// Body limit for requests no route matched (they get 404/405 after the body is read).
    var unroutedBodySize = 64 * 1024
    /// Pipelined HTTP/1.1 input buffered behind an unanswered request before reading pauses.
    var maxPendingInput = 256 * 1024
    /// Output buffered for a slow reader before reading from it pauses.
    var outputHighWater = 1024 * 1024
    var http2InitialWindowSize = 1024 * 1024
    /// Request body bytes one HTTP/2 connection may have unread by a handler (the connection
    /// flow-control window; credit is given back when a request is dispatched or dropped).
    var http2ConnectionWindowSize = 8 * 1024 * 1024

    public init() {}
}

public struct ServerTimeouts: Sendable {
    /// TLS handshake and first bytes.
    public var handshake: Double = 10
    /// Time to send a complete request head, counted from its first byte (slowloris).
    public var requestHead: Double = 30
    /// Time to send a complete request body, counted from the end of its head.
    public var requestBody: Double = 60
    /// Time an answer may wait for a peer that does not read it (HTTP/1.1 output, an HTTP/2
    /// stream's DATA behind a shut window), counted from when it was given.
    public var send: Double = 60
    /// Idle keep-alive (HTTP/1.1) or idle connection with no open stream (HTTP/2).
    public var idle: Double = 3600

    public init() {}

    var handshakeNanos: UInt64 { nanos(handshake) }
    var requestHeadNanos: UInt64 { nanos(requestHead) }
    var requestBodyNanos: UInt64 { nanos(requestBody) }
    var sendNanos: UInt64 { nanos(send) }
    var idleNanos: UInt64 { nanos(idle) }

    /// Seconds as nanoseconds, clamped to [1 ms, 100 years] (a NaN or huge value never traps).
    private func nanos(_ seconds: Double) -> UInt64 {
        guard seconds.isFinite, seconds > 0.001 else { return 1_000_000 }
        return UInt64(min(seconds, 3.15e9) * 1e9)
    }
}

public struct ServerConfiguration: Sendable {
    /// Address to bind: "127.0.0.1" (default), "::1", "0.0.0.0", "::" or a name that resolves.
    public var host = "127.0.0.1"
    /// Cleartext listener (HTTP/1.1, h2c prior knowledge, Upgrade: h2c); 0 picks a free port; nil disables.
    public var httpPort: Int? = 8080
    /// TLS listener (ALPN h2 / http/1.1, or the h2 preface without ALPN); nil disables.
    public var httpsPort: Int? = 8443
    /// More TLS listeners, the same as `httpsPort`'s (APNs's channel-management ports, say).
    public var extraTLSPorts: [Int] = []
    public var tls: TLSConfiguration?
    /// Host names the cleartext listener intercepts as an HTTP proxy (`CONNECT`, absolute-form
    /// requests): each tunnel is served as the TLS listener would serve that host; every other
    /// host is refused (403). Nil: CONNECT answers 405 and absolute-form targets are served as is.
    public var intercept: InterceptConfiguration?
    /// Event-loop threads.
    public var threads = Int(csys_cpu_count())
    public var limits = ServerLimits()
    public var timeouts = ServerTimeouts()
    /// SETTINGS_MAX_CONCURRENT_STREAMS for new HTTP/2 sessions (a `sessionSetup` may change it per connection).
    public var maxConcurrentStreams: UInt32 = 1000
    /// Called on the loop right before a connection's HTTP/2 session starts (SNI, ALPN and the
    /// client certificate are known): adjust `initialMaxConcurrentStreams` or `storage`.
    public var sessionSetup: (@Sendable (ConnectionContext) -> Void)?
    /// Asked on the loop when a TLS client starts its handshake (its loop index given): false
    /// drops the connection there, as a failed handshake (fault injection).
    public var acceptTLS: (@Sendable (Int) -> Bool)?
    /// GOAWAY debug data sent when an HTTP/2 connection is closed for idleness.
    public var idleGoAwayDebugData: [UInt8] = []
    /// GOAWAY debug data sent to HTTP/2 connections on graceful shutdown.
    public var shutdownGoAwayDebugData: [UInt8] = []

    public init() {}
}

/// What every connection of a server shares, immutable once the server starts.
final class ServerCore: @unchecked Sendable { // `loops` is filled before any loop runs, then only read
    let configuration: ServerConfiguration
    let dispatcher: Dispatcher
    let tls: TLSContext?
    let intercept: InterceptAuthority?
    let budget: ConnectionBudget
    /// The server's event loops (set while starting, before any of them runs).
    var loops: [EventLoop] = []

    init(configuration: ServerConfiguration, router: Router) throws {
        self.configuration = configuration
        budget = ConnectionBudget(
            maxConnections: max(1, configuration.limits.maxConnections),
            maxBufferedBytes: max(1 << 20, configuration.limits.maxBufferedBytes), loops: max(1, configuration.threads))
        dispatcher = Dispatcher(router: router, limits: configuration.limits, budget: budget)
        tls = try configuration.tls.map { try TLSContext($0) }
        intercept = try configuration.intercept.map { try InterceptAuthority($0) }
    }
}
