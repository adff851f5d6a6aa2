import Foundation
import PushCore
import State
import XCTest

@testable import FCM

/// The registry read back from a snapshot whose token records wait unapplied until asked for
/// (`DeferredRecords`): every way of reaching a token finds it as it was saved.
final class FCMDeviceRegistryRestartTests: XCTestCase {
    var dir = ""
    var opened: [StateLog] = []

    override func setUp() {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-fcm-restart-\(UUID().uuidString)").path
    }

    override func tearDown() {
        for log in opened { log.release() }
        try? FileManager.default.removeItem(atPath: dir)
    }

    static func token(_ i: Int) -> String {
        let fid = "f" + String(String(format: "%021d", i).suffix(21))
        return fid + ":APA91b" + String(repeating: "Tok_-\(i % 10)", count: 23)
    }

    func open() throws -> (FCMDeviceRegistry, StateLog) {
        for log in opened { log.release() }
        opened.removeAll()
        let registry = FCMDeviceRegistry()
        let (log, _) = try StateLog.open(directory: dir, durability: .strict, registry: StoreRegistry([registry]))
        opened.append(log)
        return (registry, log)
    }

    /// 2,000 subscribed tokens (one uninstalled, one bound to a project), a snapshot, a change in
    /// the log after it; read back without the background pass: each lookup applies its token.
    func testTokensWaitingFromASnapshotAnswerEveryLookup() throws {
        var (registry, log) = try open()
        let tokens = (0..<2_000).map(Self.token)
        XCTAssertEqual(Set(registry.subscribe(tokens: tokens, topic: "news", project: nil, nowMs: 86_400_000)), [.ok])
        XCTAssertEqual(registry.subscribe(token: tokens[1], topic: "sports", project: nil, nowMs: 86_400_000), .ok)
        XCTAssertTrue(registry.uninstall(token: tokens[2], atMs: 5))
        XCTAssertEqual(registry.check(token: Array(tokens[3].utf8)[...], project: "p1", nowMs: 1), .ok)
        _ = try log.takeSnapshot()
        XCTAssertEqual(registry.unsubscribe(token: tokens[4], topic: "news"), .ok) // after the snapshot: the log's tail
        XCTAssertTrue(log.write())

        (registry, log) = try open()
        XCTAssertEqual(registry.waiting.count, 1_999, "token 4's record applied before its tail change")
        XCTAssertEqual(registry.check(token: Array(tokens[2].utf8)[...], project: "p1", nowMs: 2), .unregistered)
        XCTAssertEqual(registry.check(token: Array(tokens[3].utf8)[...], project: "p2", nowMs: 2), .senderMismatch)
        XCTAssertEqual(registry.device(token: tokens[1])?.topics.keys.sorted(), ["news", "sports"])
        XCTAssertEqual(registry.device(token: tokens[4])?.topics.keys.sorted(), [])
        XCTAssertEqual(registry.waiting.count, 1_996)
        // By installation id: every record applied first (that index is built by applying).
        XCTAssertEqual(registry.registrationToken(forInstallation: Array(tokens[10].utf8.prefix(22))[...]), tokens[10])
        XCTAssertFalse(registry.waiting.isPending)
        XCTAssertEqual(registry.count, 2_000)
        XCTAssertEqual(registry.fanOut(topic: "news", project: "p1").count, 1_998, "all but the uninstalled and the unsubscribed")
        XCTAssertEqual(registry.fanOut(topic: "news", project: "p2").count, 0, "the send to p1 bound every unbound one to p1")
    }

    /// A topic send right after a start reaches every saved subscriber (the waiting records applied first).
    func testATopicSendAfterAStartReachesEverySavedSubscriber() throws {
        var (registry, log) = try open()
        let tokens = (0..<500).map(Self.token)
        _ = registry.subscribe(tokens: tokens, topic: "news", project: nil, nowMs: 1)
        _ = try log.takeSnapshot()
        (registry, log) = try open()
        XCTAssertEqual(registry.waiting.count, 500)
        XCTAssertEqual(registry.fanOut(topic: "news", project: "p").count, 500)
        XCTAssertEqual(registry.topicCount, 1)
        // A reset forgets them.
        registry.reset(.all)
        XCTAssertEqual(registry.count, 0)
    }
}
