import PushCore
import Transport

/// Google's OAuth 2.0 token endpoint for the JWT-bearer grant (RFC 7523), as service-account
/// credentials use it: `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`.
/// The RS256 assertion is verified against the registered account (`iss` = client email, `kid`
/// = private key id); both Google's audience and the emulator's own token URL are accepted
/// (Python's google-auth always signs the former).
public struct FCMOAuth: Sendable {
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let googleAudiences: Set<String> = [
        "https://oauth2.googleapis.com/token",
        "https://www.googleapis.com/oauth2/v4/token",
        "https://accounts.google.com/o/oauth2/token",
    ]
    static let messagingScopes: Set<String> = [
        "https://www.googleapis.com/auth/cloud-platform",
        "https://www.googleapis.com/auth/firebase.messaging",
    ]

    public let accounts: FCMServiceAccounts
    public let tokens: FCMAccessTokens
    public let lifetime: Int

    public init(accounts: FCMServiceAccounts, tokens: FCMAccessTokens, lifetime: Int) {
        self.accounts = accounts
        self.tokens = tokens
        self.lifetime = lifetime
    }

    /// Answers a token request. `authority` is the Host the client used (its own token URL is
    /// an accepted audience).
    public func respond(body: [UInt8], contentType: String?, authority: String?, nowSeconds: Int64) -> Response {
        let form = FCMOAuth.parseForm(body)
        guard let grant = form["grant_type"] else {
            return FCMOAuth.error("invalid_request", "Missing required parameter: grant_type")
        }
        guard grant == FCMOAuth.grantType else {
            return FCMOAuth.error("unsupported_grant_type", "Invalid grant_type: \(grant)")
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return FCMOAuth.error("invalid_request", "Missing required parameter: assertion")
        }
        switch verify(assertion: Array(assertion.utf8), authority: authority, nowSeconds: nowSeconds) {
        case .failure(let r): return r.response
        case .success(let (account, scopes)):
            let messaging = !scopes.isDisjoint(with: FCMOAuth.messagingScopes)
            let token = tokens.issue(
                .init(
                    project: account.projectID, expiresAtSeconds: nowSeconds + Int64(lifetime),
                    messagingScope: messaging, clientEmail: account.clientEmail))
            var r = FCMResponses.json(
                200, Array("{\"access_token\":\"\(token)\",\"expires_in\":\(max(0, lifetime - 1)),\"token_type\":\"Bearer\"}".utf8))
            r.headers.add(name: "cache-control", value: "no-cache, no-store, max-age=0, must-revalidate")
            r.headers.add(name: "pragma", value: "no-cache")
            return r
        }
    }

    struct Claims {
        var iss: String?, scope: String?, aud: String?, iat: Int64?, exp: Int64?
    }

    func verify(assertion: [UInt8], authority: String?, nowSeconds: Int64) -> Result<(FCMServiceAccounts.Account, Set<String>), Rejection> {
        let parts = assertion.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else {
            return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid JWT: the assertion is not a well-formed JWT.")))
        }
        var alg: String?
        var kid: String?
        guard
            FCMOAuth.object(
                header,
                { v, k, val in
                    if v.keyEquals(k, "alg"), v.tokens[val].kind == .string { alg = v.string(val) }
                    if v.keyEquals(k, "kid"), v.tokens[val].kind == .string { kid = v.string(val) }
                })
        else { return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid JWT: the header is not a JSON object."))) }
        guard alg == "RS256" else {
            return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid JWT: the signing algorithm must be RS256.")))
        }
        var c = Claims()
        guard
            FCMOAuth.object(
                payload,
                { v, k, val in
                    let t = v.tokens[val].kind
                    switch v.string(k) {
                    case "iss": if t == .string { c.iss = v.string(val) }
                    case "scope": if t == .string { c.scope = v.string(val) }
                    case "aud": if t == .string { c.aud = v.string(val) }
                    case "iat": if let n = v.number(val) { c.iat = Int64(n) }
                    case "exp": if let n = v.number(val) { c.exp = Int64(n) }
                    default: break
                    }
                })
        else { return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid JWT: the claim set is not a JSON object."))) }
        guard let iss = c.iss, let account = accounts.lookup(email: iss) else {
            if let named = c.iss {
                let shown = String(named.prefix(200))
                accounts.missing.say(shown) {
                    "a token request (the OAuth JWT of a service-account key file) names \(shown), an account this emulator does not have; it looked "
                        + accounts.searched
                        + ". Answered invalid_grant \"account not found\". Register the account with `pushemu credentials fcm --server URL` or POST /emulator/v1/fcm/service-accounts."
                }
            }
            return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid grant: account not found")))
        }
        if let kid, kid != account.privateKeyID {
            return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid JWT Signature.")))
        }
        guard RS256.verify(account.key, message: Array(assertion[parts[0].startIndex..<parts[1].endIndex]), signature: signature) else {
            return .failure(Rejection(FCMOAuth.error("invalid_grant", "Invalid JWT Signature.")))
        }
        guard let aud = c.aud, FCMOAuth.googleAudiences.contains(aud) || FCMOAuth.isOwnTokenURL(aud, authority: authority) else {
            return .failure(
                Rejection(
                    FCMOAuth.error(
                        "invalid_grant", "Invalid JWT: Failed audience check. The right audience is https://oauth2.googleapis.com/token")))
        }
        guard let iat = c.iat, let exp = c.exp, exp > iat, exp - iat <= 3600, iat <= nowSeconds + 300, exp > nowSeconds else {
            return .failure(
                Rejection(
                    FCMOAuth.error(
                        "invalid_grant",
                        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the assertion and use a clock with skew to account for clock differences between systems."
                    )))
        }
        let scopes = Set((c.scope ?? "").split(separator: " ").map(String.init))
        guard !scopes.isEmpty else {
            return .failure(Rejection(FCMOAuth.error("invalid_scope", "Empty or missing scope not allowed.")))
        }
        return .success((account, scopes))
    }

    /// `http(s)://<the host the client used, or a loopback name>/token`.
    static func isOwnTokenURL(_ aud: String, authority: String?) -> Bool {
        let lower = aud.lowercased()
        let rest: Substring
        if lower.hasPrefix("http://") {
            rest = lower.dropFirst(7)
        } else if lower.hasPrefix("https://") {
            rest = lower.dropFirst(8)
        } else {
            return false
        }
        guard let slash = rest.firstIndex(of: "/"), rest[slash...] == "/token" else { return false }
        let host = rest[..<slash]
        if let authority, host == authority.lowercased() { return true }
        let name = host.hasPrefix("[") ? String(host.prefix { $0 != "]" }.dropFirst()) : String(host.split(separator: ":").first ?? "")
        return ["localhost", "127.0.0.1", "::1", "oauth2.googleapis.com"].contains(name)
    }

    static func object(_ bytes: [UInt8], _ body: (JSONView, Int, Int) -> Void) -> Bool {
        bytes.withUnsafeBytes { raw -> Bool in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return false }
            let v = JSONView(bytes: raw, tokens: tokens)
            v.forEachMember(0) { body(v, $0, $1) }
            return true
        }
    }

    /// `application/x-www-form-urlencoded` fields (the first of each name).
    static func parseForm(_ body: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        for part in body.split(separator: UInt8(ascii: "&")) {
            let kv = part.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let k = PercentEncoding.decode(kv[0], plusAsSpace: true)
            let v = kv.count > 1 ? PercentEncoding.decode(kv[1], plusAsSpace: true) : ""
            if out[k] == nil { out[k] = v }
        }
        return out
    }

    /// Google's OAuth error shape.
    public static func error(_ code: String, _ description: String, status: Int = 400) -> Response {
        FCMResponses.json(status, Array(("{\"error\":\"\(code)\",\"error_description\":" + JSONWriter.quote(description) + "}").utf8))
    }
}
