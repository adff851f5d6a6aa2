import PushCore
import Runtime
import State
import Synchronization
import XCTest

@testable import Fleet

/// Fleet members pushed without deviating cost four bytes, not a record: their counts, their
/// inbox from the delivery history, their becoming a record, and their snapshot.
final class FleetMemberCountsTests: XCTestCase {
    func testCountsSaturateAndPagesComeWhenNeeded() {
        let c = FleetMemberCounts(count: 3 * FleetMemberCounts.pageSize)
        XCTAssertEqual(c.bytes, 0)
        XCTAssertEqual(c.counts(5), FleetMemberCounts.Counts(received: 0, opened: 0))
        XCTAssertEqual(c.bytes, 0, "a read makes no page")
        XCTAssertTrue(c.receive(5))
        XCTAssertTrue(c.receive(5))
        c.open(5)
        XCTAssertEqual(c.counts(5), FleetMemberCounts.Counts(received: 2, opened: 1))
        XCTAssertEqual(c.bytes, FleetMemberCounts.pageBytes)
        XCTAssertTrue(c.receive(2 * FleetMemberCounts.pageSize + 1))
        XCTAssertEqual(c.bytes, 2 * FleetMemberCounts.pageBytes)
        XCTAssertEqual(c.pushedMembers, 2)
        XCTAssertFalse(c.receive(3 * FleetMemberCounts.pageSize), "past the fleet")
        XCTAssertFalse(c.receive(-1))

        c.set(7, FleetMemberCounts.Counts(received: FleetMemberCounts.maxReceived, opened: FleetMemberCounts.maxOpened))
        XCTAssertFalse(c.receive(7), "a full count asks for a record")
        c.open(7)
        XCTAssertEqual(c.counts(7).opened, FleetMemberCounts.maxOpened, "opens stop at 4,095")
        c.set(7, FleetMemberCounts.Counts(word: 0))
        XCTAssertEqual(c.pushedMembers, 2)

        var pages: [(Int, [Int])] = []
        c.forEachPage { first, found in pages.append((first, found.map(\.0))) }
        XCTAssertEqual(pages.map(\.0), [0, 2 * FleetMemberCounts.pageSize])
        XCTAssertEqual(pages.map(\.1), [[5], [2 * FleetMemberCounts.pageSize + 1]])
    }

    func testConcurrentReceivesAreAllCounted() {
        let c = FleetMemberCounts(count: 1 << 30)
        let threads = 4
        let each = 50_000
        let done = Atomic<Int>(0)
        for t in 0..<threads {
            _ = Threads.spawn {
                for i in 0..<each { _ = c.receive((i % 64) * 1_000_003 + (t & 1)) }
                done.add(1, ordering: .relaxed)
            }
        }
        let deadline = Clock.monotonicNanoseconds() + 30_000_000_000
        while done.load(ordering: .relaxed) < threads && Clock.monotonicNanoseconds() < deadline { usleep(1_000) }
        XCTAssertEqual(done.load(ordering: .relaxed), threads)
        var total = 0
        c.forEachPage { _, found in total += found.reduce(0) { $0 + Int($1.1.received) } }
        XCTAssertEqual(total, threads * each)
        XCTAssertEqual(c.pushedMembers, 128)
    }

    final class History: DeliveryHistory, @unchecked Sendable {
        var entries: [String: [DeliveredNotification]] = [:]
        func delivered(token: String, limit: Int) -> [DeliveredNotification] { Array((entries[token] ?? []).suffix(limit)) }
    }

    func apns(_ token: String, n: UInt64, collapse: String? = nil) -> Delivery {
        var d = Delivery(
            provider: .apns, platform: .ios, token: token, app: "com.example.app", environment: "sandbox",
            notificationID: UUIDValue(high: n, low: n), messageName: "id-\(n)", receivedAtMs: Int64(n),
            payload: Array(#"{"aps":{"alert":"a"}}"#.utf8))
        d.alerts.insert(.alert)
        d.collapseID = collapse
        return d
    }

    func makeStore(inboxSize: Int = 3) -> DeviceStore {
        var c = DeviceStore.Configuration()
        c.inboxSize = inboxSize
        return DeviceStore(configuration: c, dispatcher: nil)
    }

    func testPushedMembersAreCountsAndReadBackWithTheirInbox() throws {
        let s = makeStore()
        let history = History()
        s.readInboxes(from: history)
        let f = try s.createFleet(
            platform: .ios, app: "com.example.app", count: 10_000, environment: "sandbox", seed: 7, behavior: nil, tracking: nil,
            labels: ["camp"], nowMs: 1)
        let a = s.token(f, index: 10)
        let b = s.token(f, index: 9_999)
        for n in 1...4 { XCTAssertEqual(s.deliver(apns(a, n: UInt64(n), collapse: n >= 3 ? "score" : nil)).display.outcome, .shown) }
        s.deliver(apns(b, n: 9))
        XCTAssertEqual(s.recordCount, 0, "no records for members as their fleet made them")
        XCTAssertEqual(s.countedMembers, 2)
        XCTAssertEqual(s.countedMemberBytes, FleetMemberCounts.pageBytes)

        // The inbox comes from the history: collapse and the ring as a record's would be.
        history.entries[a] = (1...4).map {
            DeliveredNotification(
                notificationID: UUIDValue(high: UInt64($0), low: UInt64($0)), receivedAtMs: Int64($0), collapseID: $0 >= 3 ? "score" : nil)
        }
        var d = try XCTUnwrap(s.device(token: a))
        XCTAssertEqual(d.fleet, f.number)
        XCTAssertEqual(d.fleetIndex, 10)
        XCTAssertEqual(d.labels, ["camp"])
        XCTAssertEqual(d.received, 4)
        XCTAssertEqual(d.collapsed, 1)
        XCTAssertEqual(d.inboxEntries.map(\.notificationID.low), [1, 2, 4])
        XCTAssertEqual(d.evicted, 0)
        // The history holds fewer than were received (pruned): the rest count as pushed out.
        history.entries[b] = []
        d = try XCTUnwrap(s.device(token: b))
        XCTAssertEqual(d.received, 1)
        XCTAssertEqual(d.inbox.count, 0)
        XCTAssertEqual(d.evicted, 1)

        // A change makes it a record, with its counts and inbox; its fleet forgets them.
        let changed = try XCTUnwrap(s.update(token: a) { $0.appState = .foreground })
        XCTAssertEqual(changed.received, 4)
        XCTAssertEqual(changed.inboxEntries.count, 3)
        XCTAssertEqual(s.recordCount, 1)
        XCTAssertEqual(s.countedMembers, 1)
        s.deliver(apns(a, n: 5))
        d = try XCTUnwrap(s.device(token: a))
        XCTAssertEqual(d.received, 5)
        XCTAssertEqual(d.inboxEntries.map(\.notificationID.low), [2, 4, 5])
        XCTAssertEqual(s.countedMembers, 1, "a record's pushes are the record's")
    }

    func testOfflineAndUninstalledMembersAreNotCounted() throws {
        let s = makeStore()
        var states = FleetDeviceStates()
        states.appState = [0, 0, 0, 1] // every member offline
        let f = try s.createFleet(
            platform: .ios, app: "com.example.app", count: 100, environment: "sandbox", seed: 3, behavior: nil, tracking: nil,
            labels: [], nowMs: 1, states: states)
        let t = s.token(f, index: 1)
        XCTAssertEqual(s.deliver(apns(t, n: 1)).display.reason, .heldOffline)
        XCTAssertEqual(s.recordCount, 1, "what an offline member holds is a record")
        XCTAssertEqual(s.countedMembers, 0)
        XCTAssertEqual(s.device(token: t)?.pending.count, 1)
    }

    func testCountsSurviveASnapshot() throws {
        let s = makeStore()
        let f = try s.createFleet(
            platform: .android, app: "com.example.app", count: 100_000, environment: "demo", seed: 11, behavior: nil, tracking: nil,
            labels: [], nowMs: 1)
        var pushed: [Int: Int] = [:]
        for (n, i) in [3, 70_000, 3, 99_999, 16_384, 3].enumerated() {
            var d = Delivery(
                provider: .fcm, platform: .android, token: s.token(f, index: i), app: "com.example.app", environment: "demo",
                notificationID: UUIDValue(high: 1, low: UInt64(n)), messageName: "m", receivedAtMs: 1, payload: Array("{}".utf8))
            d.hasData = true
            s.deliver(d)
            pushed[i, default: 0] += 1
        }
        _ = try XCTUnwrap(s.update(token: s.token(f, index: 16_384)) { $0.privacyOptOut = true })
        var records: [ChangeRecord] = []
        s.snapshot { records.append($0) }
        s.snapshotIndependent { records.append($0) }
        XCTAssertEqual(records.filter { $0.kind == DeviceStore.Kind.members }.count, 3, "one record a page with pushed members")

        let again = makeStore()
        for r in records {
            try r.body.withUnsafeBytes { try again.apply(RecordView(kind: r.kind, version: r.version, atMs: 0, body: $0)) }
        }
        XCTAssertEqual(again.countedMembers, 3)
        XCTAssertEqual(again.recordCount, 1)
        for (i, n) in pushed {
            XCTAssertEqual(again.device(token: s.token(f, index: i))?.received, UInt64(n), "member \(i)")
        }
        XCTAssertEqual(again.device(token: s.token(f, index: 16_384))?.privacyOptOut, true)

        // A record naming a fleet that does not exist, or a member past its count, is refused.
        let bad = DeviceStore.record(members: [(100_000, .init(received: 1, opened: 0))], fleet: f.number, first: 0)
        XCTAssertThrowsError(
            try bad.withUnsafeBytes { try again.apply(RecordView(kind: DeviceStore.Kind.members, version: 1, atMs: 0, body: $0)) })
        let orphan = DeviceStore.record(members: [(1, .init(received: 1, opened: 0))], fleet: 9, first: 0)
        XCTAssertThrowsError(
            try orphan.withUnsafeBytes { try again.apply(RecordView(kind: DeviceStore.Kind.members, version: 1, atMs: 0, body: $0)) })
    }
}
