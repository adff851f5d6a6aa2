import PushCore
import Runtime
import Transport

/// Topic subscriptions: the Instance ID API (`iid.googleapis.com`: `/iid/v1:batchAdd`,
/// `:batchRemove`, `/iid/v1/{token}/rel/topics/{topic}`, `/iid/info/{token}`) and the FCM v1
/// per-registration API firebase-admin 7.7+ uses (`/v1/projects/{p}/registrations/{token}/
/// topicSubscriptions`), over one subscription state.
public struct FCMTopicManagement: Sendable {
    static let maxBatch = 1000
    public let provider: FCMProvider
    var devices: FCMDeviceRegistry { provider.devices }

    public init(provider: FCMProvider) { self.provider = provider }

    /// IID errors are `{"error":"<Code>"}`.
    static func iidError(_ status: Int, _ code: String) -> Response {
        FCMResponses.json(status, Array(("{\"error\":" + JSONWriter.quote(code) + "}").utf8))
    }

    /// Credentials for the IID API: a bearer is required; the emulator's own tokens must be
    /// current (and are the only ones accepted with `--fcm-auth strict`). Returns the caller's
    /// project when known.
    func authorize(_ request: Request, nowMs: Int64) -> Result<String?, Rejection> {
        guard let h = request.headers.first("authorization") else {
            return .failure(Rejection(FCMTopicManagement.iidError(401, "Unauthorized: the request is missing an OAuth 2 access token")))
        }
        // A legacy server key (`key=AAAA...`): refused as Google refuses it since the legacy
        // APIs' shutdown.
        if h.count > 4, h.withUnsafeBytes({ UnsafeRawBufferPointer(rebasing: $0.prefix(4)).equalsIgnoringCase("key=") }) {
            return .failure(
                Rejection(
                    FCMTopicManagement.iidError(401, "Authenticating using server key is deprecated. Please use an OAuth2 token instead.")))
        }
        guard h.count > 7, h.withUnsafeBytes({ UnsafeRawBufferPointer(rebasing: $0.prefix(7)).equalsIgnoringCase("bearer ") }) else {
            return .failure(Rejection(FCMTopicManagement.iidError(401, "Unauthorized")))
        }
        switch provider.tokens.verify(h.dropFirst(7), nowSeconds: nowMs / 1000) {
        case .valid(let c): return .success(c.project)
        case .foreign where provider.configuration.authMode == .lenient: return .success(nil)
        default: return .failure(Rejection(FCMTopicManagement.iidError(401, "Unauthorized")))
        }
    }

    /// `POST /iid/v1:batchAdd` / `:batchRemove` with `{"to":"/topics/x","registration_tokens":[...]}`.
    public func batch(_ request: Request, add: Bool, nowMs: Int64) -> Response {
        let project: String?
        switch authorize(request, nowMs: nowMs) {
        case .failure(let r): return r.response
        case .success(let p): project = p
        }
        var to: String?
        var tokens: [String]? = nil
        var bad: String?
        let ok = request.body.withUnsafeBytes { raw -> Bool in
            var t: [JSONToken] = []
            guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else { return false }
            let v = JSONView(bytes: raw, tokens: t)
            v.forEachMember(0) { k, val in
                switch v.string(k) {
                case "to":
                    if v.tokens[val].kind == .string { to = v.string(val) } else { bad = "InvalidParameters: to must be a string" }
                case "registration_tokens":
                    guard v.tokens[val].kind == .array else {
                        bad = "InvalidParameters: registration_tokens must be an array"
                        return
                    }
                    var list: [String] = []
                    v.forEachElement(val) { e in
                        if v.tokens[e].kind == .string {
                            list.append(v.string(e))
                        } else {
                            bad = "InvalidParameters: registration_tokens must hold strings"
                        }
                    }
                    tokens = list
                default: break
                }
            }
            return true
        }
        guard ok else { return FCMTopicManagement.iidError(400, "InvalidParameters: the body must be a JSON object") }
        if let bad { return FCMTopicManagement.iidError(400, bad) }
        guard let to else { return FCMTopicManagement.iidError(400, "MissingTo") }
        guard let tokens, !tokens.isEmpty else { return FCMTopicManagement.iidError(400, "MissingRegistration") }
        guard tokens.count <= FCMTopicManagement.maxBatch else {
            return FCMTopicManagement.iidError(400, "TooManyRegistrations: at most \(FCMTopicManagement.maxBatch) tokens per request")
        }
        guard to.hasPrefix("/topics/"), let name = FCMFormats.topicName(Array(to.utf8)) else {
            return FCMTopicManagement.iidError(400, "InvalidTopicName")
        }
        let topic = String(decoding: name, as: UTF8.self)
        var results: [String] = []
        results.reserveCapacity(tokens.count)
        // One call, one state-log record, however many tokens it names.
        let outcomes =
            add
            ? devices.subscribe(tokens: tokens, topic: topic, project: project, nowMs: nowMs)
            : devices.unsubscribe(tokens: tokens, topic: topic, nowMs: nowMs)
        for r in outcomes {
            switch r {
            case .ok, .notSubscribed: results.append("{}")
            case .senderMismatch: results.append("{\"error\":\"PERMISSION_DENIED\"}")
            default: results.append("{\"error\":\"\(r.rawValue)\"}")
            }
        }
        return FCMResponses.json(200, Array(("{\"results\":[" + results.joined(separator: ",") + "]}").utf8))
    }

    /// `POST /iid/v1/{token}/rel/topics/{topic}`.
    func relate(_ request: Request, token: String, topic rawTopic: String, nowMs: Int64) -> Response {
        let project: String?
        switch authorize(request, nowMs: nowMs) {
        case .failure(let r): return r.response
        case .success(let p): project = p
        }
        guard let name = FCMFormats.topicName(Array(rawTopic.utf8)) else { return FCMTopicManagement.iidError(400, "InvalidTopicName") }
        switch devices.subscribe(token: token, topic: String(decoding: name, as: UTF8.self), project: project, nowMs: nowMs) {
        case .ok, .notSubscribed: return FCMResponses.json(200, Array("{}".utf8))
        case .invalidArgument: return FCMTopicManagement.iidError(400, "InvalidToken")
        case .notFound: return FCMTopicManagement.iidError(404, "NOT_FOUND")
        case .tooManyTopics: return FCMTopicManagement.iidError(400, "TOO_MANY_TOPICS")
        case .senderMismatch: return FCMTopicManagement.iidError(403, "PERMISSION_DENIED")
        case .full: return FCMTopicManagement.iidError(429, "RESOURCE_EXHAUSTED")
        }
    }

    /// `GET /iid/info/{token}[?details=true]`.
    public func info(_ request: Request, token: String, details: Bool, nowMs: Int64) -> Response {
        if case .failure(let r) = authorize(request, nowMs: nowMs) { return r.response }
        guard let d = devices.device(token: token), d.uninstalledAtMs == nil else {
            return FCMTopicManagement.iidError(404, "No information found about this instance id.")
        }
        var s = "{\"applicationVersion\":\"1\",\"application\":" + JSONWriter.quote(d.app ?? "com.pushemu.app")
        s +=
            ",\"scope\":\"*\",\"authorizedEntity\":\"\(d.project.flatMap { provider.accounts.projectNumber(for: $0) } ?? d.project ?? "")\""
        s += ",\"platform\":\"\(d.platform.uppercased())\""
        if details {
            let topics = d.topics.sorted { $0.key < $1.key }.map { t, day in
                JSONWriter.quote(t) + ":{\"addDate\":\"" + FCMTopicManagement.date(days: Int(day)) + "\"}"
            }
            s += ",\"rel\":{\"topics\":{" + topics.joined(separator: ",") + "}}"
        }
        return FCMResponses.json(200, Array((s + "}").utf8))
    }

    /// `POST .../registrations/{token}/topicSubscriptions?topic_name=T` and
    /// `DELETE .../registrations/{token}/topicSubscriptions/{topic}[?allow_missing=true]`,
    /// answering in the `google.rpc.Status` envelope.
    public func registration(
        _ request: Request, project: String, token: String, topic rawTopic: String, subscribe: Bool,
        allowMissing: Bool, state: FCMConnectionState, nowMs: Int64
    ) -> Response {
        if let e = provider.authorize(request, project: project, state: state, nowMs: nowMs) { return e.response }
        guard FCMFormats.isRegistrationToken(token.utf8) else {
            return FCMError.fcm(.invalidArgument, "The registration token is not a valid FCM registration token", field: "registration")
                .response
        }
        guard let name = FCMFormats.topicName(Array(rawTopic.utf8)) else {
            return FCMError.invalid("topic_name", "Invalid topic name: \(rawTopic). A topic name must match [a-zA-Z0-9-_.~%]{1,900}.")
                .response
        }
        let topic = String(decoding: name, as: UTF8.self)
        let r =
            subscribe
            ? devices.subscribe(token: token, topic: topic, project: project, nowMs: nowMs)
            : devices.unsubscribe(token: token, topic: topic)
        switch r {
        case .ok: return FCMResponses.json(200, Array("{}".utf8))
        case .notSubscribed:
            if subscribe || allowMissing { return FCMResponses.json(200, Array("{}".utf8)) }
            return FCMError(httpStatus: 404, status: "NOT_FOUND", message: "The registration is not subscribed to topic \(topic).").response
        case .notFound: return FCMError.fcm(.unregistered).response
        case .invalidArgument: return FCMError.invalidToken.response
        case .senderMismatch: return FCMError.fcm(.senderIDMismatch).response
        case .tooManyTopics:
            return FCMError(
                httpStatus: 400, status: "FAILED_PRECONDITION",
                message: "TOO_MANY_TOPICS: the app instance is subscribed to the maximum of \(FCMDeviceRegistry.maxTopicsPerDevice) topics."
            ).response
        case .full:
            return FCMError(
                httpStatus: 429, status: "RESOURCE_EXHAUSTED",
                message: "pushemu holds as many FCM devices as --max-devices allows; this subscription is not kept."
            ).response
        }
    }

    /// `YYYY-MM-DD` for a day number since 1970-01-01.
    static func date(days: Int) -> String {
        let c = Clock.civil(Int64(days) * 86400)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(c.year)-\(two(c.month))-\(two(c.day))"
    }
}
