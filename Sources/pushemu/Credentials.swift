import APNs
import Emulator
import FCM
import Glibc
import PushCore
import Runtime
import Transport
import WebPush

/// `pushemu credentials apns|fcm`: a key made here, its private half written for the sender,
/// its public half registered with the emulator. With `--server URL` it is registered over the
/// admin API of that running emulator (nothing depends on directories); otherwise it is written
/// to the data directory (`--data-dir`, `PUSHEMU_DATA_DIR`, the config file's, `./.pushemu`),
/// where `pushemu serve` with the same settings finds it, running or not.
enum Credentials {
    static func apns(_ f: [String: String]) throws -> String {
        var env: APNsEnvironment? = nil
        if let e = f["environment"] {
            guard let v = APNsEnvironment(rawValue: e) else { throw UsageError("--environment must be sandbox or production, got '\(e)'") }
            env = v
        }
        for id in [f["team-id"], f["key-id"]].compactMap({ $0 }) where !APNsKeyStore.isValidID(id) {
            throw UsageError("'\(id)' is not a 10-character id (letters and digits)")
        }
        let topics = f["topics"].map { $0.split(separator: ",").map(String.init) }
        let (entry, pem) = try APNsKeyStore.makeKey(teamID: f["team-id"], keyID: f["key-id"], environment: env, topics: topics)
        let registered: String
        if f["server"] != nil {
            try guardOneDestination(f)
            var body = JSONObjectWriter()
            body.add("teamId", entry.teamID)
            body.add("keyId", entry.keyID)
            body.add("publicKeyPem", entry.publicKeyPEM)
            if let env { body.add("environment", env.rawValue) }
            if let topics { body.add("topics", strings: topics) }
            let server = try CommandSettings.server(f)
            _ = try Commands.call("POST", server + "/emulator/v1/apns/keys", body: body.text)
            registered = server
        } else {
            let directory = try CommandSettings.dataDirectory(f) + "/apns/keys"
            try APNsKeyStore.writeDropIn(entry, directory: directory)
            registered = Files.absolute(directory)
        }
        let outDir = f["out"] ?? "."
        try Emulator.makeDirectory(outDir)
        let path = outDir + "/AuthKey_\(entry.keyID).p8"
        do {
            try Files.writeAtomically(path, Array(pem.utf8), mode: 0o600)
        } catch {
            throw ConfigurationError("\(error)")
        }
        var out = JSONObjectWriter()
        out.add("teamId", entry.teamID)
        out.add("keyId", entry.keyID)
        out.add("keyFile", path)
        out.add("registeredWith", registered)
        return out.text + "\n"
    }

    /// Writes the service-account key file to `--out` (default: standard output, the file
    /// itself). `token_uri` defaults to the emulator's `/token`; `google` writes Google's own
    /// (https://oauth2.googleapis.com/token), served through the proxy.
    static func fcm(_ f: [String: String]) throws -> String {
        let project = f["project"] ?? ""
        let server = f["server"] != nil ? try CommandSettings.server(f) : nil
        var tokenURI = f["token-uri"] ?? (server ?? "http://127.0.0.1:8080") + "/token"
        if tokenURI == "google" { tokenURI = "https://oauth2.googleapis.com/token" }
        guard tokenURI.hasPrefix("http://") || tokenURI.hasPrefix("https://") else {
            throw UsageError("--token-uri must be an http(s) URL or google, got '\(tokenURI)'")
        }
        let json: String
        let registered: String
        do {
            let (account, privatePEM) = try FCMServiceAccounts.makeAccount(projectID: project)
            if let server {
                try guardOneDestination(f)
                var body = JSONObjectWriter()
                body.add("projectId", account.projectID)
                body.add("clientEmail", account.clientEmail)
                body.add("privateKeyId", account.privateKeyID)
                body.add("publicKeyPem", account.publicKeyPEM)
                _ = try Commands.call("POST", server + "/emulator/v1/fcm/service-accounts", body: body.text)
                registered = server
            } else {
                let directory = try CommandSettings.dataDirectory(f) + "/fcm/service-accounts"
                try FCMServiceAccounts.writeDropIn(account, directory: directory)
                registered = Files.absolute(directory)
            }
            json = FCMServiceAccounts.serviceAccountJSON(account, privateKeyPEM: privatePEM, tokenURI: tokenURI)
        } catch let error as FCMServiceAccounts.AccountError {
            throw UsageError("--project: \(error)")
        }
        guard let path = f["out"] else { return json }
        do {
            try Files.writeAtomically(path, Array(json.utf8), mode: 0o600)
        } catch {
            throw ConfigurationError("\(error)")
        }
        var out = JSONObjectWriter()
        out.add("project", project)
        out.add("credentialsFile", path)
        out.add("registeredWith", registered)
        return out.text + "\n"
    }

    static func guardOneDestination(_ f: [String: String]) throws {
        if f["data-dir"] != nil {
            throw UsageError("--server registers with a running emulator and --data-dir writes for one: give one of them")
        }
    }
}

extension Credentials {
    /// `pushemu credentials vapid`: a P-256 key pair as Web Push senders take it (py_vapid and
    /// pywebpush a PEM file, `web-push` the base64url halves).
    static func vapid(_ f: [String: String]) throws -> String {
        guard let key = P256Key.generate(), let pem = key.privateKeyPEM, let scalar = key.privateKey else {
            throw ConfigurationError("could not make a P-256 key pair")
        }
        var out = JSONObjectWriter()
        out.add("publicKey", Base64URL.encode(key.publicKey))
        out.add("privateKey", Base64URL.encode(scalar))
        if let path = f["out"] {
            do {
                try Files.writeAtomically(path, Array(pem.utf8), mode: 0o600)
            } catch {
                throw ConfigurationError("\(error)")
            }
            out.add("privateKeyFile", path)
        } else {
            out.add("privateKeyPem", pem)
        }
        return out.text + "\n"
    }

    /// `pushemu token vapid`: the `Authorization` header a Web Push sender sends, as pywebpush
    /// and web-push make it (a JWT with `aud`, `exp` 12 hours ahead and `sub`, then `k`).
    static func vapidToken(_ f: [String: String]) throws -> String {
        guard let path = f["key"], let aud = f["aud"] else {
            throw UsageError("usage: pushemu token vapid --key FILE --aud ORIGIN [--sub SUBJECT] [--exp SECONDS]")
        }
        let pem = String(decoding: try Emulator.readFile(path, what: "key"), as: UTF8.self)
        guard let key = P256Key.fromPEM(privateKey: pem) else { throw ConfigurationError("'\(path)' is not a P-256 private key (PEM)") }
        var exp = Clock.nowSeconds() + 12 * 3600
        if let s = f["exp"] {
            guard let v = Int64(s), v > 0 else { throw UsageError("--exp must be a positive integer (seconds since the epoch)") }
            exp = v
        }
        guard let header = VAPID.authorization(key: key, audience: aud, subject: f["sub"] ?? "mailto:ops@example.com", expiresAt: exp)
        else {
            throw ConfigurationError("signing failed")
        }
        return header + "\n"
    }
}
