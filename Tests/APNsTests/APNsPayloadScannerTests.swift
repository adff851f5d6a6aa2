import APNs
import PushCore
import XCTest

/// The connection's payload scan with its memo: whatever sequence of payloads and push types it
/// is given, each answer (summary, warnings, and the tokens left for the device layer) is the
/// one a fresh `APNsPayload.inspect` gives.
final class APNsPayloadScannerTests: XCTestCase {
    static let campaign = #"{"aps":{"alert":{"title":"Sale","body":"Half price today"},"badge":1,"sound":"default"},"_mId":"m-1"}"#

    /// A fresh scan of `payload`: its summary, warnings and tokens.
    func fresh(_ payload: [UInt8], _ type: APNsPushType) -> (APNsPayloadSummary, [String], [JSONToken]) {
        let buffer = JSONTokenBuffer()
        var warnings: [String] = []
        let summary = APNsPayload.inspect(payload, pushType: type, tokens: buffer, warnings: &warnings)
        return (summary, warnings, Array(buffer.tokens))
    }

    /// Scans `payload` with `scanner` and checks the answer against a fresh scan.
    @discardableResult
    func check(
        _ scanner: APNsPayloadScanner, _ payload: [UInt8], _ type: APNsPushType, inDocument: Bool = false,
        file: StaticString = #filePath, line: UInt = #line
    ) -> (APNsPayloadSummary, [String]) {
        var warnings: [String] = []
        let summary: APNsPayloadSummary
        if inDocument {
            // The bytes inside a larger buffer, as FCM's `apns.payload` is read.
            let document = Array("{\"apns\":{\"payload\":".utf8) + payload + Array("}}".utf8)
            summary = document.withUnsafeBytes { raw in
                scanner.inspect(UnsafeRawBufferPointer(rebasing: raw[19..<(19 + payload.count)]), pushType: type, warnings: &warnings)
            }
        } else {
            summary = scanner.inspect(payload, pushType: type, warnings: &warnings)
        }
        let (s, w, t) = fresh(payload, type)
        XCTAssertEqual(summary, s, "summary of \(String(decoding: payload, as: UTF8.self))", file: file, line: line)
        XCTAssertEqual(warnings, w, "warnings of \(String(decoding: payload, as: UTF8.self))", file: file, line: line)
        if s.isJSON {
            XCTAssertTrue(
                Array(scanner.tokens.tokens).elementsEqual(t) { a, b in
                    (a.kind, a.start, a.end, a.next, a.count, a.escaped) == (b.kind, b.start, b.end, b.next, b.count, b.escaped)
                }, "tokens of \(String(decoding: payload, as: UTF8.self))", file: file, line: line)
        }
        return (summary, warnings)
    }

    func testARepeatedPayloadGetsTheSameScanAndItsTokensReadTheNewCopy() {
        let scanner = APNsPayloadScanner()
        check(scanner, Array(Self.campaign.utf8), .alert)
        // Another request's body: equal bytes in a different buffer.
        let again = Array(Self.campaign.utf8)
        let (summary, _) = check(scanner, again, .alert)
        XCTAssertEqual(summary.title(in: again), "Sale")
        XCTAssertEqual(summary.body(in: again), "Half price today")
        let badge = again.withUnsafeBytes { raw -> String? in
            let v = JSONView(bytes: raw, buffer: scanner.tokens)
            guard let aps = v.member(0, "aps"), let badge = v.member(aps, "badge") else { return nil }
            return String(decoding: raw[Int(v.tokens[badge].start)..<Int(v.tokens[badge].end)], as: UTF8.self)
        }
        XCTAssertEqual(badge, "1", "the device layer reads the payload through these tokens")
    }

    func testOneByteOfDifferenceIsScannedAgain() {
        let scanner = APNsPayloadScanner()
        let good = Array(#"{"aps":{"badge":1,"sound":"a"}}"#.utf8)
        let bad = Array(#"{"aps":{"badge":-1,"sound":"a"}}"#.utf8)
        let clipped = Array(good.dropLast())
        XCTAssertEqual(check(scanner, good, .alert).1, [])
        XCTAssertEqual(check(scanner, bad, .alert).1, ["aps.badge must be a non-negative integer"])
        XCTAssertEqual(check(scanner, bad, .alert).1, ["aps.badge must be a non-negative integer"], "remembered")
        XCTAssertEqual(check(scanner, good, .alert).1, [])
        XCTAssertFalse(check(scanner, clipped, .alert).0.isJSON)
        XCTAssertTrue(check(scanner, good, .alert).0.isJSON)
    }

    func testThePushTypeIsPartOfWhatIsRemembered() {
        let scanner = APNsPayloadScanner()
        let start = Array(#"{"aps":{"event":"start","timestamp":1}}"#.utf8)
        let asLiveActivity = check(scanner, start, .liveactivity).1
        XCTAssertTrue(asLiveActivity.contains("a liveactivity start needs aps.content-state"), "\(asLiveActivity)")
        XCTAssertNotEqual(check(scanner, start, .alert).1, asLiveActivity)
        XCTAssertEqual(check(scanner, start, .liveactivity).1, asLiveActivity)
        let mdm = Array(#"{"mdm":"00000000-0000-0000-0000-000000000000"}"#.utf8)
        XCTAssertEqual(check(scanner, mdm, .mdm).1, [])
        XCTAssertEqual(check(scanner, mdm, .alert).1, ["payload has no aps dictionary"])
    }

    func testBytesInsideADocumentAreRememberedAsTheirOwnCopy() {
        let scanner = APNsPayloadScanner()
        let payload = Array(Self.campaign.utf8)
        check(scanner, payload, .alert, inDocument: true)
        check(scanner, payload, .alert, inDocument: true)
        check(scanner, payload, .alert)
        let bad = Array(#"{"aps":{"badge":"x"}}"#.utf8)
        XCTAssertEqual(check(scanner, bad, .alert, inDocument: true).1.count, 1)
        XCTAssertEqual(check(scanner, bad, .alert).1.count, 1)
        XCTAssertEqual(check(scanner, payload, .alert, inDocument: true).1, [])
    }

    func testRememberedWarningsFollowTheOnesAlreadyThere() {
        let scanner = APNsPayloadScanner()
        let bad = Array(#"{"aps":{"badge":"x"}}"#.utf8)
        for _ in 0..<2 {
            var warnings = ["earlier"]
            _ = scanner.inspect(bad, pushType: .alert, warnings: &warnings)
            XCTAssertEqual(warnings.first, "earlier")
            XCTAssertEqual(warnings.count, 2, "\(warnings)")
        }
    }

    func testAPayloadPastEveryLimitIsScannedEachTime() {
        let scanner = APNsPayloadScanner()
        let big = Array((#"{"aps":{"alert":""# + String(repeating: "x", count: 6000) + #""},"k":1}"#).utf8)
        check(scanner, big, .alert)
        check(scanner, big, .voip)
        check(scanner, big, .voip)
        check(scanner, Array(Self.campaign.utf8), .alert)
    }

    /// A bounded, seeded walk through payloads that differ from the last one by a byte, a length
    /// or a push type, or repeat it: every answer is a fresh scan's.
    func testAnySequenceAnswersAsAFreshScan() {
        var rng = FastRandom(seed: 23)
        let seeds = [
            Self.campaign, #"{"aps":{"content-available":1},"data":{"k":[1,2,3]}}"#,
            #"{"aps":{"alert":"caf\u00e9","mutable-content":1,"interruption-level":"passive"}}"#,
            #"{"aps":{"event":"update","timestamp":5,"content-state":{"score":1}}}"#,
        ]
        let types: [APNsPushType] = [.alert, .background, .liveactivity, .voip]
        let scanner = APNsPayloadScanner()
        var payload = Array(seeds[0].utf8)
        var type = APNsPushType.alert
        for _ in 0..<600 {
            switch rng.next() % 6 {
            case 0: payload = Array(seeds[Int(rng.next() % UInt64(seeds.count))].utf8)
            case 1: type = types[Int(rng.next() % UInt64(types.count))]
            case 2 where !payload.isEmpty:
                let i = Int(rng.next() % UInt64(payload.count))
                payload[i] = Array(#"{}[]":,1-ax\ "#.utf8)[Int(rng.next() % 13)]
            case 3 where payload.count > 1: payload.removeLast()
            default: break // the same payload again
            }
            check(scanner, payload, type, inDocument: rng.next() % 2 == 0)
        }
    }
}
