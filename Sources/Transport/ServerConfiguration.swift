import CSystem

/// Bounds on everything a client controls.
public struct ServerLimits: Sendable {
    /// Connections per server; split evenly between event loops.
    public var maxConnections = 10_000
    /// HTTP/2 header list (name + value + 32 per field), advertised in SETTINGS and enforced (431).
    public var maxHeaderListSize = 16 * 1024
    /// HTTP/1.1 request line and head limits.
    public var http1 = HTTP1Limits()
    /// Body limit for requests no route matched (they get 404/405 after the body is read).
    public var unroutedBodySize = 64 * 1024
    /// Pipelined HTTP/1.1 input buffered behind an unanswered request before reading pauses.
    public var maxPendingInput = 256 * 1024
    /// Output buffered for a slow reader before reading from it pauses.
    public var outputHighWater = 1024 * 1024
    public var http2InitialWindowSize = 1024 * 1024
    public var http2ConnectionWindowSize = 16 * 1024 * 1024

    public init() {}
}

public struct ServerTimeouts: Sendable {
    /// TLS handshake and first bytes.
    public var handshake: Double = 10
    /// Time to send a complete HTTP/1.1 request head once it started (slowloris).
    public var requestHead: Double = 30
    /// Idle keep-alive (HTTP/1.1) or idle connection with no open stream (HTTP/2).
    public var idle: Double = 3600

    public init() {}

    var handshakeNanos: UInt64 { UInt64(handshake * 1e9) }
    var requestHeadNanos: UInt64 { UInt64(requestHead * 1e9) }
    var idleNanos: UInt64 { UInt64(idle * 1e9) }
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
final class ServerCore: Sendable {
    let configuration: ServerConfiguration
    let dispatcher: Dispatcher
    let tls: TLSContext?

    init(configuration: ServerConfiguration, router: Router) throws {
        self.configuration = configuration
        dispatcher = Dispatcher(router: router, limits: configuration.limits)
        tls = try configuration.tls.map { try TLSContext($0) }
    }
}
