import APNs
import Emulator
import FCM
import Glibc
import Journal
import PushCore
import Runtime

/// The commands besides `serve` (`CommandSpec.all` lists them with their options).
enum Commands {
    /// Runs a command; returns its stdout text or throws a one-line error (`UsageError` for a
    /// command line that cannot run as given). `--help` anywhere after a command's words prints
    /// that command's usage and options.
    static func run(_ args: [String]) throws -> String {
        guard let first = args.first else { throw UsageError("missing command") }
        guard let (spec, afterWords) = CommandSpec.find(args) else {
            if CommandSpec.all.contains(where: { $0.words.first == first }) {
                if args.contains("--help") || args.contains("-h") { return CommandSpec.group(first) }
                let words = CommandSpec.all.filter { $0.words.first == first }.map { $0.words.dropFirst().joined(separator: " ") }
                let hint = args.count > 1 ? NearestName.suggest(args[1], in: words).map { "did you mean '\(first) \($0)'?\n" } ?? "" : ""
                throw UsageError(hint + CommandSpec.group(first))
            }
            throw UsageError(unknownCommand(first))
        }
        if afterWords.contains("--help") || afterWords.contains("-h") { return spec.help }
        var rest = afterWords
        var operand = ""
        if let name = spec.operand {
            guard let value = rest.first, !value.hasPrefix("--") else {
                throw UsageError("\(spec.words.joined(separator: " ")) needs \(name)\nusage: " + spec.usageLine)
            }
            operand = value
            rest.removeFirst()
        }
        let f = try flags(rest, spec: spec)
        for option in spec.options where option.required && f[option.name] == nil {
            throw UsageError(
                "\(spec.words.joined(separator: " ")) needs --\(option.name) \(option.value) (\(option.help))\nusage: " + spec.usageLine)
        }
        let (answer, view) = try answer(spec.words.joined(separator: " "), operand, f)
        guard let view, f["json"] == nil else { return answer }
        return ReadableOutput.render(answer, view)
    }

    /// "unknown command 'devcies' (did you mean devices?)".
    static func unknownCommand(_ word: String) -> String {
        var names: [String] = []
        for spec in CommandSpec.all where !names.contains(spec.words[0]) { names.append(spec.words[0]) }
        let hint = NearestName.suggest(word, in: names + ["serve", "help", "version"]).map { "did you mean \($0)? " } ?? ""
        return "unknown command '\(word)' (\(hint)see pushemu --help)"
    }

    /// What a command prints: its text, and how to show it readably when it is an admin API
    /// answer (nil: printed as it is).
    static func answer(_ command: String, _ operand: String, _ f: [String: String]) throws -> (String, ReadableOutput.View?) {
        let devices = "/emulator/v1/devices/"
        switch command {
        case "credentials apns": return (try Credentials.apns(f), nil)
        case "credentials fcm": return (try Credentials.fcm(f), nil)
        case "credentials vapid": return (try Credentials.vapid(f), nil)
        case "token apns": return (try apnsToken(f), nil)
        case "token vapid": return (try Credentials.vapidToken(f), nil)
        case "env": return (try ProxyCommands.env(f), nil)
        case "ca": return (try ProxyCommands.ca(f), nil)
        case "devices add": return (try addDevice(f), .fields)
        case "devices list":
            var query = "?limit=" + (f["limit"] ?? "100")
            if let label = f["label"] { query += "&label=" + PercentEncoding.encode(label) }
            if let cursor = f["cursor"] { query += "&cursor=" + PercentEncoding.encode(cursor) }
            return (try call("GET", server(f) + "/emulator/v1/devices" + query), .devices)
        case "devices show": return (try call("GET", server(f) + devices + PercentEncoding.encode(operand)), .fields)
        case "devices uninstall": return (try call("DELETE", server(f) + devices + PercentEncoding.encode(operand)), .fields)
        case "activity start", "activity subscribe", "activity end", "activity push-to-start":
            return (try activity(String(command.dropFirst(9)), device: operand, f), .fields)
        case "activity list": return (try activity("list", device: operand, f), .activities)
        case "notifications list":
            let query = search(f, extra: ["limit", "order", "cursor"])
            return (try call("GET", server(f) + "/emulator/v1/notifications" + query), .notifications)
        case "notifications latest":
            return (try call("GET", server(f) + "/emulator/v1/notifications/latest" + search(f, extra: ["wait"])), .fields)
        case "notifications show":
            return (try call("GET", server(f) + "/emulator/v1/notifications/" + PercentEncoding.encode(operand)), .fields)
        case "notifications delete":
            return (try call("DELETE", server(f) + "/emulator/v1/notifications" + search(f, extra: [])), .fields)
        case "fleet create": return (try createFleet(f), .fields)
        case "fleet list": return (try call("GET", server(f) + "/emulator/v1/fleets"), .fleets)
        case "fleet show": return (try call("GET", server(f) + "/emulator/v1/fleets/" + PercentEncoding.encode(operand)), .fields)
        case "fleet tokens": return (try fleetPages(operand, f, of: "tokens", pageSize: 100_000), nil)
        case "fleet subscriptions": return (try fleetPages(operand, f, of: "subscriptions", pageSize: 10_000), nil)
        case "faults list": return (try call("GET", server(f) + "/emulator/v1/faults"), .faults)
        case "faults add": return (try FaultCommands.add(operand, f), .fields)
        case "faults delete": return (try FaultCommands.delete(operand, f), .fields)
        case "reset": return (try call("POST", server(f) + "/emulator/v1/reset" + (f["all"] != nil ? "?all=true" : ""), body: ""), .fields)
        case "stats": return (try call("GET", server(f) + "/emulator/v1/stats"), .fields)
        case "state export": return (try StateCommands.export(f), nil)
        case "state import": return (try StateCommands.importFile(operand, f), .fields)
        case "export": return (try JournalCommands.export(f), nil)
        case "report": return (try JournalCommands.report(f), nil)
        case "campaigns":
            let pairs = ["campaign", "since"].compactMap { name in f[name].map { name + "=" + PercentEncoding.encode($0) } }
            let query = pairs.isEmpty ? "" : "?" + pairs.joined(separator: "&")
            return (try call("GET", server(f) + "/emulator/v1/campaigns" + query), .campaigns)
        default: throw UsageError(unknownCommand(command))
        }
    }

    /// The search flags (and `extra` ones) as a query string.
    static func search(_ f: [String: String], extra: [String]) -> String {
        let names = ["q", "provider", "token", "campaign"] + extra
        let pairs = names.compactMap { name in f[name].map { name + "=" + PercentEncoding.encode($0) } }
        return pairs.isEmpty ? "" : "?" + pairs.joined(separator: "&")
    }

    /// A JSON array of the comma-separated `list`.
    static func jsonList(_ list: String) -> String {
        "[" + list.split(separator: ",").map { JSONWriter.quote(String($0)) }.joined(separator: ",") + "]"
    }

    /// `--permission`, `--app-state` (a name, or a JSON object of shares for a fleet),
    /// `--url-schemes`, `--sounds`, as the admin API's fields (it validates them).
    static func stateFields(_ f: [String: String]) -> [String] {
        var fields: [String] = []
        for (key, field) in [("permission", "permission"), ("app-state", "appState")] {
            if let value = f[key] {
                fields.append(JSONWriter.quote(field) + ":" + (value.hasPrefix("{") ? value : JSONWriter.quote(value)))
            }
        }
        for (key, field) in [("url-schemes", "urlSchemes"), ("sounds", "sounds")] {
            if let list = f[key] { fields.append(JSONWriter.quote(field) + ":" + jsonList(list)) }
        }
        return fields
    }

    /// `pushemu devices add`: `POST /emulator/v1/devices`.
    static func addDevice(_ f: [String: String]) throws -> String {
        var fields: [String] = []
        for key in ["platform", "app", "token", "environment", "project"] {
            if let value = f[key] { fields.append(JSONWriter.quote(key) + ":" + JSONWriter.quote(value)) }
        }
        for key in ["tracking", "registration", "behavior"] { if let value = f[key] { fields.append(JSONWriter.quote(key) + ":" + value) } }
        for key in ["labels", "topics"] { if let list = f[key] { fields.append(JSONWriter.quote(key) + ":" + jsonList(list)) } }
        fields += stateFields(f)
        if let fcm = f["fcm-token"] { fields.append("\"fcmToken\":" + (fcm == "new" ? "true" : JSONWriter.quote(fcm))) }
        for (key, field) in [("browser", "browser"), ("application-server-key", "applicationServerKey")] {
            if let value = f[key] { fields.append(JSONWriter.quote(field) + ":" + JSONWriter.quote(value)) }
        }
        if f["local-endpoint"] != nil { fields.append("\"localEndpoint\":true") }
        return try call("POST", server(f) + "/emulator/v1/devices", body: "{" + fields.joined(separator: ",") + "}")
    }

    /// `pushemu activity ...`: the Live Activity admin endpoints of one device.
    static func activity(_ command: String, device: String, _ f: [String: String]) throws -> String {
        let base = try server(f) + "/emulator/v1/devices/" + PercentEncoding.encode(device)
        let activityID = f["activity"].map { PercentEncoding.encode($0) } ?? ""
        switch command {
        case "start":
            var fields = ["\"attributesType\":" + JSONWriter.quote(f["type"] ?? "")]
            if let value = f["attributes"] { fields.append("\"attributes\":" + value) }
            if let value = f["content-state"] { fields.append("\"contentState\":" + value) }
            if let value = f["channel"] { fields.append("\"channel\":" + JSONWriter.quote(value)) }
            return try call("POST", base + "/activities", body: "{" + fields.joined(separator: ",") + "}")
        case "subscribe":
            return try call(
                "POST", base + "/activities/\(activityID)/channel", body: "{\"channel\":" + JSONWriter.quote(f["channel"] ?? "") + "}")
        case "end": return try call("DELETE", base + "/activities/\(activityID)")
        case "push-to-start":
            return try call("POST", base + "/push-to-start", body: "{\"attributesType\":" + JSONWriter.quote(f["type"] ?? "") + "}")
        default: return try call("GET", base + "/activities")
        }
    }

    /// `pushemu fleet create`: `POST /emulator/v1/fleets`.
    static func createFleet(_ f: [String: String]) throws -> String {
        var fields: [String] = []
        for (key, field) in [
            ("platform", "platform"), ("app", "app"), ("environment", "environment"), ("project", "project"), ("browser", "browser"),
            ("application-server-key", "applicationServerKey"),
        ] {
            if let value = f[key] { fields.append(JSONWriter.quote(field) + ":" + JSONWriter.quote(value)) }
        }
        for (key, field) in [("count", "count"), ("seed", "seed"), ("register-rate", "registerRate")] {
            if let value = f[key] {
                guard Int(value) != nil else { throw UsageError("--\(key) must be an integer, got '\(value)'") }
                fields.append(JSONWriter.quote(field) + ":" + value)
            }
        }
        for key in ["tracking", "registration", "behavior"] { if let value = f[key] { fields.append(JSONWriter.quote(key) + ":" + value) } }
        if let labels = f["labels"] { fields.append("\"labels\":" + jsonList(labels)) }
        fields += stateFields(f)
        return try call("POST", server(f) + "/emulator/v1/fleets", body: "{" + fields.joined(separator: ",") + "}")
    }

    /// `pushemu fleet tokens ID` (one token per line) and `pushemu fleet subscriptions ID` (a web
    /// fleet's, one JSON object per line): all of them by default, fetched in pages of
    /// `pageSize` and streamed (a 10-million-member fleet never sits in memory at once).
    static func fleetPages(_ id: String, _ f: [String: String], of list: String, pageSize: Int) throws -> String {
        var offset = Int(f["offset"] ?? "0") ?? 0
        var left = Int(f["limit"] ?? "") ?? Int.max
        var out = ""
        var extra = ""
        if let e = f["endpoints"] {
            guard e == "real" || e == "local" else { throw UsageError("--endpoints must be real or local") }
            extra = "&endpoints=" + e
        }
        while left > 0 {
            let page = min(left, pageSize)
            let r = try AdminClient.request(
                "GET", try server(f) + "/emulator/v1/fleets/\(id)/\(list)?offset=\(offset)&limit=\(page)" + extra)
            guard r.status == 200 else { throw ConfigurationError("the emulator answered \(r.status): \(r.body)") }
            let tokens = Array(r.body.utf8).withUnsafeBytes { raw -> [String] in
                var t: [JSONToken] = []
                var limits = JSONLimits()
                limits.maxTokens = 1 << 20
                guard JSONParser.parse(raw, into: &t, limits: limits) == nil else { return [] }
                let v = JSONView(bytes: raw, tokens: t)
                var items: [String] = []
                if list == "tokens", let a = v.member(0, "tokens") { v.forEachElement(a) { items.append(v.string($0)) } }
                if list == "subscriptions", let a = v.member(0, "subscriptions") {
                    v.forEachElement(a) { items.append(String(decoding: v.raw($0), as: UTF8.self)) }
                }
                return items
            }
            if tokens.isEmpty {
                if offset == 0 { throw ConfigurationError("no \(list): \(r.body.prefix(200))") }
                break
            }
            // Streamed page by page: a 10-million-token fleet never sits in memory at once.
            out = tokens.joined(separator: "\n") + "\n"
            var bytes = Array(out.utf8)[...]
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                if n <= 0 {
                    if errno == EINTR { continue }
                    throw ConfigurationError("cannot write the \(list)")
                }
                bytes = bytes.dropFirst(n)
            }
            out = ""
            offset += tokens.count
            left -= tokens.count
            if tokens.count < page { break }
        }
        return out
    }

    static func server(_ f: [String: String]) throws -> String { try CommandSettings.server(f) }

    static func call(_ method: String, _ url: String, body: String? = nil) throws -> String {
        let r = try AdminClient.request(method, url, body: body)
        guard (200..<300).contains(r.status) else { throw ConfigurationError("the emulator answered \(r.status): \(r.body)") }
        return r.body + "\n"
    }

    /// `--name value`, `--name=value` and switches, each one the command has (an unknown one is
    /// refused with the nearest it has).
    static func flags(_ args: [String], spec: CommandSpec) throws -> [String: String] {
        let allowed = spec.allowed
        let switches = Set(spec.options.filter(\.isSwitch).map(\.name))
        var out: [String: String] = [:]
        var i = 0
        while i < args.count {
            let a = args[i]
            guard a.hasPrefix("--") else {
                throw UsageError("unexpected argument '\(a)'\nusage: " + spec.usageLine)
            }
            var name = String(a.dropFirst(2))
            var value: String? = nil
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard allowed.contains(name) else {
                let near = NearestName.suggest(name, in: spec.options.map(\.name)).map { "did you mean --\($0)? " } ?? ""
                throw UsageError(
                    "unknown option '--\(name)' (\(near)see pushemu \(spec.words.joined(separator: " ")) --help)")
            }
            if value == nil && switches.contains(name) { value = "true" }
            if value == nil {
                guard i + 1 < args.count else { throw UsageError("option '--\(name)' needs a value") }
                value = args[i + 1]
                i += 1
            }
            out[name] = value
            i += 1
        }
        return out
    }

    static func apnsToken(_ f: [String: String]) throws -> String {
        guard let keyPath = f["key"], let kid = f["key-id"], let team = f["team-id"] else {
            throw UsageError("usage: pushemu token apns --key FILE --key-id K --team-id T [--iat SECONDS]")
        }
        let pem = String(decoding: try Emulator.readFile(keyPath, what: "key"), as: UTF8.self)
        guard let key = ES256.Key.fromPEM(pem, isPrivate: true) else {
            throw ConfigurationError("'\(keyPath)' is not a P-256 private key (.p8)")
        }
        var iat = Clock.nowSeconds()
        if let s = f["iat"] {
            guard let v = Int64(s) else { throw UsageError("--iat must be an integer (seconds since the epoch)") }
            iat = v
        }
        guard let jwt = ProviderToken.make(key: key, keyID: kid, teamID: team, issuedAt: iat) else {
            throw ConfigurationError("signing failed")
        }
        return jwt + "\n"
    }
}
