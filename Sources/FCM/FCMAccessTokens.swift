import Glibc
import PushCore
import Transport

/// The OAuth 2.0 access tokens the emulator issues: self-contained and sealed with an
/// HMAC-SHA256 under a server secret, so checking one needs no lookup and no lock:
/// `ya29.pushemu.<base64url("v1|project|expiry|scopes|client")>.<base64url(mac[0..<16])>`.
/// The secret is kept under `--data-dir` (so tokens survive a restart) or made per process.
public struct FCMAccessTokens: Sendable {
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
    let secret: [UInt8]

    public init(secret: [UInt8]) { self.secret = secret }

    /// Loads (or creates) the secret in `directory`; a fresh random one when nil.
    public static func load(directory: String?) -> FCMAccessTokens {
        guard let directory else { return FCMAccessTokens(secret: RS256.randomBytes(32)) }
        let path = directory + "/token-secret"
        if let s = Files.read(path, limit: 1024), s.count == 32 { return FCMAccessTokens(secret: s) }
        let s = RS256.randomBytes(32)
        Files.makeDirectories(directory)
        try? Files.writeAtomically(path, s, mode: 0o600)
        return FCMAccessTokens(secret: s)
    }

    public func issue(_ c: Claims) -> String {
        let body = Base64URL.encode(Array("v1|\(c.project)|\(c.expiresAtSeconds)|\(c.messagingScope ? 1 : 0)|\(c.clientEmail)".utf8))
        let mac = Array(Array(body.utf8).withUnsafeBytes { RS256.hmac(key: secret, message: $0) }.prefix(16))
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
        let expected = Array(body).withUnsafeBytes { RS256.hmac(key: secret, message: $0) }
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
