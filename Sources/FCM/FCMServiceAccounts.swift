import Glibc
import PushCore
import Runtime
import State
import Synchronization
import Transport

/// Registered Google service accounts: the public half of each account's RSA key, which the
/// OAuth token endpoint verifies assertions against (by `iss` = client email, and `kid`).
/// Kept in the state log (store `fcm.serviceAccounts`). `<data-dir>/fcm/service-accounts/` is a
/// drop-in folder: `pushemu credentials fcm --data-dir` writes an account's public half there,
/// and the emulator registers the files it finds at start and on a lookup that misses.
public final class FCMServiceAccounts: PersistentStore {
    /// One service account: its identity and the public half of its key (pushemu keeps no private key).
    public struct Account: Sendable {
        /// The Firebase project it sends for.
        public let projectID: String
        /// The project's number (the sender id).
        public let projectNumber: String
        /// `...@PROJECT.iam.gserviceaccount.com`, what an OAuth assertion's `iss` names.
        public let clientEmail: String
        /// Google's numeric client id.
        public let clientID: String
        /// The key's id (`kid` of the assertions it signs).
        public let privateKeyID: String
        /// The public key, PEM.
        public let publicKeyPEM: String
        /// The key assertions are verified with.
        public let key: RS256.Key
    }

    /// Why an account could not be registered, for the admin API's message.
    public struct AccountError: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    private let accounts = FutexLock<[String: Account]>([:])
    /// The drop-in folder (nil: none).
    private let directory: String?
    /// The store's name in the state log and the store registry.
    public let stateName = "fcm.serviceAccounts"
    /// Where this store's change records go.
    public let changes = ChangeLink(store: "fcm.serviceAccounts")

    /// Said once per client email a token request names that this store does not have.
    public let missing = OnceNotice()

    /// Where an account is looked for, for the operator: the admin API's and the drop-in folder.
    public var searched: String {
        "among the accounts registered over the admin API"
            + (directory.map { " and in \(Files.absolute($0))" } ?? " (there is no data directory: --in-memory)")
    }

    /// A store with the drop-in folder `directory` (nil: none, `--in-memory`).
    public init(directory: String?) {
        self.directory = directory
    }

    /// A project id as Google allows them: 6 to 30 lowercase letters, digits and hyphens,
    /// starting with a letter (the emulator also accepts the `demo-` ids of the Firebase emulators).
    static func isValidProjectID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count >= 4, b.count <= 30, let f = b.first, f >= 0x61 && f <= 0x7A, b.last != UInt8(ascii: "-") else { return false }
        return b.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "-") }
    }

    /// Generates a key pair and registers a new account for `projectID`. Returns the account and
    /// the complete service-account JSON (with the private key) whose `token_uri` is `tokenURI`.
    public func generate(projectID: String, tokenURI: String) throws -> (Account, json: String) {
        let (made, privatePEM) = try FCMServiceAccounts.makeAccount(projectID: projectID)
        let account = try register(
            projectID: projectID, clientEmail: made.clientEmail, privateKeyID: made.privateKeyID, publicKeyPEM: made.publicKeyPEM,
            clientID: made.clientID)
        return (account, FCMServiceAccounts.serviceAccountJSON(account, privateKeyPEM: privatePEM, tokenURI: tokenURI))
    }

    /// A new account for `projectID` and its private key, registered nowhere.
    public static func makeAccount(projectID: String) throws -> (Account, privateKeyPEM: String) {
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
        let account = try checked(
            projectID: projectID, projectNumber: derivedProjectNumber(projectID), clientEmail: email, privateKeyID: kid,
            publicKeyPEM: key.publicKeyPEM, clientID: clientID)
        return (account, key.privateKeyPEM)
    }

    /// Registers an existing account's public key (replacing one with the same email).
    @discardableResult
    public func register(
        projectID: String, clientEmail: String, privateKeyID: String, publicKeyPEM: String,
        clientID: String? = nil
    ) throws -> Account {
        let number = projectNumber(for: projectID) ?? FCMServiceAccounts.derivedProjectNumber(projectID)
        let a = try FCMServiceAccounts.checked(
            projectID: projectID, projectNumber: number, clientEmail: clientEmail, privateKeyID: privateKeyID,
            publicKeyPEM: publicKeyPEM, clientID: clientID)
        accounts.withLock { m in
            m[clientEmail] = a
            if changes.isLogging { changes.emit(kind: Kind.account, atMs: Clock.nowMs(), FCMServiceAccounts.record(a)) }
        }
        return a
    }

    /// An account checked field by field.
    static func checked(
        projectID: String, projectNumber number: String, clientEmail: String, privateKeyID: String, publicKeyPEM: String,
        clientID: String?
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
        return Account(
            projectID: projectID, projectNumber: number, clientEmail: clientEmail,
            clientID: clientID ?? FCMServiceAccounts.derivedProjectNumber(clientEmail) + "000000000",
            privateKeyID: privateKeyID, publicKeyPEM: key.publicKeyPEM, key: key)
    }

    /// The account whose client email is `email`, registering the drop-in folder's accounts on a miss.
    public func lookup(email: String) -> Account? {
        if let a = accounts.withLock({ $0[email] }) { return a }
        guard directory != nil else { return nil }
        if registerDropIns() > 0 { changes.writeNow() }
        return accounts.withLock { $0[email] }
    }

    /// The project number the emulator assigns a project (stable: derived from the id).
    public func projectNumber(for projectID: String) -> String? {
        accounts.withLock { $0.values.first { $0.projectID == projectID }?.projectNumber }
    }

    /// Whether a path segment is a project number (digits only), which names its project
    /// through the accounts; anything else is the project id itself.
    static func isProjectNumber(_ segment: some Sequence<UInt8>) -> Bool {
        segment.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// The project id a path segment names: the id itself, or a registered project's number.
    public func projectID(forPathSegment s: String) -> String {
        guard FCMServiceAccounts.isProjectNumber(s.utf8) else { return s }
        return accounts.withLock { $0.values.first { $0.projectNumber == s }?.projectID } ?? s
    }

    /// Every account, by client email.
    public var all: [Account] { accounts.withLock { Array($0.values) }.sorted { $0.clientEmail < $1.clientEmail } }

    /// Forgets every account (and deletes their drop-in files, which would bring them back).
    public func removeAll() {
        let gone = accounts.withLock { a -> [Account] in
            let gone = a.values.sorted { $0.clientEmail < $1.clientEmail }
            a.removeAll()
            if changes.isLogging {
                for g in gone { changes.emit(kind: Kind.accountRemoved, atMs: Clock.nowMs()) { $0.string(1, g.clientEmail) } }
            }
            return gone
        }
        if let directory { for g in gone { unlink(directory + "/" + g.privateKeyID + ".json") } }
    }

    /// `.all` forgets the accounts; `.state` keeps them (credentials survive a plain reset).
    public func reset(_ scope: ResetScope) {
        guard scope == .all else { return }
        let gone = accounts.withLock { a -> [Account] in
            let gone = Array(a.values)
            a.removeAll()
            return gone
        }
        if let directory { for g in gone { unlink(directory + "/" + g.privateKeyID + ".json") } }
    }

    // MARK: state

    enum Kind {
        static let account = 1
        static let accountRemoved = 2
    }

    /// The record kinds it writes to the state log (account added, removed).
    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: Kind.account, name: "account",
                fields: [
                    FieldSchema(1, "projectId", .string), FieldSchema(2, "projectNumber", .string), FieldSchema(3, "clientEmail", .string),
                    FieldSchema(4, "clientId", .string), FieldSchema(5, "privateKeyId", .string), FieldSchema(6, "publicKeyPem", .string),
                ]),
            RecordSchema(kind: Kind.accountRemoved, name: "accountRemoved", fields: [FieldSchema(1, "clientEmail", .string)]),
        ]
    }

    static func record(_ a: Account) -> [UInt8] {
        var w = StateWriter()
        w.string(1, a.projectID)
        w.string(2, a.projectNumber)
        w.string(3, a.clientEmail)
        w.string(4, a.clientID)
        w.string(5, a.privateKeyID)
        w.string(6, a.publicKeyPEM)
        return w.bytes
    }

    /// Applies one record from the state log (at start, or from an import).
    public func apply(_ record: RecordView) throws {
        guard record.version == 1 else {
            throw StateFormatError("fcm.serviceAccounts record version \(record.version) is newer than this pushemu")
        }
        try record.withBody { raw in
            var r = StateReader(raw)
            var f = [String](repeating: "", count: 7)
            while let n = try r.next() {
                if (1...6).contains(n) { f[n] = try r.string() } else { try r.skip() }
            }
            switch record.kind {
            case Kind.account:
                let a: Account
                do {
                    a = try FCMServiceAccounts.checked(
                        projectID: f[1], projectNumber: f[2].isEmpty ? FCMServiceAccounts.derivedProjectNumber(f[1]) : f[2],
                        clientEmail: f[3], privateKeyID: f[5], publicKeyPEM: f[6], clientID: f[4].isEmpty ? nil : f[4])
                } catch let e as AccountError {
                    throw StateFormatError("a service account: \(e.description)")
                }
                accounts.withLock { $0[a.clientEmail] = a }
            case Kind.accountRemoved:
                _ = accounts.withLock { $0.removeValue(forKey: f[1]) }
            default:
                throw StateFormatError("fcm.serviceAccounts has no record kind \(record.kind)")
            }
        }
    }

    /// Every account as records, for a snapshot or an export.
    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        for a in all { emit(ChangeRecord(store: stateName, kind: Kind.account, body: FCMServiceAccounts.record(a))) }
    }

    /// A 12-digit number derived from the project id (FNV-1a), like Google's project numbers.
    static func derivedProjectNumber(_ s: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in s.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return String(100_000_000_000 + h % 900_000_000_000)
    }

    /// Google's service-account key file.
    public static func serviceAccountJSON(_ a: Account, privateKeyPEM: String, tokenURI: String) -> String {
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

    // MARK: drop-in files

    /// The account as the admin API lists it (no key material beyond the public key).
    public static func accountJSON(_ a: Account) -> String {
        "{\"projectId\":" + JSONWriter.quote(a.projectID) + ",\"projectNumber\":\"\(a.projectNumber)\",\"clientEmail\":"
            + JSONWriter.quote(a.clientEmail) + ",\"clientId\":\"\(a.clientID)\",\"privateKeyId\":" + JSONWriter.quote(a.privateKeyID)
            + ",\"publicKeyPem\":" + JSONWriter.quote(a.publicKeyPEM) + "}"
    }

    /// Writes an account's drop-in file into `directory` (made if missing).
    public static func writeDropIn(_ a: Account, directory: String) throws {
        Files.makeDirectories(directory)
        do {
            try Files.writeAtomically(directory + "/" + a.privateKeyID + ".json", Array((accountJSON(a) + "\n").utf8))
        } catch {
            throw AccountError(description: "\(error)")
        }
    }

    /// Registers every account file in the drop-in folder not registered as it is; how many.
    @discardableResult
    public func registerDropIns() -> Int {
        guard let directory else { return 0 }
        var n = 0
        for name in Files.list(directory).sorted() where name.hasSuffix(".json") {
            guard let a = FCMServiceAccounts.load(directory + "/" + name) else { continue }
            let known = accounts.withLock { $0[a.clientEmail] }
            if let known, known.privateKeyID == a.privateKeyID, known.publicKeyPEM == a.publicKeyPEM { continue }
            accounts.withLock { m in
                m[a.clientEmail] = a
                if changes.isLogging { changes.emit(kind: Kind.account, atMs: Clock.nowMs(), FCMServiceAccounts.record(a)) }
            }
            n += 1
        }
        return n
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
