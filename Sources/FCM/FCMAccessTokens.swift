import Glibc
import PushCore
import Runtime
import State
import Synchronization
import Transport

/// The OAuth 2.0 access tokens the emulator issues: self-contained and sealed with an
/// HMAC-SHA256 under a server secret, so checking one needs no lookup and no lock:
/// `ya29.pushemu.<base64url("v1|project|expiry|scopes|client")>.<base64url(mac[0..<16])>`.
/// The secret is kept in the state log (store `fcm.oauth`, so tokens survive a restart) or made
/// per process with `--in-memory`.
public final class FCMAccessTokens: PersistentStore {
    public struct Claims: Sendable, Equatable {
        public var project: String
        public var expiresAtSeconds: Int64
        /// The token's scopes include cloud-platform or firebase.messaging.
        public var messagingScope: Bool
        public var clientEmail: String

        public init(project: String, expiresAtSeconds: Int64, messagingScope: Bool, clientEmail: String) {
            self.project = project
            self.expiresAtSeconds = expiresAtSeconds
            self.messagingScope = messagingScope
            self.clientEmail = clientEmail
        }
    }

    public enum Verdict: Sendable, Equatable {
        /// Not a token this emulator issued (accepted only with `--fcm-auth lenient`).
        case foreign
        /// Carries the emulator's prefix but its seal does not verify.
        case forged
        case expired(Claims)
        case valid(Claims)
    }

    static let prefix: [UInt8] = Array("ya29.pushemu.".utf8)
    /// Read when a token is issued or a connection sees a bearer token it has not checked.
    private let secretBox: FutexLock<[UInt8]>
    /// The secret came from the state log (else it is new, or an older data directory's).
    private let restored = Atomic<Bool>(false)
    public let stateName = "fcm.oauth"
    public let changes = ChangeLink(store: "fcm.oauth")

    public var secret: [UInt8] { secretBox.withLock { $0 } }

    public init(secret: [UInt8]) { secretBox = FutexLock(secret) }

    /// A fresh random secret, or the one an older data directory kept in `directory/token-secret`
    /// (the state log's, when it has one, replaces it at start).
    public static func load(directory: String?) -> FCMAccessTokens {
        if let directory, let s = Files.read(directory + "/token-secret", limit: 1024), s.count == 32 { return FCMAccessTokens(secret: s) }
        return FCMAccessTokens(secret: RS256.randomBytes(32))
    }

    /// Logs the secret unless the state log gave it (once, after start has read the log).
    public func keepSecret() {
        guard !restored.load(ordering: .relaxed), changes.isLogging else { return }
        let s = secret
        changes.emit(kind: 1, atMs: Clock.nowMs()) { $0.bytes(1, s) }
    }

    public var recordSchemas: [RecordSchema] { [RecordSchema(kind: 1, name: "secret", fields: [FieldSchema(1, "secret", .bytes)])] }

    /// The secret every node of a cluster holds alike (agreed in Redis): the records of other
    /// nodes' secrets are then passed over.
    private let sharedSecret = Atomic<Bool>(false)

    /// Takes the cluster's secret (its access tokens verify on every node).
    public func adoptShared(_ s: [UInt8]) {
        guard s.count == 32 else { return }
        sharedSecret.store(true, ordering: .relaxed)
        secretBox.withLock { $0 = s }
    }

    public func apply(_ record: RecordView) throws {
        guard record.kind == 1, record.version == 1 else {
            throw StateFormatError("fcm.oauth has no record kind \(record.kind) v\(record.version)")
        }
        guard !sharedSecret.load(ordering: .relaxed) else { return }
        let s = try record.withBody { raw -> [UInt8] in
            var r = StateReader(raw)
            var s: [UInt8] = []
            while let f = try r.next() { if f == 1 { s = try r.bytes() } else { try r.skip() } }
            return s
        }
        guard s.count == 32 else { throw StateFormatError("the OAuth secret must be 32 bytes") }
        secretBox.withLock { $0 = s }
        restored.store(true, ordering: .relaxed)
    }

    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        let s = secret
        var w = StateWriter()
        w.bytes(1, s)
        emit(ChangeRecord(store: stateName, kind: 1, body: w.bytes))
    }

    /// The secret outlives every reset: tokens a client holds stay valid.
    public func reset(_ scope: ResetScope) {}

    public func issue(_ c: Claims) -> String {
        let body = Base64URL.encode(Array("v1|\(c.project)|\(c.expiresAtSeconds)|\(c.messagingScope ? 1 : 0)|\(c.clientEmail)".utf8))
        let key = secret
        let mac = Array(Array(body.utf8).withUnsafeBytes { RS256.hmac(key: key, message: $0) }.prefix(16))
        return "ya29.pushemu." + body + "." + Base64URL.encode(mac)
    }

    public func verify<C: Collection>(_ token: C, nowSeconds: Int64) -> Verdict where C.Element == UInt8 {
        let t = Array(token)
        guard t.starts(with: FCMAccessTokens.prefix) else { return .foreign }
        let rest = t[FCMAccessTokens.prefix.count...]
        guard let dot = rest.lastIndex(of: UInt8(ascii: ".")), let mac = Base64URL.decode(rest[(dot + 1)...]), mac.count == 16 else {
            return .forged
        }
        let body = rest[..<dot]
        let key = secret
        let expected = Array(body).withUnsafeBytes { RS256.hmac(key: key, message: $0) }
        var diff: UInt8 = 0
        for i in 0..<16 { diff |= expected[i] ^ mac[i] }
        guard diff == 0, let plain = Base64URL.decode(body) else { return .forged }
        let parts = plain.split(separator: UInt8(ascii: "|"), maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].elementsEqual("v1".utf8),
            let exp = Int64(String(decoding: parts[2], as: UTF8.self))
        else { return .forged }
        let c = Claims(
            project: String(decoding: parts[1], as: UTF8.self), expiresAtSeconds: exp,
            messagingScope: parts[3].elementsEqual("1".utf8), clientEmail: String(decoding: parts[4], as: UTF8.self))
        return nowSeconds >= exp ? .expired(c) : .valid(c)
    }
}
