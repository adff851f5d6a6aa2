import APNs
import EmulatorTesting
import Fleet
import Foundation
import PushCore
import Runtime
import TestSupport
import XCTest

/// Live Activity broadcast and channel management over HTTP/2 with token auth, in process:
/// create, read, list, delete, broadcast, the two storage policies, push-to-start and updates
/// to an activity's own token, every broadcast error reason once, the 10,000-channel limit, and
/// a broadcast reaching 10,000 subscribed activities exactly once each.
final class BroadcastTests: XCTestCase {
    static let app = "com.example.app"
    static let manageHost = "api-manage-broadcast.sandbox.push.apple.com"
    static let broadcastHost = "api-broadcast.sandbox.push.apple.com"

    func object(_ response: TestResponse, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any], response.text, file: file, line: line)
    }

    /// A provider token for a key registered through the admin API (team `team`).
    func authorization(_ emulator: TestEmulator, team: String = "TEAM123456", keyID: String = "KEY1234567", issuedAt: Int64? = nil)
        throws -> String
    {
        let key = try XCTUnwrap(ES256.Key.generate())
        let body = "{\"teamId\":\"\(team)\",\"keyId\":\"\(keyID)\",\"publicKeyPem\":" + JSONWriter.quote(key.publicKeyPEM) + "}"
        let created = try emulator.http1(TestRequest("POST", "/emulator/v1/apns/keys", body: body))
        XCTAssertEqual(created.status, 201, created.text)
        let token = try XCTUnwrap(
            ProviderToken.make(key: key, keyID: keyID, teamID: team, issuedAt: issuedAt ?? Int64(Date().timeIntervalSince1970)))
        return "bearer " + token
    }

    func createChannel(_ client: H2Client, _ auth: String, policy: Int, app: String = BroadcastTests.app) throws -> String {
        let r = try client.send(
            [
                TestRequest(
                    "POST", "/1/apps/\(app)/channels", headers: [("authorization", auth)],
                    body: "{\"message-storage-policy\":\(policy),\"push-type\":\"LiveActivity\"}")
            ], authority: Self.manageHost)[0]
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertNotNil(r.header("apns-request-id"))
        return try XCTUnwrap(r.header("apns-channel-id"))
    }

    func broadcast(_ channel: String, _ auth: String, _ body: String, expiration: String? = nil) -> TestRequest {
        var headers = [("authorization", auth), ("apns-channel-id", channel), ("apns-push-type", "liveactivity")]
        if let expiration { headers.append(("apns-expiration", expiration)) }
        return TestRequest("POST", "/4/broadcasts/apps/\(Self.app)", headers: headers, body: body)
    }

    static func update(_ score: Int, event: String = "update") -> String {
        "{\"aps\":{\"timestamp\":\(Int(Date().timeIntervalSince1970) + score),\"event\":\"\(event)\",\"content-state\":{\"score\":\(score)}}}"
    }

    func device(_ emulator: TestEmulator) throws -> String {
        let r = try emulator.http1(TestRequest("POST", "/emulator/v1/devices", body: "{\"platform\":\"ios\",\"app\":\"\(Self.app)\"}"))
        XCTAssertEqual(r.status, 201, r.text)
        return try XCTUnwrap(try object(r)["token"] as? String)
    }

    func activities(_ emulator: TestEmulator, _ token: String) throws -> [[String: Any]] {
        try XCTUnwrap(try object(try emulator.get("/emulator/v1/devices/\(token)/activities"))["activities"] as? [[String: Any]])
    }

    /// Waits for the fan-out worker (a notification query waits for answered broadcasts).
    func settle(_ emulator: TestEmulator) throws { _ = try emulator.get("/emulator/v1/notifications?limit=1") }

    /// A broadcast's deliveries carry the team whose key sent it, so a `team:` scope reads them
    /// (and another team's scope does not).
    func testBroadcastDeliveriesAreInTheSendingTeamsScope() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let auth = try authorization(emulator, team: "TEAMSCOPE1", keyID: "KEYSCOPE01")
        _ = try authorization(emulator, team: "TEAMSCOPE2", keyID: "KEYSCOPE02")
        let client = try H2Client(port: emulator.httpPort)
        let channel = try createChannel(client, auth, policy: 1)
        for _ in 0..<3 {
            let phone = try device(emulator)
            let r = try emulator.http1(
                TestRequest(
                    "POST", "/emulator/v1/devices/\(phone)/activities",
                    body:
                        "{\"attributesType\":\"ScoreAttributes\",\"attributes\":{},\"contentState\":{\"score\":0},\"channel\":\"\(channel)\"}"
                ))
            XCTAssertEqual(r.status, 201, r.text)
        }
        let r = try client.send([broadcast(channel, auth, Self.update(1))], authority: Self.broadcastHost)[0]
        XCTAssertEqual(r.status, 200, r.text)
        try settle(emulator)
        func deliveries(_ scope: String) throws -> [[String: Any]] {
            let list = try object(try emulator.get("/emulator/v1/notifications?scope=\(scope)&limit=50"))
            return try XCTUnwrap(list["notifications"] as? [[String: Any]]).filter { $0["topic"] as? String == channel }
        }
        let own = try deliveries("team:TEAMSCOPE1")
        XCTAssertEqual(own.count, 3)
        XCTAssertTrue(own.allSatisfy { $0["team"] as? String == "TEAMSCOPE1" }, "\(own)")
        XCTAssertEqual(try deliveries("team:TEAMSCOPE2").count, 0)
    }

    func testChannelsBroadcastsAndPushToStart() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let auth = try authorization(emulator)
        let client = try H2Client(port: emulator.httpPort)

        // Create, read, list.
        let stored = try createChannel(client, auth, policy: 1)
        let unstored = try createChannel(client, auth, policy: 0)
        XCTAssertNotNil(Data(base64Encoded: stored))
        var r = try client.send(
            [TestRequest("GET", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth), ("apns-channel-id", stored)])],
            authority: Self.manageHost)[0]
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try object(r)["message-storage-policy"] as? Int, 1)
        XCTAssertEqual(try object(r)["push-type"] as? String, "LiveActivity")
        let requestID = "8d2e2d3c-5b33-4d4a-9f5b-2f1c1c7e9a01"
        r = try client.send(
            [TestRequest("GET", "/1/apps/\(Self.app)/all-channels", headers: [("authorization", auth), ("apns-request-id", requestID)])],
            authority: Self.manageHost)[0]
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.header("apns-request-id"), requestID)
        XCTAssertEqual(try object(r)["channels"] as? [String], [stored, unstored])

        // An app's activity listens to the Most Recent Message channel.
        let phone = try device(emulator)
        r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices/\(phone)/activities",
                body:
                    "{\"attributesType\":\"ScoreAttributes\",\"attributes\":{\"team\":\"A\"},\"contentState\":{\"score\":0},\"channel\":\"\(stored)\"}"
            ))
        XCTAssertEqual(r.status, 201, r.text)
        let first = try object(r)
        XCTAssertEqual((first["pushToken"] as? String)?.count, 160)
        XCTAssertEqual(first["channel"] as? String, stored)

        // Broadcast (on the broadcast host, and on the push host: clients use both).
        r = try client.send([broadcast(stored, auth, Self.update(1))], authority: Self.broadcastHost)[0]
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertNotNil(r.header("apns-request-id"))
        XCTAssertNotNil(r.header("apns-unique-id"))
        XCTAssertNil(r.header("apns-id"))
        XCTAssertTrue(r.body.isEmpty)
        r = try client.send([broadcast(stored, auth, Self.update(2))], authority: "api.sandbox.push.apple.com")[0]
        XCTAssertEqual(r.status, 200, r.text)
        try settle(emulator)
        var list = try activities(emulator, phone)
        XCTAssertEqual((list.first?["contentState"] as? [String: Any])?["score"] as? Int, 2)
        XCTAssertEqual(list.first?["updates"] as? Int, 2)
        // Recorded like any push: one notification per activity reached, under the channel.
        let sent = try object(
            try emulator.get("/emulator/v1/notifications?topic=\(stored.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"))
        XCTAssertEqual((sent["notifications"] as? [[String: Any]])?.count, 2)

        // No Message Stored: apns-expiration must be 0.
        r = try client.send([broadcast(unstored, auth, Self.update(3))], authority: Self.broadcastHost)[0]
        XCTAssertEqual(r.status, 400)
        XCTAssertEqual(try object(r)["reason"] as? String, "BadExpirationDate")
        r = try client.send([broadcast(unstored, auth, Self.update(3), expiration: "0")], authority: Self.broadcastHost)[0]
        XCTAssertEqual(r.status, 200, r.text)

        // A later subscriber gets the Most Recent Message channel's last message, and nothing
        // from the No Message Stored one.
        r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices/\(phone)/activities",
                body: "{\"attributesType\":\"ScoreAttributes\",\"contentState\":{\"score\":0}}"))
        let second = try XCTUnwrap(try object(r)["id"] as? String)
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/devices/\(phone)/activities/\(second)/channel", body: "{\"channel\":\"\(unstored)\"}"))
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual((try object(r)["contentState"] as? [String: Any])?["score"] as? Int, 0)
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/devices/\(phone)/activities/\(second)/channel", body: "{\"channel\":\"\(stored)\"}"))
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual((try object(r)["contentState"] as? [String: Any])?["score"] as? Int, 2)

        // Push-to-start: a start to the device's push-to-start token starts an activity with
        // its own update token, subscribed to the channel the push names.
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/devices/\(phone)/push-to-start", body: "{\"attributesType\":\"ScoreAttributes\"}"))
        XCTAssertEqual(r.status, 201, r.text)
        let startToken = try XCTUnwrap(try object(r)["token"] as? String)
        let liveHeaders = [
            ("authorization", auth), ("apns-push-type", "liveactivity"), ("apns-topic", Self.app + ".push-type.liveactivity"),
        ]
        let now = Int(Date().timeIntervalSince1970)
        let start =
            "{\"aps\":{\"timestamp\":\(now),\"event\":\"start\",\"attributes-type\":\"ScoreAttributes\",\"attributes\":{\"team\":\"B\"},"
            + "\"content-state\":{\"score\":7},\"input-push-channel\":\"\(stored)\",\"alert\":{\"title\":\"Kick-off\"}}}"
        r = try client.send([TestRequest("POST", "/3/device/\(startToken)", headers: liveHeaders, body: start)])[0]
        XCTAssertEqual(r.status, 200, r.text)
        list = try activities(emulator, phone)
        XCTAssertEqual(list.count, 3)
        let started = try XCTUnwrap(list.last)
        XCTAssertEqual(started["startedBy"] as? String, "push-to-start")
        XCTAssertEqual(started["channel"] as? String, stored)
        XCTAssertEqual((started["attributes"] as? [String: Any])?["team"] as? String, "B")
        let updateToken = try XCTUnwrap(started["pushToken"] as? String)
        XCTAssertNotEqual(updateToken, startToken)
        let inbox = try XCTUnwrap(try object(try emulator.get("/emulator/v1/devices/\(phone)/inbox"))["inbox"] as? [[String: Any]])
        XCTAssertEqual(inbox.last?["activityEvent"] as? String, "start")
        XCTAssertEqual(inbox.last?["activityId"] as? String, started["id"] as? String)

        // Update, then end, through the activity's own token; then its token is no longer valid.
        let update =
            "{\"aps\":{\"timestamp\":\(now + 10),\"event\":\"update\",\"content-state\":{\"score\":8},\"stale-date\":\(now + 600)}}"
        r = try client.send([TestRequest("POST", "/3/device/\(updateToken)", headers: liveHeaders, body: update)])[0]
        XCTAssertEqual(r.status, 200, r.text)
        let end = "{\"aps\":{\"timestamp\":\(now + 20),\"event\":\"end\",\"content-state\":{\"score\":9},\"dismissal-date\":\(now + 900)}}"
        r = try client.send([TestRequest("POST", "/3/device/\(updateToken)", headers: liveHeaders, body: end)])[0]
        XCTAssertEqual(r.status, 200, r.text)
        let ended = try XCTUnwrap(try activities(emulator, phone).last)
        XCTAssertEqual(ended["state"] as? String, "ended")
        XCTAssertEqual((ended["contentState"] as? [String: Any])?["score"] as? Int, 9)
        XCTAssertEqual(ended["staleDate"] as? Int, now + 600)
        XCTAssertEqual(ended["dismissalDate"] as? Int, now + 900)
        r = try client.send([TestRequest("POST", "/3/device/\(updateToken)", headers: liveHeaders, body: update)])[0]
        XCTAssertEqual(r.status, 410, r.text)

        // Delete: 204, then the channel is gone.
        r = try client.send(
            [TestRequest("DELETE", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth), ("apns-channel-id", stored)])],
            authority: Self.manageHost)[0]
        XCTAssertEqual(r.status, 204, r.text)
        r = try client.send(
            [TestRequest("GET", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth), ("apns-channel-id", stored)])],
            authority: Self.manageHost)[0]
        XCTAssertEqual(r.status, 400)
        XCTAssertEqual(try object(r)["reason"] as? String, "ChannelNotRegistered")
    }

    func testEveryBroadcastErrorReason() throws {
        let emulator = try TestEmulator(
            .inProcess, arguments: ["--apns-broadcast-apps", "com.example.app,com.other.app", "--allow-override-header"])
        defer { emulator.stop() }
        let auth = try authorization(emulator)
        let setup = try H2Client(port: emulator.httpPort)
        let channel = try createChannel(setup, auth, policy: 1)
        let path = "/4/broadcasts/apps/\(Self.app)"
        let body = Self.update(1)
        let good = [("authorization", auth), ("apns-channel-id", channel), ("apns-push-type", "liveactivity")]
        func without(_ name: String) -> [(String, String)] { good.filter { $0.0 != name } }
        func with(_ name: String, _ value: String) -> [(String, String)] { without(name) + [(name, value)] }
        let otherTeam = try authorization(emulator, team: "OTHERTEAM1", keyID: "KEY7654321")
        let expired = try authorization(
            emulator, team: "TEAM123456", keyID: "KEY2222222", issuedAt: Int64(Date().timeIntervalSince1970) - 7200)
        let cases: [(String, TestRequest, Int, String)] = [
            ("method", TestRequest("GET", path, headers: good), 405, "MethodNotAllowed"),
            ("path", TestRequest("POST", "/4/broadcasts/\(Self.app)", headers: good, body: body), 404, "BadPath"),
            ("suffix", TestRequest("POST", path + ".push-type.liveactivity", headers: good, body: body), 400, "TopicDisallowed"),
            ("request id", TestRequest("POST", path, headers: good + [("apns-request-id", "nope")], body: body), 400, "BadMessageId"),
            ("no token", TestRequest("POST", path, headers: without("authorization"), body: body), 403, "MissingProviderToken"),
            ("bad token", TestRequest("POST", path, headers: with("authorization", "bearer abc"), body: body), 403, "InvalidProviderToken"),
            ("old token", TestRequest("POST", path, headers: with("authorization", expired), body: body), 403, "ExpiredProviderToken"),
            ("team", TestRequest("POST", path, headers: with("authorization", otherTeam), body: body), 403, "TopicMismatch"),
            (
                "capability", TestRequest("POST", "/4/broadcasts/apps/com.disabled.app", headers: good, body: body), 400,
                "FeatureNotEnabled"
            ),
            ("no channel", TestRequest("POST", path, headers: without("apns-channel-id"), body: body), 400, "MissingChannelId"),
            ("channel", TestRequest("POST", path, headers: with("apns-channel-id", "not a channel!"), body: body), 400, "BadChannelId"),
            (
                "unknown channel", TestRequest("POST", path, headers: with("apns-channel-id", "AAAAAAAAAAAAAAAAAAAAAA=="), body: body), 400,
                "ChannelNotRegistered"
            ),
            ("no push type", TestRequest("POST", path, headers: without("apns-push-type"), body: body), 400, "MissingPushType"),
            ("push type", TestRequest("POST", path, headers: with("apns-push-type", "alert"), body: body), 400, "InvalidPushType"),
            ("priority", TestRequest("POST", path, headers: good + [("apns-priority", "7")], body: body), 400, "BadPriority"),
            ("expiration", TestRequest("POST", path, headers: good + [("apns-expiration", "soon")], body: body), 400, "BadExpirationDate"),
            ("empty", TestRequest("POST", path, headers: good), 400, "PayloadEmpty"),
            (
                "large",
                TestRequest("POST", path, headers: good, body: "{\"aps\":{},\"x\":\"" + String(repeating: "x", count: 5200) + "\"}"),
                413, "PayloadTooLarge"
            ),
            ("start", TestRequest("POST", path, headers: good, body: Self.update(1, event: "start")), 400, "BadRequestPayload"),
            (
                "params",
                TestRequest(
                    "POST", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth)],
                    body: "{\"message-storage-policy\":2,\"push-type\":\"LiveActivity\"}"), 400, "BadRequestParams"
            ),
            ("create empty", TestRequest("POST", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth)]), 400, "PayloadEmpty"),
            (
                "manage method", TestRequest("PUT", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth)]), 405,
                "MethodNotAllowed"
            ),
            ("manage path", TestRequest("GET", "/1/apps/\(Self.app)/channel", headers: [("authorization", auth)]), 404, "BadPath"),
            ("read no id", TestRequest("GET", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth)]), 400, "MissingChannelId"),
            (
                "injected 429", TestRequest("POST", path, headers: good + [("x-pushemu-fault", "reason=TooManyRequests")], body: body), 429,
                "TooManyRequests"
            ),
            (
                "injected 500", TestRequest("POST", path, headers: good + [("x-pushemu-fault", "reason=InternalServerError")], body: body),
                500, "InternalServerError"
            ),
            (
                "injected 503", TestRequest("POST", path, headers: good + [("x-pushemu-fault", "reason=Shutdown")], body: body), 503,
                "Shutdown"
            ),
        ]
        for (name, request, status, reason) in cases {
            // Each on a connection of its own (auth is cached per connection).
            let r = try emulator.h2([request], authority: Self.broadcastHost)[0]
            XCTAssertEqual(r.status, status, "\(name): \(r.text)")
            XCTAssertEqual(try? object(r)["reason"] as? String, reason, name)
            XCTAssertNotNil(r.header("apns-request-id"), name)
            XCTAssertNil(r.header("apns-id"), name)
        }
        // A second token on one connection within 20 minutes.
        let second = try authorization(emulator, team: "TEAM123456", keyID: "KEY3333333")
        let client = try H2Client(port: emulator.httpPort)
        XCTAssertEqual(
            try client.send([TestRequest("POST", path, headers: good, body: body)], authority: Self.broadcastHost)[0].status, 200)
        let r = try client.send(
            [TestRequest("POST", path, headers: with("authorization", second), body: body)], authority: Self.broadcastHost)[0]
        XCTAssertEqual(r.status, 429)
        XCTAssertEqual(try object(r)["reason"] as? String, "TooManyProviderTokenUpdates")
    }

    func testTenThousandChannelsAtMost() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let auth = try authorization(emulator)
        let client = try H2Client(port: emulator.httpPort)
        let create = TestRequest(
            "POST", "/1/apps/\(Self.app)/channels", headers: [("authorization", auth)],
            body: "{\"message-storage-policy\":0,\"push-type\":\"LiveActivity\"}")
        for _ in 0..<10 {
            let answers = try client.send(Array(repeating: create, count: 1_000), authority: Self.manageHost)
            XCTAssertEqual(answers.filter { $0.status == 201 }.count, 1_000)
        }
        let r = try client.send([create], authority: Self.manageHost)[0]
        XCTAssertEqual(r.status, 400)
        XCTAssertEqual(try object(r)["reason"] as? String, "CannotCreateChannelConfig")
        // Per app and environment: production and another app still have room.
        XCTAssertEqual(try client.send([create], authority: "api-manage-broadcast.push.apple.com")[0].status, 201)
        let list = try client.send(
            [TestRequest("GET", "/1/apps/\(Self.app)/all-channels", headers: [("authorization", auth)])], authority: Self.manageHost)[0]
        XCTAssertEqual((try object(list)["channels"] as? [String])?.count, 10_000)
    }

    func testBroadcastReachesTenThousandActivitiesOnce() throws {
        let emulator = try TestEmulator(.inProcess, arguments: ["--notification-log-size", "1000"])
        defer { emulator.stop() }
        let root = try XCTUnwrap(emulator.inProcess)
        let auth = try authorization(emulator)
        let client = try H2Client(port: emulator.httpPort)
        let channel = try createChannel(client, auth, policy: 1)
        var random = FastRandom(seed: 11)
        var devices: [String] = []
        for _ in 0..<10_000 {
            let token = DeviceLifecycle.randomToken(.ios, &random)
            try root.deviceStore.register(
                SimDevice(token: token, platform: .ios, app: Self.app, environment: "sandbox", createdAtMs: 0, seed: random.next()))
            guard
                case .success = root.deviceStore.startActivity(
                    token: token, attributesType: "ScoreAttributes", attributes: "{}", contentState: "{}", channel: channel, staleDate: nil,
                    nowMs: Clock.nowMs())
            else { return XCTFail("startActivity") }
            devices.append(token)
        }
        let r = try client.send([broadcast(channel, auth, Self.update(5), expiration: "0")], authority: Self.broadcastHost)[0]
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertTrue(root.fanOut.waitUntilIdle(timeoutMs: 60_000))
        XCTAssertEqual(root.fanOut.counters.delivered, 10_000)
        for token in devices {
            let device = try XCTUnwrap(root.deviceStore.device(token: token))
            XCTAssertEqual(device.received, 1, token)
            XCTAssertEqual(device.activities.first?.updates, 1, token)
        }
    }
}

/// FCM to an iOS app: the message reaches the app's device as the APNs notification FCM makes
/// of it, and `apns.live_activity_token` reaches the same Live Activity an APNs update would.
final class FCMToIOSTests: XCTestCase {
    func object(_ response: TestResponse) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any], response.text)
    }

    func testFCMReachesIOSDevicesAndTheirLiveActivities() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let sink = try TrackingSink()
        defer { sink.stop() }
        // The device's SDK reports what it sees: the APNs payload (data keys at the top level,
        // FCM's image attachment), not the FCM message.
        let tracking =
            #"{"preset":"webhook","method":"GET","url":"\#(sink.url)/e/{event}?m={payload._mId}&img={payload.fcm_options.image|urlencode}"}"#
        var r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices",
                body:
                    #"{"platform":"ios","app":"com.example.app","fcmToken":true,"project":"demo-project","topics":["news"],"tracking":\#(tracking),"behavior":{"openRate":0}}"#
            ))
        XCTAssertEqual(r.status, 201, r.text)
        let device = try object(r)
        let apnsToken = try XCTUnwrap(device["token"] as? String)
        let fcmToken = try XCTUnwrap(device["fcmToken"] as? String)
        XCTAssertEqual(device["fcmProject"] as? String, "demo-project")
        let headers = [("authorization", "Bearer ya29.ios-test"), ("content-type", "application/json")]
        let send = "/v1/projects/demo-project/messages:send"
        r = try emulator.h2([
            TestRequest(
                "POST", send, headers: headers,
                body:
                    #"{"message":{"token":"\#(fcmToken)","notification":{"title":"Hi","image":"https://example.com/i.png"},"data":{"_mId":"42"}}}"#
            )
        ])[0]
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(sink.wait(for: 1), 1)
        let url = try XCTUnwrap(sink.requests.first?.target)
        XCTAssertTrue(url.hasPrefix("/e/receive?m=42&img=https%3A%2F%2Fexample.com%2Fi.png"), url)
        // A topic the iOS app subscribed to reaches it too.
        r = try emulator.h2([TestRequest("POST", send, headers: headers, body: #"{"message":{"topic":"news","data":{"k":"topic"}}}"#)])[0]
        XCTAssertEqual(r.status, 200, r.text)
        _ = try emulator.get("/emulator/v1/notifications?limit=1")
        let shown = try object(try emulator.get("/emulator/v1/devices/\(apnsToken)"))
        XCTAssertEqual(shown["received"] as? Int, 2)
        XCTAssertEqual(shown["platform"] as? String, "ios")

        // A Live Activity updated through FCM.
        r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices/\(apnsToken)/activities",
                body: #"{"attributesType":"ScoreAttributes","contentState":{"score":0}}"#))
        let activityToken = try XCTUnwrap(try object(r)["pushToken"] as? String)
        let now = Int(Date().timeIntervalSince1970)
        r = try emulator.h2([
            TestRequest(
                "POST", send, headers: headers,
                body: #"""
                    {"message":{"token":"\#(fcmToken)","apns":{"live_activity_token":"\#(activityToken)",
                     "headers":{"apns-push-type":"liveactivity"},
                     "payload":{"aps":{"timestamp":\#(now),"event":"update","content-state":{"score":4}}}}}}
                    """#)
        ])[0]
        XCTAssertEqual(r.status, 200, r.text)
        let activities = try XCTUnwrap(
            try object(try emulator.get("/emulator/v1/devices/\(apnsToken)/activities"))["activities"] as? [[String: Any]])
        XCTAssertEqual((activities.first?["contentState"] as? [String: Any])?["score"] as? Int, 4)
        XCTAssertEqual(activities.first?["updates"] as? Int, 1)
    }
}
