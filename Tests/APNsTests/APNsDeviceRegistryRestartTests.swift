import Foundation
import PushCore
import State
import XCTest

@testable import APNs

/// Tokens read back from a snapshot wait unapplied until a push or a lookup names them.
final class APNsDeviceRegistryRestartTests: XCTestCase {
    func testTokensWaitingFromASnapshotAnswerPushesAsSaved() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-apns-restart-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func token(_ i: Int) -> [UInt8] { Array(String(format: "%064x", i + 1).utf8) }
        let bundle = Array("com.example.app".utf8)[...]

        var registry = APNsDeviceRegistry()
        var (log, _) = try StateLog.open(directory: dir, durability: .strict, registry: StoreRegistry([registry]))
        for i in 0..<1_000 { XCTAssertEqual(registry.check(token: token(i)[...], environment: .sandbox, bundle: bundle), .ok) }
        XCTAssertTrue(registry.uninstall(token: String(decoding: token(1), as: UTF8.self), atMs: 42))
        _ = try log.takeSnapshot()
        registry.register(token: String(decoding: token(2), as: UTF8.self), environment: .production, bundleID: "com.other")
        XCTAssertTrue(log.write())
        log.release()

        registry = APNsDeviceRegistry()
        (log, _) = try StateLog.open(directory: dir, durability: .strict, registry: StoreRegistry([registry]))
        defer { log.release() }
        XCTAssertEqual(registry.waiting.count, 999, "token 2 applied before its change in the log's tail")
        XCTAssertEqual(registry.check(token: token(1)[...], environment: .sandbox, bundle: bundle), .unregistered(timestampMs: 42))
        XCTAssertEqual(registry.check(token: token(2)[...], environment: .sandbox, bundle: bundle), .wrongEnvironment)
        XCTAssertEqual(registry.check(token: token(5)[...], environment: .production, bundle: bundle), .wrongEnvironment)
        XCTAssertEqual(registry.check(token: token(6)[...], environment: .sandbox, bundle: Array("com.x".utf8)[...]), .notForTopic)
        XCTAssertEqual(registry.device(token: String(decoding: token(7), as: UTF8.self))?.pushes, 1)
        XCTAssertEqual(registry.waiting.count, 995)
        XCTAssertEqual(registry.count, 1_000, "the waiting records counted without applying them")
        XCTAssertEqual(registry.waiting.count, 995)
        registry.applyAllDeferred()
        XCTAssertFalse(registry.waiting.isPending)
        XCTAssertEqual(registry.count, 1_000)
    }
}
