import FCM
import PushCore
import Runtime
import Transport
import XCTest

/// OAuth (the jwt-bearer token endpoint), the access tokens it issues, and the send API's
/// credential checks, driven as pure functions.
final class FCMAuthTests: XCTestCase {
    static let project = "demo-project"
    let nowS: Int64 = 1_800_000_000
    var accounts: FCMServiceAccounts!
    var account: FCMServiceAccounts.Account!
    var privateKey: RS256.Key!
    let tokens = FCMAccessTokens(secret: Array(repeating: 7, count: 32))

    override func setUpWithError() throws {
        accounts = FCMServiceAccounts(directory: nil)
        let (a, json) = try accounts.generate(projectID: Self.project, tokenURI: "http://127.0.0.1:8080/token")
        account = a
        let pem = try XCTUnwrap(Self.field(json, "private_key"))
        privateKey = try XCTUnwrap(RS256.Key.fromPEM(pem, isPrivate: true))
    }

    static func field(_ json: String, _ name: StaticString) -> String? {
        Array(json.utf8).withUnsafeBytes { raw in
            var t: [JSONToken] = []
            guard JSONParser.parse(raw, into: &t) == nil else { return nil }
            let v = JSONView(bytes: raw, tokens: t)
            return v.member(0, name).map { v.string($0) }
        }
    }

    func assertion(
        iss: String? = nil, kid: String? = nil, aud: String = "https://oauth2.googleapis.com/token",
        scope: String? = "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email",
        iat: Int64? = nil, lifetime: Int64 = 3600, alg: String = "RS256", key: RS256.Key? = nil
    ) -> String {
        let i = iat ?? nowS
        var claims = "{\"iss\":\"\(iss ?? account.clientEmail)\",\"aud\":\"\(aud)\",\"iat\":\(i),\"exp\":\(i + lifetime)"
        if let scope { claims += ",\"scope\":\"\(scope)\"" }
        claims += "}"
        return RS256.makeJWT(
            key: key ?? privateKey, header: "{\"alg\":\"\(alg)\",\"kid\":\"\(kid ?? account.privateKeyID)\",\"typ\":\"JWT\"}",
            claims: claims)!
    }

    func tokenRequest(_ assertion: String, grant: String = FCMOAuth.grantType) -> Response {
        let body = "grant_type=" + grant.split(separator: ":").joined(separator: "%3A") + "&assertion=" + assertion
        return FCMOAuth(accounts: accounts, tokens: tokens, lifetime: 3600)
            .respond(
                body: Array(body.utf8), contentType: "application/x-www-form-urlencoded", authority: "127.0.0.1:8080", nowSeconds: nowS)
    }

    func body(_ r: Response) -> String { String(decoding: r.body, as: UTF8.self) }

    func testServiceAccountJSONHasGoogleFields() throws {
        let (_, json) = try accounts.generate(projectID: "other-project", tokenURI: "http://h:1/token")
        for f: StaticString in [
            "type", "project_id", "private_key_id", "private_key", "client_email", "client_id", "auth_uri",
            "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url", "universe_domain",
        ] {
            XCTAssertNotNil(Self.field(json, f), "\(f)")
        }
        XCTAssertEqual(Self.field(json, "type"), "service_account")
        XCTAssertEqual(Self.field(json, "token_uri"), "http://h:1/token")
        XCTAssertTrue(Self.field(json, "private_key")!.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        XCTAssertThrowsError(try accounts.generate(projectID: "Bad_Project", tokenURI: "x"))
    }

    func testTokenEndpointIssuesAnAccessToken() throws {
        for aud in ["https://oauth2.googleapis.com/token", "http://127.0.0.1:8080/token", "http://localhost:9/token"] {
            let r = tokenRequest(assertion(aud: aud))
            XCTAssertEqual(r.status, 200, body(r))
            XCTAssertEqual(Self.field(body(r), "token_type"), "Bearer")
            XCTAssertTrue(body(r).contains("\"expires_in\":3599"))
            let token = try XCTUnwrap(Self.field(body(r), "access_token"))
            guard case .valid(let c) = tokens.verify(Array(token.utf8), nowSeconds: nowS) else { return XCTFail("not valid") }
            XCTAssertEqual(c.project, Self.project)
            XCTAssertTrue(c.messagingScope)
            XCTAssertEqual(c.expiresAtSeconds, nowS + 3600)
        }
    }

    func testTokenEndpointErrors() throws {
        let other = try XCTUnwrap(RS256.Key.generate())
        let cases: [(String, Response, String, String)] = [
            ("bad signature", tokenRequest(assertion(key: other)), "invalid_grant", "Invalid JWT Signature."),
            (
                "unknown account", tokenRequest(assertion(iss: "nobody@x.iam.gserviceaccount.com")), "invalid_grant",
                "Invalid grant: account not found"
            ),
            ("wrong kid", tokenRequest(assertion(kid: "0000")), "invalid_grant", "Invalid JWT Signature."),
            ("wrong audience", tokenRequest(assertion(aud: "https://evil.example/token")), "invalid_grant", "Failed audience check"),
            ("expired", tokenRequest(assertion(iat: nowS - 7200)), "invalid_grant", "short-lived token"),
            ("too long-lived", tokenRequest(assertion(lifetime: 7200)), "invalid_grant", "short-lived token"),
            ("from the future", tokenRequest(assertion(iat: nowS + 3000)), "invalid_grant", "short-lived token"),
            ("no scope", tokenRequest(assertion(scope: nil)), "invalid_scope", "Empty or missing scope"),
            ("not RS256", tokenRequest(assertion(alg: "HS256")), "invalid_grant", "RS256"),
            ("garbage", tokenRequest("abc.def"), "invalid_grant", "well-formed"),
            ("wrong grant", tokenRequest(assertion(), grant: "client_credentials"), "unsupported_grant_type", "client_credentials"),
        ]
        for (name, r, code, text) in cases {
            XCTAssertEqual(r.status, 400, name)
            XCTAssertEqual(Self.field(body(r), "error"), code, name)
            XCTAssertTrue(Self.field(body(r), "error_description")?.contains(text) == true, "\(name): \(body(r))")
        }
        let missing = FCMOAuth(accounts: accounts, tokens: tokens, lifetime: 3600)
            .respond(
                body: Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer".utf8), contentType: nil, authority: nil,
                nowSeconds: nowS)
        XCTAssertEqual(Self.field(body(missing), "error"), "invalid_request")
    }

    func testNonMessagingScopeGivesPermissionDenied() throws {
        let r = tokenRequest(assertion(scope: "https://www.googleapis.com/auth/datastore"))
        let token = try XCTUnwrap(Self.field(body(r), "access_token"))
        let e = provider().authorize(request(bearer: token), project: Self.project, state: FCMConnectionState(), nowMs: nowS * 1000)
        XCTAssertEqual(e?.httpStatus, 403)
        XCTAssertEqual(e?.message, "Request had insufficient authentication scopes.")
    }

    func testAccessTokenSeal() {
        let c = FCMAccessTokens.Claims(project: "p1", expiresAtSeconds: nowS + 10, messagingScope: true, clientEmail: "a@b")
        let t = tokens.issue(c)
        XCTAssertEqual(tokens.verify(Array(t.utf8), nowSeconds: nowS), .valid(c))
        XCTAssertEqual(tokens.verify(Array(t.utf8), nowSeconds: nowS + 10), .expired(c))
        var forged = Array(t.utf8)
        forged[20] = forged[20] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertEqual(tokens.verify(forged, nowSeconds: nowS), .forged)
        XCTAssertEqual(FCMAccessTokens(secret: Array(repeating: 8, count: 32)).verify(Array(t.utf8), nowSeconds: nowS), .forged)
        XCTAssertEqual(tokens.verify(Array("ya29.a0AfH6SMB".utf8), nowSeconds: nowS), .foreign)
        XCTAssertEqual(tokens.verify(Array("ya29.c.c0ASRK0GaGoogleIssued".utf8), nowSeconds: nowS), .foreign)
    }

    func provider(_ mode: FCMConfiguration.AuthMode = .lenient) -> FCMProvider {
        var c = FCMConfiguration()
        c.authMode = mode
        return FCMProvider(
            configuration: c, accounts: accounts, tokens: tokens, devices: FCMDeviceRegistry(),
            quota: FCMQuota(perMinute: 0))
    }

    func request(bearer: String?, scheme: String = "Bearer") -> Request {
        var f = HTTPFields()
        f.add(name: ":path", value: "/v1/projects/\(Self.project)/messages:send")
        if let bearer { f.add(name: "authorization", value: "\(scheme) \(bearer)") }
        return Request(version: .http2, method: .post, headers: f, body: Array(#"{"message":{"topic":"a"}}"#.utf8))
    }

    func testSendCredentials() {
        let nowMs = nowS * 1000
        func issued(project: String = Self.project, expires: Int64? = nil) -> String {
            tokens.issue(.init(project: project, expiresAtSeconds: expires ?? nowS + 100, messagingScope: true, clientEmail: "x@y"))
        }
        let cases: [(String, FCMConfiguration.AuthMode, String?, String, Int?, String?)] = [
            ("missing", .lenient, nil, "Bearer", 401, "CREDENTIALS_MISSING"),
            ("foreign lenient", .lenient, "anything", "Bearer", nil, nil),
            ("foreign strict", .strict, "anything", "Bearer", 401, "ACCESS_TOKEN_TYPE_UNSUPPORTED"),
            ("issued strict", .strict, issued(), "Bearer", nil, nil),
            ("issued lowercase scheme", .strict, issued(), "bearer", nil, nil),
            ("basic scheme", .lenient, "dXNlcjpwYXNz", "Basic", 401, "ACCESS_TOKEN_TYPE_UNSUPPORTED"),
            ("expired lenient", .lenient, issued(expires: nowS - 1), "Bearer", 401, "ACCESS_TOKEN_EXPIRED"),
            ("forged", .lenient, "ya29.pushemu.AAAA.BBBBBBBBBBBBBBBBBBBBBB", "Bearer", 401, "ACCESS_TOKEN_TYPE_UNSUPPORTED"),
            ("other project", .lenient, issued(project: "someone-else"), "Bearer", 403, "IAM_PERMISSION_DENIED"),
        ]
        for (name, mode, bearer, scheme, status, reason) in cases {
            let e = provider(mode).authorize(
                request(bearer: bearer, scheme: scheme), project: Self.project, state: FCMConnectionState(), nowMs: nowMs)
            XCTAssertEqual(e?.httpStatus, status, name)
            XCTAssertEqual(e?.errorInfoReason, reason, name)
            if status == 401 {
                XCTAssertTrue(
                    e!.response.headers.firstString("www-authenticate")?.hasPrefix("Bearer realm=\"https://accounts.google.com/\"") == true,
                    name)
                XCTAssertEqual(e?.status, "UNAUTHENTICATED", name)
            }
        }
        // The per-connection cache notices expiry.
        let state = FCMConnectionState()
        let p = provider()
        let token = issued(expires: nowS + 1)
        XCTAssertNil(p.authorize(request(bearer: token), project: Self.project, state: state, nowMs: nowMs))
        XCTAssertEqual(p.authorize(request(bearer: token), project: Self.project, state: state, nowMs: nowMs + 1000)?.httpStatus, 401)
    }

    func testProjectNumberNamesTheProject() {
        XCTAssertEqual(accounts.projectID(forPathSegment: account.projectNumber), Self.project)
        XCTAssertEqual(accounts.projectID(forPathSegment: "999"), "999")
        XCTAssertEqual(account.projectNumber.count, 12)
    }

    func testAccountsPersistAndReload() throws {
        let dir = "/tmp/pushemu-fcm-accounts-\(getpid())"
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        // The CLI made an account and dropped it in: a running store finds it on a miss, and
        // registers it (a state-log record), so it stays when the file goes.
        let (acc, _) = try FCMServiceAccounts.makeAccount(projectID: "persist-me")
        let b = FCMServiceAccounts(directory: dir)
        XCTAssertNil(b.lookup(email: acc.clientEmail))
        try FCMServiceAccounts.writeDropIn(acc, directory: dir)
        XCTAssertEqual(b.lookup(email: acc.clientEmail)?.privateKeyID, acc.privateKeyID)
        unlink(dir + "/" + acc.privateKeyID + ".json")
        XCTAssertEqual(b.lookup(email: acc.clientEmail)?.privateKeyID, acc.privateKeyID)
        XCTAssertEqual(FCMServiceAccounts(directory: dir).registerDropIns(), 0)
    }
}
