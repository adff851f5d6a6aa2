import FCM
import Faults
import Fleet
import Journal
import PushCore
import Transport

/// Wires the FCM provider to the transport: the send route, the OAuth token endpoint, topic
/// management, the retired legacy APIs, and the hand-off of accepted messages (one record per
/// recipient device) to the notification log.
struct FCMService: Sendable {
    let provider: FCMProvider
    let oauth: FCMOAuth
    let topics: FCMTopicManagement
    let log: NotificationLog
    let devices: DeviceStore
    let faults: FaultHandling
    /// The journal before an answer leaves, the metrics after.
    let answers: AnswerRecording

    static let maxBody = 64 * 1024

    init(provider: FCMProvider, log: NotificationLog, devices: DeviceStore, faults: FaultHandling, metrics: Metrics, journal: Journal?) {
        answers = AnswerRecording(provider: .fcm, journal: journal, metrics: metrics)
        self.devices = devices
        self.faults = faults
        self.provider = provider
        self.oauth = FCMOAuth(accounts: provider.accounts, tokens: provider.tokens, lifetime: provider.configuration.tokenLifetime)
        self.topics = FCMTopicManagement(provider: provider)
        self.log = log
    }

    /// slot1 belongs to FCM (see Emulator.router).
    static func state(_ ctx: ConnectionContext) -> FCMConnectionState {
        if let s = ctx.slot1 { return unsafeDowncast(s, to: FCMConnectionState.self) }
        let s = FCMConnectionState()
        ctx.slot1 = s
        return s
    }

    func register(_ r: inout Router) {
        r.add(.post, "/v1/projects/{project}/messages:send", maxBodySize: FCMService.maxBody,
              bodyTooLarge: { _ in FCMError.tooLarge.response }) { ex in send(ex) }
        r.add(.post, "/token", maxBodySize: 64 * 1024) { ex in token(ex) }
        r.add(.post, "/oauth2/v4/token", maxBodySize: 64 * 1024) { ex in token(ex) }
        r.add(.post, "/iid/v1:batchAdd", maxBodySize: 1 << 20) { ex in
            ex.respond(topics.batch(ex.request, add: true, nowMs: Clock.nowMs()))
        }
        r.add(.post, "/iid/v1:batchRemove", maxBodySize: 1 << 20) { ex in
            ex.respond(topics.batch(ex.request, add: false, nowMs: Clock.nowMs()))
        }
        r.add(.post, "/iid/v1/{token}/rel/topics/{topic}", maxBodySize: 4096) { ex in
            ex.respond(topics.relate(ex.request, token: FCMService.decoded(ex.parameter(0)), topic: FCMService.decoded(ex.parameter(1)),
                                     nowMs: Clock.nowMs()))
        }
        r.add(.get, "/iid/info/{token}") { ex in
            let details = ex.request.queryParameter("details") == "true"
            ex.respond(topics.info(ex.request, token: FCMService.decoded(ex.parameter(0)), details: details, nowMs: Clock.nowMs()))
        }
        r.add(.post, "/v1/projects/{project}/registrations/{token}/topicSubscriptions", maxBodySize: 4096) { ex in
            let topic = ex.request.queryParameter("topic_name").map { percentDecode($0) } ?? ""
            registration(ex, topic: topic, subscribe: true)
        }
        r.add(.delete, "/v1/projects/{project}/registrations/{token}/topicSubscriptions/{topic}", maxBodySize: 4096) { ex in
            registration(ex, topic: FCMService.decoded(ex.parameter(2)), subscribe: false)
        }
        // Shut down in July 2024: stale clients fail here as they would in production.
        r.add(nil, "/fcm/send", maxBodySize: 64 * 1024) { ex in
            ex.respond(FCMService.retired("The legacy FCM HTTP API (/fcm/send) was shut down in July 2024. Use the HTTP v1 API: POST /v1/projects/{project}/messages:send."))
        }
        r.add(nil, "/batch", maxBodySize: 1 << 20) { ex in
            ex.respond(FCMService.retired("The FCM batch API (/batch) was shut down in July 2024. Send each message with POST /v1/projects/{project}/messages:send."))
        }
    }

    static func retired(_ message: String) -> Response {
        FCMError(httpStatus: 404, status: "NOT_FOUND", message: message).response
    }

    static func decoded(_ s: ArraySlice<UInt8>) -> String { PercentEncoding.decode(s, plusAsSpace: false) }

    func send(_ ex: Exchange) {
        let started = Clock.monotonicNanoseconds()
        let state = FCMService.state(ex.connection)
        let now = ex.eventLoop.nowMs
        let request = ex.request
        let d = provider.send(request, projectSegment: ex.parameter(0), state: state, nowMs: now)
        let id = UUIDValue.random(&state.rng)
        let target: ArraySlice<UInt8> = d.tokenRange.map { request.body[$0] } ?? []
        let fault = faults.effect(FaultContext(provider: .fcm, token: target, topic: d.topicLabel.map { Array($0.utf8)[...] },
                                               project: d.project, path: request.path, headers: request.headers,
                                               device: faults.lookup),
                                  headers: request.headers, loop: ex.eventLoop.index, nowMs: now)
        if let f = fault, f.effect.answers {
            let r = FaultHandling.fcmResponse(f.effect)
            let reason = f.effect.errorCode ?? ""
            commit(ex, request, d, now, started, target: target, status: r.status, reason: reason, id: nil) { [self] in
                let delay = faults.send(r, ex, effect: f, provider: .fcm, goAwayJSON: false)
                answers.observe(ex, started, status: r.status, reason: reason, delay: delay)
            }
            return
        }
        if d.accepted {
            let payload = request.body[d.message.messageRange]
            if let r = d.tokenRange {
                log.append(shard: ex.eventLoop.index, id: id, provider: .fcm, receivedAtMs: now, environment: d.project,
                           token: request.body[r], topic: nil, headers: request.headers, payload: payload, payloadIsJSON: true,
                           warnings: d.message.warnings)
                deliver(d, token: request.body[r], id: id, payload: payload, now: now)
                faults.applyState(fault, token: request.body[r])
            }
            // A topic or condition send: one record per device, all under the message's name.
            let topic = d.topicLabel.map { Array($0.utf8)[...] }
            for (n, token) in d.recipients.enumerated() {
                let rid = UUIDValue(high: id.high, low: id.low &+ UInt64(n))
                log.append(shard: ex.eventLoop.index, id: rid, provider: .fcm,
                           receivedAtMs: now, environment: d.project, token: Array(token.utf8)[...], topic: topic,
                           headers: request.headers, payload: payload, payloadIsJSON: true, warnings: d.message.warnings)
                deliver(d, token: Array(token.utf8)[...], id: rid, payload: payload, now: now)
            }
        }
        let response = provider.response(d, id: id, nowMs: now)
        let status = d.error?.httpStatus ?? 200, reason = d.error.map { $0.errorCode?.rawValue ?? $0.status } ?? ""
        // The answer goes out once the journal holds the record (`--durability strict`).
        // (Keeping only what the answer uses: see APNsService.)
        let engine = faults.engine, metrics = answers.metrics
        commit(ex, request, d, now, started, target: target, status: status, reason: reason, id: d.accepted ? id : nil) {
            let delay = FaultHandling.send(response, ex, effect: fault, provider: .fcm, goAwayJSON: false, engine: engine)
            AnswerRecording.observe(metrics, .fcm, ex, started, status: status, reason: reason, delay: delay)
        }
    }

    /// Sends `answer` once the journal holds the request's record (see `AnswerRecording.commit`).
    /// `request` is `ex.request`.
    func commit(_ ex: Exchange, _ request: Request, _ d: FCMSendDecision, _ now: Int64, _ started: UInt64, target: ArraySlice<UInt8>,
                status: Int, reason: String, id: UUIDValue?, _ answer: @escaping @Sendable () -> Void) {
        answers.commit(atMs: now, provider: .fcm, connection: ex.connection.id, environment: d.project, token: target,
                       topic: d.topicLabel.map { Array($0.utf8)[...] }, status: status, reason: reason,
                       latencyUs: Int64((Clock.monotonicNanoseconds() - started) / 1000), headers: request.headers,
                       payload: d.accepted ? request.body[d.message.messageRange] : request.body[...],
                       warnings: d.message.warnings, notificationID: id, ex, answer)
    }

    /// The hand-off to the simulated device (an Android app with the FCM SDK).
    func deliver(_ d: FCMSendDecision, token: ArraySlice<UInt8>, id: UUIDValue, payload: ArraySlice<UInt8>, now: Int64) {
        // The message name is derived from (project, id, time) when an SDK needs it.
        var delivery = Delivery(provider: .fcm, platform: .android, tokenBytes: token, appBytes: nil, environment: d.project,
                                notificationID: id, messageName: nil, receivedAtMs: now, payload: payload)
        delivery.hasData = d.message.hasData
        delivery.collapseID = d.message.collapseKey
        delivery.expiresAtMs = now + d.message.ttlSeconds * 1000
        devices.deliver(delivery)
    }

    func token(_ ex: Exchange) {
        let req = ex.request
        // A rule matching the token endpoint (`"path":"/token"`) answers in OAuth's shape:
        // `{"errorCode":"invalid_grant","reason":"..."}` or any other OAuth error code.
        if let f = faults.effect(FaultContext(provider: .fcm, token: [], topic: nil, project: nil, path: req.path,
                                              headers: req.headers, device: faults.lookup),
                                 headers: req.headers, loop: ex.eventLoop.index, nowMs: Clock.nowMs()), f.effect.answers {
            let e = f.effect
            var r = FCMOAuth.error(e.errorCode ?? "invalid_grant", e.reason ?? "Invalid JWT Signature.", status: e.status ?? 400)
            if let ra = e.retryAfter { r.headers.add(name: "retry-after", value: String(ra)) }
            faults.send(r, ex, effect: f, provider: .fcm, goAwayJSON: false)
            return
        }
        ex.respond(oauth.respond(body: req.body, contentType: req.headers.firstString("content-type"),
                                 authority: req.authority.map { String(decoding: $0, as: UTF8.self) },
                                 nowSeconds: Clock.nowSeconds()))
    }

    func registration(_ ex: Exchange, topic: String, subscribe: Bool) {
        let project = provider.accounts.projectID(forPathSegment: FCMService.decoded(ex.parameter(0)))
        ex.respond(topics.registration(ex.request, project: project, token: FCMService.decoded(ex.parameter(1)), topic: topic,
                                       subscribe: subscribe, allowMissing: ex.request.queryParameter("allow_missing") == "true",
                                       state: FCMService.state(ex.connection), nowMs: Clock.nowMs()))
    }

    /// Connections whose SNI names fcm.googleapis.com get FCM's 100 concurrent streams.
    static func applies(toServerName sni: String) -> Bool { sni == "fcm.googleapis.com" }
}
