import PushCore

/// What the app knows when its campaign SDK registers: the push token (and the one it replaces
/// after a refresh), the platform, the app, a stable hardware id.
public struct RegistrationContext: Sendable {
    /// `.register`, `.unregister`, or `.appOpen` (the app opened from a push).
    public var event: TrackingEvent
    /// "ios" or "android".
    public var platform: String
    public var token: String
    public var previousToken: String?
    public var app: String
    public var hwid: String
    public var atMs: Int64

    public init(event: TrackingEvent, platform: String, token: String, previousToken: String? = nil, app: String, hwid: String, atMs: Int64)
    {
        self.event = event
        self.platform = platform
        self.token = token
        self.previousToken = previousToken
        self.app = app
        self.hwid = hwid
        self.atMs = atMs
    }
}

/// The registration calls of the SDKs whose format `tracking.md` gives, built as the SDK builds
/// them, and the generic webhook for every other platform. Pure: values in, a request out.
///
/// - `adobe-campaign` (§1.3): `POST {url}/nms/mobile/1/registerIOS.jssp` (`registerAndroid.jssp`),
///   a form body of `registrationToken`, `mobileAppUuid` (option `integrationKey`), `userKey`,
///   the device fields (Android adds `deviceImei`) and `additionalParams` as the SDK's XML. The
///   SDK sends it again only when the SHA-256 of token + user key + parameters + integration key
///   changed (`fingerprint`); it sends nothing on uninstall.
/// - `pushwoosh`: `POST {url or https://{appCode}.api.pushwoosh.com}/json/1.3/registerDevice`
///   (`unregisterDevice` on uninstall, `applicationOpen` when a push opens the app), a
///   `{"request":{...}}` envelope with `Authorization: Token {apiToken}`.
/// - `webhook`: method, url, headers and body templates (`Templates`, `event` is `register`,
///   `unregister` or `appOpen`; `device.previousToken` after a refresh).
public enum RegistrationPresets {
    public enum Outcome: Sendable {
        /// Send `job`; `fingerprint` is what the device keeps of a registration (Adobe's SHA-256,
        /// which skips an unchanged one; the token for the others; nil after an unregistration).
        case job(TrackingJob, fingerprint: String?)
        case skip(String)
    }

    /// The call `config`'s SDK makes for `ctx.event`, or why it makes none. `lastFingerprint` is
    /// the fingerprint of the device's last registration sent.
    public static func job(_ config: RegistrationConfig, _ ctx: RegistrationContext, lastFingerprint: String?) -> Outcome {
        let base = config.url.utf8.last == UInt8(ascii: "/") ? String(config.url.dropLast()) : config.url
        let built: (TrackingRequest, String?)
        switch config.preset {
        case "adobe-campaign":
            guard ctx.event == .register else {
                return .skip("the Adobe Campaign SDK sends a registration only (nothing on \(ctx.event.rawValue))")
            }
            let fingerprint = adobeFingerprint(config, ctx)
            if fingerprint == lastFingerprint {
                return .skip("adobe-campaign: token, user key and parameters unchanged since the last registration")
            }
            built = (adobe(config, ctx, base: base), fingerprint)
        case "pushwoosh":
            built = (pushwoosh(config, ctx, base: base), ctx.event == .register ? ctx.token : nil)
        case "webhook":
            guard ctx.event != .appOpen else { return .skip("the registration webhook reports register and unregister") }
            built = (webhook(config, ctx), ctx.event == .register ? ctx.token : nil)
        default:
            return .skip("unknown registration preset \(config.preset)")
        }
        let job = TrackingJob(
            request: built.0, event: ctx.event, preset: config.preset, token: ctx.token, notificationID: "", notBeforeMs: ctx.atMs,
            platform: ctx.platform)
        return .job(job, fingerprint: built.1)
    }

    // MARK: Adobe Campaign Classic

    static func adobeDevice(_ c: RegistrationConfig, _ platform: String) -> [(String, String)] {
        let ios = platform == "ios"
        var fields: [(String, String)] = ios ? [] : [("deviceImei", c.options["deviceImei"] ?? "")]
        let defaults: [(String, String)] = [
            ("deviceName", ios ? "iPhone" : "Pixel 8"), ("deviceModel", ios ? "iPhone15,2" : "Pixel 8"),
            ("deviceBrand", ios ? "Apple" : "google"), ("deviceManufacturer", ios ? "Apple" : "Google"),
            ("osName", ios ? "ios" : "android"), ("osVersion", ios ? "17.4" : "14"), ("osLanguage", "en-US"),
        ]
        for (name, value) in defaults { fields.append((name, c.options[name] ?? value)) }
        return fields
    }

    /// `<additionalParameters><param name="k" value="v"/>...</additionalParameters>`.
    static func adobeParams(_ c: RegistrationConfig) -> String {
        "<additionalParameters>" + c.additionalParams.map { "<param name=\"\(xmlEscape($0.0))\" value=\"\(xmlEscape($0.1))\"/>" }.joined()
            + "</additionalParameters>"
    }

    /// SHA-256 of token + userKey + parameters + integration key: the SDK's "has anything changed".
    static func adobeFingerprint(_ c: RegistrationConfig, _ ctx: RegistrationContext) -> String {
        Templates.sha256Hex(Array((ctx.token + (c.options["userKey"] ?? "") + adobeParams(c) + (c.options["integrationKey"] ?? "")).utf8))
    }

    static func adobe(_ c: RegistrationConfig, _ ctx: RegistrationContext, base: String) -> TrackingRequest {
        var fields: [(String, String)] = [
            ("registrationToken", ctx.token), ("mobileAppUuid", c.options["integrationKey"] ?? ""), ("userKey", c.options["userKey"] ?? ""),
        ]
        fields += adobeDevice(c, ctx.platform)
        fields.append(("additionalParams", adobeParams(c)))
        let body = fields.map { $0.0 + "=" + formEncode($0.1) }.joined(separator: "&")
        let page = ctx.platform == "ios" ? "registerIOS.jssp" : "registerAndroid.jssp"
        return TrackingRequest(
            method: "POST", url: "\(base)/nms/mobile/1/\(page)",
            headers: [("Content-Type", "application/x-www-form-urlencoded;charset=UTF-8")], body: Array(body.utf8))
    }

    // MARK: Pushwoosh

    static func pushwoosh(_ c: RegistrationConfig, _ ctx: RegistrationContext, base: String) -> TrackingRequest {
        let appCode = c.options["appCode"] ?? ""
        let root = base.isEmpty ? "https://\(appCode).api.pushwoosh.com" : base
        let ios = ctx.platform == "ios"
        var body = "{\"request\":{\"application\":" + JSONWriter.quote(appCode) + ",\"hwid\":" + JSONWriter.quote(ctx.hwid)
        let method: String
        switch ctx.event {
        case .unregister:
            method = "unregisterDevice"
        case .appOpen:
            method = "applicationOpen"
            body += ",\"device_type\":\(ios ? 1 : 3),\"v\":" + JSONWriter.quote(c.options["sdkVersion"] ?? "6.7.0")
        default:
            method = "registerDevice"
            body += ",\"push_token\":" + JSONWriter.quote(ctx.token) + ",\"device_type\":\(ios ? 1 : 3)"
            body +=
                ",\"language\":" + JSONWriter.quote(c.options["language"] ?? "en")
                + ",\"timezone\":\(Int(c.options["timezone"] ?? "") ?? 0)"
            body += ",\"device_model\":" + JSONWriter.quote(c.options["deviceModel"] ?? (ios ? "iPhone15,2" : "Pixel 8"))
            body += ",\"os_version\":" + JSONWriter.quote(c.options["osVersion"] ?? (ios ? "17.4" : "14"))
            body += ",\"app_version\":" + JSONWriter.quote(c.options["appVersion"] ?? "1.0")
            body += ",\"v\":" + JSONWriter.quote(c.options["sdkVersion"] ?? "6.7.0")
        }
        if let user = c.options["userId"] { body += ",\"userId\":" + JSONWriter.quote(user) }
        body += "}}"
        return TrackingRequest(
            method: "POST", url: "\(root)/json/1.3/\(method)",
            headers: [("Content-Type", "application/json; charset=utf-8"), ("Authorization", "Token " + (c.options["apiToken"] ?? ""))],
            body: Array(body.utf8))
    }

    // MARK: webhook

    static func webhook(_ c: RegistrationConfig, _ ctx: RegistrationContext) -> TrackingRequest {
        var t = TrackingContext(
            event: ctx.event, platform: ctx.platform, token: ctx.token, app: ctx.app, notificationID: "", messageName: "",
            receivedAtMs: ctx.atMs, atMs: ctx.atMs, payload: PayloadReader([]), userID: c.options["userId"])
        t.previousToken = ctx.previousToken
        t.hardwareIDOverride = ctx.hwid
        return TrackingRequest(
            method: c.method, url: Templates.render(c.url, t, options: c.options),
            headers: c.headers.map { ($0.0, Templates.render($0.1, t, options: c.options)) },
            body: c.body.map { Array(Templates.render($0, t, options: c.options).utf8) } ?? [])
    }

    // MARK: encodings

    /// `application/x-www-form-urlencoded` as Java's URLEncoder writes it (the Android SDK's):
    /// letters, digits and `.-*_` kept, space as `+`, every other byte `%XX`.
    static func formEncode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "*"), UInt8(ascii: "_"):
                out.append(b)
            case UInt8(ascii: " "): out.append(UInt8(ascii: "+"))
            default: out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func xmlEscape(_ s: String) -> String { MarkupEscaping.escape(s, apostrophe: true) }
}
