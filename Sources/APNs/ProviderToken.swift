import PushCore
import Transport

/// An APNs provider token (JWT, ES256), parsed but not yet verified.
public struct ProviderToken: Sendable {
    public let keyID: String
    public let teamID: String
    public let issuedAt: Int64
    /// `header.claims`, the signed bytes.
    public let signingInput: [UInt8]
    /// The raw 64-byte r||s signature.
    public let signature: [UInt8]

    public enum ParseError: Error, Equatable {
        case malformed(String)
    }

    /// Parses `<header>.<claims>.<signature>` (base64url segments). Checks the shape APNs checks:
    /// alg ES256, a 10-character kid, a 10-character iss (team id), an iat in seconds.
    public static func parse<C: Collection>(_ jwt: C) -> Result<ProviderToken, ParseError> where C.Element == UInt8 {
        let bytes = Array(jwt)
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.malformed("a JWT has three dot-separated parts")) }
        guard let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { return .failure(.malformed("JWT parts are not base64url")) }
        guard signature.count == 64 else { return .failure(.malformed("an ES256 signature is 64 bytes")) }

        var tokens: [JSONToken] = []
        var alg: String?
        var kid: String?
        let headerOK = header.withUnsafeBytes { raw -> Bool in
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return false }
            let v = JSONView(bytes: raw, tokens: tokens)
            if let a = v.member(0, "alg"), v.tokens[a].kind == .string { alg = v.string(a) }
            if let k = v.member(0, "kid"), v.tokens[k].kind == .string { kid = v.string(k) }
            return true
        }
        guard headerOK else { return .failure(.malformed("the JWT header is not a JSON object")) }
        guard alg == "ES256" else { return .failure(.malformed("alg must be ES256")) }
        guard let kid, kid.utf8.count == 10 else { return .failure(.malformed("kid must be a 10-character key id")) }

        var iss: String?
        var iat: Int64?
        let claimsOK = claims.withUnsafeBytes { raw -> Bool in
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return false }
            let v = JSONView(bytes: raw, tokens: tokens)
            if let i = v.member(0, "iss"), v.tokens[i].kind == .string { iss = v.string(i) }
            if let i = v.member(0, "iat") { iat = ProviderToken.issuedAt(v, i) }
            return true
        }
        guard claimsOK else { return .failure(.malformed("the JWT claims are not a JSON object")) }
        guard let iss, iss.utf8.count == 10, iss.utf8.allSatisfy({ isAlphanumeric($0) }) else {
            return .failure(.malformed("iss must be a 10-character team id"))
        }
        guard let iat else { return .failure(.malformed("iat must be a non-negative number of seconds")) }
        let signingInput = Array(bytes[parts[0].startIndex..<parts[1].endIndex])
        return .success(ProviderToken(keyID: kid, teamID: iss, issuedAt: iat, signingInput: signingInput, signature: signature))
    }

    /// The latest `iat` accepted: year 2286 in seconds (beyond, a value is a mistake, such as
    /// milliseconds, and arithmetic on it in milliseconds could overflow).
    static let maxIssuedAt: Int64 = 9_999_999_999

    /// JWT's NumericDate: a JSON number of seconds, which may carry a fraction (the PyAPNs2
    /// family signs `time.time()`; Apple accepts it). A finite number from 0 to `maxIssuedAt`
    /// gives its integer part. A string of 1 to 10 decimal digits is the number it spells
    /// (kalyke-apns has signed `"iat":"1796460390"` since 2022, and senders in production use
    /// it). Any other string, a negative or out-of-range number, or anything else gives nil.
    static func issuedAt(_ view: JSONView, _ index: Int) -> Int64? {
        if view.tokens[index].kind == .string {
            let raw = view.raw(index)
            guard raw.count >= 1, raw.count <= 10, raw.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return raw.reduce(0) { $0 * 10 + Int64($1 - 0x30) }
        }
        if let whole = view.integer(index) { return whole >= 0 && Int64(whole) <= maxIssuedAt ? Int64(whole) : nil }
        guard let seconds = view.number(index), seconds.isFinite, seconds >= 0, seconds < Double(maxIssuedAt + 1) else {
            return nil
        }
        return Int64(seconds.rounded(.towardZero))
    }

    /// Makes a signed token (for `pushemu token apns` and tests).
    public static func make(key: ES256.Key, keyID: String, teamID: String, issuedAt: Int64) -> String? {
        let header = Base64URL.encode(Array("{\"alg\":\"ES256\",\"kid\":\"\(keyID)\"}".utf8))
        let claims = Base64URL.encode(Array("{\"iss\":\"\(teamID)\",\"iat\":\(issuedAt)}".utf8))
        let input = Array("\(header).\(claims)".utf8)
        guard let sig = ES256.sign(key, message: input) else { return nil }
        return "\(header).\(claims).\(Base64URL.encode(sig))"
    }
}

@inline(__always)
func isAlphanumeric(_ c: UInt8) -> Bool {
    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
}
