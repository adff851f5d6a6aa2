import FCM
import PushCore
import Transport
import XCTest

/// The send decision (recipients, device outcomes, quota), topic management and the error
/// envelope for every FcmError code.
final class FCMSendTests: XCTestCase {
    static let project = "demo-project"
    let nowMs: Int64 = 1_800_000_000_000
    var devices: FCMDeviceRegistry!

    static func token(_ i: Int) -> String {
        "f" + String(repeating: String(i % 10), count: 21) + ":APA91b" + String(repeating: "Zz\(i % 10)", count: 40)
    }

    override func setUp() { devices = FCMDeviceRegistry() }

    func provider(quota: Int = 0) -> FCMProvider {
        FCMProvider(
            configuration: FCMConfiguration(), accounts: FCMServiceAccounts(directory: nil),
            tokens: FCMAccessTokens(secret: Array(repeating: 1, count: 32)), devices: devices,
            quota: FCMQuota(perMinute: quota))
    }

    func request(_ body: String, path: String = "/v1/projects/\(FCMSendTests.project)/messages:send") -> Request {
        var f = HTTPFields()
        f.add(name: ":path", value: path)
        f.add(name: "authorization", value: "Bearer test")
        return Request(version: .http2, method: .post, headers: f, body: Array(body.utf8))
    }

    /// Whom a topic or condition send reaches (what the fan-out worker resolves after the answer).
    func recipients(_ body: String, project: String = FCMSendTests.project) -> [String] {
        let p = provider()
        let d = send(body, project: project, provider: p)
        XCTAssertNil(d.error)
        guard let target = d.fanOut else { return [] }
        return p.recipients(of: target, project: project)
    }

    func send(_ body: String, project: String = FCMSendTests.project, provider p: FCMProvider? = nil, at: Int64? = nil) -> FCMSendDecision {
        (p ?? provider()).send(request(body), projectSegment: Array(project.utf8)[...], state: FCMConnectionState(), nowMs: at ?? nowMs)
    }

    func testTokenSendsAndDeviceOutcomes() {
        let t = Self.token(1)
        let body = #"{"message":{"token":"\#(t)","data":{"a":"b"}}}"#
        var d = send(body)
        XCTAssertNil(d.error)
        XCTAssertEqual(d.tokenRange.map { String(decoding: Array(body.utf8)[$0], as: UTF8.self) }, t)
        XCTAssertEqual(devices.device(token: t)?.project, Self.project)

        // A token bound to one project, sent to from another: 403 SENDER_ID_MISMATCH.
        d = send(#"{"message":{"token":"\#(t)"}}"#, project: "other-project")
        XCTAssertEqual(d.error?.errorCode, .senderIDMismatch)
        XCTAssertEqual(d.error?.httpStatus, 403)
        XCTAssertEqual(d.error?.status, "PERMISSION_DENIED")

        // Uninstalled: 404 UNREGISTERED, also for a dry run.
        devices.uninstall(token: t, atMs: nowMs)
        for dry in [false, true] {
            d = send(#"{"validate_only":\#(dry),"message":{"token":"\#(t)"}}"#)
            XCTAssertEqual(d.error?.errorCode, .unregistered, "dry run \(dry)")
            XCTAssertEqual(d.error?.httpStatus, 404)
            XCTAssertEqual(d.error?.message, "Requested entity was not found.")
        }
    }

    func testDryRunDeliversNothingAndAnswersFakeID() {
        let p = provider()
        let d = send(#"{"validate_only":true,"message":{"token":"\#(Self.token(2))"}}"#, provider: p)
        XCTAssertNil(d.error)
        XCTAssertNil(d.fanOut)
        XCTAssertNil(d.tokenRange)
        let r = p.response(d, id: UUIDValue(high: 1, low: 2), nowMs: nowMs)
        XCTAssertEqual(r.status, 200)
        XCTAssertTrue(String(decoding: r.body, as: UTF8.self).contains("\"projects/demo-project/messages/fake_message_id\""))
    }

    func testSuccessNameHasFCMShape() {
        let p = provider()
        let d = send(#"{"message":{"token":"\#(Self.token(3))"}}"#, provider: p)
        let body = String(decoding: p.response(d, id: UUIDValue(high: 0xabcdef, low: 1), nowMs: nowMs).body, as: UTF8.self)
        XCTAssertTrue(
            body.contains("\"name\": \"projects/demo-project/messages/0:\(nowMs * 1000 + 0xabcdef % 1000)%0000000000abcdef\""), body)
    }

    /// A full registry refuses a subscription instead of indexing a device it does not keep
    /// (which a fan-out would then silently miss).
    func testFullRegistryRefusesSubscriptions() {
        let small = FCMDeviceRegistry(shardCount: 4, capacity: 8)
        var results: [FCMDeviceRegistry.SubscriptionResult] = []
        for i in 0..<40 { results.append(small.subscribe(token: Self.token(i) + "\(i)", topic: "t", project: nil, nowMs: nowMs)) }
        let kept = results.filter { $0 == .ok }.count
        XCTAssertEqual(kept, 8)
        XCTAssertEqual(results.filter { $0 == .full }.count, 32)
        XCTAssertEqual(small.fanOut(topic: "t", project: Self.project).count, kept)
    }

    func testTopicAndConditionFanOut() {
        let (a, b, c, d) = (Self.token(1), Self.token(2), Self.token(3), Self.token(4))
        XCTAssertEqual(devices.subscribe(token: a, topic: "news", project: Self.project, nowMs: nowMs), .ok)
        XCTAssertEqual(devices.subscribe(token: b, topic: "news", project: nil, nowMs: nowMs), .ok)
        XCTAssertEqual(devices.subscribe(token: b, topic: "sports", project: nil, nowMs: nowMs), .ok)
        XCTAssertEqual(devices.subscribe(token: c, topic: "sports", project: Self.project, nowMs: nowMs), .ok)
        XCTAssertEqual(devices.subscribe(token: d, topic: "news", project: "other-project", nowMs: nowMs), .ok)

        XCTAssertEqual(Set(recipients(#"{"message":{"topic":"news"}}"#)), [a, b])
        XCTAssertEqual(send(#"{"message":{"topic":"/topics/news"}}"#).topicLabel, "news")
        XCTAssertEqual(recipients(#"{"message":{"topic":"nobody"}}"#), [])
        XCTAssertEqual(Set(recipients(#"{"message":{"condition":"'news' in topics && 'sports' in topics"}}"#)), [b])
        XCTAssertEqual(Set(recipients(#"{"message":{"condition":"'sports' in topics && !('news' in topics)"}}"#)), [c])
        XCTAssertEqual(Set(recipients(#"{"message":{"condition":"'news' in topics || 'sports' in topics"}}"#)), [a, b, c])
        // Left to right: ('news' || 'sports') && !'news'.
        XCTAssertEqual(
            Set(recipients(#"{"message":{"condition":"'news' in topics || 'sports' in topics && !('news' in topics)"}}"#)), [c])
        // b was unbound until demo-project's sends reached it; now only d is other-project's.
        XCTAssertEqual(devices.device(token: b)?.project, Self.project)
        XCTAssertEqual(Set(recipients(#"{"message":{"topic":"news"}}"#, project: "other-project")), [d])

        XCTAssertEqual(devices.unsubscribe(token: a, topic: "news"), .ok)
        XCTAssertEqual(devices.unsubscribe(token: a, topic: "news"), .notSubscribed)
        devices.uninstall(token: b, atMs: nowMs)
        XCTAssertEqual(recipients(#"{"message":{"topic":"news"}}"#), [])
    }

    func testTooManyTopics() {
        let t = Self.token(5)
        for i in 0..<FCMDeviceRegistry.maxTopicsPerDevice {
            XCTAssertEqual(devices.subscribe(token: t, topic: "t\(i)", project: nil, nowMs: nowMs), .ok)
        }
        XCTAssertEqual(devices.subscribe(token: t, topic: "one-more", project: nil, nowMs: nowMs), .tooManyTopics)
        XCTAssertEqual(devices.subscribe(token: t, topic: "t7", project: nil, nowMs: nowMs), .ok) // already subscribed
        XCTAssertEqual(devices.subscribe(token: "short", topic: "a", project: nil, nowMs: nowMs), .invalidArgument)
    }

    func testQuotaAnswers429WithRetryAfter() {
        let p = provider(quota: 60) // one per second, burst of 60
        for i in 0..<60 { XCTAssertNil(send(#"{"message":{"topic":"q"}}"#, provider: p).error, "request \(i)") }
        let d = send(#"{"message":{"topic":"q"}}"#, provider: p)
        XCTAssertEqual(d.error?.httpStatus, 429)
        XCTAssertEqual(d.error?.errorCode, .quotaExceeded)
        XCTAssertEqual(d.error?.status, "RESOURCE_EXHAUSTED")
        XCTAssertTrue(d.error!.json.contains("type.googleapis.com/google.rpc.QuotaFailure"))
        XCTAssertEqual(d.error?.response.headers.firstString("retry-after"), "1")
        // Invalid requests take quota too; the bucket refills continuously.
        XCTAssertNil(send(#"{"message":{"topic":"q"}}"#, provider: p, at: nowMs + 1000).error)
        XCTAssertNotNil(send(#"{"message":{"topic":"q"}}"#, provider: p, at: nowMs + 1000).error)
        // Projects have their own buckets.
        XCTAssertNil(send(#"{"message":{"topic":"q"}}"#, project: "another-one", provider: p).error)
    }

    /// Connections take a large quota a few tokens at a time (no lock per send): two
    /// connections sending in turn at one instant get exactly the quota between them, a closed
    /// connection's unspent tokens go back to the bucket, and so do a lease's when its
    /// connection turns to another project. A small quota leases one token: counted exactly.
    func testQuotaLeasesSpendExactlyTheQuota() {
        XCTAssertEqual(FCMQuota(perMinute: 60).leaseSize, 1)
        XCTAssertEqual(FCMQuota(perMinute: 600_000).leaseSize, 3)
        XCTAssertEqual(FCMQuota(perMinute: 1_000_000_000).leaseSize, 64)
        let q = FCMQuota(perMinute: 400_000)
        XCTAssertEqual(q.leaseSize, 2)
        let a = FCMQuota.Lease()
        let b = FCMQuota.Lease()
        var sent = 0
        while sent < 500_000, q.take(sent % 2 == 0 ? a : b, project: "p", nowMs: 1000) == nil { sent += 1 }
        XCTAssertEqual(sent, 400_000)
        XCTAssertEqual(q.take(b, project: "p", nowMs: 1000), 1, "429 with Retry-After 1 s once the bucket is dry")
        XCTAssertNil(q.take(a, project: "other", nowMs: 1000), "projects have their own buckets")

        let r = FCMQuota(perMinute: 400_000)
        var first: FCMQuota.Lease? = FCMQuota.Lease()
        XCTAssertNil(r.take(first!, project: "p", nowMs: 1000)) // leased 2, spent 1
        XCTAssertNil(r.take(first!, project: "q", nowMs: 1000)) // p's spare token goes back
        first = nil // the connection closes: q's spare token goes back
        let c = FCMQuota.Lease()
        var more = 0
        while more < 500_000, r.take(c, project: "p", nowMs: 1000) == nil { more += 1 }
        XCTAssertEqual(more, 399_999, "every token not spent came back")
        more = 0
        while more < 500_000, r.take(c, project: "q", nowMs: 1000) == nil { more += 1 }
        XCTAssertEqual(more, 399_999)
    }

    func testEveryErrorCodeEnvelope() {
        let expected: [FCMErrorCode: (Int, String)] = [
            .invalidArgument: (400, "INVALID_ARGUMENT"), .unregistered: (404, "NOT_FOUND"),
            .senderIDMismatch: (403, "PERMISSION_DENIED"), .quotaExceeded: (429, "RESOURCE_EXHAUSTED"),
            .unavailable: (503, "UNAVAILABLE"), .internalError: (500, "INTERNAL"),
            .thirdPartyAuthError: (401, "UNAUTHENTICATED"),
        ]
        XCTAssertEqual(expected.count, FCMErrorCode.allCases.count)
        for code in FCMErrorCode.allCases {
            let e = FCMError.fcm(code)
            let r = e.response
            XCTAssertEqual(r.status, expected[code]!.0, code.rawValue)
            XCTAssertEqual(r.headers.firstString("content-type"), "application/json; charset=UTF-8")
            let body = String(decoding: r.body, as: UTF8.self)
            XCTAssertTrue(body.hasPrefix("{\"error\":{\"code\":\(expected[code]!.0),\"message\":"), body)
            XCTAssertTrue(body.contains("\"status\":\"\(expected[code]!.1)\""), body)
            XCTAssertTrue(
                body.contains("{\"@type\":\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":\"\(code.rawValue)\"}"),
                body)
            XCTAssertTrue(r.body.withUnsafeBytes { JSONParser.isValid($0) })
        }
        XCTAssertEqual(FCMError.fcm(.internalError).message, "Internal error encountered.")
    }

    func testInstanceIDBatch() {
        let tm = FCMTopicManagement(provider: provider())
        let (a, b) = (Self.token(1), Self.token(2))
        devices.register(token: b, project: nil, app: "com.example", nowMs: nowMs)
        devices.uninstall(token: b, atMs: nowMs)
        func body(_ r: Response) -> String { String(decoding: r.body, as: UTF8.self) }
        var r = tm.batch(
            request(#"{"to":"/topics/news","registration_tokens":["\#(a)","\#(b)","bad"]}"#, path: "/iid/v1:batchAdd"), add: true,
            nowMs: nowMs)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(body(r), #"{"results":[{},{"error":"NOT_FOUND"},{"error":"INVALID_ARGUMENT"}]}"#)
        r = tm.info(request("", path: "/iid/info/\(a)"), token: a, details: true, nowMs: nowMs)
        XCTAssertTrue(body(r).contains(#""rel":{"topics":{"news":{"addDate":"2027-01-15"}}}"#), body(r))
        r = tm.batch(
            request(#"{"to":"/topics/news","registration_tokens":["\#(a)"]}"#, path: "/iid/v1:batchRemove"), add: false, nowMs: nowMs)
        XCTAssertEqual(body(r), #"{"results":[{}]}"#)
        XCTAssertTrue(devices.device(token: a)!.topics.isEmpty)
        // Request-level errors: {"error": "..."}.
        let many = (0...1000).map { "\"t\($0)\"" }.joined(separator: ",")
        r = tm.batch(request(#"{"to":"/topics/news","registration_tokens":[\#(many)]}"#), add: true, nowMs: nowMs)
        XCTAssertEqual(r.status, 400)
        r = tm.batch(request(#"{"to":"news","registration_tokens":["\#(a)"]}"#), add: true, nowMs: nowMs)
        XCTAssertEqual(body(r), #"{"error":"InvalidTopicName"}"#)
        var noAuth = HTTPFields()
        noAuth.add(name: ":path", value: "/iid/v1:batchAdd")
        r = tm.batch(Request(version: .http11, method: .post, headers: noAuth, body: []), add: true, nowMs: nowMs)
        XCTAssertEqual(r.status, 401)
    }

    func testConditionGrammar() {
        let ok = [
            "'a' in topics", "\"a\" in topics", "!('a' in topics)", "('a' in topics)", "'a' in topics&&'b' in topics",
            "((('a' in topics)))", "'a' in topics || !'b' in topics",
        ]
        for c in ok { XCTAssertNoThrow(try FCMCondition.parse(c).get(), c) }
        let bad = [
            "", "a in topics", "'a' in topic", "'a' intopics", "'a' in topics &&", "('a' in topics", "'a' in topics)",
            "'a b' in topics", "'a' in topics & 'b' in topics", "'a' in topics 'b' in topics",
        ]
        for c in bad { XCTAssertThrowsError(try FCMCondition.parse(c).get(), c) }
        XCTAssertEqual(
            try FCMCondition.parse("'a' in topics || 'a' in topics || 'a' in topics || 'a' in topics || 'a' in topics").get().topics, ["a"])
        if case .failure(.tooManyTopics(6)) = FCMCondition.parse(Array(repeating: "'a' in topics", count: 6).joined(separator: " || ")) {
        } else {
            XCTFail("six topic tests accepted")
        }
    }
}

extension FCMSendTests {
    /// `fid` (the Firebase installation id: a registration token's part before the colon)
    /// reaches the device of that installation, the one its token names; an installation with
    /// no device is unregistered, and no device is made for it.
    func testInstallationIDReachesItsDevice() {
        let t = Self.token(3)
        let fid = String(t.prefix { $0 != ":" })
        XCTAssertNil(send(#"{"message":{"token":"\#(t)","data":{"a":"b"}}}"#).error)
        let d = send(#"{"message":{"fid":"\#(fid)","data":{"via":"fid"}}}"#)
        XCTAssertNil(d.error, "\(String(describing: d.error))")
        XCTAssertEqual(d.resolvedToken.map { String(decoding: $0, as: UTF8.self) }, t)
        XCTAssertEqual(devices.device(token: t)?.pushes, 2, "the same device, twice")

        // Registered by the admin API (no push yet) is known too.
        let registered = Self.token(4)
        devices.register(token: registered, project: Self.project, app: "com.example", nowMs: nowMs)
        let r = send(#"{"message":{"fid":"\#(String(registered.prefix { $0 != ":" }))"}}"#)
        XCTAssertEqual(r.resolvedToken.map { String(decoding: $0, as: UTF8.self) }, registered)

        // An installation nobody registered: UNREGISTERED, and nothing is created.
        let count = devices.count
        let unknown = send(#"{"message":{"fid":"cAAAAAAAAAAAAAAAAAAAAA"}}"#)
        XCTAssertEqual(unknown.error?.errorCode, .unregistered)
        XCTAssertEqual(unknown.error?.httpStatus, 404)
        XCTAssertEqual(devices.count, count)
        // A malformed one: INVALID_ARGUMENT, as before.
        XCTAssertEqual(send(#"{"message":{"fid":"short"}}"#).error?.errorCode, .invalidArgument)
        // Uninstalled: as for its token.
        devices.uninstall(token: t, atMs: nowMs)
        XCTAssertEqual(send(#"{"message":{"fid":"\#(fid)"}}"#).error?.errorCode, .unregistered)
    }
}
