import EmulatorTesting
import Foundation
import XCTest

/// Numbers from clients never reach arithmetic unchecked: huge fault windows, stalls, delay
/// distributions and override headers get a 400 (or are ignored, for a malformed override), and
/// the emulator keeps answering (each of these used to kill the process with SIGILL).
final class HostileNumbersTests: XCTestCase {
    func testHugeFaultNumbersGet400AndTheEmulatorStaysUp() throws {
        for mode in TestEmulator.Mode.allCases {
            let emulator = try TestEmulator(mode, arguments: ["--allow-override-header"])
            defer { emulator.stop() }
            let rules = [
                #"{"match":{"after":"99999999999999999999s"},"effect":{"status":500}}"#,
                #"{"match":{"for":9223372036854775807},"effect":{"status":500}}"#,
                #"{"effect":{"stallMs":9000000000000000000}}"#,
                #"{"effect":{"delay":{"dist":"uniform","min":0,"max":1e300}}}"#,
                #"{"effect":{"delay":{"dist":"lognormal","mu":1000,"sigma":1}}}"#,
            ]
            for rule in rules {
                let r = try emulator.http1(TestRequest("POST", "/emulator/v1/faults", body: rule))
                XCTAssertEqual(r.status, 400, "\(mode) \(rule): \(r.text)")
                XCTAssertTrue(r.text.contains(#""error":{"code":400"#), r.text)
            }
            let scenario = #"{"steps":[{"at":"99999999999999999999s","effect":{"status":503}}]}"#
            XCTAssertEqual(try emulator.http1(TestRequest("POST", "/emulator/v1/scenarios", body: scenario)).status, 400)
            // An override header with a huge stall on a push: refused, never carried out.
            let push = TestRequest(
                "POST", "/3/device/f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820",
                headers: [
                    ("apns-topic", "com.example.app"), ("authorization", "bearer x.y.z"),
                    ("x-pushemu-fault", "stall=99999999999999999999s"),
                ], body: #"{"aps":{}}"#)
            let answer = try emulator.h2([push])[0]
            XCTAssertNotEqual(answer.status, 0, "\(mode): the push got an answer")
            XCTAssertEqual(try emulator.get("/healthz").status, 200, "\(mode): still up")
        }
    }
}
