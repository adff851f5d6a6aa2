import APNs
import PushCore
import Transport
import XCTest

/// Drives the APNs provider as a pure function: request + connection + time in, decision and
/// wire response out. One table row per reason the emulator can produce.
final class APNsProviderTests: XCTestCase {
    static let team = "TEAM123456"
    static let kid = "KEY1234567"
    static let token = String(repeating: "ab", count: 32)
    let now: Int64 = 1_800_000_000_000 // ms

    var keys: APNsKeyStore!
    var privateKey: ES256.Key!
    var devices: APNsDeviceRegistry!

    override func setUpWithError() throws {
        keys = APNsKeyStore(directory: nil)
        let (_, pem) = try keys.generate(teamID: Self.team, keyID: Self.kid)
        privateKey = try XCTUnwrap(ES256.Key.fromPEM(pem, isPrivate: true))
        devices = APNsDeviceRegistry()
    }

    func provider(_ tweak: (inout APNsConfiguration) -> Void = { _ in }) -> APNsProvider {
        var c = APNsConfiguration()
        tweak(&c)
        return APNsProvider(configuration: c, keys: keys, devices: devices)
    }

    func jwt(
        kid: String = APNsProviderTests.kid, team: String = APNsProviderTests.team, iat: Int64? = nil,
        key: ES256.Key? = nil
    ) -> String {
        ProviderToken.make(key: key ?? privateKey, keyID: kid, teamID: team, issuedAt: iat ?? now / 1000)!
    }

    func request(
        method: HTTPMethod = .post, path: String? = nil, token: String = APNsProviderTests.token,
        headers: [(String, String)] = [], auth: String? = "default", authority: String = "api.sandbox.push.apple.com",
        topic: String? = "com.example.app", body: String = #"{"aps":{"alert":"hi"}}"#
    ) -> Request {
        var f = HTTPFields()
        f.add(name: ":method", value: method.name)
        f.add(name: ":path", value: path ?? "/3/device/\(token)")
        f.add(name: ":authority", value: authority)
        if let topic { f.add(name: "apns-topic", value: topic) }
        if let auth { f.add(name: "authorization", value: "bearer " + (auth == "default" ? jwt() : auth)) }
        for (n, v) in headers { f.add(name: n, value: v) }
        return Request(version: .http2, method: method, headers: f, body: Array(body.utf8))
    }

    struct Row {
        let name: String
        let expect: APNsReason?
        var config: (inout APNsConfiguration) -> Void = { _ in }
        var cert: PeerCertificate? = nil
        var prepare: (APNsProviderTests, APNsProvider, APNsConnectionState) -> Void = { _, _, _ in }
        let request: (APNsProviderTests) -> Request
    }

    static func cert(
        uid: String? = "com.example.app", oids: [String] = ["1.2.840.113635.100.6.3.1"],
        topics: [String] = []
    ) -> PeerCertificate {
        var subject: [PeerCertificate.NameEntry] = []
        if let uid { subject.append(.init(name: "UID", oid: "0.9.2342.19200300.100.1.1", value: uid)) }
        subject.append(.init(name: "CN", oid: "2.5.4.3", value: "Apple Push Services: \(uid ?? "-")"))
        var exts = oids.map { PeerCertificate.Extension(oid: $0, critical: false, value: [0x05, 0x00]) }
        if !topics.isEmpty {
            var inner: [UInt8] = []
            for t in topics {
                inner += [0x0C, UInt8(t.utf8.count)] + Array(t.utf8)
                inner += [0x30, 5, 0x0C, 3] + Array("app".utf8)
            }
            exts.append(.init(oid: "1.2.840.113635.100.6.3.6", critical: false, value: [0x30, UInt8(inner.count)] + inner))
        }
        return PeerCertificate(subject: subject, issuer: [], extensions: exts, notBefore: 0, notAfter: 0, serialNumberHex: "01")
    }

    var rows: [Row] {
        let t = Self.token
        return [
            Row(name: "accepted alert", expect: nil) { $0.request() },
            Row(name: "accepted voip at 5120 bytes", expect: nil) {
                $0.request(
                    headers: [("apns-push-type", "voip")], topic: "com.example.app.voip",
                    body: #"{"aps":{},"pad":""# + String(repeating: "x", count: 5120 - 19) + #""}"#)
            },
            Row(name: "accepted 160-hex Live Activity token", expect: nil) {
                $0.request(
                    token: String(repeating: "c", count: 160), headers: [("apns-push-type", "liveactivity")],
                    topic: "com.example.app.push-type.liveactivity",
                    body: #"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#)
            },
            Row(name: "accepted with every optional header", expect: nil) {
                $0.request(
                    headers: [
                        ("apns-id", "123e4567-e89b-12d3-a456-426614174000"), ("apns-expiration", "0"),
                        ("apns-priority", "5"), ("apns-collapse-id", String(repeating: "c", count: 64)),
                        ("apns-push-type", "background"),
                    ], body: #"{"aps":{"content-available":1}}"#)
            },
            Row(name: "accepted certificate push without topic", expect: nil, cert: Self.cert()) { $0.request(auth: nil, topic: nil) },
            Row(name: "accepted unknown kid (lenient)", expect: nil) { $0.request(auth: $0.jwt(kid: "UNKNOWN123")) },

            Row(name: "DuplicateHeaders", expect: .duplicateHeaders) {
                $0.request(headers: [("apns-priority", "10"), ("apns-priority", "5")])
            },
            Row(name: "DuplicateHeaders (topic)", expect: .duplicateHeaders) { $0.request(headers: [("apns-topic", "com.example.app")]) },
            Row(name: "BadMessageId", expect: .badMessageId) { $0.request(headers: [("apns-id", "not-a-uuid")]) },
            Row(name: "BadMessageId uppercase", expect: .badMessageId) {
                $0.request(headers: [("apns-id", "123E4567-E89B-12D3-A456-426614174000")])
            },
            Row(name: "MethodNotAllowed", expect: .methodNotAllowed) { $0.request(method: .get) },
            Row(name: "BadPath", expect: .badPath) { $0.request(path: "/3/devices/\(t)") },
            Row(name: "BadPath (extra segment)", expect: .badPath) { $0.request(path: "/3/device/\(t)/x") },
            Row(name: "MissingDeviceToken", expect: .missingDeviceToken) { $0.request(path: "/3/device/") },
            Row(name: "MissingDeviceToken (no slash)", expect: .missingDeviceToken) { $0.request(path: "/3/device") },
            Row(name: "BadDeviceToken (not hex)", expect: .badDeviceToken) { $0.request(token: String(repeating: "z", count: 64)) },
            Row(name: "BadDeviceToken (too short)", expect: .badDeviceToken) { $0.request(token: "abcd") },
            Row(name: "BadDeviceToken (too long)", expect: .badDeviceToken) { $0.request(token: String(repeating: "a", count: 202)) },
            Row(
                name: "BadDeviceToken (other environment)", expect: .badDeviceToken,
                prepare: { tc, p, _ in
                    _ = p.devices.check(
                        token: ArraySlice(Self.token.utf8), environment: .production, bundle: ArraySlice("com.example.app".utf8))
                }, request: { $0.request() }),
            Row(name: "MissingProviderToken", expect: .missingProviderToken) { $0.request(auth: nil) },
            Row(name: "InvalidProviderToken (garbage)", expect: .invalidProviderToken) { $0.request(auth: "not.a.jwt") },
            Row(name: "InvalidProviderToken (not bearer)", expect: .invalidProviderToken) { tc in
                var r = tc.request(auth: nil)
                r = Request(
                    version: .http2, method: .post,
                    headers: {
                        var h = r.headers
                        h.add(name: "authorization", value: "basic abc")
                        return h
                    }(), body: r.body)
                return r
            },
            Row(name: "InvalidProviderToken (alg HS256)", expect: .invalidProviderToken) {
                let h = Base64URL.encode(Array(#"{"alg":"HS256","kid":"KEY1234567"}"#.utf8))
                let c = Base64URL.encode(Array(#"{"iss":"TEAM123456","iat":1800000000}"#.utf8))
                return $0.request(auth: "\(h).\(c).\(Base64URL.encode([UInt8](repeating: 1, count: 64)))")
            },
            Row(name: "InvalidProviderToken (kid not 10 chars)", expect: .invalidProviderToken) {
                $0.request(auth: $0.jwt(kid: "KEY123456"))
            },
            Row(name: "InvalidProviderToken (iss not 10 chars)", expect: .invalidProviderToken) {
                $0.request(auth: $0.jwt(team: "TEAM12345"))
            },
            Row(name: "InvalidProviderToken (iat in the future)", expect: .invalidProviderToken) {
                $0.request(auth: $0.jwt(iat: $0.now / 1000 + 3600))
            },
            Row(name: "InvalidProviderToken (bad signature)", expect: .invalidProviderToken) {
                $0.request(auth: $0.jwt(key: ES256.Key.generate()!))
            },
            Row(name: "InvalidProviderToken (team not the key's)", expect: .invalidProviderToken) {
                $0.request(auth: $0.jwt(team: "OTHER12345"))
            },
            Row(
                name: "InvalidProviderToken (strict, unknown kid)", expect: .invalidProviderToken, config: { $0.authMode = .strict },
                request: {
                    $0.request(auth: $0.jwt(kid: "UNKNOWN123"))
                }),
            Row(
                name: "InvalidProviderToken (connection bound to another team)", expect: .invalidProviderToken,
                prepare: { tc, p, s in
                    _ = p.decide(
                        tc.request(auth: tc.jwt(kid: "UNKNOWN123", team: "OTHER12345", iat: tc.now / 1000 - 1800)),
                        connection: .init(serverName: nil, peerCertificate: nil), state: s, nowMs: tc.now - 30 * 60_000)
                }, request: { $0.request() }),
            Row(name: "ExpiredProviderToken", expect: .expiredProviderToken) { $0.request(auth: $0.jwt(iat: $0.now / 1000 - 3601)) },
            Row(
                name: "TooManyProviderTokenUpdates", expect: .tooManyProviderTokenUpdates,
                prepare: { tc, p, s in
                    _ = p.decide(
                        tc.request(auth: tc.jwt(iat: tc.now / 1000 - 60)), connection: .init(serverName: nil, peerCertificate: nil),
                        state: s, nowMs: tc.now - 60_000)
                }, request: { $0.request() }),
            Row(
                name: "BadEnvironmentKeyIdInToken", expect: .badEnvironmentKeyIdInToken,
                prepare: { tc, p, _ in
                    let k = ES256.Key.generate()!
                    try! p.keys.register(teamID: Self.team, keyID: "PRODKEY123", publicKeyPEM: k.publicKeyPEM, environment: .production)
                    tc.extraKey = k
                }, request: { $0.request(auth: $0.jwt(kid: "PRODKEY123", key: $0.extraKey)) }),
            Row(
                name: "UnrelatedKeyIdInToken", expect: .unrelatedKeyIdInToken,
                prepare: { tc, p, s in
                    let k = ES256.Key.generate()!
                    try! p.keys.register(teamID: Self.team, keyID: "TOPICKEY12", publicKeyPEM: k.publicKeyPEM, topics: ["com.example.app"])
                    tc.extraKey = k
                    _ = p.decide(
                        tc.request(auth: tc.jwt(iat: tc.now / 1000 - 3000)), connection: .init(serverName: nil, peerCertificate: nil),
                        state: s, nowMs: tc.now - 25 * 60_000)
                }, request: { $0.request(auth: $0.jwt(kid: "TOPICKEY12", key: $0.extraKey)) }),
            Row(name: "BadCertificate (no UID)", expect: .badCertificate, cert: Self.cert(uid: nil)) { $0.request(auth: nil) },
            Row(name: "BadCertificate (no environment OID)", expect: .badCertificate, cert: Self.cert(oids: [])) { $0.request(auth: nil) },
            Row(name: "BadCertificateEnvironment", expect: .badCertificateEnvironment, cert: Self.cert()) {
                $0.request(auth: nil, authority: "api.push.apple.com")
            },
            Row(name: "MissingTopic (token)", expect: .missingTopic) { $0.request(topic: nil) },
            Row(
                name: "MissingTopic (multi-topic certificate)", expect: .missingTopic,
                cert: Self.cert(topics: ["com.example.app", "com.example.other"])
            ) { $0.request(auth: nil, topic: nil) },
            Row(name: "BadCollapseId", expect: .badCollapseId) {
                $0.request(headers: [("apns-collapse-id", String(repeating: "c", count: 65))])
            },
            Row(name: "BadPriority", expect: .badPriority) { $0.request(headers: [("apns-priority", "7")]) },
            Row(name: "BadPriority (background at 10)", expect: .badPriority) {
                $0.request(headers: [("apns-push-type", "background"), ("apns-priority", "10")], body: #"{"aps":{"content-available":1}}"#)
            },
            Row(name: "InvalidPushType", expect: .invalidPushType) { $0.request(headers: [("apns-push-type", "banner")]) },
            Row(name: "BadExpirationDate", expect: .badExpirationDate) { $0.request(headers: [("apns-expiration", "tomorrow")]) },
            Row(name: "BadExpirationDate (negative)", expect: .badExpirationDate) { $0.request(headers: [("apns-expiration", "-1")]) },
            Row(name: "BadTopic (voip without suffix)", expect: .badTopic) { $0.request(headers: [("apns-push-type", "voip")]) },
            Row(name: "BadTopic (alert to a voip topic)", expect: .badTopic) { $0.request(topic: "com.example.app.voip") },
            Row(name: "BadTopic (not a bundle id)", expect: .badTopic) { $0.request(topic: "com example app") },
            Row(name: "BadTopic (certificate topic not covered)", expect: .badTopic, cert: Self.cert()) {
                $0.request(auth: nil, topic: "com.other.app")
            },
            Row(
                name: "TopicDisallowed (topic-specific key)", expect: .topicDisallowed,
                prepare: { tc, p, _ in
                    let k = ES256.Key.generate()!
                    try! p.keys.register(
                        teamID: Self.team, keyID: "TOPICKEY34", publicKeyPEM: k.publicKeyPEM, topics: ["com.example.other"])
                    tc.extraKey = k
                }, request: { $0.request(auth: $0.jwt(kid: "TOPICKEY34", key: $0.extraKey)) }),
            Row(name: "TopicDisallowed (liveactivity over a certificate)", expect: .topicDisallowed, cert: Self.cert()) {
                $0.request(headers: [("apns-push-type", "liveactivity")], auth: nil, topic: "com.example.app.push-type.liveactivity")
            },
            Row(
                name: "DeviceTokenNotForTopic", expect: .deviceTokenNotForTopic,
                prepare: { tc, p, _ in
                    _ = p.devices.check(
                        token: ArraySlice(Self.token.utf8), environment: .sandbox, bundle: ArraySlice("com.example.other".utf8))
                }, request: { $0.request() }),
            Row(
                name: "Unregistered", expect: .unregistered,
                prepare: { tc, p, _ in
                    p.devices.register(token: Self.token, environment: .sandbox, bundleID: "com.example.app")
                    p.devices.uninstall(token: Self.token, atMs: 1_700_000_000_123)
                }, request: { $0.request() }),
            Row(name: "PayloadEmpty", expect: .payloadEmpty) { $0.request(body: "") },
            Row(name: "PayloadTooLarge (alert over 4096)", expect: .payloadTooLarge) {
                $0.request(body: #"{"aps":{},"pad":""# + String(repeating: "x", count: 4097 - 19) + #""}"#)
            },
            Row(name: "PayloadTooLarge (voip over 5120)", expect: .payloadTooLarge) {
                $0.request(
                    headers: [("apns-push-type", "voip")], topic: "com.example.app.voip",
                    body: #"{"aps":{},"pad":""# + String(repeating: "x", count: 5121 - 19) + #""}"#)
            },
            Row(
                name: "BadPayload (strict, not JSON)", expect: .badPayload, config: { $0.strictPayload = true },
                request: {
                    $0.request(body: "{aps")
                }),
            Row(
                name: "BadPayload (strict, bad aps)", expect: .badPayload, config: { $0.strictPayload = true },
                request: {
                    $0.request(body: #"{"aps":{"badge":"3"}}"#)
                }),
        ]
    }

    var extraKey: ES256.Key?

    func testEveryReasonTable() throws {
        var covered: Set<APNsReason> = []
        for row in rows {
            try setUpWithError()
            extraKey = nil
            let p = provider(row.config)
            let state = APNsConnectionState()
            row.prepare(self, p, state)
            let req = row.request(self)
            let d = p.decide(req, connection: APNsConnectionInfo(serverName: nil, peerCertificate: row.cert), state: state, nowMs: now)
            XCTAssertEqual(d.reason, row.expect, row.name)
            let resp = p.response(d, request: req, state: state)
            XCTAssertEqual(resp.status, row.expect?.status ?? 200, row.name)
            // apns-id: echoed when the request had a valid one, generated otherwise.
            let id = try XCTUnwrap(resp.headers.first("apns-id"), row.name)
            XCTAssertNotNil(UUIDValue.parseCanonicalLowercase(id), row.name)
            if let sent = req.headers.first("apns-id"), row.expect != .badMessageId {
                XCTAssertEqual(id.utf8String, sent.utf8String, row.name)
            }
            XCTAssertEqual(
                resp.headers.first("apns-unique-id") != nil, d.environment == .sandbox, "apns-unique-id on sandbox only: \(row.name)")
            if let reason = row.expect {
                covered.insert(reason)
                XCTAssertEqual(resp.headers.first("content-type")?.utf8String, "application/json", row.name)
                let body = String(decoding: resp.body, as: UTF8.self)
                if reason == .unregistered {
                    XCTAssertEqual(body, #"{"reason":"Unregistered","timestamp":1700000000123}"#)
                } else {
                    XCTAssertEqual(body, "{\"reason\":\"\(reason.rawValue)\"}", row.name)
                }
            } else {
                XCTAssertTrue(resp.body.isEmpty, "success has no body: \(row.name)")
                XCTAssertNil(resp.headers.first("content-type"), row.name)
            }
        }
        // Reasons only faults, GOAWAY or the device layer produce are out of this table.
        // The broadcast and channel APIs' own reasons have their table in BroadcastTests.
        let notHere: Set<APNsReason> = [
            .idleTimeout, .forbidden, .expiredToken, .tooManyRequests, .internalServerError,
            .serviceUnavailable, .shutdown, .featureNotEnabled, .missingChannelId, .badChannelId, .channelNotRegistered,
            .badRequestParams, .badRequestPayload, .missingPushType, .cannotCreateChannelConfig, .topicMismatch,
        ]
        XCTAssertEqual(Set(APNsReason.allCases).subtracting(notHere).subtracting(covered), [], "every producible reason has a row")
    }

    func testProductionResponsesHaveNoUniqueIDAndSpellingIsConfigurable() throws {
        let p = provider { $0.badEnvironmentReason = "BadEnvironmentKeyInToken" }
        let k = ES256.Key.generate()!
        try keys.register(teamID: Self.team, keyID: "SANDKEY123", publicKeyPEM: k.publicKeyPEM, environment: .sandbox)
        let req = request(auth: jwt(kid: "SANDKEY123", key: k), authority: "api.push.apple.com")
        let state = APNsConnectionState()
        let d = p.decide(req, connection: .init(serverName: nil, peerCertificate: nil), state: state, nowMs: now)
        let resp = p.response(d, request: req, state: state)
        XCTAssertEqual(resp.status, 403)
        XCTAssertEqual(String(decoding: resp.body, as: UTF8.self), #"{"reason":"BadEnvironmentKeyInToken"}"#)
        XCTAssertNil(resp.headers.first("apns-unique-id"))
    }

    func testEnvironmentFromAuthorityHostThenSNIThenDefault() {
        let p = provider { $0.defaultEnvironment = .production }
        func env(_ authority: String?, sni: String?) -> APNsEnvironment {
            var f = HTTPFields()
            if let authority { f.add(name: "host", value: authority) }
            return p.environment(
                Request(version: .http2, method: .post, headers: f), APNsConnectionInfo(serverName: sni, peerCertificate: nil))
        }
        XCTAssertEqual(env("api.sandbox.push.apple.com:443", sni: nil), .sandbox)
        XCTAssertEqual(env("api.development.push.apple.com", sni: "api.push.apple.com"), .sandbox)
        XCTAssertEqual(env("api.push.apple.com:2197", sni: nil), .production)
        XCTAssertEqual(env("localhost:8443", sni: "api.sandbox.push.apple.com"), .sandbox)
        XCTAssertEqual(env(nil, sni: nil), .production)
    }

    func testTokenVerifiedOnceThenCachedAndStreamsRaisedOnce() {
        let p = provider()
        let state = APNsConnectionState()
        let conn = APNsConnectionInfo(serverName: nil, peerCertificate: nil)
        let token = jwt() // ECDSA signatures are randomized: every jwt() is a different token
        let first = p.decide(request(auth: token), connection: conn, state: state, nowMs: now)
        XCTAssertNil(first.reason)
        XCTAssertEqual(first.raiseStreamsTo, 1000)
        let second = p.decide(request(auth: token), connection: conn, state: state, nowMs: now + 1000)
        XCTAssertNil(second.reason)
        XCTAssertNil(second.raiseStreamsTo)
        // Even if the key disappears, the cached verification holds for this connection.
        keys.removeAll()
        XCTAssertNil(p.decide(request(auth: token), connection: conn, state: state, nowMs: now + 2000).reason)
        // ...until the token ages out.
        XCTAssertEqual(p.decide(request(auth: token), connection: conn, state: state, nowMs: now + 3601_000).reason, .expiredProviderToken)
        // A different token within 20 minutes is one update too many.
        XCTAssertEqual(p.decide(request(auth: jwt()), connection: conn, state: APNsConnectionState(), nowMs: now).reason, nil)
        XCTAssertEqual(
            p.decide(request(auth: jwt(iat: now / 1000 + 10)), connection: conn, state: state, nowMs: now + 20_000).reason,
            .tooManyProviderTokenUpdates)
    }

    func testCachedTokenIsRecheckedForAnotherEnvironment() throws {
        let p = provider()
        let k = ES256.Key.generate()!
        try keys.register(teamID: Self.team, keyID: "PRODONLY12", publicKeyPEM: k.publicKeyPEM, environment: .production)
        let token = jwt(kid: "PRODONLY12", key: k)
        let state = APNsConnectionState()
        let conn = APNsConnectionInfo(serverName: nil, peerCertificate: nil)
        XCTAssertNil(p.decide(request(auth: token, authority: "api.push.apple.com"), connection: conn, state: state, nowMs: now).reason)
        XCTAssertNil(p.decide(request(auth: token, authority: "api.push.apple.com"), connection: conn, state: state, nowMs: now + 1).reason)
        XCTAssertEqual(
            p.decide(request(auth: token, authority: "api.sandbox.push.apple.com"), connection: conn, state: state, nowMs: now + 2).reason,
            .badEnvironmentKeyIdInToken)
        XCTAssertNil(p.decide(request(auth: token, authority: "api.push.apple.com"), connection: conn, state: state, nowMs: now + 3).reason)
    }

    func testReplacingAnExpiredTokenIsNotThrottled() {
        let p = provider()
        let state = APNsConnectionState()
        let conn = APNsConnectionInfo(serverName: nil, peerCertificate: nil)
        XCTAssertNil(p.decide(request(auth: jwt(iat: now / 1000 - 3500)), connection: conn, state: state, nowMs: now).reason)
        let later = now + 200_000
        XCTAssertEqual(
            p.decide(request(auth: jwt(iat: now / 1000 - 3500)), connection: conn, state: state, nowMs: later).reason, .expiredProviderToken
        )
        XCTAssertNil(p.decide(request(auth: jwt(iat: later / 1000)), connection: conn, state: state, nowMs: later).reason)
    }

    func testErrorBudgetLeadsToGoAway() {
        let p = provider { $0.maxConnectionErrors = 10 }
        let state = APNsConnectionState()
        let conn = APNsConnectionInfo(serverName: nil, peerCertificate: nil)
        let bad = request(token: "zz")
        XCTAssertNil(p.decide(bad, connection: conn, state: state, nowMs: now).goAwayReason)
        let d = p.decide(bad, connection: conn, state: state, nowMs: now)
        XCTAssertEqual(d.goAwayReason, "BadDeviceToken", "BadDeviceToken weighs 5: the second one exhausts 10")
        XCTAssertNil(p.decide(bad, connection: conn, state: state, nowMs: now).goAwayReason, "GOAWAY once")
    }

    func testPayloadWarningsAndSummary() {
        let p = provider()
        let state = APNsConnectionState()
        let body = #"{"aps":{"alert":{"title":"T","body":"B","bogus":1},"mutable-content":1,"badge":-1,"custom":2},"_mId":"m","_dId":"d"}"#
        let d = p.decide(request(body: body), connection: .init(serverName: nil, peerCertificate: nil), state: state, nowMs: now)
        XCTAssertNil(d.reason, "warnings only by default")
        let payload = Array(body.utf8)
        XCTAssertEqual(d.summary.title(in: payload), "T")
        XCTAssertEqual(d.summary.body(in: payload), "B")
        XCTAssertTrue(d.summary.mutableContent)
        XCTAssertFalse(d.summary.contentAvailable)
        XCTAssertEqual(d.summary.customKeyCount, 2)
        let escaped = p.decide(
            request(body: #"{"aps":{"alert":{"title":"caf\u00e9 \"x\""}}}"#),
            connection: .init(serverName: nil, peerCertificate: nil), state: APNsConnectionState(), nowMs: now)
        XCTAssertEqual(escaped.summary.title(in: Array(#"{"aps":{"alert":{"title":"caf\u00e9 \"x\""}}}"#.utf8)), "café \"x\"")
        XCTAssertTrue(d.warnings.contains("aps.alert.bogus is not an alert key APNs knows"), "\(d.warnings)")
        XCTAssertTrue(d.warnings.contains("aps.badge must be a non-negative integer"), "\(d.warnings)")
        XCTAssertTrue(d.warnings.contains("aps.custom is not a key APNs knows (custom keys belong outside aps)"), "\(d.warnings)")
        let la = p.decide(
            request(
                headers: [("apns-push-type", "liveactivity")], topic: "com.example.app.push-type.liveactivity",
                body: #"{"aps":{"event":"start","timestamp":1}}"#),
            connection: .init(serverName: nil, peerCertificate: nil), state: APNsConnectionState(), nowMs: now)
        XCTAssertNil(la.reason)
        XCTAssertTrue(la.warnings.contains("a liveactivity start needs aps.content-state"), "\(la.warnings)")
        XCTAssertTrue(la.warnings.contains("a liveactivity start needs aps.attributes-type and aps.attributes"), "\(la.warnings)")
    }

    /// One connection pushing the same payloads over and over (its scan remembered between
    /// requests): every request is judged as if it were the first.
    func testARepeatedPayloadOnOneConnectionIsJudgedEachTime() {
        let p = provider { $0.strictPayload = true }
        let state = APNsConnectionState()
        let conn = APNsConnectionInfo(serverName: nil, peerCertificate: nil)
        let bad = #"{"aps":{"badge":"x"}}"#
        let good = #"{"aps":{"alert":{"title":"T"},"badge":2}}"#
        let liveActivity = [("apns-push-type", "liveactivity")]
        let laTopic = "com.example.app.push-type.liveactivity"
        let start = #"{"aps":{"event":"start","timestamp":1}}"#
        let auth = jwt() // one token for the connection (a new one per request is TooManyProviderTokenUpdates)
        for round in 0..<3 {
            XCTAssertEqual(
                p.decide(request(auth: auth, body: bad), connection: conn, state: state, nowMs: now).reason, .badPayload, "round \(round)")
            XCTAssertEqual(
                p.decide(request(auth: auth, body: bad), connection: conn, state: state, nowMs: now).reason, .badPayload, "round \(round)")
            let ok = p.decide(request(auth: auth, body: good), connection: conn, state: state, nowMs: now)
            XCTAssertNil(ok.reason, "round \(round): \(ok.warnings)")
            XCTAssertEqual(ok.summary.title(in: Array(good.utf8)), "T")
            XCTAssertEqual(
                p.decide(
                    request(headers: liveActivity, auth: auth, topic: laTopic, body: start), connection: conn, state: state, nowMs: now
                ).reason,
                .badPayload, "a start without content-state, as a Live Activity")
            XCTAssertEqual(p.decide(request(auth: auth, body: start), connection: conn, state: state, nowMs: now).reason, .badPayload)
        }
    }

    func testTopicSuffixRules() {
        for t in APNsPushType.allCases where t != .mdm && t != .alert && t != .background {
            let topic = "com.example.app" + t.topicSuffix!
            XCTAssertEqual(t.bundleID(fromTopic: topic), "com.example.app", "\(t)")
            XCTAssertNil(APNsPushType.alert.bundleID(fromTopic: topic), "alert to \(topic)")
        }
        XCTAssertNil(APNsPushType.voip.bundleID(fromTopic: "com.example.app.voip-ptt"))
        XCTAssertEqual(APNsPushType.pushtotalk.bundleID(fromTopic: "com.example.app.voip-ptt"), "com.example.app")
        XCTAssertEqual(APNsPushType.mdm.bundleID(fromTopic: "com.apple.mgmt.External.1234"), "com.apple.mgmt.External.1234")
    }
}

extension APNsProviderTests {
    /// A token signed with a fractional `iat` (as `apns2` and `gobiko-apns` sign `time.time()`)
    /// is accepted in strict auth, and its time is checked like any other: an hour old, expired.
    func testFractionalIssuedAtIsAcceptedInStrictAuth() throws {
        func signed(iat: String) throws -> String {
            let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(Self.kid)"}"#.utf8))
            let claims = Base64URL.encode(Array(#"{"iss":"\#(Self.team)","iat":\#(iat)}"#.utf8))
            let signature = try XCTUnwrap(ES256.sign(privateKey, message: Array("\(header).\(claims)".utf8)))
            return "\(header).\(claims).\(Base64URL.encode(signature))"
        }
        let strict = provider { $0.authMode = .strict }
        let fresh = try signed(iat: "\(now / 1000 - 5).734218")
        let accepted = strict.decide(
            request(auth: fresh), connection: .init(serverName: nil, peerCertificate: nil), state: APNsConnectionState(), nowMs: now)
        XCTAssertNil(accepted.reason, "fractional iat: \(String(describing: accepted.reason))")
        let old = try signed(iat: "\(now / 1000 - 3601).25")
        let expired = strict.decide(
            request(auth: old), connection: .init(serverName: nil, peerCertificate: nil), state: APNsConnectionState(), nowMs: now)
        XCTAssertEqual(expired.reason, .expiredProviderToken)
        let negative = try signed(iat: "-12.5")
        let refused = strict.decide(
            request(auth: negative), connection: .init(serverName: nil, peerCertificate: nil), state: APNsConnectionState(), nowMs: now)
        XCTAssertEqual(refused.reason, .invalidProviderToken)
    }
}
