import PushCore
import Runtime
import Transport

/// FCM HTTP v1 as a push gateway: `messages:send` decided by `FCMProvider` (credentials, quota,
/// proto3 JSON, FCM's rules, the recipient), one accepted push per recipient device (a token,
/// or every subscriber of a topic or condition), answers in Google's format. Its other routes:
/// the OAuth token endpoint (fault rules on its path answer in OAuth's error shape), Instance
/// ID topic management, the v1 registration subscriptions, and the retired legacy APIs.
public final class FCMGateway: PushGateway {
    /// FCM's provider index and name.
    public let provider = PushProvider.fcm
    /// Google's rules (schema, auth, quota, registry).
    public let rules: FCMProvider
    let oauth: FCMOAuth
    let topics: FCMTopicManagement

    /// The largest `messages:send` body read (FCM's limit is on the message's fields, checked after).
    static let maxBody = 64 * 1024
    /// Google's host names a sender reaches for FCM: send, OAuth tokens (both token URIs),
    /// Instance ID topic management (what the proxy intercepts).
    public static let hostNames = ["fcm.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com", "iid.googleapis.com"]

    /// A gateway over `rules`.
    public init(rules: FCMProvider) {
        self.rules = rules
        oauth = FCMOAuth(accounts: rules.accounts, tokens: rules.tokens, lifetime: rules.configuration.tokenLifetime)
        topics = FCMTopicManagement(provider: rules)
    }

    /// FCM's routes: `/v1/projects/{p}/messages:send`, the legacy `/fcm/send`, Instance ID, OAuth, and their 404s.
    public func routes() -> [GatewayRoute] {
        let oauth = self.oauth
        let topics = self.topics
        let rules = self.rules
        let token: @Sendable (Exchange) -> Void = { exchange in
            let request = exchange.request
            exchange.respond(
                oauth.respond(
                    body: request.body, contentType: request.headers.firstString("content-type"),
                    authority: request.authority.map { String(decoding: $0, as: UTF8.self) },
                    nowSeconds: Clock.nowSeconds()))
        }
        // A rule on the token endpoint (`"path":"/token"`) answers in OAuth's shape:
        // `{"errorCode":"invalid_grant","reason":"..."}` or any other OAuth error code.
        let oauthError: @Sendable (InjectedAnswer, Request) -> Response = { answer, _ in
            var response = FCMOAuth.error(
                answer.errorCode ?? "invalid_grant", answer.reason ?? "Invalid JWT Signature.",
                status: answer.status ?? 400)
            if let retryAfter = answer.retryAfter { response.headers.add(name: "retry-after", value: String(retryAfter)) }
            return response
        }
        let registration: @Sendable (Exchange, String, Bool) -> Void = { exchange, topic, subscribe in
            let request = exchange.request
            let project = rules.accounts.projectID(forPathSegment: FCMGateway.decoded(exchange.parameter(0)))
            exchange.respond(
                topics.registration(
                    request, project: project, token: FCMGateway.decoded(exchange.parameter(1)),
                    topic: topic, subscribe: subscribe,
                    allowMissing: request.queryParameter("allow_missing") == "true",
                    state: FCMGateway.connectionState(exchange.connection), nowMs: Clock.nowMs()))
        }
        let routes = [
            GatewayRoute(
                [.post], "/v1/projects/{project}/messages:send", maxBodySize: FCMGateway.maxBody,
                bodyTooLarge: { _ in FCMError.tooLarge.response }, handling: .push),
            GatewayRoute(
                [.post], "/token", maxBodySize: 64 * 1024, bodyTooLarge: FCMGateway.oauthTooLarge,
                unavailable: FCMGateway.oauthUnavailable, kind: .token, handling: .faultable(token, injected: oauthError)),
            GatewayRoute(
                [.post], "/oauth2/v4/token", maxBodySize: 64 * 1024, bodyTooLarge: FCMGateway.oauthTooLarge,
                unavailable: FCMGateway.oauthUnavailable, kind: .token, handling: .faultable(token, injected: oauthError)),
            GatewayRoute(
                [.post], "/iid/v1:batchAdd", maxBodySize: 1 << 20,
                handling: .direct { exchange in
                    exchange.respond(topics.batch(exchange.request, add: true, nowMs: Clock.nowMs()))
                }),
            GatewayRoute(
                [.post], "/iid/v1:batchRemove", maxBodySize: 1 << 20,
                handling: .direct { exchange in
                    exchange.respond(topics.batch(exchange.request, add: false, nowMs: Clock.nowMs()))
                }),
            GatewayRoute(
                [.post], "/iid/v1/{token}/rel/topics/{topic}", maxBodySize: 4096,
                handling: .direct { exchange in
                    exchange.respond(
                        topics.relate(
                            exchange.request, token: FCMGateway.decoded(exchange.parameter(0)),
                            topic: FCMGateway.decoded(exchange.parameter(1)), nowMs: Clock.nowMs()))
                }),
            GatewayRoute(
                [.get], "/iid/info/{token}", maxBodySize: 64 * 1024,
                handling: .direct { exchange in
                    let details = exchange.request.queryParameter("details") == "true"
                    exchange.respond(
                        topics.info(
                            exchange.request, token: FCMGateway.decoded(exchange.parameter(0)), details: details,
                            nowMs: Clock.nowMs()))
                }),
            GatewayRoute(
                [.post], "/v1/projects/{project}/registrations/{token}/topicSubscriptions", maxBodySize: 4096,
                handling: .direct { exchange in
                    let topic =
                        exchange.request.queryParameter("topic_name")
                        .map { PercentEncoding.decode(Array($0.utf8)[...], plusAsSpace: true) } ?? ""
                    registration(exchange, topic, true)
                }),
            GatewayRoute(
                [.delete], "/v1/projects/{project}/registrations/{token}/topicSubscriptions/{topic}", maxBodySize: 4096,
                handling: .direct { exchange in registration(exchange, FCMGateway.decoded(exchange.parameter(2)), false) }),
            // Shut down in July 2024: stale clients fail here as they would in production (the
            // legacy send answers each target DeprecatedApi; the batch endpoint is gone).
            GatewayRoute(
                nil, "/fcm/send", maxBodySize: 64 * 1024,
                handling: .direct { exchange in
                    guard exchange.request.method == .post else {
                        return exchange.respond(
                            FCMGateway.retired(
                                "The legacy FCM HTTP API (/fcm/send) was shut down in July 2024. Use the HTTP v1 API: POST /v1/projects/{project}/messages:send."
                            ))
                    }
                    exchange.respond(FCMLegacyAPI.send(exchange.request))
                }),
            GatewayRoute(
                nil, "/batch", maxBodySize: 1 << 20,
                handling: .direct { exchange in
                    exchange.respond(
                        FCMGateway.retired(
                            "The FCM batch API (/batch) was shut down in July 2024. Send each message with POST /v1/projects/{project}/messages:send."
                        ))
                }),
        ]
        // Shedding load (the server's buffer budget spent): Google's retryable 503.
        return routes.map { route in
            var route = route
            if route.unavailable == nil {
                route.unavailable = { _ in
                    var response = FCMError.fcm(.unavailable).response
                    response.headers.add(name: "retry-after", value: "1")
                    return response
                }
            }
            if route.bodyTooLarge == nil { route.bodyTooLarge = { _ in FCMError.tooLarge.response } }
            return route
        }
    }

    static let oauthTooLarge: @Sendable (Request) -> Response = { _ in
        FCMOAuth.error("invalid_request", "The request body is too large.", status: 413)
    }

    static let oauthUnavailable: @Sendable (Request) -> Response = { _ in
        var response = FCMOAuth.error("temporarily_unavailable", "The server is overloaded; retry later.", status: 503)
        response.headers.add(name: "retry-after", value: "1")
        return response
    }

    static func retired(_ message: String) -> Response {
        FCMError(httpStatus: 404, status: "NOT_FOUND", message: message).response
    }

    static func decoded(_ segment: ArraySlice<UInt8>) -> String { PercentEncoding.decode(segment, plusAsSpace: false) }

    /// A fresh connection's FCM state (scratch buffers, the bearer verdict, a quota lease).
    public func makeConnectionState() -> FCMConnectionState { FCMConnectionState() }

    /// The connection's FCM state, for the routes outside the pipeline (topic subscriptions
    /// share its bearer-token cache). Same slot as the pipeline's.
    static func connectionState(_ connection: ConnectionContext) -> FCMConnectionState {
        if let state = connection[slot: PushProvider.fcm.index] { return unsafeDowncast(state, to: FCMConnectionState.self) }
        let state = FCMConnectionState()
        connection[slot: PushProvider.fcm.index] = state
        return state
    }

    /// Connections whose SNI names fcm.googleapis.com get FCM's concurrent streams (`--fcm-streams`).
    public func setUpConnection(_ connection: ConnectionContext) -> Bool {
        guard connection.serverName == "fcm.googleapis.com" else { return false }
        connection.initialMaxConcurrentStreams = rules.configuration.streams
        return true
    }

    /// Validates a send as FCM does: auth, quota, the message's schema and rules, the target's registration.
    @inlinable @inline(__always)
    public func decide(
        _ request: Request, on exchange: Exchange, state: FCMConnectionState, nowMs: Int64, into decision: inout FCMSendDecision
    ) {
        // The segment from the request the pipeline holds (`exchange.parameter` would read the
        // exchange's request again: a copy of it, three retains).
        rules.send(request, projectSegment: exchange.parameters.value(0, in: request.path), state: state, nowMs: nowMs, into: &decision)
    }

    /// The token, topic or condition sent to, and the project.
    @inlinable @inline(__always)
    public func subject(of decision: FCMSendDecision, request: Request) -> PushSubject {
        if let token = decision.recipientToken(in: request.body) {
            return PushSubject(token: token, topic: decision.topicLabel.map { Array($0.utf8)[...] }, scope: decision.project)
        }
        return FCMGateway.namedSubject(of: decision, request: request)
    }

    /// A send not delivered to a token: the token, fid, topic or condition the request named,
    /// so a rejected send is journaled, streamed and counted under its recipient (a request
    /// refused before its body was read, for its credentials or the quota, is read for it here).
    @usableFromInline
    static func namedSubject(of decision: FCMSendDecision, request: Request) -> PushSubject {
        let body = request.body
        if let r = decision.namedRecipient {
            return PushSubject(token: body[r], topic: nil, scope: decision.project)
        }
        if let label = decision.topicLabel {
            return PushSubject(token: [], topic: Array(label.utf8)[...], scope: decision.project)
        }
        guard !decision.accepted, !body.isEmpty else { return PushSubject(token: [], topic: nil, scope: decision.project) }
        // `{"message": {"token" | "fid" | "topic" | "condition": "..."}}`, read as it stands.
        var named: (token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?) = ([], nil)
        body.withUnsafeBytes { raw in
            var tokens: [JSONToken] = []
            var limits = JSONLimits()
            limits.maxTokens = 4096
            guard JSONParser.parse(raw, into: &tokens, limits: limits) == nil, tokens.first?.kind == .object else { return }
            let v = JSONView(bytes: raw, tokens: tokens)
            guard let m = v.member(0, "message"), v.tokens[m].kind == .object else { return }
            func text(_ key: StaticString) -> ArraySlice<UInt8>? {
                guard let i = v.member(m, key), v.tokens[i].kind == .string, !v.tokens[i].escaped else { return nil }
                let t = v.tokens[i]
                return body[Int(t.start)..<Int(t.end)]
            }
            if let t = text("token") ?? text("fid") {
                named.token = t
            } else if let t = text("topic") ?? text("condition") {
                named.topic = t
            }
        }
        return PushSubject(token: named.token, topic: named.topic, scope: decision.project)
    }

    /// FCM has no per-token limit (its per-project quota is part of `decide`): this is asked only
    /// when the fan-out worker has no room for another topic or condition send (FCM allows 1,000
    /// concurrent fan-outs per project), answered as FCM's quota error.
    /// Out of line: inlined, its error construction made the request path copy the decision.
    @inline(never)
    public func rateLimited(_ decision: inout FCMSendDecision) {
        decision.error = .quota(project: decision.project, retryAfterSeconds: 1)
        decision.fanOut = nil
    }

    /// The accepted message's id (its `name`'s last part derives from it).
    @inlinable @inline(__always)
    public func notificationID(for decision: FCMSendDecision, request: Request, state: FCMConnectionState) -> UUIDValue {
        UUIDValue.random(&state.rng)
    }

    /// A token (or fid) send reaches its device here; a topic or condition send is a fan-out.
    @inlinable @inline(__always)
    public func forEachAcceptedPush(
        _ decision: FCMSendDecision, request: Request, id: UUIDValue, state: FCMConnectionState,
        nowMs: Int64, _ body: AcceptedPushSink
    ) {
        guard let token = decision.recipientToken(in: request.body) else { return }
        let flags = AcceptedPushFlags(payloadIsJSON: true, appliesDeviceEffects: true)
        let payload = request.body[decision.message.messageRange]
        if decision.recipientIsIOS {
            let delivery = FCMGateway.iOSDelivery(project: decision.project, token: token, id: id, message: payload, nowMs: nowMs)
            return body(delivery, nil, decision.message.warnings, nil, flags)
        }
        // Built here, whole, by one initialiser (a Delivery returned from a helper was copied once
        // more per push; one set field by field after its initialiser, once more too).
        let delivery = Delivery(
            provider: .fcm, platform: .android, tokenBytes: token, appBytes: nil, environment: decision.project,
            notificationID: id, messageName: nil, receivedAtMs: nowMs, payload: payload, tokenKey: decision.tokenKey,
            hasData: decision.message.hasData, alerts: decision.message.hasNotification ? .notification : [],
            collapseID: decision.message.collapseKey, expiresAtMs: nowMs + decision.message.ttlSeconds * 1000)
        body(delivery, nil, decision.message.warnings, nil, flags)
    }

    /// Whether the send goes to a topic or condition (fanned out off the loop).
    @inlinable @inline(__always)
    public func fansOut(_ decision: FCMSendDecision) -> Bool { decision.fanOut != nil }

    /// A topic or condition send: every subscriber, one record per device under the message's
    /// name, resolved and delivered by the fan-out worker after the answer.
    public func fanOut(_ decision: FCMSendDecision, request: Request, id: UUIDValue, nowMs: Int64) -> FanOutJob? {
        guard let target = decision.fanOut else { return nil }
        let rules = self.rules
        let project = decision.project
        let message = decision.message
        let payload = Array(request.body[decision.message.messageRange])
        let devices = rules.devices
        return FanOutJob(
            provider: .fcm, notificationID: id, topic: decision.topicLabel.map { Array($0.utf8) }, headers: request.headers,
            warnings: message.warnings, payloadIsJSON: true,
            recipients: { each in rules.forEachRecipient(of: target, project: project, each) },
            delivery: { token, index in
                FCMGateway.delivery(
                    message, project: project, token: Array(token.utf8)[...], id: FanOutJob.recipientID(id, index),
                    payload: payload[...], nowMs: nowMs, toIOS: devices.isIOS(token: token))
            })
    }

    /// What the device layer receives for one recipient of a fan-out: the message itself for
    /// an Android app, the APNs notification FCM makes of it for an iOS app.
    static func delivery(
        _ message: borrowing FCMParsedMessage, project: String, token: ArraySlice<UInt8>, id: UUIDValue, payload: ArraySlice<UInt8>,
        nowMs: Int64, toIOS: Bool
    ) -> Delivery {
        if toIOS { return iOSDelivery(project: project, token: token, id: id, message: payload, nowMs: nowMs) }
        var delivery = Delivery(
            provider: .fcm, platform: .android, tokenBytes: token, appBytes: nil, environment: project,
            notificationID: id, messageName: nil, receivedAtMs: nowMs, payload: payload)
        delivery.hasData = message.hasData
        if message.hasNotification { delivery.alerts = .notification }
        delivery.collapseID = message.collapseKey
        delivery.expiresAtMs = nowMs + message.ttlSeconds * 1000
        return delivery
    }

    /// An iOS app's recipient: the APNs notification (`FCMAPNsMapping`), to the app's device,
    /// or to the Live Activity `apns.live_activity_token` names.
    @usableFromInline
    static func iOSDelivery(project: String, token: ArraySlice<UInt8>, id: UUIDValue, message: ArraySlice<UInt8>, nowMs: Int64) -> Delivery
    {
        let mapped = FCMAPNsMapping.map(message: message, messageID: PushNotification.fcmMessageID(id, receivedAtMs: nowMs))
        var delivery = Delivery(
            provider: .fcm, platform: .ios, tokenBytes: mapped.liveActivityToken.map { Array($0.utf8)[...] } ?? token, appBytes: nil,
            environment: project, notificationID: id, messageName: nil, receivedAtMs: nowMs, payload: mapped.payload[...])
        delivery.mutableContent = mapped.mutableContent
        delivery.contentAvailable = mapped.contentAvailable
        delivery.alerts = mapped.alerts
        delivery.collapseID = mapped.collapseID
        delivery.expiresAtMs = mapped.expiration.map { $0 * 1000 }
        return delivery
    }

    /// `{"name": "projects/P/messages/ID"}`, or Google's error envelope.
    @inlinable @inline(__always)
    public func response(
        for decision: FCMSendDecision, request: Request, id: UUIDValue, state: FCMConnectionState,
        nowMs: Int64
    ) -> Response {
        rules.response(decision, id: id, nowMs: nowMs)
    }

    /// The scratch's tokens when this request's body was parsed in full (not recalled by the
    /// message memo, whose tokens are another body's).
    @inlinable @inline(__always)
    public func parsedBody(of decision: FCMSendDecision, state: FCMConnectionState) -> JSONTokenBuffer? {
        decision.accepted && state.scratch.tokensAreLastBody ? state.scratch.tokens : nil
    }

    /// What the journal and metrics record: status, error code, the message kept.
    @inlinable @inline(__always)

    public func outcome(of decision: FCMSendDecision, request: Request) -> PushOutcome {
        guard !decision.accepted, let error = decision.error else {
            return PushOutcome(
                status: 200, reason: "", payload: request.body[decision.message.messageRange], warnings: decision.message.warnings)
        }
        return PushOutcome(
            status: error.httpStatus, reason: error.errorCode?.rawValue ?? error.status, payload: request.body[...],
            warnings: decision.message.warnings)
    }

    /// FCM's error envelope for the code given (or the one the status implies); a bare 502 is
    /// Google's front-end HTML page, not JSON.
    public var hostNames: [String] { FCMGateway.hostNames }

    /// Google's 403 for a request refused to a browser page of another site.
    public func browserRefusal(_ request: Request, reason: String) -> Response {
        FCMError(httpStatus: 403, status: "PERMISSION_DENIED", message: reason).response
    }

    /// A fault's answer in Google's error envelope (or an OAuth error at the token endpoint).
    public func injectedAnswer(_ answer: InjectedAnswer, request: Request) -> (response: Response, reason: String) {
        (FCMGateway.injectedResponse(answer), answer.errorCode ?? "")
    }

    static func injectedResponse(_ answer: InjectedAnswer) -> Response {
        if answer.status == 502 && answer.errorCode == nil {
            var headers = HTTPFields()
            headers.add(name: "content-type", value: "text/html; charset=UTF-8")
            return Response(status: 502, headers: headers, body: FCMGateway.serverErrorPage)
        }
        var error: FCMError
        if let code = answer.errorCode.flatMap(FCMErrorCode.init(rawValue:)) {
            error = .fcm(code)
        } else {
            let status = answer.status ?? 500
            let code: FCMErrorCode =
                switch status {
                case 400: .invalidArgument
                case 401: .thirdPartyAuthError
                case 403: .senderIDMismatch
                case 404: .unregistered
                case 429: .quotaExceeded
                case 503: .unavailable
                default: .internalError
                }
            error = .fcm(code)
            error.httpStatus = status
        }
        if let status = answer.status { error.httpStatus = status }
        var response = error.response
        if let retryAfter = answer.retryAfter { response.headers.add(name: "retry-after", value: String(retryAfter)) }
        return response
    }

    /// Google's front end fails with an HTML page.
    static let serverErrorPage = Array(
        ("<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  <title>Error 502 (Server Error)!!1</title>\n"
            + "  <p><b>502.</b> <ins>That’s an error.</ins>\n  <p>The server encountered a temporary error and could not "
            + "complete your request.<p>Please try again in 30 seconds.  <ins>That’s all we know.</ins>\n").utf8)

    /// FCM takes no connection actions after an answer.
    public struct ConnectionActions: Sendable {
        /// No actions.
        @inlinable public init() {}
    }

    /// FCM closes nothing after a send.
    @inlinable @inline(__always)
    public func connectionActions(after decision: FCMSendDecision) -> ConnectionActions { ConnectionActions() }
    /// Nor after a fault's answer.
    public func connectionActionsAfterInjectedAnswer() -> ConnectionActions { ConnectionActions() }
    /// Nothing to do.
    @inlinable @inline(__always)
    public static func perform(_ actions: ConnectionActions, on connection: ConnectionContext) {}
    /// Never acts.
    public static func acts(_ actions: ConnectionActions) -> Bool { false }

    /// The reason as given (no JSON).
    public static func goAwayDebugData(reason: String) -> [UInt8] { Array(reason.utf8) }
}

extension FCMSendDecision: PushDecision {}
