import PushCore
import Transport

/// APNs as a push gateway: `POST /3/device/<token>` decided by `APNsProvider` (the rules, a pure
/// function of request, connection and time), answered in Apple's format, with the connection
/// actions APNs takes after an answer: raising SETTINGS_MAX_CONCURRENT_STREAMS once a token is
/// valid, adapting it to errors (`--apns-adaptive-streams`), and GOAWAY with a JSON reason.
/// The pipeline runs everything else (faults, the token rate limit, delivery, journal, metrics).
public final class APNsGateway: PushGateway {
    public let provider = PushProvider.apns
    public let rules: APNsProvider
    /// `--apns-adaptive-streams`: the stream limit halves after an error and grows by one per
    /// success up to this; 0 when off.
    @usableFromInline let adaptiveStreamsTop: UInt32

    public init(rules: APNsProvider, adaptiveStreams: Bool) {
        self.rules = rules
        adaptiveStreamsTop = adaptiveStreams ? rules.configuration.streamsAfterAuth : 0
    }

    @usableFromInline static let devicePrefix: [UInt8] = Array("/3/device/".utf8)

    public func routes() -> [GatewayRoute] {
        let configuration = rules.configuration
        return [
            GatewayRoute(
                nil, "/3/*", maxBodySize: APNsPushType.voip.maxPayloadSize,
                bodyTooLarge: { APNsProvider.errorResponse(.payloadTooLarge, request: $0, configuration: configuration) },
                handling: .push)
        ]
    }

    public func makeConnectionState() -> APNsConnectionState { APNsConnectionState() }

    /// Token connections to an APNs host start with one stream until a valid token arrives;
    /// certificate connections start at the full limit.
    public func setUpConnection(_ connection: ConnectionContext) -> Bool {
        guard let serverName = connection.serverName, APNsEnvironment.forHost(serverName) != nil else { return false }
        connection.initialMaxConcurrentStreams =
            connection.peerCertificate == nil
            ? rules.configuration.streamsBeforeAuth : rules.configuration.streamsAfterAuth
        return true
    }

    /// Under an APNs host name every unknown path is APNs's 404 BadPath.
    public func notFound(_ request: Request) -> Response? {
        guard let authority = request.authority, APNsEnvironment.forHost(authority) != nil else { return nil }
        return APNsProvider.errorResponse(.badPath, request: request, configuration: rules.configuration)
    }

    @inlinable @inline(__always)
    public func decide(
        _ request: Request, on exchange: Exchange, state: APNsConnectionState, nowMs: Int64, into decision: inout APNsDecision
    ) {
        let connection = exchange.connection
        rules.decide(
            request,
            connection: APNsConnectionInfo(
                serverName: connection.serverName,
                peerCertificate: connection.peerCertificate),
            state: state, nowMs: nowMs, into: &decision)
    }

    /// The token from the decision, or from the path for a request rejected before its token was read.
    @inlinable @inline(__always)
    public func subject(of decision: APNsDecision, request: Request) -> PushSubject {
        var token = decision.token
        if token.isEmpty, request.path.starts(with: APNsGateway.devicePrefix) {
            token = request.path.dropFirst(APNsGateway.devicePrefix.count)
        }
        return PushSubject(token: token, topic: decision.topic, scope: decision.environment.rawValue)
    }

    @inlinable @inline(__always)
    public func rateLimited(_ decision: inout APNsDecision) { decision.reason = .tooManyRequests }

    /// The sender's `apns-id` when valid, else the one generated for the answer.
    @inlinable @inline(__always)
    public func notificationID(for decision: APNsDecision, request: Request, state: APNsConnectionState) -> UUIDValue {
        decision.generatedID ?? request.headers.first("apns-id").flatMap { UUIDValue.parseCanonicalLowercase($0) }
            ?? UUIDValue.random(&state.rng)
    }

    @inlinable @inline(__always)
    public func forEachAcceptedPush(
        _ decision: APNsDecision, request: Request, id: UUIDValue, state: APNsConnectionState,
        nowMs: Int64, _ body: AcceptedPushSink
    ) {
        var delivery = Delivery(
            provider: .apns, platform: .ios, tokenBytes: decision.token, appBytes: decision.bundle,
            environment: decision.environment.rawValue, notificationID: id, messageName: nil,
            receivedAtMs: nowMs, payload: request.body[...])
        delivery.tokenKey = decision.tokenKey
        delivery.mutableContent = decision.summary.mutableContent
        delivery.contentAvailable = decision.summary.contentAvailable
        delivery.collapseID = decision.collapseID.map { String(decoding: $0, as: UTF8.self) }
        delivery.expiresAtMs = decision.expiration.map { $0 * 1000 }
        body(
            delivery, decision.topic, decision.warnings, decision.summary.isJSON ? state.tokens : nil,
            AcceptedPushFlags(payloadIsJSON: decision.summary.isJSON, appliesDeviceEffects: true))
    }

    @inlinable @inline(__always)
    public func response(
        for decision: APNsDecision, request: Request, id: UUIDValue, state: APNsConnectionState,
        nowMs: Int64
    ) -> Response {
        rules.response(decision, request: request, state: state)
    }

    @inlinable @inline(__always)
    public func outcome(of decision: APNsDecision, request: Request) -> PushOutcome {
        PushOutcome(
            status: decision.status, reason: decision.reason.map { rules.configuration.reasonString($0) } ?? "",
            payload: request.body[...], warnings: decision.warnings)
    }

    /// The reason given (a known one in Apple's body, another as given), else the one the
    /// status implies; 410 answers carry a timestamp.
    public func injectedAnswer(_ answer: InjectedAnswer, request: Request) -> (response: Response, reason: String) {
        let reason =
            answer.reason.flatMap(APNsReason.init(rawValue:)) ?? answer.status.map(APNsGateway.impliedReason)
            ?? .internalServerError
        var response = APNsProvider.errorResponse(reason, request: request, configuration: rules.configuration)
        if let status = answer.status { response.status = status }
        if let custom = answer.reason, APNsReason(rawValue: custom) == nil {
            response.body = Array("{\"reason\":\(JSONWriter.quote(custom))}".utf8)
        }
        if response.status == 410 {
            response.body = Array("{\"reason\":\"\(answer.reason ?? "Unregistered")\",\"timestamp\":\(Clock.nowMs())}".utf8)
        }
        if let retryAfter = answer.retryAfter { response.headers.add(name: "retry-after", value: String(retryAfter)) }
        return (response, answer.reason ?? APNsGateway.impliedReason(response.status).rawValue)
    }

    /// The reason an injected status implies when a rule names none.
    static func impliedReason(_ status: Int) -> APNsReason {
        switch status {
        case 400: .badDeviceToken
        case 403: .forbidden
        case 404: .badPath
        case 405: .methodNotAllowed
        case 410: .unregistered
        case 413: .payloadTooLarge
        case 429: .tooManyRequests
        case 503: .serviceUnavailable
        default: .internalServerError
        }
    }

    /// What an APNs connection does once an answer is out.
    public struct ConnectionActions: Sendable {
        /// Raise SETTINGS_MAX_CONCURRENT_STREAMS to this (the first valid token).
        @usableFromInline var raiseStreamsTo: UInt32?
        /// `--apns-adaptive-streams`'s top, 0 when off.
        @usableFromInline var adaptiveTop: UInt32
        @usableFromInline var success: Bool
        /// GOAWAY with `{"reason": R}` (wrong environment, unusable certificate, error budget spent).
        @usableFromInline var goAwayReason: String?

        @usableFromInline
        init(raiseStreamsTo: UInt32?, adaptiveTop: UInt32, success: Bool, goAwayReason: String?) {
            self.raiseStreamsTo = raiseStreamsTo
            self.adaptiveTop = adaptiveTop
            self.success = success
            self.goAwayReason = goAwayReason
        }
    }

    @inlinable @inline(__always)
    public func connectionActions(after decision: APNsDecision) -> ConnectionActions {
        ConnectionActions(
            raiseStreamsTo: decision.raiseStreamsTo, adaptiveTop: adaptiveStreamsTop, success: decision.accepted,
            goAwayReason: decision.goAwayReason)
    }

    public func connectionActionsAfterInjectedAnswer() -> ConnectionActions {
        ConnectionActions(raiseStreamsTo: nil, adaptiveTop: adaptiveStreamsTop, success: false, goAwayReason: nil)
    }

    @inlinable @inline(__always)
    public static func perform(_ actions: ConnectionActions, on connection: ConnectionContext) {
        if let limit = actions.raiseStreamsTo, connection.maxConcurrentStreams < limit { connection.setMaxConcurrentStreams(limit) }
        if actions.adaptiveTop > 0 { adapt(connection, success: actions.success, top: actions.adaptiveTop) }
        if let reason = actions.goAwayReason {
            connection.goAway(lastStreamID: nil, errorCode: 0, debugData: goAwayDebugData(reason: reason))
        }
    }

    /// APNs lowers a connection's stream limit after errors and raises it again after successes.
    @usableFromInline
    static func adapt(_ connection: ConnectionContext, success: Bool, top: UInt32) {
        let current = connection.maxConcurrentStreams
        guard current > 1 || success else { return }
        if success {
            if current < top { connection.setMaxConcurrentStreams(current + 1) }
        } else {
            connection.setMaxConcurrentStreams(max(1, current / 2))
        }
    }

    /// `{"reason":"R"}` (APNs's style); nothing for an empty reason.
    public static func goAwayDebugData(reason: String) -> [UInt8] {
        reason.isEmpty ? [] : Array("{\"reason\":\"\(reason)\"}".utf8)
    }
}

extension APNsDecision: PushDecision {
    public init() { self.init(environment: .sandbox) }
}
