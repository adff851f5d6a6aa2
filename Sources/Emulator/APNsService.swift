import APNs
import Fleet
import PushCore
import Transport

/// Wires the APNs provider to the transport: per-connection state, the decision, the hand-off
/// of accepted notifications, the response, and the connection actions APNs takes
/// (raising SETTINGS_MAX_CONCURRENT_STREAMS after the first valid token, GOAWAY).
struct APNsService: Sendable {
    let provider: APNsProvider
    let log: NotificationLog
    let devices: DeviceStore

    func register(_ r: inout Router) {
        let configuration = provider.configuration
        r.add(nil, "/3/*", maxBodySize: APNsPushType.voip.maxPayloadSize,
              bodyTooLarge: { APNsProvider.errorResponse(.payloadTooLarge, request: $0, configuration: configuration) }) { ex in
            handle(ex)
        }
    }

    func handle(_ ex: Exchange) {
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
        let d = provider.decide(request, connection: APNsConnectionInfo(serverName: ctx.serverName, peerCertificate: ctx.peerCertificate),
                                state: state, nowMs: now)
        if d.accepted {
            let id = d.generatedID ?? request.headers.first("apns-id").flatMap { UUIDValue.parseCanonicalLowercase($0) }
                ?? UUIDValue.random(&state.rng)
            log.append(shard: ex.eventLoop.index, id: id, provider: .apns, receivedAtMs: now, environment: d.environment.rawValue,
                       token: d.token, topic: d.topic, headers: request.headers, payload: request.body[...],
                       payloadIsJSON: d.summary.isJSON, warnings: d.warnings)
            var delivery = Delivery(provider: .apns, platform: .ios, token: String(decoding: d.token, as: UTF8.self),
                                    app: d.topic.flatMap { t in d.pushType.bundleLength(ofTopic: t).map { String(decoding: t.prefix($0), as: UTF8.self) } },
                                    environment: d.environment.rawValue, notificationID: id, messageName: id.description,
                                    receivedAtMs: now, payload: request.body)
            delivery.mutableContent = d.summary.mutableContent
            delivery.contentAvailable = d.summary.contentAvailable
            delivery.collapseID = request.headers.firstString("apns-collapse-id")
            if let e = request.headers.first("apns-expiration"), let secs = Int64(String(decoding: e, as: UTF8.self)) {
                delivery.expiresAtMs = secs * 1000
            }
            devices.deliver(delivery)
        }
        ex.respond(provider.response(d, request: request, state: state))
        if let n = d.raiseStreamsTo, ctx.maxConcurrentStreams < n { ctx.setMaxConcurrentStreams(n) }
        if let reason = d.goAwayReason {
            ctx.goAway(lastStreamID: nil, errorCode: 0, debugData: Array("{\"reason\":\"\(reason)\"}".utf8))
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
