import PushCore
import Transport

/// The four push services browsers subscribe through, each with its host, its VAPID audience,
/// its limits and its way of saying no (`WebPushRefusal`, answered by `response(refusing:)`).
public enum WebPushService: String, CaseIterable, Sendable {
    /// Google's, for Chrome (FCM's Web Push endpoint).
    case fcm
    /// Mozilla's autopush, for Firefox.
    case mozilla
    /// Apple's, for Safari.
    case apple
    /// Microsoft's WNS, for Edge.
    case wns

    /// The service a browser subscribes through.
    public static func of(browser: String) -> WebPushService? {
        switch browser {
        case "chrome": .fcm
        case "firefox": .mozilla
        case "safari": .apple
        case "edge": .wns
        default: nil
        }
    }

    /// The browser that subscribes through it.
    public var browser: String {
        switch self {
        case .fcm: "chrome"
        case .mozilla: "firefox"
        case .apple: "safari"
        case .wns: "edge"
        }
    }

    /// The host of its endpoints.
    public var host: String {
        switch self {
        case .fcm: "fcm.googleapis.com"
        case .mozilla: "updates.push.services.mozilla.com"
        case .apple: "web.push.apple.com"
        case .wns: "wns2-par02p.notify.windows.com"
        }
    }

    /// The VAPID `aud` it requires: its origin.
    public var origin: String { WebPushService.origins[index][0] }

    /// Its position in `allCases`.
    var index: Int {
        switch self {
        case .fcm: 0
        case .mozilla: 1
        case .apple: 2
        case .wns: 3
        }
    }

    /// Each service's `[origin]`, made once (the audiences a push is checked against).
    static let origins: [[String]] = allCases.map { ["https://" + $0.host] }

    /// The longest TTL it keeps a message for; a longer one is lowered to it (autopush: 60 days;
    /// FCM: 4 weeks; Apple's and WNS's limits are not published: 4 weeks assumed).
    public var maxTTL: Int {
        switch self {
        case .mozilla: 60 * 86_400
        case .fcm, .apple, .wns: 28 * 86_400
        }
    }

    /// The largest encrypted body it takes (RFC 8030 §7.2: at least 4,096 bytes).
    public static let maxBody = 4_096

    /// A subscription's endpoint URL for `token`: under the service's own host, or under
    /// `localBase` (`http://127.0.0.1:8080`) for senders that reach pushemu without the proxy.
    public func endpoint(token: String, versionTwo: Bool, localBase: String? = nil) -> String {
        let base = localBase ?? origin
        switch self {
        case .fcm: return base + "/fcm/send/" + token
        case .mozilla: return base + (versionTwo ? "/wpush/v2/" : "/wpush/v1/") + token
        case .apple: return base + (localBase == nil ? "/" : "/web.push.apple.com/") + token
        case .wns: return base + "/w/?token=" + token
        }
    }

    /// `Location` of an accepted message.
    func location(messageID: String) -> String {
        switch self {
        case .fcm: return origin + "/" + messageID
        case .mozilla: return origin + "/m/" + messageID
        case .apple, .wns: return origin + "/m/" + messageID
        }
    }
}

/// Why a service refuses a push, with its status; `message` is the service's own words.
public struct WebPushRefusal: Error, Equatable, Sendable {
    /// What went wrong, in pushemu's words for the journal, metrics and fault rules.
    public enum Kind: String, Sendable {
        case unknownSubscription, gone, missingTTL, badTTL, badUrgency, badTopic, tooLarge, badEncoding, unauthorized, keyMismatch
        case tooManyRequests
    }
    public var kind: Kind
    public var status: Int
    /// The service's reason (autopush's message, FCM's line, Apple's `reason`, WNS's description).
    public var message: String
    /// autopush's errno (0 for the other services).
    public var errno: Int = 0

    public init(kind: Kind, status: Int, message: String, errno: Int = 0) {
        self.kind = kind
        self.status = status
        self.message = message
        self.errno = errno
    }
}

extension WebPushService {
    /// The service's refusal of `kind`, worded as it words it (`detail`: autopush's message
    /// where it has several for one kind).
    public func refusal(_ kind: WebPushRefusal.Kind, detail: String? = nil) -> WebPushRefusal {
        switch self {
        case .mozilla: return mozillaRefusal(kind, detail: detail)
        case .fcm: return fcmRefusal(kind, detail: detail)
        case .apple: return appleRefusal(kind, detail: detail)
        case .wns: return wnsRefusal(kind, detail: detail)
        }
    }

    private func mozillaRefusal(_ kind: WebPushRefusal.Kind, detail: String?) -> WebPushRefusal {
        switch kind {
        case .unknownSubscription: WebPushRefusal(kind: kind, status: 404, message: "Invalid token", errno: 102)
        case .gone: WebPushRefusal(kind: kind, status: 410, message: "Request did not validate No such subscription", errno: 106)
        case .missingTTL: WebPushRefusal(kind: kind, status: 400, message: "Missing TTL value", errno: 111)
        case .badTTL: WebPushRefusal(kind: kind, status: 400, message: detail ?? "TTL must be greater than 0", errno: 114)
        case .badUrgency: WebPushRefusal(kind: kind, status: 400, message: "Unknown urgency value", errno: 110)
        case .badTopic:
            WebPushRefusal(kind: kind, status: 400, message: detail ?? "Topic must be no greater than 32 characters", errno: 113)
        case .tooLarge: WebPushRefusal(kind: kind, status: 413, message: "Data payload too large", errno: 104)
        case .badEncoding: WebPushRefusal(kind: kind, status: 400, message: detail ?? "Missing Content-Encoding header", errno: 110)
        case .unauthorized, .keyMismatch:
            WebPushRefusal(kind: kind, status: 401, message: detail ?? "Invalid Authorization Header", errno: 109)
        case .tooManyRequests: WebPushRefusal(kind: kind, status: 429, message: "Too Many Requests", errno: 201)
        }
    }

    private func fcmRefusal(_ kind: WebPushRefusal.Kind, detail: String?) -> WebPushRefusal {
        switch kind {
        case .unknownSubscription:
            WebPushRefusal(
                kind: kind, status: 404,
                message:
                    "A valid push subscription endpoint should be specified in the URL as such: https://fcm.googleapis.com/wp/dHIoDxE7Hdg:APA91bH1Zj0kNa..."
            )
        case .gone: WebPushRefusal(kind: kind, status: 410, message: "push subscription has unsubscribed or expired.")
        case .missingTTL, .badTTL: WebPushRefusal(kind: kind, status: 400, message: "InvalidTtlParameter")
        case .badUrgency: WebPushRefusal(kind: kind, status: 400, message: "invalid Urgency header")
        case .badTopic: WebPushRefusal(kind: kind, status: 400, message: "invalid Topic header")
        case .tooLarge: WebPushRefusal(kind: kind, status: 413, message: "payload too large")
        case .badEncoding: WebPushRefusal(kind: kind, status: 400, message: detail ?? "invalid Content-Encoding header")
        case .keyMismatch:
            WebPushRefusal(
                kind: kind, status: 403,
                message:
                    "the VAPID credentials in the authorization header do not correspond to the credentials used to create the subscriptions."
            )
        case .unauthorized: WebPushRefusal(kind: kind, status: 403, message: detail ?? "invalid JWT provided")
        case .tooManyRequests: WebPushRefusal(kind: kind, status: 429, message: "too many requests")
        }
    }

    private func appleRefusal(_ kind: WebPushRefusal.Kind, detail: String?) -> WebPushRefusal {
        switch kind {
        case .unknownSubscription, .gone: WebPushRefusal(kind: kind, status: 410, message: "Unregistered")
        case .missingTTL, .badTTL: WebPushRefusal(kind: kind, status: 400, message: "BadTtl")
        case .badUrgency: WebPushRefusal(kind: kind, status: 400, message: "BadUrgency")
        case .badTopic: WebPushRefusal(kind: kind, status: 400, message: "BadWebPushTopic")
        case .tooLarge: WebPushRefusal(kind: kind, status: 413, message: "PayloadTooLarge")
        case .badEncoding: WebPushRefusal(kind: kind, status: 400, message: "BadWebPushRequest")
        case .keyMismatch: WebPushRefusal(kind: kind, status: 400, message: "VapidPkHashMismatch")
        case .unauthorized: WebPushRefusal(kind: kind, status: 403, message: detail ?? "BadJwtToken")
        case .tooManyRequests: WebPushRefusal(kind: kind, status: 429, message: "TooManyRequests")
        }
    }

    private func wnsRefusal(_ kind: WebPushRefusal.Kind, detail: String?) -> WebPushRefusal {
        switch kind {
        case .unknownSubscription: WebPushRefusal(kind: kind, status: 404, message: "The channel URI is not valid.")
        case .gone: WebPushRefusal(kind: kind, status: 410, message: "The channel expired.")
        case .missingTTL, .badTTL: WebPushRefusal(kind: kind, status: 400, message: detail ?? "Ttl value is not valid.")
        case .badUrgency: WebPushRefusal(kind: kind, status: 400, message: "Urgency value is not valid.")
        case .badTopic: WebPushRefusal(kind: kind, status: 400, message: "Topic value is not valid.")
        case .tooLarge: WebPushRefusal(kind: kind, status: 413, message: "The notification payload exceeds the size limit.")
        case .badEncoding: WebPushRefusal(kind: kind, status: 400, message: detail ?? "Content-Encoding is not valid.")
        case .keyMismatch: WebPushRefusal(kind: kind, status: 403, message: "The VAPID public key does not match the channel.")
        case .unauthorized: WebPushRefusal(kind: kind, status: 401, message: detail ?? "The VAPID authorization is not valid.")
        case .tooManyRequests: WebPushRefusal(kind: kind, status: 406, message: "The notification rate is too high.")
        }
    }

    /// A VAPID failure as this service reports it.
    public func refusal(vapid failure: VAPIDFailure) -> WebPushRefusal {
        switch self {
        case .mozilla:
            let message: String =
                switch failure {
                case .missing: "Missing VAPID token"
                case .unknownScheme: "Unknown auth scheme"
                case .missingToken: "Missing VAPID token"
                case .missingKey: "Missing VAPID public key"
                case .invalidKey: "Invalid VAPID public key: not a P-256 public key"
                case .invalidClaims(let why): "Invalid VAPID token: " + why
                case .badSignature: "Invalid VAPID token: InvalidSignature"
                case .expired: "Invalid VAPID token: ExpiredSignature"
                case .expiresTooLate: "The VAPID token expiration is too long"
                case .audience: "Invalid VAPID audience"
                case .subject(let why): why
                case .keyMismatch: "VAPID public key mismatch"
                }
            return refusal(failure == .keyMismatch ? .keyMismatch : .unauthorized, detail: message)
        case .fcm:
            switch failure {
            case .keyMismatch: return refusal(.keyMismatch)
            case .expiresTooLate:
                return refusal(.unauthorized, detail: "exp claim MUST NOT be more than 24 hours from the time of the request")
            default: return refusal(.unauthorized)
            }
        case .apple:
            switch failure {
            case .keyMismatch: return refusal(.keyMismatch)
            case .expired: return refusal(.unauthorized, detail: "ExpiredJwtToken")
            default: return refusal(.unauthorized)
            }
        case .wns:
            if failure == .keyMismatch { return refusal(.keyMismatch) }
            return failure == .missing
                ? WebPushRefusal(kind: .unauthorized, status: 401, message: "The request has no VAPID authorization.")
                : refusal(.unauthorized)
        }
    }

    /// The service's answer to a refused push: autopush's JSON error, FCM's plain line, Apple's
    /// `{"reason"}`, WNS's empty body with `X-WNS-*` headers.
    public func response(refusing r: WebPushRefusal, retryAfter: Int = 60) -> Response {
        var response: Response
        switch self {
        case .mozilla:
            let error =
                r.status == 401
                ? "Unauthorized"
                : r.status == 404
                    ? "Not Found"
                    : r.status == 410
                        ? "Gone" : r.status == 413 ? "Payload Too Large" : r.status == 429 ? "Too Many Requests" : "Bad Request"
            response = .json(
                r.status,
                "{\"code\":\(r.status),\"errno\":\(r.errno),\"error\":\"\(error)\",\"message\":\(JSONWriter.quote(r.message)),\"more_info\":\"http://autopush.readthedocs.io/en/latest/http.html#error-codes\"}"
            )
            if r.status == 410 { response.headers.add(name: "cache-control", value: "max-age=86400") }
        case .fcm:
            var headers = HTTPFields()
            headers.add(name: "content-type", value: "text/plain; charset=utf-8")
            response = Response(status: r.status, headers: headers, body: Array((r.message + "\n").utf8))
        case .apple:
            response = .json(r.status, "{\"reason\":\(JSONWriter.quote(r.message))}")
        case .wns:
            response = Response(status: r.status, headers: HTTPFields(), body: [])
            response.headers.add(name: "x-wns-status", value: "dropped")
            response.headers.add(name: "x-wns-error-description", value: r.message)
        }
        if r.kind == .tooManyRequests { response.headers.add(name: "retry-after", value: String(retryAfter)) }
        return response
    }

    /// The service's 201 for an accepted message: `Location` (the message's URL) and the TTL it
    /// applied (autopush), FCM's empty body, Apple's `apns-id`, WNS's `X-WNS-*` headers.
    public func response(accepting messageID: String, ttl: Int) -> Response {
        var response = Response(status: 201, headers: HTTPFields(), body: [])
        response.headers.add(name: "location", value: location(messageID: messageID))
        switch self {
        case .mozilla: response.headers.add(name: "ttl", value: String(ttl))
        case .fcm: break
        case .apple: response.headers.add(name: "apns-id", value: messageID)
        case .wns:
            response.headers.add(name: "x-wns-status", value: "received")
            response.headers.add(name: "x-wns-msg-id", value: messageID)
        }
        return response
    }
}
