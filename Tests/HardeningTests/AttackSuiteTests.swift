import Foundation
import TestSupport
import XCTest

/// The attack suite (`Tests/Hardening/attacks.py`), one case per test: each starts the binary,
/// attacks it as a broken or hostile client would (HTTP/2 floods and bombs, half-open streams,
/// unread answers, abandoned and slow HTTP/1.1 requests, malformed framing, the connection
/// limit, stalled TLS handshakes, fuzzed bodies) and checks that the process stays up,
/// `/healthz` answers a new connection within 1 s throughout, RSS stays bounded and comes back,
/// and the attack itself was ended as it should be.
final class AttackSuiteTests: XCTestCase {
    private func attack(_ name: String) throws {
        let script = ServerProcess.repositoryRoot + "/Tests/Hardening/attacks.py"
        let result = try runCommand("python3", [script, "--binary", ServerProcess.binaryPath, name], timeout: 120)
        print(result.stdout)
        XCTAssertEqual(result.status, 0, "attack \(name) failed:\n\(result.stdout)\n\(result.stderr)")
    }

    func testRapidReset() throws { try attack("rapid-reset") }
    func testWindowUpdateFlood() throws { try attack("window-update-flood") }
    func testPingFlood() throws { try attack("ping-flood") }
    func testSettingsFlood() throws { try attack("settings-flood") }
    func testPriorityFlood() throws { try attack("priority-flood") }
    func testEmptyDataFlood() throws { try attack("empty-data-flood") }
    func testContinuationFlood() throws { try attack("continuation-flood") }
    func testHpackBomb() throws { try attack("hpack-bomb") }
    func testOversizedHeaders() throws { try attack("oversized-headers") }
    func testOverlongFields() throws { try attack("overlong-fields") }
    func testStreamOverrun() throws { try attack("stream-overrun") }
    func testHalfOpenBodies() throws { try attack("half-open-bodies") }
    func testZeroWindowPages() throws { try attack("zero-window-pages") }
    func testHttp1AbandonedBodies() throws { try attack("http1-abandoned-bodies") }
    func testHttp1LargeBodies() throws { try attack("http1-large-bodies") }
    func testSlowloris() throws { try attack("slowloris") }
    func testHttp1BodyTimeout() throws { try attack("http1-body-timeout") }
    func testH2OpenStreamTimeout() throws { try attack("h2-open-stream-timeout") }
    func testZeroWindowSendTimeout() throws { try attack("zero-window-send-timeout") }
    func testConnectionLimit() throws { try attack("connection-limit") }
    func testLimitFlood() throws { try attack("limit-flood") }
    func testTlsHandshakeStalls() throws { try attack("tls-handshake-stalls") }
    func testHttp1Malformed() throws { try attack("http1-malformed") }
    func testFuzzedBodies() throws { try attack("fuzzed-bodies") }
    func testServiceAccountFlood() throws { try attack("service-account-flood") }
    func testTooLargeShapes() throws { try attack("too-large-shapes") }
    func testH2FrameFuzz() throws { try attack("h2-frame-fuzz") }
    func testAdminFlood() throws { try attack("admin-flood") }
    func testFaultRuleScale() throws { try attack("fault-rule-scale") }
    func testRebinding() throws { try attack("rebinding") }
    func testAdminRate() throws { try attack("admin-rate") }
    func testChannelFill() throws { try attack("channel-fill") }
    func testConnectionMemory() throws { try attack("connection-memory") }
    func testStateMemory() throws { try attack("state-memory") }
    func testJournalFull() throws { try attack("journal-full") }
    func testFdLimit() throws { try attack("fd-limit") }
    func testKillNineThreeTimes() throws { try attack("kill-nine-three-times") }
}
