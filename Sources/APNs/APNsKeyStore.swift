import Glibc
import PushCore
import Synchronization
import Transport

/// Registered provider-token signing keys, by key id. Read on a connection's first sight of a
/// token only (verified tokens are cached per connection), so one mutex is fine here.
/// Persisted as one JSON file per key under `<data-dir>/apns/keys/`, so `pushemu credentials apns`
/// can register a key with a running emulator: a lookup that misses re-reads the directory.
public final class APNsKeyStore: Sendable {
    public struct Entry: Sendable {
        public let teamID: String
        public let keyID: String
        /// nil: usable in both environments.
        public let environment: APNsEnvironment?
        /// Topic-specific key: the bundle ids it may push to. nil: a team-scoped key.
        public let topics: [String]?
        public let publicKeyPEM: String
        public let key: ES256.Key
    }

    public struct KeyError: Error, CustomStringConvertible {
        public let description: String
    }

    private let keys = FutexLock<[String: Entry]>([:])
    private let directory: String?

    /// `directory` nil: in memory only.
    public init(directory: String?) {
        self.directory = directory
        if let directory {
            Files.makeDirectories(directory)
            for name in Files.list(directory) where name.hasSuffix(".json") {
                if let e = APNsKeyStore.load(directory + "/" + name) { keys.withLock { $0[e.keyID] = e } }
            }
        }
    }

    public static func isValidID(_ s: String) -> Bool {
        s.utf8.count == 10 && s.utf8.allSatisfy(isAlphanumeric)
    }

    /// Registers a public key. Replaces an earlier key with the same id.
    @discardableResult
    public func register(
        teamID: String, keyID: String, publicKeyPEM: String, environment: APNsEnvironment? = nil,
        topics: [String]? = nil
    ) throws -> Entry {
        guard APNsKeyStore.isValidID(teamID) else { throw KeyError(description: "teamId must be 10 letters or digits") }
        guard APNsKeyStore.isValidID(keyID) else { throw KeyError(description: "keyId must be 10 letters or digits") }
        guard let key = ES256.Key.fromPEM(publicKeyPEM, isPrivate: false) else {
            throw KeyError(description: "publicKeyPem is not a PEM P-256 public key")
        }
        let e = Entry(
            teamID: teamID, keyID: keyID, environment: environment, topics: topics,
            publicKeyPEM: key.publicKeyPEM, key: key)
        keys.withLock { $0[keyID] = e }
        try persist(e)
        return e
    }

    /// Generates a key pair, registers its public half and returns the private key PEM (.p8).
    public func generate(
        teamID: String?, keyID: String?, environment: APNsEnvironment? = nil,
        topics: [String]? = nil
    ) throws -> (Entry, privateKeyPEM: String) {
        var rng = FastRandom()
        let team = teamID ?? APNsKeyStore.randomID(&rng)
        let kid = keyID ?? APNsKeyStore.randomID(&rng)
        guard let key = ES256.Key.generate() else { throw KeyError(description: "key generation failed") }
        let e = try register(teamID: team, keyID: kid, publicKeyPEM: key.publicKeyPEM, environment: environment, topics: topics)
        return (e, key.privateKeyPEM)
    }

    /// The key for `keyID`, re-reading the directory on a miss.
    public func lookup(_ keyID: String) -> Entry? {
        if let e = keys.withLock({ $0[keyID] }) { return e }
        guard let directory, APNsKeyStore.isValidID(keyID),
            let e = APNsKeyStore.load(directory + "/" + keyID + ".json")
        else { return nil }
        keys.withLock { $0[keyID] = e }
        return e
    }

    public var all: [Entry] { keys.withLock { Array($0.values) }.sorted { $0.keyID < $1.keyID } }

    /// Forgets every key (and deletes their files).
    public func removeAll() {
        let ids = keys.withLock { k -> [String] in
            let ids = Array(k.keys)
            k.removeAll()
            return ids
        }
        if let directory { for id in ids { unlink(directory + "/" + id + ".json") } }
    }

    static func randomID(_ rng: inout FastRandom) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        return String(decoding: (0..<10).map { _ in alphabet[Int(rng.next(below: UInt64(alphabet.count)))] }, as: UTF8.self)
    }

    // MARK: persistence

    func json(_ e: Entry) -> String {
        var s = "{\"teamId\":\"\(e.teamID)\",\"keyId\":\"\(e.keyID)\""
        if let env = e.environment { s += ",\"environment\":\"\(env.rawValue)\"" }
        if let t = e.topics { s += ",\"topics\":[" + t.map(JSONWriter.quote).joined(separator: ",") + "]" }
        return s + ",\"publicKeyPem\":" + JSONWriter.quote(e.publicKeyPEM) + "}\n"
    }

    private func persist(_ e: Entry) throws {
        guard let directory else { return }
        do {
            try Files.writeAtomically(directory + "/" + e.keyID + ".json", Array(json(e).utf8))
        } catch {
            throw KeyError(description: "\(error)")
        }
    }

    static func load(_ path: String) -> Entry? {
        guard let data = Files.read(path) else { return nil }
        return data.withUnsafeBytes { raw -> Entry? in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return nil }
            let v = JSONView(bytes: raw, tokens: tokens)
            guard let t = v.member(0, "teamId"), let k = v.member(0, "keyId"), let p = v.member(0, "publicKeyPem"),
                let key = ES256.Key.fromPEM(v.string(p), isPrivate: false)
            else { return nil }
            var env: APNsEnvironment? = nil
            if let e = v.member(0, "environment") { env = APNsEnvironment(rawValue: v.string(e)) }
            var topics: [String]? = nil
            if let ts = v.member(0, "topics") {
                var list: [String] = []
                v.forEachElement(ts) { list.append(v.string($0)) }
                topics = list
            }
            return Entry(
                teamID: v.string(t), keyID: v.string(k), environment: env, topics: topics,
                publicKeyPEM: v.string(p), key: key)
        }
    }
}
