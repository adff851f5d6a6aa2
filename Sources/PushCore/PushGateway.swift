import Transport

/// A push gateway: the rules of one provider API (APNs, FCM, or a test's toy), plugged into the
/// one request pipeline (`PushPipeline` in the Pipeline module).
///
/// A gateway turns a request into a decision without touching sockets, and formats what the
/// pipeline sends back. Everything between (fault rules, the token rate limit, the notification
/// log, delivery to simulated devices, device effects, the journal commit, shaping, metrics) is
/// the pipeline's, run once for every gateway in one documented order:
///
/// ```
/// decide(_:on:state:nowMs:into:)         the provider's verdict, in place
///   -> subject(of:request:)               what fault rules and the journal see (token, topic, scope)
///   -> injectedAnswer(_:request:)         when a fault rule answers instead
///   -> rateLimited(_:)                    when the pipeline's per-token limit refuses
///   -> notificationID + forEachAcceptedPush   accepted: log, deliver, device effects
///   -> fanOut                             many devices: a job for the fan-out worker (off the loop)
///   -> deferredPush                       delivered after the answer, off the loop (Web Push decrypts)
///   -> response(for:...) + outcome(of:request:)  the answer and how it is recorded
///   -> connectionActions(after:)          what the connection does once the answer is out
/// ```
///
/// Threading: every requirement that takes a request runs on the event loop that owns the
/// request's connection, with that connection's `ConnectionState`; none may block. A gateway is
/// shared by every loop, so its own stored state is immutable or internally synchronised
/// (registries), never per-loop.
public protocol PushGateway: Sendable {
    /// What the gateway remembers per connection (auth caches, scratch buffers). Created on the
    /// connection's first push request and touched only by that connection's loop.
    associatedtype ConnectionState: AnyObject
    /// The verdict on one request, written in place (`init()` is the blank one the pipeline
    /// passes to `decide`).
    associatedtype Decision: PushDecision
    /// What the connection does after an answer leaves (raise the stream limit, GOAWAY). A small
    /// value: it is captured by the deferred answer.
    associatedtype ConnectionActions: Sendable

    /// Who this gateway is: its fixed index and its name.
    var provider: PushProvider { get }

    /// The routes it serves: its push route (`.push`) and any others (OAuth, topic management,
    /// retired APIs). Called once, when the router is built.
    func routes() -> [GatewayRoute]

    /// A fresh per-connection state.
    func makeConnectionState() -> ConnectionState

    /// Adjusts a new connection before its HTTP/2 session starts (its initial stream limit, by
    /// SNI); true when the connection is this gateway's. Runs on the connection's loop.
    func setUpConnection(_ connection: ConnectionContext) -> Bool

    /// The answer for a path no route matches, when this gateway owns the request's host
    /// (APNs answers 404 BadPath under its host names); nil otherwise.
    func notFound(_ request: Request) -> Response?

    /// The provider's verdict on `request` (the exchange's, read once by the pipeline), written
    /// into `decision` (a blank one). The exchange gives the connection and the route's parameters.
    func decide(_ request: Request, on exchange: Exchange, state: ConnectionState, nowMs: Int64, into decision: inout Decision)

    /// What fault rules match on and the journal records as the request's target.
    func subject(of decision: Decision, request: Request) -> PushSubject

    /// Turns an accepted decision into the gateway's "too many requests" answer (the pipeline's
    /// per-token rate limit refused it).
    func rateLimited(_ decision: inout Decision)

    /// The id of an accepted notification (the sender's, when the API lets it choose one).
    func notificationID(for decision: Decision, request: Request, state: ConnectionState) -> UUIDValue

    /// Calls `body` once for each device an accepted decision reaches (one for a token send,
    /// one per subscriber for a topic send), in order (see `AcceptedPushSink`).
    func forEachAcceptedPush(
        _ decision: Decision, request: Request, id: UUIDValue, state: ConnectionState, nowMs: Int64,
        _ body: AcceptedPushSink)

    /// The many-device part of an accepted push (an FCM topic or condition, an APNs broadcast):
    /// a job the pipeline's fan-out worker resolves and delivers after the answer, off the event
    /// loop. nil (the default) when `forEachAcceptedPush` delivers the push in full.
    func fanOut(_ decision: Decision, request: Request, id: UUIDValue, nowMs: Int64) -> FanOutJob?

    /// Whether an accepted `decision` has a fan-out (asked before it is accepted for good, to
    /// reserve room on the worker). False by default.
    func fansOut(_ decision: Decision) -> Bool

    /// Whether an accepted `decision` is delivered off the loop (`deferredPush`), asked before it
    /// is accepted for good, to reserve room on the worker. False by default.
    func defersDelivery(_ decision: Decision) -> Bool

    /// The delivery of an accepted push that `defersDelivery`, worked out on the pipeline's
    /// deferred-delivery worker after the answer (the browser's decryption); `forEachAcceptedPush`
    /// is then not called. nil (the default) for gateways that deliver on the loop.
    func deferredPush(_ decision: Decision, request: Request, id: UUIDValue, nowMs: Int64) -> DeferredPush?

    /// The answer to a request the provider decided (accepted or rejected).
    func response(for decision: Decision, request: Request, id: UUIDValue, state: ConnectionState, nowMs: Int64) -> Response

    /// How the answer is recorded: status, reason, the payload kept and its lint warnings.
    func outcome(of decision: Decision, request: Request) -> PushOutcome

    /// The tokens of an accepted request's whole body when its `decide` parsed the body just
    /// now (so the journal need not parse it again for its campaign); nil (the default) when a
    /// memo answered, or the body is not JSON. Read before the connection's next request.
    func parsedBody(of decision: Decision, state: ConnectionState) -> JSONTokenBuffer?

    /// The answer a fault rule injects, in the gateway's own format, and the reason recorded.
    func injectedAnswer(_ answer: InjectedAnswer, request: Request) -> (response: Response, reason: String)

    /// What the connection does once the answer to `decision` is out.
    func connectionActions(after decision: Decision) -> ConnectionActions

    /// What the connection does once an injected (fault) answer is out.
    func connectionActionsAfterInjectedAnswer() -> ConnectionActions

    /// Carries out `actions` on the connection; runs on its loop after the answer was handed to it.
    static func perform(_ actions: ConnectionActions, on connection: ConnectionContext)

    /// Whether `perform` would do anything with `actions`: an answer parked for its commit
    /// carries them (as a closure) only then. Defaults to true.
    static func acts(_ actions: ConnectionActions) -> Bool

    /// GOAWAY debug data for a fault's `goaway` reason, in the gateway's style.
    static func goAwayDebugData(reason: String) -> [UInt8]

    /// The 403 for a browser request from another site (`BrowserOrigin`), in the gateway's
    /// format. Defaults to its injected 403 (`Forbidden`).
    func browserRefusal(_ request: Request, reason: String) -> Response

    /// The host names senders reach it under (the proxy's, `--resolve`'s): a browser request
    /// naming one is not taken for a rebinding page.
    var hostNames: [String] { get }
}

extension PushGateway {
    /// No tokens lent: the journal parses the payload itself.
    public func parsedBody(of decision: Decision, state: ConnectionState) -> JSONTokenBuffer? { nil }

    /// No host names of its own: only loopback `Host`s pass the browser check.
    public var hostNames: [String] { [] }

    /// A 403 in a plain text body, for gateways without an error format of their own.
    public func browserRefusal(_ request: Request, reason: String) -> Response {
        injectedAnswer(InjectedAnswer(status: 403, reason: "Forbidden", errorCode: nil, retryAfter: nil), request: request).response
    }

    /// Conservatively true: the pipeline then builds the closure that performs the actions.
    public static func acts(_ actions: ConnectionActions) -> Bool { true }
    /// No per-connection setup: the server's defaults apply.
    public func setUpConnection(_ connection: ConnectionContext) -> Bool { false }
    /// The router's 404.
    public func notFound(_ request: Request) -> Response? { nil }
    /// No many-device pushes.
    @inlinable @inline(__always)
    public func fanOut(_ decision: Decision, request: Request, id: UUIDValue, nowMs: Int64) -> FanOutJob? { nil }
    /// No many-device pushes.
    @inlinable @inline(__always)
    public func fansOut(_ decision: Decision) -> Bool { false }
    /// Delivered on the loop.
    @inlinable @inline(__always)
    public func defersDelivery(_ decision: Decision) -> Bool { false }
    /// Delivered on the loop.
    @inlinable @inline(__always)
    public func deferredPush(_ decision: Decision, request: Request, id: UUIDValue, nowMs: Int64) -> DeferredPush? { nil }
}

/// A gateway's verdict type.
public protocol PushDecision {
    /// A blank decision, before `decide` writes it.
    init()
    /// Whether the push was accepted (and so is delivered).
    var accepted: Bool { get }
}

/// What a route is, for fault rules (`"route"` in a rule's match): a push, a broadcast, the
/// OAuth token endpoint, or channel management.
public enum RouteKind: UInt8, Sendable, CaseIterable {
    case send, broadcast, token, channels

    /// The name a fault rule's `"route"` uses (`send`, `broadcast`, `token`, `channels`).
    public var name: String {
        switch self {
        case .send: "send"
        case .broadcast: "broadcast"
        case .token: "token"
        case .channels: "channels"
        }
    }

    /// The kind a rule names (nil: no such kind).
    public static func named(_ s: String) -> RouteKind? { allCases.first { $0.name == s } }

    /// The OAuth token endpoint is not the push service: a rule reaches it only by naming it
    /// (its `route`, or a `path` that selects it), so a rule meant for an outage of FCM's
    /// sends does not break the SDK's credentials first.
    public var needsNaming: Bool { self == .token }
}

/// One route a gateway serves, and how the pipeline handles it.
public struct GatewayRoute: Sendable {
    /// Whether the pipeline runs a route, or the gateway answers it alone.
    public enum Handling: Sendable {
        /// A push request: the pipeline's stages, in order.
        case push
        /// Answered by the gateway alone (no fault rules, no journal).
        case direct(@Sendable (Exchange) -> Void)
        /// Answered by the gateway unless a fault rule matches its path; the rule's answer is
        /// formatted by `injected` (an OAuth error for a token endpoint, say) and shaped as any.
        case faultable(@Sendable (Exchange) -> Void, injected: @Sendable (InjectedAnswer, Request) -> Response)
    }

    /// nil: every method (the handler decides).
    public var methods: [HTTPMethod]?
    /// The path pattern (`/3/device/{token}`).
    public var pattern: String
    /// The largest body it accepts.
    public var maxBodySize: Int
    /// The 413 in the gateway's format (nil: the router's).
    public var bodyTooLarge: (@Sendable (Request) -> Response)?
    /// The 503 while the server sheds load, in the gateway's format (nil: the router's).
    public var unavailable: (@Sendable (Request) -> Response)?
    /// How the pipeline handles it.
    public var handling: Handling
    /// What it is, for fault rules.
    public var kind: RouteKind
    /// What an HTTP/1.x request gets instead of being served (nil: served), for a service that
    /// speaks HTTP/2 only.
    public var http1Answer: (@Sendable (Request) -> Response)?

    /// Whether the pipeline's stages run it.
    public var isPush: Bool {
        if case .push = handling { return true }
        return false
    }

    /// Only for requests to this host (tried when no other route matches; see `Router.add`).
    public var host: String?

    /// A route with its pattern, handling and limits.
    public init(
        _ methods: [HTTPMethod]?, _ pattern: String, maxBodySize: Int,
        bodyTooLarge: (@Sendable (Request) -> Response)? = nil,
        unavailable: (@Sendable (Request) -> Response)? = nil, kind: RouteKind = .send, host: String? = nil, handling: Handling
    ) {
        self.host = host
        self.kind = kind
        self.methods = methods
        self.pattern = pattern
        self.maxBodySize = maxBodySize
        self.bodyTooLarge = bodyTooLarge
        self.unavailable = unavailable
        self.handling = handling
    }
}

/// What fault rules match on and the journal records as a request's target.
public struct PushSubject {
    /// The device token (empty when the request named none).
    public var token: ArraySlice<UInt8>
    /// APNs topic, FCM topic or condition.
    public var topic: ArraySlice<UInt8>?
    /// APNs environment or FCM project.
    public var scope: String
    /// The APNs team whose credentials sent it (nil for other providers, or before authentication).
    public var team: TeamID? = nil

    /// A subject with its token, topic and scope.
    @inlinable
    public init(token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, scope: String) {
        self.token = token
        self.topic = topic
        self.scope = scope
    }
}

/// How an answer is recorded (journal, metrics).
public struct PushOutcome {
    /// The HTTP status of the answer.
    public var status: Int
    /// The APNs reason or FCM error code; empty on success.
    public var reason: String
    /// The payload the journal keeps.
    public var payload: ArraySlice<UInt8>
    /// The provider's warnings about the request, kept with its record.
    public var warnings: [String]
    /// The tokens of the request's whole body, when the gateway lends them (`parsedBody`).
    public var parsedBody: JSONTokenBuffer?

    /// An outcome with its status, reason, payload and warnings.
    @inlinable
    public init(status: Int, reason: String, payload: ArraySlice<UInt8>, warnings: [String]) {
        self.status = status
        self.reason = reason
        self.payload = payload
        self.warnings = warnings
    }
}

/// How the pipeline takes each device an accepted push reaches (`forEachAcceptedPush`), as
/// separate arguments so nothing is packed, copied or retained on the way:
/// - `delivery`: what the device layer receives (and the notification log keeps: id, token,
///   environment, payload); lent (`borrowing`), so it is read in place;
/// - `topic`: the APNs topic, or the FCM topic or condition of a fan-out;
/// - `warnings`: the payload's lint warnings;
/// - `parsedPayload`: the payload's tokens when the gateway already scanned it (saves a rescan);
/// - `flags`: whether the payload is JSON, whether a fault's device effects apply.
public typealias AcceptedPushSink = (
    _ delivery: borrowing Delivery, _ topic: ArraySlice<UInt8>?, _ warnings: [String], _ parsedPayload: JSONTokenBuffer?,
    _ flags: AcceptedPushFlags
) -> Void

/// The plain facts about one accepted push (no references: free to copy).
public struct AcceptedPushFlags: Sendable {
    /// The payload is JSON (the notification log shows it as an object).
    public var payloadIsJSON: Bool
    /// A fault's device effects (uninstall, rotate) apply to this device: a token send, not
    /// each subscriber of a topic send.
    public var appliesDeviceEffects: Bool

    /// Flags for one accepted push.
    @inlinable
    public init(payloadIsJSON: Bool, appliesDeviceEffects: Bool) {
        self.payloadIsJSON = payloadIsJSON
        self.appliesDeviceEffects = appliesDeviceEffects
    }
}

/// An answer a fault rule injects, before a gateway formats it. Unset fields take the gateway's
/// defaults for the status (APNs: the reason a status implies; FCM: the error code).
public struct InjectedAnswer: Sendable {
    /// The HTTP status (nil: the gateway's default for the reason or error code).
    public var status: Int?
    /// An APNs reason (or an OAuth error description for FCM's token endpoint).
    public var reason: String?
    /// An FCM error code (or an OAuth error code).
    public var errorCode: String?
    /// Seconds, sent as `retry-after`.
    public var retryAfter: Int?

    /// An answer with the given fields.
    public init(status: Int?, reason: String?, errorCode: String?, retryAfter: Int?) {
        self.status = status
        self.reason = reason
        self.errorCode = errorCode
        self.retryAfter = retryAfter
    }
}
