import APNs
import FCM
import Glibc
import PushCore

/// `pushemu credentials ...` and `pushemu token ...`: the commands besides `serve`.
public enum Commands {
    /// Runs a command; returns its stdout text or throws a one-line error.
    public static func run(_ args: [String]) throws -> String {
        guard let command = args.first else { throw ConfigurationError("missing command") }
        let rest = Array(args.dropFirst())
        switch command {
        case "credentials":
            if rest.first == "fcm" {
                return try fcmCredentials(try flags(Array(rest.dropFirst()), allowed: ["project", "out", "token-uri", "data-dir"]))
            }
            guard rest.first == "apns" else { throw ConfigurationError("usage: pushemu credentials apns|fcm [options] (see pushemu --help)") }
            return try apnsCredentials(try flags(Array(rest.dropFirst()),
                                                 allowed: ["team-id", "key-id", "out", "data-dir", "environment", "topics"]))
        case "token":
            guard rest.first == "apns" else { throw ConfigurationError("usage: pushemu token apns --key FILE --key-id K --team-id T") }
            return try apnsToken(try flags(Array(rest.dropFirst()), allowed: ["key", "key-id", "team-id", "iat"]))
        default:
            throw ConfigurationError("unknown command '\(command)' (see pushemu --help)")
        }
    }

    static func flags(_ args: [String], allowed: Set<String>) throws -> [String: String] {
        var out: [String: String] = [:]
        var i = 0
        while i < args.count {
            let a = args[i]
            guard a.hasPrefix("--") else { throw ConfigurationError("unexpected argument '\(a)'") }
            var name = String(a.dropFirst(2)), value: String? = nil
            if let eq = name.firstIndex(of: "=") { value = String(name[name.index(after: eq)...]); name = String(name[..<eq]) }
            guard allowed.contains(name) else { throw ConfigurationError("unknown option '--\(name)'") }
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
        let store = APNsKeyStore(directory: dataDir + "/apns/keys")
        let (entry, pem) = try store.generate(teamID: f["team-id"], keyID: f["key-id"], environment: env, topics: topics)
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
    /// `--out` (default: stdout). `token_uri` defaults to http://127.0.0.1:8080/token.
    static func fcmCredentials(_ f: [String: String]) throws -> String {
        guard let project = f["project"] else { throw ConfigurationError("usage: pushemu credentials fcm --project P [--out FILE] [--token-uri URL]") }
        let tokenURI = f["token-uri"] ?? "http://127.0.0.1:8080/token"
        guard tokenURI.hasPrefix("http://") || tokenURI.hasPrefix("https://") else { throw ConfigurationError("--token-uri must be an http(s) URL") }
        let accounts = FCMServiceAccounts(directory: (f["data-dir"] ?? "./.pushemu") + "/fcm/service-accounts")
        let json: String
        do {
            (_, json) = try accounts.generate(projectID: project, tokenURI: tokenURI)
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
        guard let key = ES256.Key.fromPEM(pem, isPrivate: true) else { throw ConfigurationError("'\(keyPath)' is not a P-256 private key (.p8)") }
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
