import PushCore

/// How a device's app registers its push token with the campaign platform: `{"preset": NAME,
/// "url": BASE_URL, ...preset options}` on a device, a fleet or the server
/// (`--registration`). The presets are those whose registration call `tracking.md` gives
/// (`adobe-campaign`, `pushwoosh`) and `webhook` (method, url, headers and body templates) for
/// every other platform. `additionalParams` (Adobe) is an object of strings; other options are
/// strings, numbers or booleans, kept as text.
public struct RegistrationConfig: Sendable, Equatable {
    public var preset: String
    public var url: String
    public var options: [String: String]
    /// Adobe's `additionalParams`, in the order given.
    public var additionalParams: [(String, String)]
    /// `webhook`: the request's method and templates (see `Templates`).
    public var method = "POST"
    public var headers: [(String, String)] = []
    public var body: String?

    /// The presets with a registration call.
    public static let presets = ["adobe-campaign", "pushwoosh", "webhook"]
    /// Platforms whose registration format the reference does not confirm: offered through
    /// `webhook`, never invented.
    static let unconfirmed = ["onesignal", "braze", "moengage"]

    public init(preset: String, url: String, options: [String: String] = [:], additionalParams: [(String, String)] = []) {
        self.preset = preset
        self.url = url
        self.options = options
        self.additionalParams = additionalParams
    }

    public static func == (a: RegistrationConfig, b: RegistrationConfig) -> Bool { a.json == b.json }

    public struct ConfigError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Parses the admin API's `"registration"` object (the JSON text of it): the fields below,
    /// and any other as a preset option.
    public static func parse(_ json: [UInt8]) throws -> RegistrationConfig {
        var preset: String?
        var url: String?
        var method: String?
        var body: String?
        var options: [String: String] = [:]
        var headers: [(String, String)] = []
        var params: [(String, String)] = []
        try JSONObjectReader.read(
            json, path: "registration.", example: #"{"preset":"adobe-campaign","url":"https://marketing.example.com"}"#
        ) { r in
            preset = try r.string("preset")
            url = try r.string("url")
            method = try r.string("method")?.uppercased()
            body = try r.string("body")
            if let h = try r.stringPairs("headers") { headers = h }
            if let p = try r.stringPairs("additionalParams") { params = p }
            try TrackingConfig.readOptions(&r, into: &options)
        }
        let known = presets.joined(separator: ", ")
        guard let preset else { throw ConfigError(description: "registration.preset is required: one of \(known)") }
        if unconfirmed.contains(preset) {
            throw ConfigError(
                description:
                    "registration preset '\(preset)' is not offered: its SDK's registration call is not confirmed by a public source; describe it with the webhook preset (method, url, headers, body templates)"
            )
        }
        guard presets.contains(preset) else { throw ConfigError(description: "unknown registration preset '\(preset)': one of \(known)") }
        var c = RegistrationConfig(preset: preset, url: url ?? "", options: options, additionalParams: params)
        let needsURL = preset == "webhook" || preset == "adobe-campaign" || (preset == "pushwoosh" && options["appCode"] == nil)
        if needsURL && (url ?? "").isEmpty {
            throw ConfigError(
                description: preset == "webhook" ? "a webhook needs a url (a template)" : "registration.url is required for \(preset)")
        }
        if let u = url, !u.isEmpty, !(u.hasPrefix("http://") || u.hasPrefix("https://")) {
            throw ConfigError(description: "registration.url must start with http:// or https://")
        }
        if preset == "webhook" {
            c.method = method ?? "POST"
            c.headers = headers
            c.body = body
        } else if method != nil || body != nil || !headers.isEmpty {
            throw ConfigError(description: "registration.method, headers and body are the webhook preset's")
        }
        return c
    }

    /// The object as admin-API JSON.
    public var json: String {
        var s = "{\"preset\":" + JSONWriter.quote(preset) + ",\"url\":" + JSONWriter.quote(url)
        for (k, v) in options.sorted(by: { $0.key < $1.key }) { s += "," + JSONWriter.quote(k) + ":" + JSONWriter.quote(v) }
        if !additionalParams.isEmpty {
            s +=
                ",\"additionalParams\":{"
                + additionalParams.map { JSONWriter.quote($0.0) + ":" + JSONWriter.quote($0.1) }.joined(separator: ",") + "}"
        }
        if preset == "webhook" {
            s += ",\"method\":" + JSONWriter.quote(method)
            s += ",\"headers\":{" + headers.map { JSONWriter.quote($0.0) + ":" + JSONWriter.quote($0.1) }.joined(separator: ",") + "}"
            if let body { s += ",\"body\":" + JSONWriter.quote(body) }
        }
        return s + "}"
    }
}
