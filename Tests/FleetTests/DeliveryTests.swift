import Fleet
import PushCore
import Runtime
import TestSupport
import Tracking
import XCTest

/// Delivery semantics and SDK tracking end to end against a real HTTP sink: when receive and
/// open fire, retries, failures, batching, the offline queue, collapse and inbox bounds.
final class DeliveryTests: XCTestCase {
    var sink: TrackingSink!
    var log: TrackingLog!
    var dispatcher: TrackingDispatcher!

    override func setUpWithError() throws {
        sink = try TrackingSink()
        log = TrackingLog()
    }

    override func tearDown() {
        dispatcher?.stop()
        sink?.stop()
    }

    func makeStore(
        preset: String = "adobe-campaign", options: [String: String] = [:], behavior: Behavior = Behavior(),
        dispatcher tweak: (inout TrackingDispatcher.Options) -> Void = { _ in }, url: String? = nil
    ) -> DeviceStore {
        var o = TrackingDispatcher.Options()
        o.backoffBaseMs = 20
        tweak(&o)
        dispatcher = TrackingDispatcher(options: o, log: log)
        dispatcher.start()
        var c = DeviceStore.Configuration()
        var t = TrackingConfig(preset: preset, url: url ?? sink.url)
        t.options = options
        c.defaultTracking = t
        c.defaultBehavior = behavior
        c.inboxSize = 3
        return DeviceStore(configuration: c, dispatcher: dispatcher)
    }

    static let iosToken = String(repeating: "ab", count: 32)
    static let androidToken = String(repeating: "c", count: 22) + ":APA91b" + String(repeating: "x", count: 134)

    func apns(_ payload: String, token: String = DeliveryTests.iosToken, n: UInt64 = 1, collapse: String? = nil) -> Delivery {
        var d = Delivery(
            provider: .apns, platform: .ios, token: token, app: "com.example.app", environment: "sandbox",
            notificationID: UUIDValue(high: n, low: n), messageName: "id-\(n)", receivedAtMs: Clock.nowMs(), payload: Array(payload.utf8))
        let p = PayloadReader(Array(d.payload))
        d.mutableContent = p.value("aps.mutable-content") == "1"
        d.contentAvailable = p.value("aps.content-available") == "1"
        // What the APNs gateway's parse finds.
        if p.has("aps.alert") { d.alerts.insert(.alert) }
        if p.has("aps.sound") { d.alerts.insert(.sound) }
        if p.has("aps.badge") { d.alerts.insert(.badge) }
        if p.value("aps.interruption-level") == "passive" { d.alerts.insert(.passive) }
        d.collapseID = collapse
        return d
    }

    func fcm(_ message: String, n: UInt64 = 1) -> Delivery {
        var d = Delivery(
            provider: .fcm, platform: .android, token: Self.androidToken, app: nil, environment: "proj",
            notificationID: UUIDValue(high: n, low: n), messageName: "projects/proj/messages/\(n)", receivedAtMs: Clock.nowMs(),
            payload: Array(message.utf8))
        let p = PayloadReader(Array(d.payload))
        d.hasData = p.has("data")
        if p.has("notification") || p.has("android.notification") { d.alerts = .notification }
        return d
    }

    static let adobe = #""_mId":"12345","_dId":"67890""#

    func testReceiveRules() throws {
        let s = makeStore()
        // iOS: mutable-content with the extension installed fires; without it, not; content-available fires.
        s.deliver(apns(#"{"aps":{"alert":"a","mutable-content":1},\#(Self.adobe)}"#, n: 1))
        XCTAssertEqual(sink.wait(for: 1), 1)
        XCTAssertEqual(sink.requests.first?.target, "/r/?id=h3039,67890,1")
        XCTAssertEqual(sink.requests.first?.method, "GET")
        s.deliver(apns(#"{"aps":{"alert":"a"},\#(Self.adobe)}"#, n: 2))
        s.update(token: Self.iosToken) { $0.nseInstalled = false }
        s.deliver(apns(#"{"aps":{"alert":"a","mutable-content":1},\#(Self.adobe)}"#, n: 3))
        s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: 4))
        XCTAssertEqual(sink.wait(for: 2), 2)
        s.update(token: Self.iosToken) { $0.privacyOptOut = true }
        s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: 5))
        // Android: data messages fire; notification-only ones only in the foreground.
        s.deliver(fcm(#"{"token":"t","data":\#("{" + Self.adobe + "}")}"#, n: 6))
        XCTAssertEqual(sink.wait(for: 3), 3)
        s.deliver(fcm(#"{"token":"t","notification":{"title":"x"}}"#, n: 7))
        usleep(200_000)
        XCTAssertEqual(sink.count, 3)
        XCTAssertEqual(s.device(token: Self.iosToken)?.received, 5)
    }

    func testOpenRateOneAddsAClick() throws {
        var b = Behavior()
        b.openRate = 1
        b.openDelayMs = DelayRange(10, 20)
        let s = makeStore(behavior: b)
        s.deliver(apns(#"{"aps":{"alert":"a","mutable-content":1},\#(Self.adobe)}"#))
        XCTAssertEqual(sink.wait(for: 2), 2)
        XCTAssertEqual(Set(sink.requests.map(\.target)), ["/r/?id=h3039,67890,1", "/r/?id=h3039,67890,2"])
        usleep(100_000)
        XCTAssertEqual(sink.count, 2)
        XCTAssertEqual(s.device(token: Self.iosToken)?.opened, 1)
    }

    func testRetriesThenSucceeds() throws {
        sink.stop()
        sink = try TrackingSink(failFirst: 2, failStatus: 500)
        let s = makeStore()
        s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#))
        XCTAssertEqual(sink.wait(for: 3), 3)
        usleep(100_000)
        let attempts = log.query(TrackingLog.Filter())
        XCTAssertEqual(attempts.map(\.status), [500, 500, 200])
        XCTAssertEqual(attempts.map(\.attempt), [1, 2, 3])
        XCTAssertEqual(attempts.map(\.outcome), ["retrying", "retrying", "succeeded"])
        XCTAssertEqual(log.counters.succeeded, 1)
        XCTAssertEqual(log.counters.retried, 2)
    }

    func testClientErrorsAreNotRetried() throws {
        sink.stop()
        sink = try TrackingSink(failFirst: 5, failStatus: 404)
        let s = makeStore()
        s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#))
        XCTAssertEqual(sink.wait(for: 1), 1)
        usleep(200_000)
        XCTAssertEqual(sink.count, 1)
        XCTAssertEqual(log.query(TrackingLog.Filter()).map(\.outcome), ["failed"])
    }

    func testDeadSinkRecordsFailuresAndNothingCrashes() throws {
        let dead = "http://127.0.0.1:\(sink.port)"
        sink.stop()
        usleep(50_000)
        let s = makeStore(
            dispatcher: {
                $0.maxAttempts = 3
                $0.connectTimeoutMs = 500
            }, url: dead)
        for i in 0..<5 { s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: UInt64(i + 1))) }
        let deadline = Date().addingTimeInterval(10)
        while log.counters.failed < 5 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(log.counters.failed, 5)
        XCTAssertEqual(log.counters.retried, 10)
        let failed = log.query(
            {
                var f = TrackingLog.Filter()
                f.status = "failed"
                return f
            }())
        XCTAssertEqual(failed.count, 5)
        XCTAssertNotNil(failed.first?.error)
        XCTAssertEqual(failed.first?.status, 0)
        XCTAssertEqual(dispatcher.depth, 0)
    }

    func testBatchedPresetSendsOneRequestForSeveralEvents() throws {
        let s = makeStore(preset: "moengage", options: ["appId": "APP", "flushMs": "150"])
        for i in 0..<4 {
            s.deliver(fcm(#"{"token":"t","data":{"push_from":"moengage","gcm_campaign_id":"c\#(i)"}}"#, n: UInt64(i + 1)))
        }
        XCTAssertEqual(sink.wait(for: 1), 1)
        usleep(300_000)
        XCTAssertEqual(sink.count, 1)
        let r = try XCTUnwrap(sink.requests.first)
        XCTAssertEqual(r.target, "/v2/sdk/report/APP")
        XCTAssertEqual(PayloadReader(Array(r.body.utf8)).value("viewsCount"), "4")
        XCTAssertEqual(log.query(TrackingLog.Filter()).first?.events, 4)
        XCTAssertEqual(dispatcher.depth, 0)
    }

    func testQueueFullDropsAreCounted() throws {
        let s = makeStore(dispatcher: {
            $0.queueCapacity = 3
            $0.spoolBytes = 0 // no spool: beyond the queue, calls are dropped
            $0.threads = 1
        })
        var b = Behavior()
        b.receiveDelayMs = DelayRange(60_000, 60_000) // held in the queue
        s.update(token: Self.iosToken) { _ in }
        try s.register(
            SimDevice(token: Self.iosToken, platform: .ios, app: "com.example.app", environment: "sandbox", createdAtMs: 0, seed: 1))
        s.update(token: Self.iosToken) { $0.behavior = b }
        for i in 0..<5 { s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: UInt64(i + 1))) }
        XCTAssertEqual(log.counters.scheduled, 3)
        XCTAssertEqual(log.counters.dropped, 2)
    }

    /// The queue is bounded in memory too: past `queueBytes` calls are dropped and counted.
    func testQueueMemoryDropsAreCounted() throws {
        let s = makeStore(dispatcher: {
            $0.queueBytes = 1 << 16 // 64 KiB: about a hundred Adobe calls
            $0.spoolBytes = 0 // no spool: beyond memory, calls are dropped
            $0.threads = 1
        })
        var b = Behavior()
        b.receiveDelayMs = DelayRange(60_000, 60_000) // held in the queue
        try s.register(
            SimDevice(token: Self.iosToken, platform: .ios, app: "com.example.app", environment: "sandbox", createdAtMs: 0, seed: 1))
        s.update(token: Self.iosToken) { $0.behavior = b }
        for i in 0..<400 { s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: UInt64(i + 1))) }
        let scheduled = log.counters.scheduled
        XCTAssertGreaterThan(scheduled, 50)
        XCTAssertLessThan(scheduled, 250, "64 KiB holds a few hundred bytes a call, not 400 calls")
        XCTAssertEqual(log.counters.dropped, 400 - scheduled)
        XCTAssertEqual(dispatcher.depth, Int(scheduled))
    }

    /// Calls beyond the queue's memory wait in the spool on disk and are all made, in the order
    /// they were scheduled, with nothing dropped; the spool empties as the sink catches up.
    func testCallsBeyondQueueMemoryWaitInTheSpool() throws {
        let s = makeStore(dispatcher: {
            $0.queueBytes = 1 << 16 // about a hundred calls in memory
            $0.maxInFlight = 1 // one at a time: the order is the queue's
            $0.threads = 1
        })
        try s.register(
            SimDevice(token: Self.iosToken, platform: .ios, app: "com.example.app", environment: "sandbox", createdAtMs: 0, seed: 1))
        let n = 1_500
        for i in 0..<n { s.deliver(apns(#"{"aps":{"content-available":1},"_mId":"12345","_dId":"d\#(i)"}"#, n: UInt64(i + 1))) }
        XCTAssertEqual(log.counters.scheduled, UInt64(n))
        XCTAssertEqual(log.counters.dropped, 0)
        XCTAssertGreaterThan(dispatcher.spooled, n / 2, "most of them wait on disk")
        XCTAssertEqual(sink.wait(for: n, timeout: 60), n)
        let ids = sink.requests.map { $0.target.split(separator: ",")[1] }
        XCTAssertEqual(ids, (0..<n).map { "d\($0)"[...] }, "made in the order they were scheduled")
        let deadline = Clock.nowMs() + 10_000
        while dispatcher.depth > 0 && Clock.nowMs() < deadline { usleep(10_000) }
        XCTAssertEqual(dispatcher.depth, 0)
        XCTAssertEqual(dispatcher.spooled, 0)
        XCTAssertEqual(log.counters.succeeded, UInt64(n))
        XCTAssertEqual(log.counters.dropped, 0)
    }

    /// A batched preset's calls (MoEngage: items grouped per device) come back from the spool
    /// whole: every event is carried by one of the batched requests.
    func testBatchedCallsComeBackFromTheSpool() throws {
        var b = Behavior()
        b.receiveDelayMs = DelayRange(300, 300) // they wait in memory until it is full, then on disk
        let s = makeStore(
            preset: "moengage", options: ["appId": "APPID", "batchSize": "25", "flushMs": "50"], behavior: b,
            dispatcher: {
                $0.queueBytes = 1 << 16
                $0.maxInFlight = 1
                $0.threads = 1
            })
        let n = 600
        let payload = #"{"data":{"push_from":"moengage","gcm_campaign_id":"c1","moe_cid_attr":"{}"}}"#
        for i in 0..<n { s.deliver(fcm(payload, n: UInt64(i + 1))) }
        XCTAssertEqual(log.counters.dropped, 0)
        XCTAssertGreaterThan(dispatcher.spooled, 0)
        let deadline = Clock.nowMs() + 30_000
        var events = 0
        while Clock.nowMs() < deadline {
            events = sink.requests.reduce(0) { $0 + (Int(PayloadReader(Array($1.body.utf8)).value("viewsCount") ?? "") ?? 0) }
            if events >= n && dispatcher.depth == 0 { break }
            usleep(20_000)
        }
        XCTAssertEqual(events, n)
        XCTAssertEqual(dispatcher.depth, 0)
        for r in sink.requests {
            XCTAssertEqual(r.target, "/v2/sdk/report/APPID")
            XCTAssertEqual(PayloadReader(Array(r.body.utf8)).value("query_params.push_id"), Self.androidToken)
        }
    }

    /// With the spool full too, calls are dropped and counted: every call waits or is dropped.
    func testSpoolFullDropsAreCounted() throws {
        let s = makeStore(dispatcher: {
            $0.queueBytes = 1 << 16
            $0.spoolBytes = 1 << 15 // 32 KiB of disk: about a hundred calls
            $0.threads = 1
        })
        var b = Behavior()
        b.receiveDelayMs = DelayRange(60_000, 60_000) // nothing leaves during the test
        try s.register(
            SimDevice(token: Self.iosToken, platform: .ios, app: "com.example.app", environment: "sandbox", createdAtMs: 0, seed: 1))
        s.update(token: Self.iosToken) { $0.behavior = b }
        let n = 1_000
        for i in 0..<n { s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: UInt64(i + 1))) }
        let deadline = Clock.nowMs() + 10_000
        while dispatcher.depth + Int(log.counters.dropped) != n && Clock.nowMs() < deadline { usleep(10_000) }
        XCTAssertEqual(dispatcher.depth + Int(log.counters.dropped), n, "each call waits or is dropped")
        XCTAssertGreaterThan(dispatcher.spooled, 20)
        XCTAssertLessThan(dispatcher.spooled, 300, "32 KiB holds a few hundred bytes a call")
        XCTAssertGreaterThan(log.counters.dropped, 300)
    }

    /// Device records are bounded (`maxDevices`, per shard): pushes to devices beyond are still
    /// delivered and tracked, counted as unstored, and memory stops growing with them.
    func testRecordLimitKeepsDeliveringAndTracking() throws {
        var o = TrackingDispatcher.Options()
        o.backoffBaseMs = 20
        dispatcher = TrackingDispatcher(options: o, log: log)
        dispatcher.start()
        var c = DeviceStore.Configuration()
        c.defaultTracking = TrackingConfig(preset: "adobe-campaign", url: sink.url)
        c.maxDevices = 128 // 2 per shard
        let s = DeviceStore(configuration: c, dispatcher: dispatcher)
        let payload = #"{"aps":{"alert":"x","mutable-content":1},"_mId":"12345","_dId":"d"}"#
        var r = FastRandom(seed: 3)
        let hex = Array("0123456789abcdef")
        var tokens: [String] = []
        for n in 0..<1_000 {
            let t = String((0..<64).map { _ in hex[Int(r.next(below: 16))] })
            tokens.append(t)
            s.deliver(apns(payload, token: t, n: UInt64(n + 1)))
        }
        XCTAssertLessThanOrEqual(s.recordCount, 128)
        XCTAssertGreaterThan(s.recordCount, 64)
        XCTAssertEqual(s.stats.delivered, 1_000)
        XCTAssertEqual(s.stats.unstored, UInt64(1_000 - s.recordCount))
        XCTAssertEqual(sink.wait(for: 1_000, timeout: 30), 1_000, "every push tracked, kept or not")
        // A kept device still keeps its inbox; one beyond the limit has no record.
        let kept = tokens.filter { s.device(token: $0) != nil }
        XCTAssertEqual(kept.count, s.recordCount)
        XCTAssertEqual(s.device(token: kept[0])?.inbox.count, 1)
    }

    /// A loop's lint memo answers a push whose payload bytes, preset, platform, flags and profile
    /// are the last one's, and only that: every outcome equals a store's without a memo.
    func testLintMemoAnswersOnlyTheSamePayloadAndFlags() throws {
        let s = makeStore()
        var o = TrackingDispatcher.Options()
        o.threads = 1
        let plainDispatcher = TrackingDispatcher(options: o, log: TrackingLog())
        defer { plainDispatcher.stop() }
        var c = DeviceStore.Configuration()
        c.defaultTracking = TrackingConfig(preset: "adobe-campaign", url: sink.url)
        c.inboxSize = 3
        let plain = DeviceStore(configuration: c, dispatcher: plainDispatcher)
        let memo = SDKLintMemo()
        var n: UInt64 = 0
        func check(_ d: Delivery, recalled: Int, _ line: UInt = #line) {
            let remembered = s.deliver(d, lintMemo: memo)
            XCTAssertEqual(remembered, plain.deliver(d), line: line)
            XCTAssertEqual(memo.recalled, recalled, line: line)
        }
        func token(_ i: Int) -> String { String(format: "%064x", i + 1) }
        let missingDid = #"{"aps":{"alert":"a","mutable-content":1},"_mId":"12345"}"#
        n += 1
        check(apns(missingDid, token: token(1), n: n), recalled: 0)
        XCTAssertEqual(s.deliver(apns(missingDid, token: token(9), n: 99), lintMemo: memo).lint.map(\.code), ["adobe.missing-ids"])
        n += 1
        check(apns(missingDid, token: token(2), n: n), recalled: 2)
        // One byte more: read and linted again.
        let complete = #"{"aps":{"alert":"a","mutable-content":1},\#(Self.adobe)}"#
        n += 1
        check(apns(complete, token: token(3), n: n), recalled: 2)
        n += 1
        check(apns(complete, token: token(4), n: n), recalled: 3)
        // The same bytes with another flag (the Adobe SDK's extension needs mutable-content).
        var flagged = apns(complete, token: token(5), n: 100)
        flagged.mutableContent = false
        check(flagged, recalled: 3)
        XCTAssertEqual(s.deliver(flagged, lintMemo: memo).lint.map(\.code), ["adobe.mutable-content-missing"])
        n += 1
        check(apns(complete, token: token(6), n: n), recalled: 4)
        // Another preset (a device's own tracking) and another platform are other keys.
        s.update(token: token(7)) { _ in }
        _ = s.deliver(apns(complete, token: token(7), n: 101))
        s.update(token: token(7)) { $0.tracking = TrackingConfig(preset: "pushwoosh", url: self.sink.url) }
        plain.deliver(apns(complete, token: token(7), n: 101))
        plain.update(token: token(7)) { $0.tracking = TrackingConfig(preset: "pushwoosh", url: self.sink.url) }
        check(apns(complete, token: token(7), n: 102), recalled: 4)
        var android = fcm(#"{"token":"t","data":\#("{" + Self.adobe + "}")}"#, n: 103)
        check(android, recalled: 4)
        android.notificationID = UUIDValue(high: 104, low: 104)
        check(android, recalled: 5)
    }

    func testCollapseInboxAndOffline() throws {
        let s = makeStore()
        try s.register(
            SimDevice(token: Self.iosToken, platform: .ios, app: "com.example.app", environment: "sandbox", createdAtMs: 0, seed: 1))
        s.deliver(apns(#"{"aps":{"alert":"1"}}"#, n: 1, collapse: "score"))
        s.deliver(apns(#"{"aps":{"alert":"2"}}"#, n: 2, collapse: "score"))
        var d = try XCTUnwrap(s.device(token: Self.iosToken))
        XCTAssertEqual(d.inbox.count, 1)
        XCTAssertEqual(d.collapsed, 1)
        for i in 3...6 { s.deliver(apns(#"{"aps":{"alert":"x"}}"#, n: UInt64(i))) }
        d = try XCTUnwrap(s.device(token: Self.iosToken))
        XCTAssertEqual(d.inbox.count, 3)
        XCTAssertEqual(d.evicted, 2)

        // Offline: APNs keeps the latest one per app, drops expiration 0, delivers on reconnect.
        _ = s.setOnline(token: Self.iosToken, false, nowMs: Clock.nowMs())
        var now0 = apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: 10)
        now0.expiresAtMs = 0
        s.deliver(now0)
        s.deliver(apns(#"{"aps":{"content-available":1},\#(Self.adobe)}"#, n: 11))
        s.deliver(apns(#"{"aps":{"content-available":1},"_mId":"1","_dId":"last"}"#, n: 12))
        d = try XCTUnwrap(s.device(token: Self.iosToken))
        XCTAssertEqual(d.pending.count, 1)
        XCTAssertEqual(d.dropped, 1)
        usleep(100_000)
        XCTAssertEqual(sink.count, 0)
        _ = s.setOnline(token: Self.iosToken, true, nowMs: Clock.nowMs())
        XCTAssertEqual(sink.wait(for: 1), 1)
        XCTAssertEqual(sink.requests.first?.target, "/r/?id=h1,last,1")

        // FCM keeps every message until its TTL.
        _ = s.setOnline(token: Self.androidToken, false, nowMs: Clock.nowMs())
        XCTAssertNil(s.device(token: Self.androidToken), "unknown until its first message")
        s.deliver(fcm(#"{"token":"t","data":{"_mId":"1","_dId":"a"}}"#, n: 20))
        _ = s.setOnline(token: Self.androidToken, false, nowMs: Clock.nowMs())
        var expired = fcm(#"{"token":"t","data":{"_mId":"2","_dId":"b"}}"#, n: 21)
        expired.expiresAtMs = Clock.nowMs() - 1
        s.deliver(expired)
        s.deliver(fcm(#"{"token":"t","data":{"_mId":"3","_dId":"c"}}"#, n: 22))
        XCTAssertEqual(s.device(token: Self.androidToken)?.pending.count, 2)
        _ = s.setOnline(token: Self.androidToken, true, nowMs: Clock.nowMs())
        XCTAssertEqual(sink.wait(for: 3), 3)
        XCTAssertEqual(sink.requests.map(\.target).suffix(2), ["/r/?id=h1,a,1", "/r/?id=h3,c,1"])
    }
}
