import Glibc
import PushCore
import Synchronization
import Transport

/// Registered Google service accounts: the public half of each account's RSA key, which the
/// OAuth token endpoint verifies assertions against (by `iss` = client email, and `kid`).
/// Persisted one file per account under `<data-dir>/fcm/service-accounts/`, so
/// `pushemu credentials fcm` can register an account with a running emulator (a lookup that
/// misses re-reads the directory).
public final class FCMServiceAccounts: Sendable {
    public struct Account: Sendable {
        public let projectID: String
        public let projectNumber: String
        public let clientEmail: String
        public let clientID: String
        public let privateKeyID: String
        public let publicKeyPEM: String
        public let key: RS256.Key
    }

    public struct AccountError: Error, CustomStringConvertible {
        public let description: String
    }

    private let accounts = FutexLock<[String: Account]>([:])
    private let directory: String?

    public init(directory: String?) {
        self.directory = directory
        if let directory {
            Files.makeDirectories(directory)
            reload()
        }
    }

    /// A project id as Google allows them: 6 to 30 lowercase letters, digits and hyphens,
    /// starting with a letter (the emulator also accepts the `demo-` ids of the Firebase emulators).
    public static func isValidProjectID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count >= 4, b.count <= 30, let f = b.first, f >= 0x61 && f <= 0x7A, b.last != UInt8(ascii: "-") else { return false }
        return b.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "-") }
    }

    /// Generates a key pair and registers a new account for `projectID`. Returns the account and
    /// the complete service-account JSON (with the private key) whose `token_uri` is `tokenURI`.
    public func generate(projectID: String, tokenURI: String) throws -> (Account, json: String) {
        guard FCMServiceAccounts.isValidProjectID(projectID) else {
            throw AccountError(description: "projectId must be 4 to 30 lowercase letters, digits or hyphens, starting with a letter")
        }
        guard let key = RS256.Key.generate() else { throw AccountError(description: "RSA key generation failed") }
        var rng = FastRandom()
        let hex = Array("0123456789abcdef".utf8)
        let kid = String(decoding: (0..<40).map { _ in hex[Int(rng.next(below: 16))] }, as: UTF8.self)
        let suffix = String(decoding: (0..<5).map { _ in hex[Int(rng.next(below: 16))] }, as: UTF8.self)
        let email = "firebase-adminsdk-\(suffix)@\(projectID).iam.gserviceaccount.com"
        let clientID = "1" + String(decoding: (0..<20).map { _ in UInt8(0x30 + rng.next(below: 10)) }, as: UTF8.self)
        let account = try register(
            projectID: projectID, clientEmail: email, privateKeyID: kid, publicKeyPEM: key.publicKeyPEM,
            clientID: clientID)
        return (account, serviceAccountJSON(account, privateKeyPEM: key.privateKeyPEM, tokenURI: tokenURI))
    }

    /// Registers an existing account's public key (replacing one with the same email).
    @discardableResult
    public func register(
        projectID: String, clientEmail: String, privateKeyID: String, publicKeyPEM: String,
        clientID: String? = nil
    ) throws -> Account {
        guard FCMServiceAccounts.isValidProjectID(projectID) else { throw AccountError(description: "invalid projectId '\(projectID)'") }
        guard clientEmail.contains("@"), clientEmail.utf8.count <= 254 else {
            throw AccountError(description: "clientEmail must be an email address")
        }
        guard !privateKeyID.isEmpty, privateKeyID.utf8.count <= 128,
            privateKeyID.utf8.allSatisfy({ FCMFormats.isBase64URL($0) })
        else {
            throw AccountError(description: "privateKeyId must be letters, digits, '-' or '_'")
        }
        guard let key = RS256.Key.fromPEM(publicKeyPEM, isPrivate: false) ?? RS256.Key.fromPEM(publicKeyPEM, isPrivate: true) else {
            throw AccountError(description: "publicKeyPem is not a PEM RSA key")
        }
        let number = projectNumber(for: projectID) ?? FCMServiceAccounts.derivedProjectNumber(projectID)
        let a = Account(
            projectID: projectID, projectNumber: number, clientEmail: clientEmail,
            clientID: clientID ?? FCMServiceAccounts.derivedProjectNumber(clientEmail) + "000000000",
            privateKeyID: privateKeyID, publicKeyPEM: key.publicKeyPEM, key: key)
        accounts.withLock { $0[clientEmail] = a }
        try persist(a)
        return a
    }

    /// The account whose client email is `email`, re-reading the directory on a miss.
    public func lookup(email: String) -> Account? {
        if let a = accounts.withLock({ $0[email] }) { return a }
        guard directory != nil else { return nil }
        reload()
        return accounts.withLock { $0[email] }
    }

    /// The project number the emulator assigns a project (stable: derived from the id).
    public func projectNumber(for projectID: String) -> String? {
        accounts.withLock { $0.values.first { $0.projectID == projectID }?.projectNumber }
    }

    /// The project id a path segment names: the id itself, or a registered project's number.
    public func projectID(forPathSegment s: String) -> String {
        guard s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return s }
        return accounts.withLock { $0.values.first { $0.projectNumber == s }?.projectID } ?? s
    }

    public var all: [Account] { accounts.withLock { Array($0.values) }.sorted { $0.clientEmail < $1.clientEmail } }

    public func removeAll() {
        let ids = accounts.withLock { a -> [String] in
            let ids = a.values.map(\.privateKeyID)
            a.removeAll()
            return ids
        }
        if let directory { for id in ids { unlink(directory + "/" + id + ".json") } }
    }

    /// A 12-digit number derived from the project id (FNV-1a), like Google's project numbers.
    static func derivedProjectNumber(_ s: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in s.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return String(100_000_000_000 + h % 900_000_000_000)
    }

    /// Google's service-account key file.
    public func serviceAccountJSON(_ a: Account, privateKeyPEM: String, tokenURI: String) -> String {
        let encodedEmail = a.clientEmail.split(separator: "@", omittingEmptySubsequences: false).joined(separator: "%40")
        return """
            {
              "type": "service_account",
              "project_id": \(JSONWriter.quote(a.projectID)),
              "private_key_id": \(JSONWriter.quote(a.privateKeyID)),
              "private_key": \(JSONWriter.quote(privateKeyPEM)),
              "client_email": \(JSONWriter.quote(a.clientEmail)),
              "client_id": \(JSONWriter.quote(a.clientID)),
              "auth_uri": "https://accounts.google.com/o/oauth2/auth",
              "token_uri": \(JSONWriter.quote(tokenURI)),
              "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
              "client_x509_cert_url": \(JSONWriter.quote("https://www.googleapis.com/robot/v1/metadata/x509/" + encodedEmail)),
              "universe_domain": "googleapis.com"
            }

            """
    }

    // MARK: persistence

    public func accountJSON(_ a: Account) -> String {
        "{\"projectId\":" + JSONWriter.quote(a.projectID) + ",\"projectNumber\":\"\(a.projectNumber)\",\"clientEmail\":"
            + JSONWriter.quote(a.clientEmail) + ",\"clientId\":\"\(a.clientID)\",\"privateKeyId\":" + JSONWriter.quote(a.privateKeyID)
            + ",\"publicKeyPem\":" + JSONWriter.quote(a.publicKeyPEM) + "}"
    }

    private func persist(_ a: Account) throws {
        guard let directory else { return }
        do {
            try Files.writeAtomically(directory + "/" + a.privateKeyID + ".json", Array((accountJSON(a) + "\n").utf8))
        } catch {
            throw AccountError(description: "\(error)")
        }
    }

    private func reload() {
        guard let directory else { return }
        for name in Files.list(directory) where name.hasSuffix(".json") {
            guard let a = FCMServiceAccounts.load(directory + "/" + name) else { continue }
            accounts.withLock { if $0[a.clientEmail]?.privateKeyID != a.privateKeyID { $0[a.clientEmail] = a } }
        }
    }

    static func load(_ path: String) -> Account? {
        guard let data = Files.read(path) else { return nil }
        return data.withUnsafeBytes { raw -> Account? in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return nil }
            let v = JSONView(bytes: raw, tokens: tokens)
            guard let p = v.member(0, "projectId"), let n = v.member(0, "projectNumber"), let e = v.member(0, "clientEmail"),
                let c = v.member(0, "clientId"), let k = v.member(0, "privateKeyId"), let pem = v.member(0, "publicKeyPem"),
                let key = RS256.Key.fromPEM(v.string(pem), isPrivate: false)
            else { return nil }
            return Account(
                projectID: v.string(p), projectNumber: v.string(n), clientEmail: v.string(e), clientID: v.string(c),
                privateKeyID: v.string(k), publicKeyPEM: v.string(pem), key: key)
        }
    }
}
