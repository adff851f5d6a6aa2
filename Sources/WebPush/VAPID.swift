import PushCore
import Transport

/// A sender's VAPID credentials (RFC 8292) as a request carries them: `Authorization: vapid
/// t=JWT, k=KEY` (the key inline), or the draft form `Authorization: WebPush JWT` (also
/// `Bearer`) with the key in `Crypto-Key: p256ecdsa=KEY`.
public struct VAPIDCredentials: Sendable, Equatable {
    /// The JWT: `header.claims.signature`, base64url.
    public var token: ArraySlice<UInt8>
    /// The signer's public key as sent (base64url; standard base64 and padding tolerated).
    public var key: ArraySlice<UInt8>
    /// `vapid` (RFC 8292) or the draft's `webpush` / `bearer`.
    public var scheme: String
}

/// What is wrong with a request's VAPID credentials; each push service words and numbers these
/// its own way (`WebPushService.refusal`).
public enum VAPIDFailure: Error, Equatable, Sendable {
    /// No `Authorization` header where the subscription needs one.
    case missing
    /// A scheme other than vapid, webpush or bearer.
    case unknownScheme
    /// `t=` missing, or the JWT is not three base64url parts.
    case missingToken
    /// `k=` (or `p256ecdsa=`) missing.
    case missingKey
    /// The key is not a P-256 public key.
    case invalidKey
    /// The JWT header or claims do not decode, or `exp`/`aud` are missing or mistyped.
    case invalidClaims(String)
    /// The signature does not verify with the key.
    case badSignature
    /// `exp` has passed.
    case expired
    /// `exp` is more than 24 hours ahead.
    case expiresTooLate
    /// `aud` is not the push service's origin.
    case audience
    /// `sub` is missing, empty, not `mailto:` or `https:`, or names a host a service refuses.
    case subject(String)
    /// `k` is not the `applicationServerKey` the subscription was made with.
    case keyMismatch
}

/// A verified JWT's claims.
public struct VAPIDClaims: Sendable, Equatable {
    public var audience: String
    public var expiresAt: Int64
    public var subject: String?
}

public enum VAPID {
    /// The longest `exp` ahead of now that the services accept (24 hours).
    public static let maxLifetimeSeconds: Int64 = 86_400

    /// A sender's `Authorization` header (RFC 8292: `vapid t=JWT,k=KEY`), signed with `key`
    /// (a key pair); nil when it cannot sign. What `pushemu token vapid` prints, for curl.
    public static func authorization(key: P256Key, audience: String, subject: String, expiresAt: Int64) -> String? {
        let claims = "{\"aud\":" + JSONWriter.quote(audience) + ",\"exp\":\(expiresAt),\"sub\":" + JSONWriter.quote(subject) + "}"
        let signing = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        guard let signature = key.sign(Array(signing.utf8)) else { return nil }
        return "vapid t=" + signing + "." + Base64URL.encode(signature) + ",k=" + Base64URL.encode(key.publicKey)
    }
    /// The largest JWT read (a real one is about 250 bytes).
    static let maxTokenSize = 4_096

    /// The credentials in `authorization` (and `cryptoKey` for the draft form); nil when there is
    /// no `Authorization` header.
    public static func credentials(authorization: ArraySlice<UInt8>?, cryptoKey: ArraySlice<UInt8>?) -> Result<
        VAPIDCredentials?, VAPIDFailure
    > {
        guard let header = authorization, !header.isEmpty else { return .success(nil) }
        guard let space = header.firstIndex(of: UInt8(ascii: " ")) else { return .failure(.missingToken) }
        let scheme = String(decoding: header[header.startIndex..<space], as: UTF8.self).lowercased()
        let data = header[(space + 1)...].filter { $0 != UInt8(ascii: " ") }
        switch scheme {
        case "vapid":
            var token: ArraySlice<UInt8>?
            var key: ArraySlice<UInt8>?
            for part in data.split(separator: UInt8(ascii: ",")) {
                guard let eq = part.firstIndex(of: UInt8(ascii: "=")) else { continue }
                let name = part[part.startIndex..<eq]
                if name.elementsEqual("t".utf8) { token = part[(eq + 1)...] }
                if name.elementsEqual("k".utf8) { key = part[(eq + 1)...] }
            }
            guard let key, !key.isEmpty else { return .failure(.missingKey) }
            guard let token, !token.isEmpty else { return .failure(.missingToken) }
            return .success(VAPIDCredentials(token: token, key: key, scheme: scheme))
        case "webpush", "bearer":
            guard !data.isEmpty else { return .failure(.missingToken) }
            guard let key = cryptoKeyParameter("p256ecdsa", in: cryptoKey) else { return .failure(.missingKey) }
            return .success(VAPIDCredentials(token: data[...], key: key, scheme: scheme))
        default:
            return .failure(.unknownScheme)
        }
    }

    /// A parameter of a `Crypto-Key` header (`dh=...;p256ecdsa=...`, entries also split by `,`).
    public static func cryptoKeyParameter(_ name: String, in header: ArraySlice<UInt8>?) -> ArraySlice<UInt8>? {
        guard let header else { return nil }
        for part in header.split(whereSeparator: { $0 == UInt8(ascii: ";") || $0 == UInt8(ascii: ",") }) {
            let trimmed = part.drop { $0 == UInt8(ascii: " ") }
            guard let eq = trimmed.firstIndex(of: UInt8(ascii: "=")) else { continue }
            if trimmed[trimmed.startIndex..<eq].elementsEqual(name.utf8) {
                var value = trimmed[(eq + 1)...]
                while value.last == UInt8(ascii: " ") || value.last == UInt8(ascii: "\"") { value = value.dropLast() }
                while value.first == UInt8(ascii: "\"") { value = value.dropFirst() }
                return value
            }
        }
        return nil
    }

    /// A key as senders write it: base64url without padding, or with padding, or standard base64.
    public static func decodeKey(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var t = Array(text)
        while t.last == UInt8(ascii: "=") { t.removeLast() }
        for i in t.indices {
            if t[i] == UInt8(ascii: "+") { t[i] = UInt8(ascii: "-") }
            if t[i] == UInt8(ascii: "/") { t[i] = UInt8(ascii: "_") }
        }
        return Base64URL.decode(t)
    }

    /// Verifies `credentials`' JWT (ES256 with its key) and reads its claims; checks `exp`
    /// against `nowSeconds` (passed, or more than a day ahead). `aud` and `sub` are the
    /// service's to judge (`WebPushService.check`).
    public static func verify(_ credentials: VAPIDCredentials, nowSeconds: Int64) -> Result<(VAPIDClaims, P256Key), VAPIDFailure> {
        guard let raw = decodeKey(credentials.key), raw.count == 65 else { return .failure(.invalidKey) }
        guard let key = P256Key(publicKey: raw) else { return .failure(.invalidKey) }
        let t = credentials.token
        guard t.count <= maxTokenSize else { return .failure(.invalidClaims("the token is longer than \(maxTokenSize) bytes")) }
        let parts = t.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let body = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { return .failure(.missingToken) }
        guard
            readObject(
                header,
                { view, root in
                    guard let alg = view.member(root, "alg"), view.tokens[alg].kind == .string, view.string(alg) == "ES256" else {
                        return false
                    }
                    return true
                }) == true
        else { return .failure(.invalidClaims("the JWT header's alg is not ES256")) }
        let signed = t[t.startIndex..<parts[1].endIndex]
        guard key.verify(signature: signature[...], of: signed) else { return .failure(.badSignature) }
        var claims = VAPIDClaims(audience: "", expiresAt: 0, subject: nil)
        let shaped = readObject(body) { view, root in
            guard let aud = view.member(root, "aud"), view.tokens[aud].kind == .string,
                let exp = view.member(root, "exp"), view.tokens[exp].kind == .number, let e = view.integer(exp)
            else { return false }
            claims.audience = view.string(aud)
            claims.expiresAt = Int64(e)
            if let sub = view.member(root, "sub") {
                guard view.tokens[sub].kind == .string else { return false }
                claims.subject = view.string(sub)
            }
            return true
        }
        guard shaped == true else {
            return .failure(
                .invalidClaims(
                    "A value in the vapid claims is either missing or incorrectly specified (e.g. \"exp\":\"12345\" or \"sub\":null). Please correct and retry."
                ))
        }
        if claims.expiresAt <= nowSeconds { return .failure(.expired) }
        if claims.expiresAt > nowSeconds + maxLifetimeSeconds { return .failure(.expiresTooLate) }
        return .success((claims, key))
    }

    /// Parses `json` as an object and runs `body` on it; nil when it is not a JSON object.
    static func readObject(_ json: [UInt8], _ body: (JSONView, Int) -> Bool) -> Bool? {
        json.withUnsafeBytes { raw -> Bool? in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return nil }
            return body(JSONView(bytes: raw, tokens: tokens), 0)
        }
    }

    /// Apple's rule for `sub`: a `mailto:` address or an `https:` URL, and not of a host that
    /// cannot be reached (`localhost`, `*.local`, `*.invalid`).
    public static func subjectRefusal(_ sub: String?) -> String? {
        guard let sub, !sub.isEmpty else { return "the sub claim is missing" }
        let host: Substring
        if sub.hasPrefix("mailto:") {
            let address = sub.dropFirst("mailto:".count)
            guard !address.contains(" "), !address.contains("<"), let at = address.lastIndex(of: "@") else {
                return "sub is not a mailto: address"
            }
            host = address[address.index(after: at)...]
        } else if sub.hasPrefix("https://") {
            let rest = sub.dropFirst("https://".count)
            host = rest.prefix { $0 != "/" && $0 != ":" && $0 != "?" && $0 != "#" }
        } else {
            return "sub is neither a mailto: address nor an https: URL"
        }
        let h = host.lowercased()
        if h.isEmpty || h == "localhost" || h.hasSuffix(".localhost") || h.hasSuffix(".local") || h.hasSuffix(".invalid") {
            return "sub names a host that cannot be reached (\(h.isEmpty ? "none" : h))"
        }
        return nil
    }
}

/// The VAPID header verified last on one connection, as the sender sent it (`Authorization`,
/// and `Crypto-Key` for the draft form): a sender repeats it for hours, so a repeat skips the
/// parse and the signature check (its `exp` is still checked against the clock), and it keeps
/// the subject's verdict for the service last asked. Touched by its connection's loop only.
public final class VAPIDCache {
    struct Known {
        let authorization: [UInt8]
        let cryptoKey: [UInt8]?
        /// The signer's public key, decoded (what `applicationServerKey` binds).
        let key: [UInt8]
        let claims: VAPIDClaims
    }
    var known: Known?
    /// The subject verdict for `subjectService` (nil: acceptable).
    var subjectService: WebPushService?
    var subjectRefusal: String?

    public init() {}

    /// The key and claims verified for exactly these headers, if they are the last ones.
    func lookup(authorization: ArraySlice<UInt8>?, cryptoKey: ArraySlice<UInt8>?) -> (key: [UInt8], claims: VAPIDClaims)? {
        guard let k = known, let authorization, k.authorization.elementsEqual(authorization) else { return nil }
        // The draft form's key is in Crypto-Key, so that header must repeat too.
        if let stored = k.cryptoKey {
            guard let cryptoKey, stored.elementsEqual(cryptoKey) else { return nil }
        }
        return (k.key, k.claims)
    }

    /// Remembers verified credentials; `draft`: the key came from `Crypto-Key`.
    func remember(authorization: ArraySlice<UInt8>?, cryptoKey: ArraySlice<UInt8>?, draft: Bool, key: [UInt8], claims: VAPIDClaims) {
        guard let authorization else { return }
        known = Known(
            authorization: Array(authorization), cryptoKey: draft ? Array(cryptoKey ?? []) : nil, key: key, claims: claims)
        subjectService = nil
    }

    /// The subject's verdict under `service`, worked out once per verified header and service.
    func subjectVerdict(_ service: WebPushService, _ subject: String?, _ rule: (String?) -> String?) -> String?? {
        if subjectService == service { return .some(subjectRefusal) }
        subjectRefusal = rule(subject)
        subjectService = service
        return .some(subjectRefusal)
    }
}
