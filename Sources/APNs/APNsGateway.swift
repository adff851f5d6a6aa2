import CSystem
import PushCore
import Runtime
import Synchronization
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
        let rules = self.rules
        let manage: @Sendable (Exchange) -> Void = { exchange in
            let connection = exchange.connection
            let answer = rules.manageChannels(
                exchange.request,
                connection: APNsConnectionInfo(
                    serverName: connection.serverName, peerCertificate: connection.peerCertificate, localPort: connection.localPort),
                state: APNsGateway.connectionState(connection), nowMs: Clock.nowMs())
            exchange.respond(answer.response)
            if let limit = answer.raiseStreamsTo, connection.maxConcurrentStreams < limit { connection.setMaxConcurrentStreams(limit) }
            if let reason = answer.goAwayReason {
                connection.goAway(lastStreamID: nil, errorCode: 0, debugData: APNsGateway.goAwayDebugData(reason: reason))
            }
        }
        let gateway = self
        return apnsRoutes(manage: manage, gateway: gateway).map { route in
            var route = route
            if !configuration.allowHTTP1 { route.http1Answer = APNsGateway.http1Refusal }
            return route
        }
    }

    /// Apple serves the provider API over HTTP/2 only, and its front end answers a request line
    /// where the HTTP/2 preface belongs as an HTTP/2 server does: SETTINGS, then GOAWAY with
    /// PROTOCOL_ERROR and "Unexpected HTTP/1.x request: METHOD PATH" (what a client that printed
    /// it reported, reactor-netty#399), and the connection closed. An HTTP/1.1 client reads those
    /// bytes as a broken response. pushemu adds how to serve HTTP/1.1 anyway, and says so once on
    /// stderr.
    static func http1Refusal(_ request: Request) -> Response {
        let line = "Unexpected HTTP/1.x request: \(request.method.name) \(request.path.utf8String)"
        if APNsGateway.http1Said.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            csys_write_stderr(
                "pushemu: an HTTP/1.1 request to the APNs provider API (\(request.method.name) \(request.path.utf8String)) got what Apple's servers give it, a GOAWAY: APNs speaks HTTP/2 only (start with --apns-http1 to serve HTTP/1.1 for curl)\n"
            )
        }
        let debug = Array((line + " (APNs speaks HTTP/2 only; pushemu serves HTTP/1.1 with --apns-http1)").utf8)
        var out: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0] // SETTINGS, empty
        let length = 8 + debug.count
        out += [UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        out += [7, 0, 0, 0, 0, 0] // GOAWAY, no flags, stream 0
        out += [0, 0, 0, 0, 0, 0, 0, 1] // last stream 0, PROTOCOL_ERROR
        return .verbatim(out + debug)
    }

    static let http1Said = Atomic<Bool>(false)

    private func apnsRoutes(
        manage: @escaping @Sendable (Exchange) -> Void, gateway: APNsGateway
    ) -> [GatewayRoute] {
        let configuration = rules.configuration
        return [
            GatewayRoute(
                nil, "/3/*", maxBodySize: APNsPushType.voip.maxPayloadSize,
                bodyTooLarge: { APNsProvider.errorResponse(.payloadTooLarge, request: $0, configuration: configuration) },
                unavailable: { APNsProvider.errorResponse(.serviceUnavailable, request: $0, configuration: configuration) },
                handling: .push),
            // Live Activity broadcasts: pushes like any other (faults, journal, delivery), fanned out.
            GatewayRoute(
                nil, "/4/*", maxBodySize: APNsProvider.maxBroadcastPayload,
                bodyTooLarge: { APNsProvider.broadcastError(.payloadTooLarge, request: $0, configuration: configuration) },
                unavailable: { APNsProvider.broadcastError(.serviceUnavailable, request: $0, configuration: configuration) },
                kind: .broadcast, handling: .push),
            // Channel management: answered here, unless a fault rule on its path answers.
            GatewayRoute(
                nil, "/1/*", maxBodySize: 64 * 1024,
                bodyTooLarge: { APNsProvider.broadcastError(.payloadTooLarge, request: $0, configuration: configuration) },
                unavailable: { APNsProvider.broadcastError(.serviceUnavailable, request: $0, configuration: configuration) },
                kind: .channels,
                handling: .faultable(
                    manage,
                    injected: { answer, request in
                        var response = gateway.injectedAnswer(answer, request: request).response
                        APNsGateway.useRequestID(&response, request: request)
                        return response
                    })),
        ]
    }

    /// The connection's APNs state, for the routes outside the pipeline (channel management
    /// shares its provider-token cache). Same slot as the pipeline's.
    static func connectionState(_ connection: ConnectionContext) -> APNsConnectionState {
        if let state = connection[slot: PushProvider.apns.index] { return unsafeDowncast(state, to: APNsConnectionState.self) }
        let state = APNsConnectionState()
        connection[slot: PushProvider.apns.index] = state
        return state
    }

    /// An injected answer on the broadcast APIs: `apns-request-id` in place of `apns-id`.
    static func useRequestID(_ response: inout Response, request: Request) {
        var headers = HTTPFields()
        let sent = request.headers.first("apns-request-id").flatMap(APNsProvider.parseRequestID)
        var rng = FastRandom()
        (sent ?? UUIDValue.random(&rng)).withBytes { headers.add(name: "apns-request-id", value: $0) }
        for i in 0..<response.headers.count {
            let name = response.headers.name(at: i)
            if !name.equals("apns-id") && !name.equals("apns-unique-id") {
                headers.add(
                    name: String(decoding: name, as: UTF8.self), value: String(decoding: response.headers.value(at: i), as: UTF8.self))
            }
        }
        response.headers = headers
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
    public var hostNames: [String] { APNsEnvironment.hostNames }

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
                serverName: connection.serverName, peerCertificate: connection.peerCertificate, localPort: connection.localPort),
            state: state, nowMs: nowMs, into: &decision)
    }

    /// The token from the decision, or from the path for a request rejected before its token was read.
    @inlinable @inline(__always)
    public func subject(of decision: APNsDecision, request: Request) -> PushSubject {
        // A broadcast names no device: its channel is the subject's topic.
        if decision.isBroadcast {
            var subject = PushSubject(
                token: [], topic: decision.topic ?? request.headers.first("apns-channel-id"), scope: decision.environment.rawValue)
            subject.team = decision.team
            return subject
        }
        var token = decision.token
        if token.isEmpty, request.path.starts(with: APNsGateway.devicePrefix) {
            token = request.path.dropFirst(APNsGateway.devicePrefix.count)
        }
        var subject = PushSubject(token: token, topic: decision.topic, scope: decision.environment.rawValue)
        subject.team = decision.team
        return subject
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
        guard !decision.isBroadcast else { return }
        // Whole, by one initialiser: set field by field after it, it was copied once more.
        let delivery = Delivery(
            provider: .apns, platform: .ios, tokenBytes: decision.token, appBytes: decision.bundle,
            environment: decision.environment.rawValue, notificationID: id, messageName: nil,
            receivedAtMs: nowMs, payload: request.body[...], tokenKey: decision.tokenKey,
            mutableContent: decision.summary.mutableContent, contentAvailable: decision.summary.contentAvailable,
            alerts: decision.summary.alerts, collapseID: decision.collapseID.map { String(decoding: $0, as: UTF8.self) },
            expiresAtMs: decision.expiration.map { $0 * 1000 })
        body(
            delivery, decision.topic, decision.warnings, decision.summary.isJSON ? state.scanner.tokens : nil,
            AcceptedPushFlags(payloadIsJSON: decision.summary.isJSON, appliesDeviceEffects: true))
    }

    @inlinable @inline(__always)
    public func fansOut(_ decision: APNsDecision) -> Bool { decision.broadcast != nil }

    /// A broadcast: kept on a Most Recent Message channel, then delivered by the fan-out worker
    /// to every Live Activity subscribed to the channel, each once.
    public func fanOut(_ decision: APNsDecision, request: Request, id: UUIDValue, nowMs: Int64) -> FanOutJob? {
        guard let target = decision.broadcast else { return nil }
        let payload = request.body
        let environment = decision.environment
        let expiresAtMs = decision.expiration.map { $0 == 0 ? 0 : $0 * 1000 }
        rules.channels.recordBroadcast(
            target.channelID, bundle: target.bundleID, environment: environment,
            message: APNsChannelRegistry.StoredMessage(
                payload: payload, notificationID: id, receivedAtMs: nowMs,
                expiresAtMs: min(nowMs + APNsChannelRegistry.storedMessageLifetimeMs, expiresAtMs.flatMap { $0 == 0 ? nil : $0 } ?? .max),
                priority: target.priority))
        let directory = rules.devices.directory
        return FanOutJob(
            provider: .apns, notificationID: id, topic: Array(target.channelID.utf8), headers: request.headers,
            warnings: decision.warnings, payloadIsJSON: decision.summary.isJSON,
            recipients: { each in
                let tokens =
                    directory?.liveActivityTokens(
                        subscribedTo: target.channelID, bundleID: target.bundleID, environment: environment.rawValue)
                    ?? []
                for t in tokens where !each(t) { return }
            },
            delivery: { token, index in
                var delivery = Delivery(
                    provider: .apns, platform: .ios, token: token, app: target.bundleID, environment: environment.rawValue,
                    notificationID: FanOutJob.recipientID(id, index), messageName: nil, receivedAtMs: nowMs, payload: payload)
                delivery.expiresAtMs = expiresAtMs
                delivery.channelID = target.channelID
                return delivery
            }, team: decision.team)
    }

    @inlinable @inline(__always)
    public func response(
        for decision: APNsDecision, request: Request, id: UUIDValue, state: APNsConnectionState,
        nowMs: Int64
    ) -> Response {
        // A broadcast's answer, also for one refused before its path was read (a repeated header).
        if decision.isBroadcast || (decision.reason != nil && request.path.hasPrefix("/4/")) {
            return rules.broadcastResponse(decision, id: id, state: state)
        }
        return rules.response(decision, request: request, state: state, nowMs: nowMs)
    }

    /// The payload scanner's tokens: those of this request's payload (after a memo hit too,
    /// since the memo answers only for the same bytes).
    @inlinable @inline(__always)
    public func parsedBody(of decision: APNsDecision, state: APNsConnectionState) -> JSONTokenBuffer? {
        decision.accepted && decision.summary.isJSON ? state.scanner.tokens : nil
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
        // `/4/...` (a broadcast), told by one byte: every path here starts with '/' (a generic
        // prefix test cost 160 instructions per device push).
        let path = request.path
        if path.count > 3, path[path.startIndex &+ 1] == UInt8(ascii: "4") { APNsGateway.useRequestID(&response, request: request) }
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

    @inlinable @inline(__always)
    public static func acts(_ actions: ConnectionActions) -> Bool {
        actions.raiseStreamsTo != nil || actions.adaptiveTop > 0 || actions.goAwayReason != nil
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
