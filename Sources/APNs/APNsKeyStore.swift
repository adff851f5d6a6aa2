import Glibc
import PushCore
import Runtime
import State
import Synchronization
import Transport

/// Registered provider-token signing keys, by key id. Read on a connection's first sight of a
/// token only (verified tokens are cached per connection), so one mutex is fine here.
///
/// Kept in the state log (store `apns.keys`: a `key` record per registration, `keyRemoved` per
/// removal). `<data-dir>/apns/keys/` is a drop-in folder: `pushemu credentials apns --data-dir`
/// writes a key there as a JSON file, and the emulator registers the files it finds at start
/// and on a lookup that misses (so a key made beside a running emulator works at once).
public final class APNsKeyStore: PersistentStore {
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
    /// The drop-in folder (nil: none, `--in-memory`).
    private let directory: String?
    public let stateName = "apns.keys"
    public let changes = ChangeLink(store: "apns.keys")

    /// Said once per key id a provider token names that this store does not have.
    public let missing = OnceNotice()

    /// Where a key is looked for, for the operator: the admin API's keys and the drop-in folder.
    public var searched: String {
        "among the keys registered over the admin API"
            + (directory.map { " and in \(Files.absolute($0))/<KEY ID>.json" } ?? " (there is no data directory: --in-memory)")
    }

    /// `directory`: the drop-in folder, read on a miss (nil: none).
    public init(directory: String?) {
        self.directory = directory
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
        let e = try APNsKeyStore.entry(teamID: teamID, keyID: keyID, publicKeyPEM: publicKeyPEM, environment: environment, topics: topics)
        keys.withLock { k in
            k[keyID] = e
            if changes.isLogging { changes.emit(kind: Kind.key, atMs: Clock.nowMs(), APNsKeyStore.record(e)) }
        }
        return e
    }

    /// A checked entry.
    static func entry(
        teamID: String, keyID: String, publicKeyPEM: String, environment: APNsEnvironment?, topics: [String]?
    ) throws -> Entry {
        guard APNsKeyStore.isValidID(teamID) else { throw KeyError(description: "teamId must be 10 letters or digits") }
        guard APNsKeyStore.isValidID(keyID) else { throw KeyError(description: "keyId must be 10 letters or digits") }
        guard let key = ES256.Key.fromPEM(publicKeyPEM, isPrivate: false) else {
            throw KeyError(description: "publicKeyPem is not a PEM P-256 public key")
        }
        return Entry(teamID: teamID, keyID: keyID, environment: environment, topics: topics, publicKeyPEM: key.publicKeyPEM, key: key)
    }

    /// Generates a key pair, registers its public half and returns the private key PEM (.p8).
    public func generate(
        teamID: String?, keyID: String?, environment: APNsEnvironment? = nil,
        topics: [String]? = nil
    ) throws -> (Entry, privateKeyPEM: String) {
        let (made, pem) = try APNsKeyStore.makeKey(teamID: teamID, keyID: keyID, environment: environment, topics: topics)
        let e = try register(
            teamID: made.teamID, keyID: made.keyID, publicKeyPEM: made.publicKeyPEM, environment: environment, topics: topics)
        return (e, pem)
    }

    /// A new key pair (random ids where none are given), registered nowhere.
    public static func makeKey(
        teamID: String?, keyID: String?, environment: APNsEnvironment? = nil, topics: [String]? = nil
    ) throws -> (Entry, privateKeyPEM: String) {
        var rng = FastRandom()
        let team = teamID ?? APNsKeyStore.randomID(&rng)
        let kid = keyID ?? APNsKeyStore.randomID(&rng)
        guard let key = ES256.Key.generate() else { throw KeyError(description: "key generation failed") }
        let e = try entry(teamID: team, keyID: kid, publicKeyPEM: key.publicKeyPEM, environment: environment, topics: topics)
        return (e, key.privateKeyPEM)
    }

    /// The key for `keyID`, registering it from the drop-in folder on a miss.
    public func lookup(_ keyID: String) -> Entry? {
        if let e = keys.withLock({ $0[keyID] }) { return e }
        guard let directory, APNsKeyStore.isValidID(keyID),
            let e = APNsKeyStore.load(directory + "/" + keyID + ".json")
        else { return nil }
        let registered = try? register(
            teamID: e.teamID, keyID: e.keyID, publicKeyPEM: e.publicKeyPEM, environment: e.environment, topics: e.topics)
        changes.writeNow()
        return registered ?? e
    }

    /// Registers every key file in the drop-in folder that is not registered as it is (at
    /// start: a data directory from before the state log, or keys made while it was stopped).
    /// Returns how many were registered.
    @discardableResult
    public func registerDropIns() -> Int {
        guard let directory else { return 0 }
        var n = 0
        for name in Files.list(directory) where name.hasSuffix(".json") {
            guard let e = APNsKeyStore.load(directory + "/" + name) else { continue }
            let known = keys.withLock { $0[e.keyID] }
            if let known, known.publicKeyPEM == e.publicKeyPEM, known.teamID == e.teamID, known.environment == e.environment,
                known.topics == e.topics
            {
                continue
            }
            if (try? register(teamID: e.teamID, keyID: e.keyID, publicKeyPEM: e.publicKeyPEM, environment: e.environment, topics: e.topics))
                != nil
            {
                n += 1
            }
        }
        return n
    }

    public var all: [Entry] { keys.withLock { Array($0.values) }.sorted { $0.keyID < $1.keyID } }

    /// Forgets every key (and deletes their drop-in files, which would bring them back).
    public func removeAll() {
        let ids = keys.withLock { k -> [String] in
            let ids = Array(k.keys).sorted()
            k.removeAll()
            if changes.isLogging {
                for id in ids { changes.emit(kind: Kind.keyRemoved, atMs: Clock.nowMs()) { $0.string(1, id) } }
            }
            return ids
        }
        if let directory { for id in ids { unlink(directory + "/" + id + ".json") } }
    }

    static func randomID(_ rng: inout FastRandom) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        return String(decoding: (0..<10).map { _ in alphabet[Int(rng.next(below: UInt64(alphabet.count)))] }, as: UTF8.self)
    }

    // MARK: state

    enum Kind {
        static let key = 1
        static let keyRemoved = 2
    }

    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: Kind.key, name: "key",
                fields: [
                    FieldSchema(1, "teamId", .string), FieldSchema(2, "keyId", .string),
                    FieldSchema(3, "environment", .enumeration(["sandbox", "production"])),
                    FieldSchema(4, "topics", .string, repeated: true), FieldSchema(5, "topicSpecific", .bool),
                    FieldSchema(6, "publicKeyPem", .string),
                ]),
            RecordSchema(kind: Kind.keyRemoved, name: "keyRemoved", fields: [FieldSchema(1, "keyId", .string)]),
        ]
    }

    static func record(_ e: Entry) -> [UInt8] {
        var w = StateWriter()
        w.string(1, e.teamID)
        w.string(2, e.keyID)
        if let env = e.environment { w.uint(3, env == .sandbox ? 0 : 1) }
        if let topics = e.topics {
            for t in topics { w.string(4, t) }
            w.bool(5, true)
        }
        w.string(6, e.publicKeyPEM)
        return w.bytes
    }

    public func apply(_ record: RecordView) throws {
        guard record.version == 1 else { throw StateFormatError("apns.keys record version \(record.version) is newer than this pushemu") }
        try record.withBody { raw in
            var r = StateReader(raw)
            switch record.kind {
            case Kind.key:
                var team = ""
                var kid = ""
                var pem = ""
                var env: APNsEnvironment?
                var topics: [String] = []
                var topicSpecific = false
                while let f = try r.next() {
                    switch f {
                    case 1: team = try r.string()
                    case 2: kid = try r.string()
                    case 3: env = try r.uint() == 0 ? .sandbox : .production
                    case 4: topics.append(try r.string())
                    case 5: topicSpecific = try r.bool()
                    case 6: pem = try r.string()
                    default: try r.skip()
                    }
                }
                let e: Entry
                do {
                    e = try APNsKeyStore.entry(
                        teamID: team, keyID: kid, publicKeyPEM: pem, environment: env,
                        topics: topicSpecific || !topics.isEmpty ? topics : nil)
                } catch let error as KeyError {
                    throw StateFormatError("an APNs key: \(error.description)")
                }
                keys.withLock { $0[kid] = e }
            case Kind.keyRemoved:
                var kid = ""
                while let f = try r.next() { if f == 1 { kid = try r.string() } else { try r.skip() } }
                _ = keys.withLock { $0.removeValue(forKey: kid) }
            default:
                throw StateFormatError("apns.keys has no record kind \(record.kind)")
            }
        }
    }

    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        for e in all { emit(ChangeRecord(store: stateName, kind: Kind.key, body: APNsKeyStore.record(e))) }
    }

    public func reset(_ scope: ResetScope) {
        guard scope == .all else { return }
        let ids = keys.withLock { k -> [String] in
            let ids = Array(k.keys)
            k.removeAll()
            return ids
        }
        if let directory { for id in ids { unlink(directory + "/" + id + ".json") } }
    }

    /// Writes a key's drop-in file into `directory` (made if missing), where an emulator using
    /// that data directory registers it.
    public static func writeDropIn(_ e: Entry, directory: String) throws {
        Files.makeDirectories(directory)
        do {
            try Files.writeAtomically(directory + "/" + e.keyID + ".json", Array(json(e).utf8))
        } catch {
            throw KeyError(description: "\(error)")
        }
    }

    // MARK: drop-in files

    static func json(_ e: Entry) -> String {
        var s = "{\"teamId\":\"\(e.teamID)\",\"keyId\":\"\(e.keyID)\""
        if let env = e.environment { s += ",\"environment\":\"\(env.rawValue)\"" }
        if let t = e.topics { s += ",\"topics\":[" + t.map(JSONWriter.quote).joined(separator: ",") + "]" }
        return s + ",\"publicKeyPem\":" + JSONWriter.quote(e.publicKeyPEM) + "}\n"
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
