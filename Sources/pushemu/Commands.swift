import APNs
import Emulator
import FCM
import Glibc
import Journal
import PushCore

/// The commands besides `serve` (`CommandSpec.all` lists them with their options).
enum Commands {
    /// Runs a command; returns its stdout text or throws a one-line error. `--help` anywhere
    /// after a command's words prints that command's usage and options.
    static func run(_ args: [String]) throws -> String {
        guard let first = args.first else { throw ConfigurationError("missing command") }
        guard let (spec, afterWords) = CommandSpec.find(args) else {
            if CommandSpec.all.contains(where: { $0.words.first == first }) {
                if args.contains("--help") || args.contains("-h") { return CommandSpec.group(first) }
                throw ConfigurationError(CommandSpec.group(first))
            }
            throw ConfigurationError("unknown command '\(first)' (see pushemu --help)")
        }
        if afterWords.contains("--help") || afterWords.contains("-h") { return spec.help }
        var rest = afterWords
        var operand = ""
        if spec.operand != nil {
            guard let value = rest.first, !value.hasPrefix("--") else { throw ConfigurationError("usage: " + spec.usageLine) }
            operand = value
            rest.removeFirst()
        }
        let f = try flags(rest, allowed: spec.allowed, switches: Set(spec.options.filter(\.isSwitch).map(\.name)))
        switch spec.words.joined(separator: " ") {
        case "credentials apns": return try apnsCredentials(f)
        case "credentials fcm": return try fcmCredentials(f)
        case "token apns": return try apnsToken(f)
        case "env": return try ProxyCommands.env(f, environment: ServeOptions.processEnvironment())
        case "ca": return try ProxyCommands.ca(f)
        case "devices add": return try addDevice(f)
        case "devices list":
            var query = "?limit=" + (f["limit"] ?? "100")
            if let label = f["label"] { query += "&label=" + PercentEncoding.encode(label) }
            return try call("GET", server(f) + "/emulator/v1/devices" + query)
        case "devices show": return try call("GET", server(f) + "/emulator/v1/devices/" + PercentEncoding.encode(operand))
        case "devices uninstall": return try call("DELETE", server(f) + "/emulator/v1/devices/" + PercentEncoding.encode(operand))
        case "activity start", "activity subscribe", "activity end", "activity list", "activity push-to-start":
            return try activity(spec.words[1], device: operand, f)
        case "notifications list":
            return try call("GET", server(f) + "/emulator/v1/notifications" + search(f, extra: ["limit", "order", "cursor"]))
        case "notifications latest":
            return try call("GET", server(f) + "/emulator/v1/notifications/latest" + search(f, extra: ["wait"]))
        case "notifications show":
            return try call("GET", server(f) + "/emulator/v1/notifications/" + PercentEncoding.encode(operand))
        case "notifications delete": return try call("DELETE", server(f) + "/emulator/v1/notifications" + search(f, extra: []))
        case "fleet create": return try createFleet(f)
        case "fleet tokens": return try fleetTokens(operand, f)
        case "state export": return try StateCommands.export(f)
        case "state import": return try StateCommands.importFile(operand, f)
        case "export": return try JournalCommands.export(f)
        case "report": return try JournalCommands.report(f)
        case "campaigns":
            let pairs = ["campaign", "since"].compactMap { name in f[name].map { name + "=" + PercentEncoding.encode($0) } }
            return try call("GET", server(f) + "/emulator/v1/campaigns" + (pairs.isEmpty ? "" : "?" + pairs.joined(separator: "&")))
        default: throw ConfigurationError("unknown command '\(first)' (see pushemu --help)")
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
        return try call("POST", server(f) + "/emulator/v1/devices", body: "{" + fields.joined(separator: ",") + "}")
    }

    /// `pushemu activity ...`: the Live Activity admin endpoints of one device.
    static func activity(_ command: String, device: String, _ f: [String: String]) throws -> String {
        let base = server(f) + "/emulator/v1/devices/" + PercentEncoding.encode(device)
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
        for key in ["platform", "app", "environment", "project"] {
            if let value = f[key] { fields.append(JSONWriter.quote(key) + ":" + JSONWriter.quote(value)) }
        }
        for (key, field) in [("count", "count"), ("seed", "seed"), ("register-rate", "registerRate")] {
            if let value = f[key] {
                guard Int(value) != nil else { throw ConfigurationError("--\(key) must be an integer") }
                fields.append(JSONWriter.quote(field) + ":" + value)
            }
        }
        for key in ["tracking", "registration", "behavior"] { if let value = f[key] { fields.append(JSONWriter.quote(key) + ":" + value) } }
        if let labels = f["labels"] { fields.append("\"labels\":" + jsonList(labels)) }
        fields += stateFields(f)
        return try call("POST", server(f) + "/emulator/v1/fleets", body: "{" + fields.joined(separator: ",") + "}")
    }

    /// `pushemu fleet tokens ID`: one token per line (all of them by default), fetched in pages
    /// and streamed (a 10-million-token fleet never sits in memory at once).
    static func fleetTokens(_ id: String, _ f: [String: String]) throws -> String {
        var offset = Int(f["offset"] ?? "0") ?? 0
        var left = Int(f["limit"] ?? "") ?? Int.max
        var out = ""
        while left > 0 {
            let page = min(left, 100_000)
            let r = try AdminClient.request("GET", server(f) + "/emulator/v1/fleets/\(id)/tokens?offset=\(offset)&limit=\(page)")
            guard r.status == 200 else { throw ConfigurationError("the emulator answered \(r.status): \(r.body)") }
            let tokens = Array(r.body.utf8).withUnsafeBytes { raw -> [String] in
                var t: [JSONToken] = []
                var limits = JSONLimits()
                limits.maxTokens = 1 << 20
                guard JSONParser.parse(raw, into: &t, limits: limits) == nil else { return [] }
                let v = JSONView(bytes: raw, tokens: t)
                var list: [String] = []
                if let a = v.member(0, "tokens") { v.forEachElement(a) { list.append(v.string($0)) } }
                return list
            }
            if tokens.isEmpty {
                if offset == 0 { throw ConfigurationError("no tokens: \(r.body.prefix(200))") }
                break
            }
            // Streamed page by page: a 10-million-token fleet never sits in memory at once.
            out = tokens.joined(separator: "\n") + "\n"
            var bytes = Array(out.utf8)[...]
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                if n <= 0 {
                    if errno == EINTR { continue }
                    throw ConfigurationError("cannot write the tokens")
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

    static func server(_ f: [String: String]) -> String {
        var s = f["server"] ?? "http://127.0.0.1:8080"
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }

    static func call(_ method: String, _ url: String, body: String? = nil) throws -> String {
        let r = try AdminClient.request(method, url, body: body)
        guard (200..<300).contains(r.status) else { throw ConfigurationError("the emulator answered \(r.status): \(r.body)") }
        return r.body + "\n"
    }

    static func flags(_ args: [String], allowed: Set<String>, switches: Set<String> = []) throws -> [String: String] {
        var out: [String: String] = [:]
        var i = 0
        while i < args.count {
            let a = args[i]
            guard a.hasPrefix("--") else { throw ConfigurationError("unexpected argument '\(a)'") }
            var name = String(a.dropFirst(2))
            var value: String? = nil
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard allowed.contains(name) else { throw ConfigurationError("unknown option '--\(name)'") }
            if value == nil && switches.contains(name) { value = "true" }
            if value == nil {
                guard i + 1 < args.count else { throw ConfigurationError("option '--\(name)' needs a value") }
                value = args[i + 1]
                i += 1
            }
            out[name] = value
            i += 1
        }
        return out
    }

    /// Generates a key pair, writes `AuthKey_<KEYID>.p8` to `--out` (default .) and registers the
    /// public key under `--data-dir` (default ./.pushemu), where a running emulator finds it.
    static func apnsCredentials(_ f: [String: String]) throws -> String {
        var env: APNsEnvironment? = nil
        if let e = f["environment"] {
            guard let v = APNsEnvironment(rawValue: e) else { throw ConfigurationError("--environment must be sandbox or production") }
            env = v
        }
        for id in [f["team-id"], f["key-id"]].compactMap({ $0 }) where !APNsKeyStore.isValidID(id) {
            throw ConfigurationError("'\(id)' is not a 10-character id (letters and digits)")
        }
        let topics = f["topics"].map { $0.split(separator: ",").map(String.init) }
        let dataDir = f["data-dir"] ?? "./.pushemu"
        let (entry, pem) = try APNsKeyStore.makeKey(teamID: f["team-id"], keyID: f["key-id"], environment: env, topics: topics)
        try APNsKeyStore.writeDropIn(entry, directory: dataDir + "/apns/keys")
        let outDir = f["out"] ?? "."
        try Emulator.makeDirectory(outDir)
        let path = outDir + "/AuthKey_\(entry.keyID).p8"
        guard let file = fopen(path, "w") else { throw ConfigurationError("cannot write \(path): \(String(cString: strerror(errno)))") }
        fputs(pem, file)
        fclose(file)
        chmod(path, 0o600)
        return "{\"teamId\":\"\(entry.teamID)\",\"keyId\":\"\(entry.keyID)\",\"keyFile\":" + JSONWriter.quote(path) + "}\n"
    }

    /// Generates a service account for `--project`, registers its public key under `--data-dir`
    /// (default ./.pushemu), where a running emulator finds it, and writes the key file to
    /// `--out` (default: stdout). `token_uri` defaults to http://127.0.0.1:8080/token; `google`
    /// writes Google's own (https://oauth2.googleapis.com/token), served through the proxy.
    static func fcmCredentials(_ f: [String: String]) throws -> String {
        guard let project = f["project"] else {
            throw ConfigurationError("usage: pushemu credentials fcm --project P [--out FILE] [--token-uri URL]")
        }
        var tokenURI = f["token-uri"] ?? "http://127.0.0.1:8080/token"
        // Google's own token endpoint, as a production key file names it: reached through the proxy.
        if tokenURI == "google" { tokenURI = "https://oauth2.googleapis.com/token" }
        guard tokenURI.hasPrefix("http://") || tokenURI.hasPrefix("https://") else {
            throw ConfigurationError("--token-uri must be an http(s) URL")
        }
        let json: String
        do {
            let (account, privatePEM) = try FCMServiceAccounts.makeAccount(projectID: project)
            try FCMServiceAccounts.writeDropIn(account, directory: (f["data-dir"] ?? "./.pushemu") + "/fcm/service-accounts")
            json = FCMServiceAccounts.serviceAccountJSON(account, privateKeyPEM: privatePEM, tokenURI: tokenURI)
        } catch {
            throw ConfigurationError("\(error)")
        }
        guard let path = f["out"] else { return json }
        do {
            try Files.writeAtomically(path, Array(json.utf8), mode: 0o600)
        } catch {
            throw ConfigurationError("\(error)")
        }
        return "{\"project\":" + JSONWriter.quote(project) + ",\"credentialsFile\":" + JSONWriter.quote(path) + "}\n"
    }

    static func apnsToken(_ f: [String: String]) throws -> String {
        guard let keyPath = f["key"], let kid = f["key-id"], let team = f["team-id"] else {
            throw ConfigurationError("usage: pushemu token apns --key FILE --key-id K --team-id T [--iat SECONDS]")
        }
        let pem = String(decoding: try Emulator.readFile(keyPath, what: "key"), as: UTF8.self)
        guard let key = ES256.Key.fromPEM(pem, isPrivate: true) else {
            throw ConfigurationError("'\(keyPath)' is not a P-256 private key (.p8)")
        }
        var iat = Clock.nowSeconds()
        if let s = f["iat"] {
            guard let v = Int64(s) else { throw ConfigurationError("--iat must be an integer (seconds since the epoch)") }
            iat = v
        }
        guard let jwt = ProviderToken.make(key: key, keyID: kid, teamID: team, issuedAt: iat) else {
            throw ConfigurationError("signing failed")
        }
        return jwt + "\n"
    }
}
