import Foundation
import PushCore
import Runtime
import State
import XCTest

@testable import Fleet

/// Device records read back from a snapshot wait unapplied until their token is asked for
/// (`DeferredRecords`), except those another index names (Live Activities): every path to a
/// device finds it as it was saved.
final class DeviceStoreRestartTests: XCTestCase {
    var dir = ""
    var opened: [StateLog] = []

    override func setUp() {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-devices-restart-\(UUID().uuidString)").path
    }

    override func tearDown() {
        for log in opened { log.release() }
        try? FileManager.default.removeItem(atPath: dir)
    }

    func open() throws -> (DeviceStore, StateLog) {
        for log in opened { log.release() }
        opened.removeAll()
        var c = DeviceStore.Configuration()
        c.inboxSize = 3
        let store = DeviceStore(configuration: c, dispatcher: nil)
        let (log, _) = try StateLog.open(directory: dir, durability: .strict, registry: StoreRegistry([store]))
        opened.append(log)
        return (store, log)
    }

    static func token(_ i: Int) -> String { String(format: "%064x", i + 1) }

    func push(_ store: DeviceStore, _ i: Int, n: UInt64) -> DeviceOutcome {
        var d = Delivery(
            provider: .apns, platform: .ios, token: Self.token(i), app: "com.example.app", environment: "sandbox",
            notificationID: UUIDValue(high: n, low: n), messageName: "id-\(n)", receivedAtMs: Clock.nowMs(),
            payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        d.alerts.insert(.alert)
        return store.deliver(d)
    }

    func testDevicesWaitingFromASnapshotAnswerEveryPath() throws {
        var (store, log) = try open()
        for i in 0..<1_000 { _ = push(store, i, n: UInt64(i + 1)) }
        XCTAssertNotNil(store.uninstall(token: Self.token(1), atMs: 77))
        let started = store.startActivity(
            token: Self.token(2), attributesType: "Score", attributes: "{}", contentState: "{}", channel: nil, staleDate: nil,
            nowMs: 5)
        let activity = try started.get()
        _ = try log.takeSnapshot()
        XCTAssertNotNil(store.uninstall(token: Self.token(3), atMs: 88)) // after the snapshot: the log's tail
        XCTAssertTrue(log.write())

        (store, log) = try open()
        XCTAssertEqual(store.waiting.count, 998, "the device with an activity applied at start; token 3 by its tail")
        XCTAssertEqual(store.device(token: Self.token(3))?.uninstalledAtMs, 88)
        XCTAssertEqual(store.device(token: Self.token(3))?.inbox.count, 1, "the saved record's inbox under the tail's change")
        XCTAssertEqual(store.device(token: Self.token(1))?.uninstalledAtMs, 77)
        XCTAssertEqual(store.device(token: Self.token(2))?.activities.map(\.id), [activity.id])
        // A push to a waiting device lands in its saved inbox.
        _ = push(store, 9, n: 6_000)
        XCTAssertEqual(store.device(token: Self.token(9))?.inbox.map(\.notificationID.high), [10, 6_000])
        XCTAssertEqual(store.status(token: Array(Self.token(1).utf8)[...], platform: .ios), .uninstalled(atMs: 77))
        XCTAssertEqual(store.waiting.count, 996)
        // A listing reads every record.
        XCTAssertEqual(store.page(after: nil, limit: 5_000).devices.count, 1_000)
        XCTAssertFalse(store.waiting.isPending)
        XCTAssertEqual(store.recordCount, 1_000)
    }
}
