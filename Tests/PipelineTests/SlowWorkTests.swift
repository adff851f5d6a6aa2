import EmulatorTesting
import Foundation
import XCTest

/// Service-account key generation (RSA-2048) runs on the slow-work thread, not on the event loop:
/// while several are made, the loop (one, in process) keeps answering other requests promptly.
final class SlowWorkTests: XCTestCase {
    func testKeyGenerationLeavesTheLoopFree() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let group = DispatchGroup()
        let statuses = StatusBox()
        let port = emulator.httpPort
        for i in 0..<4 {
            group.enter()
            Thread.detachNewThread {
                let r = try? HTTP1Client.send(
                    TestRequest("POST", "/emulator/v1/fcm/service-accounts", body: #"{"projectId":"project-\#(i)"}"#), port: port)
                statuses.add(r?.status ?? 0, created: r?.text.contains("\"private_key\"") ?? false)
                group.leave()
            }
        }
        var slowest = 0.0
        var probes = 0
        while group.wait(timeout: .now()) == .timedOut && probes < 2_000 {
            let t = Date()
            XCTAssertEqual(try emulator.get("/healthz").status, 200)
            slowest = max(slowest, Date().timeIntervalSince(t))
            probes += 1
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(statuses.values, [201, 201, 201, 201])
        XCTAssertEqual(statuses.created, 4)
        XCTAssertGreaterThan(probes, 0)
        // One RSA-2048 generation alone takes longer than this in a debug build.
        XCTAssertLessThan(slowest, 0.1, "a request waited \(slowest) s behind key generation")
        let list = try emulator.get("/emulator/v1/fcm/service-accounts")
        XCTAssertEqual(list.text.components(separatedBy: "\"projectId\"").count - 1, 4, list.text)
    }
}

final class StatusBox: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Int] = []
    private var made = 0
    func add(_ status: Int, created: Bool) {
        lock.lock()
        list.append(status)
        if created { made += 1 }
        lock.unlock()
    }
    var values: [Int] {
        lock.lock()
        defer { lock.unlock() }
        return list
    }
    var created: Int {
        lock.lock()
        defer { lock.unlock() }
        return made
    }
}
