import PushCore

/// A device's (or fleet's, or the server's) tracking setup: `{"preset": NAME, "url": BASE_URL,
/// ...preset options}`. For `webhook`: `"method"`, `"url"` (a template), `"headers"` (name ->
/// template), `"body"` (a template), `"events"` (default both), `"when"` (a payload path that
/// must be present).
public struct TrackingConfig: Sendable, Equatable {
    public var preset: String
    public var url: String
    /// Preset options (appCode, apiToken, appId, apiKey, tagReceive, ...), as text.
    public var options: [String: String]
    public var method = "GET"
    public var headers: [(String, String)] = []
    public var body: String?
    public var events: Set<TrackingEvent> = TrackingEvent.notificationEvents
    public var when: String?

    public static var presets: [String] { TrackingPresets.names }

    public init(preset: String, url: String, options: [String: String] = [:]) {
        self.preset = preset
        self.url = url
        self.options = options
    }

    public static func == (a: TrackingConfig, b: TrackingConfig) -> Bool {
        a.preset == b.preset && a.url == b.url && a.options == b.options && a.method == b.method && a.body == b.body
            && a.events == b.events && a.when == b.when && a.headers.map { $0.0 + ":" + $0.1 } == b.headers.map { $0.0 + ":" + $0.1 }
    }

    public struct ConfigError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Parses the admin API's `"tracking"` object (the JSON text of it): the fields below, and
    /// any other as a preset option (a string, number or boolean, kept as text).
    public static func parse(_ json: [UInt8]) throws -> TrackingConfig {
        var preset: String?
        var url: String?
        var options: [String: String] = [:]
        var method: String?
        var headers: [(String, String)] = []
        var body: String?
        var events: Set<TrackingEvent>?
        var when: String?
        try JSONObjectReader.read(
            json, path: "tracking.", example: #"{"preset":"adobe-campaign","url":"http://host:port"}"#
        ) { r in
            preset = try r.string("preset")
            url = try r.string("url")
            method = try r.string("method")?.uppercased()
            body = try r.string("body")
            when = try r.string("when")
            if let h = try r.stringPairs("headers") { headers = h }
            if let list = try r.strings("events") {
                var set = Set<TrackingEvent>()
                for name in list {
                    guard let ev = TrackingEvent(rawValue: name), TrackingEvent.notificationEvents.contains(ev) else {
                        throw r.failure("events", "holds receive and/or open")
                    }
                    set.insert(ev)
                }
                events = set
            }
            try TrackingConfig.readOptions(&r, into: &options)
        }
        guard let preset else { throw ConfigError(description: "tracking.preset is required: one of \(presets.joined(separator: ", "))") }
        guard presets.contains(preset) else {
            throw ConfigError(description: "unknown tracking preset '\(preset)': one of \(presets.joined(separator: ", "))")
        }
        var c = TrackingConfig(preset: preset, url: url ?? "", options: options)
        if preset == "webhook" {
            guard let u = url, !u.isEmpty else { throw ConfigError(description: "a webhook needs a url (a template)") }
            c.method = method ?? "POST"
            c.headers = headers
            c.body = body
            c.when = when
        } else if TrackingPresets.needsURL(preset: preset, options: c.options) {
            guard let u = url, !u.isEmpty else { throw ConfigError(description: "tracking.url is required for \(preset)") }
        }
        if let u = url, !u.isEmpty, !(u.hasPrefix("http://") || u.hasPrefix("https://")) {
            throw ConfigError(description: "tracking.url must start with http:// or https://")
        }
        if let events { c.events = events }
        return c
    }

    /// The members `r` did not read, as preset options (shared with `RegistrationConfig`).
    static func readOptions(_ r: inout JSONObjectReader, into options: inout [String: String]) throws {
        for (name, i) in r.remaining() {
            guard let text = optionText(r.view, i) else { throw r.failure(name, "must be a string, number or boolean") }
            options[name] = text
        }
    }

    /// A preset option's value as text: a string as is, a number or boolean as written; nil for
    /// anything else.
    static func optionText(_ v: JSONView, _ val: Int) -> String? {
        switch v.tokens[val].kind {
        case .string: return v.string(val)
        case .number, .true, .false: return String(decoding: v.raw(val), as: UTF8.self)
        default: return nil
        }
    }

    /// The object as admin-API JSON.
    public var json: String {
        var s = "{\"preset\":" + JSONWriter.quote(preset) + ",\"url\":" + JSONWriter.quote(url)
        for (k, v) in options.sorted(by: { $0.key < $1.key }) { s += "," + JSONWriter.quote(k) + ":" + JSONWriter.quote(v) }
        if preset == "webhook" {
            s += ",\"method\":" + JSONWriter.quote(method)
            s += ",\"headers\":{" + headers.map { JSONWriter.quote($0.0) + ":" + JSONWriter.quote($0.1) }.joined(separator: ",") + "}"
            if let body { s += ",\"body\":" + JSONWriter.quote(body) }
            if let when { s += ",\"when\":" + JSONWriter.quote(when) }
        }
        s +=
            ",\"events\":[" + TrackingEvent.allCases.filter { events.contains($0) }.map { "\"\($0.rawValue)\"" }.joined(separator: ",")
            + "]"
        return s + "}"
    }
}
