import Transport
import XCTest

@testable import WebPush

/// Each service's verdicts and answers on the cases senders hit (webpush.md §1-3).
final class WebPushCheckTests: XCTestCase {
    let now: Int64 = 1_780_000_000
    var signer: P256Key!

    override func setUpWithError() throws { signer = try XCTUnwrap(P256Key.generate()) }

    func b64(_ bytes: [UInt8]) -> String { Base64URL.encode(bytes) }

    /// A VAPID JWT as py_vapid writes it (sorted claims), signed by `key`.
    func jwt(_ claims: String, key: P256Key? = nil, alg: String = "ES256") throws -> String {
        let signing = b64(Array(#"{"typ":"JWT","alg":"\#(alg)"}"#.utf8)) + "." + b64(Array(claims.utf8))
        let sig = try XCTUnwrap((key ?? signer).sign(Array(signing.utf8)))
        return signing + "." + b64(sig)
    }

    func headers(
        _ service: WebPushService, claims: String? = nil, ttl: String? = "60", extra: [(String, String)] = [],
        key: P256Key? = nil, scheme: String = "vapid"
    ) throws -> WebPushHeaders {
        var h = HTTPFields()
        if let ttl { h.add(name: "ttl", value: ttl) }
        h.add(name: "content-encoding", value: "aes128gcm")
        let c = claims ?? #"{"aud":"\#(service.origin)","exp":\#(now + 3600),"sub":"mailto:ops@shop.example"}"#
        let k = b64((key ?? signer).publicKey)
        if scheme == "vapid" {
            h.add(name: "authorization", value: "vapid t=\(try jwt(c, key: key)),k=\(k)")
        } else {
            h.add(name: "authorization", value: "WebPush \(try jwt(c, key: key))")
            h.add(name: "crypto-key", value: "p256ecdsa=\(k)")
        }
        for (n, v) in extra { h.add(name: n, value: v) }
        return WebPushHeaders(h)
    }

    var bound: WebPushSubscriptionFacts { WebPushSubscriptionFacts(applicationServerKey: signer.publicKey, gone: false) }

    func check(_ s: WebPushService, _ h: WebPushHeaders, body: Int = 100, sub: WebPushSubscriptionFacts? = nil) -> Result<
        WebPushAccepted, WebPushRefusal
    > {
        s.check(h, bodyCount: body, subscription: sub ?? bound, audiences: [s.origin], nowSeconds: now)
    }

    func refused(_ r: Result<WebPushAccepted, WebPushRefusal>, file: StaticString = #filePath, line: UInt = #line) -> WebPushRefusal? {
        if case .failure(let f) = r { return f }
        XCTFail("accepted", file: file, line: line)
        return nil
    }

    func testAWellFormedPushIsAcceptedByEveryService() throws {
        for s in WebPushService.allCases {
            var extra: [(String, String)] = [("urgency", "high"), ("topic", "sale-2026x")]
            if s == .wns { extra.append(("x-wns-cache-policy", "cache")) }
            let accepted = try check(s, try headers(s, extra: extra)).get()
            XCTAssertEqual(accepted.ttl, 60)
            XCTAssertEqual(accepted.urgency, "high")
            XCTAssertEqual(accepted.coding, .aes128gcm)
            XCTAssertEqual(accepted.claims?.subject, "mailto:ops@shop.example")
            let answer = s.response(accepting: "m1", ttl: 60)
            XCTAssertEqual(answer.status, 201)
            XCTAssertNotNil(answer.headers.first("location"))
        }
        // The draft form (`WebPush` + `Crypto-Key: p256ecdsa=`) too.
        XCTAssertNoThrow(try check(.mozilla, try headers(.mozilla, scheme: "webpush")).get())
        // A TTL past the service's limit is lowered to it, and autopush says so.
        XCTAssertEqual(try check(.mozilla, try headers(.mozilla, ttl: "99999999")).get().ttl, 60 * 86_400)
        XCTAssertEqual(try check(.fcm, try headers(.fcm, ttl: "99999999")).get().ttl, 2_419_200)
    }

    func testVAPIDFailuresAsEachServiceAnswersThem() throws {
        // Another key than the subscription's: autopush 401 errno 109, FCM 403 with its sentence, Apple VapidPkHashMismatch.
        let other = try XCTUnwrap(P256Key.generate())
        let m = try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, key: other))))
        XCTAssertEqual([m.status, m.errno], [401, 109])
        XCTAssertEqual(m.message, "VAPID public key mismatch")
        let body = String(decoding: WebPushService.mozilla.response(refusing: m).body, as: UTF8.self)
        XCTAssertTrue(body.contains(#""errno":109"#) && body.contains(#""code":401"#) && body.contains("more_info"), body)
        let f = try XCTUnwrap(refused(check(.fcm, try headers(.fcm, key: other))))
        XCTAssertEqual(f.status, 403)
        XCTAssertTrue(f.message.hasPrefix("the VAPID credentials in the authorization header do not correspond"))
        let fcmAnswer = WebPushService.fcm.response(refusing: f)
        XCTAssertEqual(fcmAnswer.headers.firstString("content-type"), "text/plain; charset=utf-8")
        XCTAssertEqual(String(decoding: fcmAnswer.body, as: UTF8.self).last, "\n")
        XCTAssertEqual(try XCTUnwrap(refused(check(.apple, try headers(.apple, key: other)))).message, "VapidPkHashMismatch")

        // exp more than 24 hours ahead.
        let late = #"{"aud":"https://fcm.googleapis.com","exp":\#(now + 90_000),"sub":"mailto:a@b.example"}"#
        XCTAssertEqual(
            try XCTUnwrap(refused(check(.fcm, try headers(.fcm, claims: late)))).message,
            "exp claim MUST NOT be more than 24 hours from the time of the request")
        // Expired.
        let past = #"{"aud":"https://web.push.apple.com","exp":\#(now - 1),"sub":"mailto:a@b.example"}"#
        XCTAssertEqual(try XCTUnwrap(refused(check(.apple, try headers(.apple, claims: past)))).message, "ExpiredJwtToken")
        // aud of another service.
        let aud = #"{"aud":"https://fcm.googleapis.com","exp":\#(now + 60),"sub":"mailto:a@b.example"}"#
        XCTAssertEqual(try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, claims: aud)))).message, "Invalid VAPID audience")
        XCTAssertEqual(try XCTUnwrap(refused(check(.apple, try headers(.apple, claims: aud)))).message, "BadJwtToken")
        // Apple's sub rules: localhost, .local, .invalid, a bare address; a real domain passes.
        for sub in [
            "mailto:x@localhost", "https://localhost:8443", "mailto:a@shop.local", "mailto:a@x.invalid", "ops@shop.example",
            "mailto: <a@b.c>",
        ] {
            let c = #"{"aud":"https://web.push.apple.com","exp":\#(now + 60),"sub":"\#(sub)"}"#
            XCTAssertEqual(try XCTUnwrap(refused(check(.apple, try headers(.apple, claims: c)))).message, "BadJwtToken", sub)
            // FCM does not look at sub.
            let fc = #"{"aud":"https://fcm.googleapis.com","exp":\#(now + 60),"sub":"\#(sub)"}"#
            XCTAssertNoThrow(try check(.fcm, try headers(.fcm, claims: fc)).get(), sub)
        }
        // autopush: claims that do not deserialize (exp as a string).
        let typed = #"{"aud":"https://updates.push.services.mozilla.com","exp":"\#(now + 60)","sub":"mailto:a@b.example"}"#
        XCTAssertTrue(
            try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, claims: typed)))).message.contains(
                "either missing or incorrectly specified"))
        // A signature by another key than k.
        var h = try headers(.mozilla)
        let forged = try jwt(
            #"{"aud":"https://updates.push.services.mozilla.com","exp":\#(now + 60),"sub":"mailto:a@b.example"}"#, key: other)
        var fields = HTTPFields()
        fields.add(name: "ttl", value: "0")
        fields.add(name: "authorization", value: "vapid t=\(forged), k=\(b64(signer.publicKey))")
        h = WebPushHeaders(fields)
        XCTAssertEqual(try XCTUnwrap(refused(check(.mozilla, h, body: 0))).message, "Invalid VAPID token: InvalidSignature")
        // No VAPID on a subscription made with a key; on Firefox's keyless v1 it is optional.
        var bare = HTTPFields()
        bare.add(name: "ttl", value: "10")
        XCTAssertEqual(try XCTUnwrap(refused(check(.fcm, WebPushHeaders(bare), body: 0))).status, 403)
        XCTAssertEqual(try XCTUnwrap(refused(check(.wns, WebPushHeaders(bare), body: 0))).status, 401)
        XCTAssertNoThrow(
            try check(.mozilla, WebPushHeaders(bare), body: 0, sub: WebPushSubscriptionFacts(applicationServerKey: nil, gone: false)).get())
        // An unknown scheme.
        var basic = HTTPFields()
        basic.add(name: "ttl", value: "10")
        basic.add(name: "authorization", value: "Basic abc")
        XCTAssertEqual(try XCTUnwrap(refused(check(.mozilla, WebPushHeaders(basic), body: 0))).message, "Unknown auth scheme")
    }

    func testHeaderAndBodyRules() throws {
        let missing = try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, ttl: nil))))
        XCTAssertEqual([missing.status, missing.errno], [400, 111])
        XCTAssertEqual(missing.message, "Missing TTL value")
        XCTAssertEqual(try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, ttl: "-5")))).errno, 114)
        // WNS: TTL 0 without X-WNS-Cache-Policy: no-cache (pywebpush's default TTL is 0).
        let wns = try XCTUnwrap(refused(check(.wns, try headers(.wns, ttl: "0"))))
        XCTAssertEqual(wns.message, "Ttl value conflicts with X-WNS-Cache-Policy.")
        let answer = WebPushService.wns.response(refusing: wns)
        XCTAssertEqual(answer.headers.firstString("x-wns-error-description"), "Ttl value conflicts with X-WNS-Cache-Policy.")
        XCTAssertEqual(answer.headers.firstString("x-wns-status"), "dropped")
        XCTAssertTrue(answer.body.isEmpty)
        XCTAssertNoThrow(try check(.wns, try headers(.wns, ttl: "0", extra: [("x-wns-cache-policy", "no-cache")])).get())
        // Topic: length, alphabet, and Apple's base64url decoding.
        XCTAssertEqual(
            try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, extra: [("topic", String(repeating: "a", count: 33))])))).message,
            "Topic must be no greater than 32 characters")
        XCTAssertEqual(
            try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, extra: [("topic", "a b")])))).message,
            "Topic must be URL and Filename safe Base64 alphabet")
        XCTAssertEqual(try XCTUnwrap(refused(check(.apple, try headers(.apple, extra: [("topic", "spike")])))).message, "BadWebPushTopic")
        XCTAssertNoThrow(try check(.apple, try headers(.apple, extra: [("topic", "neueangebote")])).get())
        XCTAssertNoThrow(try check(.mozilla, try headers(.mozilla, extra: [("topic", "spike")])).get())
        XCTAssertEqual(try XCTUnwrap(refused(check(.fcm, try headers(.fcm, extra: [("urgency", "urgent")])))).status, 400)
        // Size: 4,096 bytes is taken, 4,097 is 413 in each service's shape.
        XCTAssertNoThrow(try check(.fcm, try headers(.fcm), body: 4_096).get())
        for s in WebPushService.allCases {
            var extra: [(String, String)] = []
            if s == .wns { extra = [("x-wns-cache-policy", "cache")] }
            XCTAssertEqual(try XCTUnwrap(refused(check(s, try headers(s, extra: extra), body: 4_097))).status, 413, "\(s)")
        }
        // Encodings: aes128gcm refuses aesgcm's headers; aesgcm needs them; others are unknown.
        XCTAssertEqual(
            try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla, extra: [("encryption", "salt=abc")])))).message,
            "Do not include 'salt' header in aes128gcm Encryption header")
        var legacy = HTTPFields()
        legacy.add(name: "ttl", value: "60")
        legacy.add(name: "content-encoding", value: "aesgcm")
        legacy.add(name: "encryption", value: "salt=\(b64(ContentEncryption.random(16)))")
        legacy.add(name: "crypto-key", value: "dh=\(b64(signer.publicKey))")
        let accepted = try check(.mozilla, WebPushHeaders(legacy), sub: WebPushSubscriptionFacts(applicationServerKey: nil, gone: false))
            .get()
        XCTAssertEqual(accepted.coding, .aesgcm)
        XCTAssertEqual(accepted.senderKey, signer.publicKey)
        var unknown = HTTPFields()
        unknown.add(name: "ttl", value: "60")
        unknown.add(name: "content-encoding", value: "gzip")
        XCTAssertEqual(
            try XCTUnwrap(
                refused(check(.mozilla, WebPushHeaders(unknown), sub: WebPushSubscriptionFacts(applicationServerKey: nil, gone: false)))
            ).message,
            "Unknown Content-Encoding header")
    }

    func testSubscriptionsThatAreGoneOrNeverWere() throws {
        let gone = WebPushSubscriptionFacts(applicationServerKey: signer.publicKey, gone: true)
        let m = try XCTUnwrap(refused(check(.mozilla, try headers(.mozilla), sub: gone)))
        XCTAssertEqual([m.status, m.errno], [410, 106])
        XCTAssertEqual(WebPushService.mozilla.response(refusing: m).headers.firstString("cache-control"), "max-age=86400")
        let f = try XCTUnwrap(refused(check(.fcm, try headers(.fcm), sub: gone)))
        XCTAssertEqual(
            String(decoding: WebPushService.fcm.response(refusing: f).body, as: UTF8.self),
            "push subscription has unsubscribed or expired.\n")
        XCTAssertEqual(
            String(
                decoding: WebPushService.apple.response(refusing: try XCTUnwrap(refused(check(.apple, try headers(.apple), sub: gone))))
                    .body, as: UTF8.self),
            #"{"reason":"Unregistered"}"#)
        let never = WebPushService.mozilla.check(try headers(.mozilla), bodyCount: 10, subscription: nil, audiences: [], nowSeconds: now)
        XCTAssertEqual(try XCTUnwrap(refused(never)).errno, 102)
    }

    /// A connection's repeated VAPID header is verified once; its expiry still counts, and
    /// another header (another signature) is verified afresh.
    func testARepeatedJWTIsVerifiedOncePerConnection() throws {
        let cache = VAPIDCache()
        let h = try headers(.fcm)
        XCTAssertNoThrow(
            try WebPushService.fcm.check(
                h, bodyCount: 10, subscription: bound, audiences: [WebPushService.fcm.origin], nowSeconds: now, cache: cache
            ).get())
        XCTAssertNotNil(cache.known)
        XCTAssertNoThrow(
            try WebPushService.fcm.check(
                h, bodyCount: 10, subscription: bound, audiences: [WebPushService.fcm.origin], nowSeconds: now + 10, cache: cache
            ).get())
        let later = WebPushService.fcm.check(
            h, bodyCount: 10, subscription: bound, audiences: [WebPushService.fcm.origin], nowSeconds: now + 3_601, cache: cache)
        XCTAssertEqual(try XCTUnwrap(refused(later)).status, 403, "expired since it was cached")
        // The same claims signed by another key, sent with the subscription's k: not the cached header.
        let other = try XCTUnwrap(P256Key.generate())
        let forged = try jwt(#"{"aud":"https://fcm.googleapis.com","exp":\#(now + 3600),"sub":"mailto:ops@shop.example"}"#, key: other)
        var fields = HTTPFields()
        fields.add(name: "ttl", value: "60")
        fields.add(name: "authorization", value: "vapid t=\(forged),k=\(b64(signer.publicKey))")
        XCTAssertEqual(
            try XCTUnwrap(
                refused(
                    WebPushService.fcm.check(
                        WebPushHeaders(fields), bodyCount: 0, subscription: bound, audiences: [WebPushService.fcm.origin], nowSeconds: now,
                        cache: cache))
            ).message,
            "invalid JWT provided")
    }

    /// A cached header is still bound to the subscription's key, and its subject is judged per
    /// service: Apple refuses a localhost subject that FCM took from the same cached header.
    func testACachedHeaderIsStillJudgedPerSubscriptionAndService() throws {
        let cache = VAPIDCache()
        let claims = #"{"aud":"http://127.0.0.1:8080","exp":\#(now + 3600),"sub":"mailto:ops@localhost"}"#
        let fcm = try headers(.fcm, claims: claims)
        XCTAssertNoThrow(
            try WebPushService.fcm.check(
                fcm, bodyCount: 10, subscription: bound, audiences: [WebPushService.fcm.origin], nowSeconds: now, cache: cache,
                authority: Array("127.0.0.1:8080".utf8)[...]
            ).get(), "the aud derived from pushemu's own address")
        XCTAssertNotNil(cache.known)
        let apple = WebPushService.apple.check(
            fcm, bodyCount: 10, subscription: bound, audiences: [WebPushService.apple.origin], nowSeconds: now, cache: cache,
            authority: Array("127.0.0.1:8080".utf8)[...])
        XCTAssertEqual(try XCTUnwrap(refused(apple)).status, 403, "Apple refuses a localhost subject, cached or not")
        let elsewhere = WebPushService.fcm.check(
            fcm, bodyCount: 10, subscription: bound, audiences: [WebPushService.fcm.origin], nowSeconds: now, cache: cache,
            authority: Array("127.0.0.1:9090".utf8)[...])
        XCTAssertEqual(try XCTUnwrap(refused(elsewhere)).status, 403, "another authority is another audience")
        let otherKey = WebPushSubscriptionFacts(applicationServerKey: try XCTUnwrap(P256Key.generate()).publicKey, gone: false)
        let unbound = WebPushService.fcm.check(
            fcm, bodyCount: 10, subscription: otherKey, audiences: [WebPushService.fcm.origin], nowSeconds: now, cache: cache,
            authority: Array("127.0.0.1:8080".utf8)[...])
        XCTAssertEqual(try XCTUnwrap(refused(unbound)).status, 403, "k must still match the subscription's key")
    }

    /// TTL values as the services read them: spaces tolerated, a sign, at most 18 digits.
    func testTTLValues() {
        XCTAssertEqual(WebPushService.integer(Array(" 60 ".utf8)[...]), 60)
        XCTAssertEqual(WebPushService.integer(Array("-1".utf8)[...]), -1)
        XCTAssertEqual(WebPushService.integer(Array("0".utf8)[...]), 0)
        XCTAssertNil(WebPushService.integer(Array("".utf8)[...]))
        XCTAssertNil(WebPushService.integer(Array("6O".utf8)[...]))
        XCTAssertNil(WebPushService.integer(Array("1-".utf8)[...]))
        XCTAssertNil(WebPushService.integer(Array(String(repeating: "9", count: 19).utf8)[...]))
        XCTAssertEqual(WebPushService.lowercasedCoding(Array("AES128GCM".utf8)[...]), "aes128gcm")
        XCTAssertEqual(WebPushService.lowercasedCoding(Array("Br".utf8)[...]), "br")
    }
}
