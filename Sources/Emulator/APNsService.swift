import APNs
import Faults
import Fleet
import Journal
import PushCore
import Transport

/// Wires the APNs provider to the transport: per-connection state, the decision, the hand-off
/// of accepted notifications, the response, and the connection actions APNs takes
/// (raising SETTINGS_MAX_CONCURRENT_STREAMS after the first valid token, GOAWAY).
struct APNsService: Sendable {
    let provider: APNsProvider
    let log: NotificationLog
    let devices: DeviceStore
    let faults: FaultHandling
    /// `--apns-token-rate`: pushes per minute per device token before 429 TooManyRequests.
    let tokenRate: TokenRateLimiter?
    /// `--apns-adaptive-streams`: halve the stream limit after an error, raise it by one per success.
    let adaptiveStreams: Bool
    /// The journal before an answer leaves, the metrics after.
    let answers: AnswerRecording

    func register(_ r: inout Router) {
        let configuration = provider.configuration
        r.add(nil, "/3/*", maxBodySize: APNsPushType.voip.maxPayloadSize,
              bodyTooLarge: { APNsProvider.errorResponse(.payloadTooLarge, request: $0, configuration: configuration) }) { ex in
            handle(ex)
        }
    }

    func handle(_ ex: Exchange) {
        let started = Clock.monotonicNanoseconds()
        let ctx = ex.connection
        // slot0 belongs to APNs (see Emulator.router).
        let state: APNsConnectionState
        if let s = ctx.slot0 {
            state = unsafeDowncast(s, to: APNsConnectionState.self)
        } else {
            state = APNsConnectionState()
            ctx.slot0 = state
        }
        let now = ex.eventLoop.nowMs
        let request = ex.request
        var d = APNsDecision(environment: .sandbox)
        provider.decide(request, connection: APNsConnectionInfo(serverName: ctx.serverName, peerCertificate: ctx.peerCertificate),
                        state: state, nowMs: now, into: &d)
        // Faults come after the provider's decision: a rule may replace its answer.
        let fault = faults.effect(FaultContext(provider: .apns, token: d.token, topic: d.topic, project: d.environment.rawValue,
                                               path: request.path, headers: request.headers, device: faults.lookup),
                                  headers: request.headers, loop: ex.eventLoop.index, nowMs: now)
        if let f = fault, f.effect.answers {
            let r = FaultHandling.apnsResponse(f.effect, request: request, configuration: provider.configuration)
            let reason = f.effect.reason ?? FaultHandling.defaultAPNsReason(r.status).rawValue
            commit(ex, request, d, now, started, status: r.status, reason: reason, id: nil) { [self] in
                if adaptiveStreams { APNsService.adapt(ctx, success: false, top: provider.configuration.streamsAfterAuth) }
                let delay = faults.send(r, ex, effect: f, provider: .apns, goAwayJSON: true)
                answers.observe(ex, started, status: r.status, reason: reason, delay: delay)
            }
            return
        }
        if d.accepted, let limiter = tokenRate, !limiter.allow(d.token, nowMs: now) {
            d.reason = .tooManyRequests
        }
        var acceptedID: UUIDValue?
        if d.accepted {
            let id = d.generatedID ?? request.headers.first("apns-id").flatMap { UUIDValue.parseCanonicalLowercase($0) }
                ?? UUIDValue.random(&state.rng)
            acceptedID = id
            log.append(shard: ex.eventLoop.index, id: id, provider: .apns, receivedAtMs: now, environment: d.environment.rawValue,
                       token: d.token, topic: d.topic, headers: request.headers, payload: request.body[...],
                       payloadIsJSON: d.summary.isJSON, warnings: d.warnings)
            var delivery = Delivery(provider: .apns, platform: .ios, tokenBytes: d.token,
                                    appBytes: d.bundle,
                                    environment: d.environment.rawValue, notificationID: id, messageName: nil,
                                    receivedAtMs: now, payload: request.body[...])
            delivery.tokenKey = d.tokenKey
            delivery.mutableContent = d.summary.mutableContent
            delivery.contentAvailable = d.summary.contentAvailable
            delivery.collapseID = d.collapseID.map { String(decoding: $0, as: UTF8.self) }
            delivery.expiresAtMs = d.expiration.map { $0 * 1000 }
            devices.deliver(delivery, parsedPayload: d.summary.isJSON ? state.tokens : nil)
            faults.applyState(fault, token: d.token)
        }
        let response = provider.response(d, request: request, state: state)
        let status = d.status, reason = d.reason.map { provider.configuration.reasonString($0) } ?? ""
        let raise = d.raiseStreamsTo, goAway = d.goAwayReason, accepted = d.accepted
        // The answer goes out once the journal holds the record (`--durability strict`). It keeps
        // only what it uses (it may wait for a commit, and every reference kept costs a retain).
        let engine = faults.engine, metrics = answers.metrics
        let adaptTop: UInt32 = adaptiveStreams ? provider.configuration.streamsAfterAuth : 0
        commit(ex, request, d, now, started, status: status, reason: reason, id: acceptedID) {
            let delay = FaultHandling.send(response, ex, effect: fault, provider: .apns, goAwayJSON: true, engine: engine)
            AnswerRecording.observe(metrics, .apns, ex, started, status: status, reason: reason, delay: delay)
            // The connection through the exchange: capturing it as well cost a retain per answer.
            if let n = raise, ex.connection.maxConcurrentStreams < n { ex.connection.setMaxConcurrentStreams(n) }
            if adaptTop > 0 { APNsService.adapt(ex.connection, success: accepted, top: adaptTop) }
            if let reason = goAway {
                ex.connection.goAway(lastStreamID: nil, errorCode: 0, debugData: Array("{\"reason\":\"\(reason)\"}".utf8))
            }
        }
    }

    /// Sends `answer` once the journal holds the request's record (see `AnswerRecording.commit`).
    /// `request` is `ex.request`, passed on rather than copied out again.
    func commit(_ ex: Exchange, _ request: Request, _ d: APNsDecision, _ now: Int64, _ started: UInt64, status: Int,
                reason: String, id: UUIDValue?, _ answer: @escaping @Sendable () -> Void) {
        answers.commit(atMs: now, provider: .apns, connection: ex.connection.id, environment: d.environment.rawValue,
                       token: d.token.isEmpty ? APNsService.pathToken(request) : d.token, topic: d.topic, status: status,
                       reason: reason, latencyUs: Int64((Clock.monotonicNanoseconds() - started) / 1000), headers: request.headers,
                       payload: request.body[...], warnings: d.warnings, notificationID: id, ex, answer)
    }

    static let devicePrefix: [UInt8] = Array("/3/device/".utf8)

    /// The token of a request rejected before its token was read: from the path, if any.
    static func pathToken(_ request: Request) -> ArraySlice<UInt8> {
        let p = request.path
        return p.starts(with: devicePrefix) ? p.dropFirst(devicePrefix.count) : []
    }

    /// `--apns-adaptive-streams`: APNs lowers a connection's stream limit after errors and raises
    /// it again after successes.
    static func adapt(_ ctx: ConnectionContext, success: Bool, top: UInt32) {
        guard ctx.maxConcurrentStreams > 1 || success else { return }
        let cur = ctx.maxConcurrentStreams
        if success {
            if cur < top { ctx.setMaxConcurrentStreams(cur + 1) }
        } else {
            ctx.setMaxConcurrentStreams(max(1, cur / 2))
        }
    }

    /// Connection setup: token connections to an APNs host start with one stream until a valid
    /// token arrives; certificate connections start at the full limit.
    static func sessionSetup(_ configuration: APNsConfiguration) -> @Sendable (ConnectionContext) -> Void {
        { ctx in
            guard let sni = ctx.serverName, APNsEnvironment.forHost(sni) != nil else { return }
            ctx.initialMaxConcurrentStreams = ctx.peerCertificate == nil ? configuration.streamsBeforeAuth
                                                                         : configuration.streamsAfterAuth
        }
    }
}
