import PushCore
import Runtime
import Transport

/// The verdict on one Web Push request.
public struct WebPushDecision: PushDecision {
    public var service: WebPushService = .fcm
    public var token: ArraySlice<UInt8> = []
    public var refusal: WebPushRefusal?
    public var facts: WebPushAccepted?
    public var subscription: WebPushSubscription?

    /// Decided and not refused since (`rateLimited` clears it).
    public var accepted = false

    public init() {}
}

/// Per connection: the message-id generator.
public final class WebPushConnectionState {
    var rng = FastRandom()
    /// The last VAPID header verified on this connection.
    let vapid = VAPIDCache()
    public init() {}
}

/// Web Push as a push gateway: the four services' endpoints (`/fcm/send/{token}` and `/wp/`,
/// `/wpush/v1|v2/{token}`, Apple's `/{token}` under its host or `/web.push.apple.com/{token}`
/// locally, WNS's `/w/?token=`), each decided by `WebPushService.check` and answered in the
/// service's format; an accepted message is decrypted as its browser would (RFC 8291) and
/// delivered to the subscription's simulated browser with the plaintext as its payload.
public struct WebPushGateway: PushGateway {
    public let provider = PushProvider.webpush
    public let subscriptions: WebPushSubscriptions
    /// The browsers' last few readings (a sender that repeats a message is not decrypted again).
    let memo = DecryptMemo()
    /// Safari's count of each subscription's pushes that showed nothing.
    let silent = SilentPushCounts()

    public init(subscriptions: WebPushSubscriptions) { self.subscriptions = subscriptions }

    /// The services' host names (what the proxy intercepts).
    public static let hostNames = WebPushService.allCases.map(\.host)
    public var hostNames: [String] { WebPushGateway.hostNames }

    /// Bodies are read up to 4 KiB more than the limit: past it the service answers 413 in its own format.
    static let maxBody = WebPushService.maxBody + 4_096

    public func routes() -> [GatewayRoute] {
        func route(_ pattern: String, _ service: WebPushService, host: String? = nil) -> GatewayRoute {
            GatewayRoute(
                [.post], pattern, maxBodySize: WebPushGateway.maxBody,
                bodyTooLarge: { _ in service.response(refusing: service.refusal(.tooLarge)) },
                unavailable: { _ in service.response(refusing: service.refusal(.tooManyRequests)) }, host: host, handling: .push)
        }
        return [
            route("/fcm/send/{token}", .fcm), route("/wp/{token}", .fcm),
            route("/wpush/v1/{token}", .mozilla), route("/wpush/v2/{token}", .mozilla),
            route("/web.push.apple.com/{token}", .apple), route("/{token}", .apple, host: WebPushService.apple.host),
            route("/w/*", .wns),
        ]
    }

    public func makeConnectionState() -> WebPushConnectionState { WebPushConnectionState() }

    /// The service a request's path is for.
    static func service(of path: ArraySlice<UInt8>) -> WebPushService {
        func starts(_ s: StaticString) -> Bool { path.starts(with: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)) }
        if starts("/fcm/send/") || starts("/wp/") { return .fcm }
        if starts("/wpush/") { return .mozilla }
        if starts("/w/") { return .wns }
        return .apple
    }

    public func decide(
        _ request: Request, on exchange: Exchange, state: WebPushConnectionState, nowMs: Int64, into d: inout WebPushDecision
    ) {
        let service = WebPushGateway.service(of: request.path)
        d.service = service
        if service == .wns {
            d.token = Array(PercentEncoding.decode(Array((request.queryParameter("token") ?? "").utf8)[...], plusAsSpace: false).utf8)[...]
        } else {
            d.token = exchange.parameters.value(0, in: request.path)
        }
        let found = subscriptions.subscription(token: d.token).flatMap { s -> WebPushSubscription? in
            // A token of another service, or a Firefox v1 token posted to /wpush/v2/ (and back), is not one this endpoint issued.
            guard s.service == service else { return nil }
            if service == .mozilla && request.path.starts(with: "/wpush/v2/".utf8) != (s.applicationServerKey != nil) { return nil }
            return s
        }
        d.subscription = found
        let facts = found.map { WebPushSubscriptionFacts(applicationServerKey: $0.applicationServerKey, gone: $0.goneAtMs != nil) }
        // `aud`: the service's origin, or the one a sender derives from an endpoint under pushemu's own address.
        switch service.check(
            WebPushHeaders(request.headers), bodyCount: request.body.count, subscription: facts,
            audiences: WebPushService.origins[service.index], nowSeconds: nowMs / 1000, cache: state.vapid, authority: request.authority)
        {
        case .failure(let r): d.refusal = r
        case .success(let accepted):
            d.facts = accepted
            d.accepted = true
        }
    }

    public func subject(of decision: WebPushDecision, request: Request) -> PushSubject {
        PushSubject(token: decision.token, topic: decision.facts?.topic.map { Array($0.utf8)[...] }, scope: decision.service.rawValue)
    }

    public func rateLimited(_ decision: inout WebPushDecision) {
        decision.refusal = decision.service.refusal(.tooManyRequests)
        decision.accepted = false
    }

    public func notificationID(for decision: WebPushDecision, request: Request, state: WebPushConnectionState) -> UUIDValue {
        UUIDValue.random(&state.rng)
    }

    /// Every accepted message is delivered after the answer (`deferredPush`): the browser decrypts it.
    public func forEachAcceptedPush(
        _ decision: WebPushDecision, request: Request, id: UUIDValue, state: WebPushConnectionState, nowMs: Int64,
        _ body: AcceptedPushSink
    ) {}

    public func defersDelivery(_ decision: WebPushDecision) -> Bool { decision.accepted }

    /// The browser's side, on the pipeline's deferred-delivery worker: it decrypts the body
    /// with the subscription's keys (RFC 8291, or the legacy coding), and its plaintext is what
    /// the notification log, the journal and the device see. A message that does not decrypt is
    /// dropped as a browser drops it (`undecryptable`), its body kept as sent.
    public func deferredPush(_ decision: WebPushDecision, request: Request, id: UUIDValue, nowMs: Int64) -> DeferredPush? {
        guard let facts = decision.facts else { return nil }
        let token = Array(decision.token)
        let body = request.body.isEmpty ? [] : Array(request.body)
        let subscription = decision.subscription
        let service = decision.service
        let memo = self.memo
        let silent = self.silent
        return DeferredPush(lane: TokenKey(token[...]).a) {
            var plaintext: [UInt8] = []
            var failure: DecryptFailure?
            if !body.isEmpty, let s = subscription {
                switch memo.read(body, for: s, facts: facts) {
                case .success(let p): plaintext = p
                case .failure(let f): failure = f
                }
            }
            let undecryptable = failure != nil
            let read = undecryptable ? (isJSON: false, hasTitle: false, tag: nil) : WebPushGateway.read(plaintext)
            let payload = undecryptable ? body : plaintext
            var delivery = Delivery(
                provider: .webpush, platform: .web, tokenBytes: token[...], appBytes: subscription.map { Array($0.app.utf8)[...] },
                environment: service.rawValue, notificationID: id, messageName: nil, receivedAtMs: nowMs, payload: payload[...])
            if undecryptable {
                delivery.alerts = .undecryptable
            } else if read.hasTitle {
                delivery.alerts = .notification
            }
            delivery.hasData = !plaintext.isEmpty
            // The service's Topic replaces a message it holds; the notification's tag, one shown.
            delivery.collapseID = facts.topic ?? (read.hasTitle ? read.tag : nil)
            // TTL 0: delivered now or never (an offline browser's is dropped, as autopush drops it).
            delivery.expiresAtMs = facts.ttl == 0 ? 0 : nowMs + Int64(facts.ttl) * 1000
            var warnings = failure.map { ["the browser could not decrypt the message: \($0.description)"] } ?? []
            // Safari revokes a subscription whose pushes show nothing, after a few of them.
            let revokes = service == .apple && !undecryptable && !read.hasTitle && silent.count(token) >= SilentPushCounts.safariLimit
            if revokes {
                warnings.append(
                    "Safari revoked the subscription: \(SilentPushCounts.safariLimit) pushes showed no notification (later pushes: 410)")
            }
            var resolved = ResolvedPush(
                delivery: delivery, topic: facts.topic.map { Array($0.utf8) }, warnings: warnings,
                flags: AcceptedPushFlags(payloadIsJSON: read.isJSON, appliesDeviceEffects: true),
                outcome: PushOutcome(status: 201, reason: "", payload: payload[...], warnings: warnings))
            resolved.revokesSubscription = revokes
            return resolved
        }
    }

    /// One parse of a decrypted payload: whether it is a JSON object, whether it has a non-empty
    /// string `title` (what a service worker written the common way shows; Pushwoosh's `header`,
    /// at the top or under `data`, or a `notification` object's `title`), and its `tag` (a
    /// notification with the tag of one still shown replaces it, as `showNotification` does).
    static func read(_ payload: [UInt8]) -> (isJSON: Bool, hasTitle: Bool, tag: String?) {
        payload.withUnsafeBytes { raw in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return (false, false, nil) }
            let v = JSONView(bytes: raw, tokens: tokens)
            var tag: String?
            if let t = v.member(0, "tag"), v.tokens[t].kind == .string, !v.string(t).isEmpty { tag = v.string(t) }
            for key: StaticString in ["title", "header"] {
                if let t = v.member(0, key), v.tokens[t].kind == .string, !v.string(t).isEmpty { return (true, true, tag) }
            }
            if let n = v.member(0, "notification"), v.tokens[n].kind == .object, let t = v.member(n, "title"), v.tokens[t].kind == .string {
                if tag == nil, let g = v.member(n, "tag"), v.tokens[g].kind == .string, !v.string(g).isEmpty { tag = v.string(g) }
                return (true, true, tag)
            }
            // Pushwoosh's web SDK also takes its payload wrapped in `data`.
            if let d = v.member(0, "data"), v.tokens[d].kind == .object, let t = v.member(d, "header"), v.tokens[t].kind == .string,
                !v.string(t).isEmpty
            {
                return (true, true, tag)
            }
            return (true, false, tag)
        }
    }

    /// The id a service puts in its `Location`.
    static func messageID(_ service: WebPushService, _ id: UUIDValue, nowMs: Int64) -> String {
        switch service {
        case .fcm:
            // `0:<ms>%<16 hex>`, written in place.
            return String(unsafeUninitializedCapacity: 40) { buf in
                let p = UnsafeMutableRawPointer(buf.baseAddress!)
                buf[0] = UInt8(ascii: "0")
                buf[1] = UInt8(ascii: ":")
                var ms = UInt64(max(0, nowMs))
                var digits = 0
                repeat {
                    digits += 1
                    ms /= 10
                } while ms > 0
                ms = UInt64(max(0, nowMs))
                for i in stride(from: 2 + digits - 1, through: 2, by: -1) {
                    buf[i] = UInt8(ascii: "0") + UInt8(ms % 10)
                    ms /= 10
                }
                buf[2 + digits] = UInt8(ascii: "%")
                UUIDValue.writeHex16(id.high, to: p + 3 + digits)
                return 3 + digits + 16
            }
        case .mozilla: return Base64URL.encode(Array(id.description.utf8))
        case .apple: return id.description.uppercased()
        case .wns: return id.description
        }
    }

    public func response(for decision: WebPushDecision, request: Request, id: UUIDValue, state: WebPushConnectionState, nowMs: Int64)
        -> Response
    {
        if let r = decision.refusal { return decision.service.response(refusing: r) }
        return decision.service.response(
            accepting: WebPushGateway.messageID(decision.service, id, nowMs: nowMs), ttl: decision.facts?.ttl ?? 0)
    }

    public func outcome(of decision: WebPushDecision, request: Request) -> PushOutcome {
        if let r = decision.refusal { return PushOutcome(status: r.status, reason: r.message, payload: request.body[...], warnings: []) }
        // Accepted: what the answer's event carries (the journal records the browser's plaintext,
        // from `deferredPush`).
        return PushOutcome(status: 201, reason: "", payload: request.body[...], warnings: [])
    }

    public func injectedAnswer(_ answer: InjectedAnswer, request: Request) -> (response: Response, reason: String) {
        let service = WebPushGateway.service(of: request.path)
        let status = answer.status ?? 503
        var refusal: WebPushRefusal
        switch status {
        case 401, 403: refusal = service.refusal(.unauthorized)
        case 404: refusal = service.refusal(.unknownSubscription)
        case 410: refusal = service.refusal(.gone)
        case 413: refusal = service.refusal(.tooLarge)
        case 429, 406: refusal = service.refusal(.tooManyRequests)
        case 400: refusal = service.refusal(.badEncoding)
        default: refusal = WebPushRefusal(kind: .badEncoding, status: status, message: "Service Unavailable", errno: 999)
        }
        refusal.status = status
        if let reason = answer.reason ?? answer.errorCode { refusal.message = reason }
        var response = service.response(refusing: refusal, retryAfter: answer.retryAfter ?? 60)
        if let retryAfter = answer.retryAfter, refusal.kind != .tooManyRequests {
            response.headers.add(name: "retry-after", value: String(retryAfter))
        }
        return (response, refusal.message)
    }

    public struct ConnectionActions: Sendable {}
    public func connectionActions(after decision: WebPushDecision) -> ConnectionActions { ConnectionActions() }
    public func connectionActionsAfterInjectedAnswer() -> ConnectionActions { ConnectionActions() }
    public static func perform(_ actions: ConnectionActions, on connection: ConnectionContext) {}
    public static func acts(_ actions: ConnectionActions) -> Bool { false }
    public static func goAwayDebugData(reason: String) -> [UInt8] { Array(reason.utf8) }
}
