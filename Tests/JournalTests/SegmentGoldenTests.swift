import PushCore
import Runtime
import Transport
import XCTest

@testable import Journal

/// The journal's on-disk bytes do not move: a fixed sequence of request and tracking records
/// encodes to exactly the segment in `Tests/Fixtures/Journal/segment-v5.golden` (format 5: the
/// APNs team that sent a request). `segment-v4.golden` (format 4: a tracking attempt's
/// campaign, no team), `segment-v3.golden` (format 3: the device outcome, no campaign on
/// tracking) and `segment-v2.golden`, written by the build before the push pipeline existed
/// from the same records less their outcomes, still read. Set `PUSHEMU_WRITE_GOLDEN=1` to
/// rewrite the v5 file (only for a deliberate format change, with a new format version).
final class SegmentGoldenTests: XCTestCase {
    static let fixtures =
        String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/"))
        + "/Fixtures/Journal"

    /// Both providers, both token forms, repeated and changing fields, absent ids, tracking.
    static func goldenSegment() -> [UInt8] {
        var encoder = SegmentEncoder(baseMs: 1_700_000_000_000)
        let hexToken = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"
        let fcmToken = "dGhpc2lzYWZpZA:APA91bHPRgk-_xYz0123456789"
        for index in 0..<12 {
            let isAPNs = index % 3 != 2
            let headers =
                isAPNs
                ? HTTPFields([("apns-topic", "com.example.app"), ("apns-push-type", "alert"), ("authorization", "bearer x")])
                : HTTPFields([("content-type", "application/json"), ("authorization", "Bearer ya29.x")])
            let payload =
                isAPNs
                ? #"{"aps":{"alert":{"title":"Sale","body":"50% off"}},"_mId":"m\#(index % 2)","_dId":"d1"}"#
                : #"{"token":"\#(fcmToken)","notification":{"title":"Hi"},"data":{"campaign_id":"c9"}}"#
            encoder.appendRequest(
                atMs: 1_700_000_000_000 + Int64(index * 37), provider: isAPNs ? .apns : .fcm, connection: UInt64(index / 4),
                environment: isAPNs ? (index < 6 ? "sandbox" : "production") : "demo-project",
                token: Array((isAPNs ? (index == 4 ? hexToken.uppercased() : hexToken) : fcmToken).utf8)[...],
                topic: isAPNs ? Array("com.example.app".utf8)[...] : nil, status: index == 5 ? 410 : 200,
                reason: index == 5 ? "Unregistered" : "", latencyUs: Int64(40 + index), headers: headers,
                payload: Array(payload.utf8)[...], warnings: index == 1 ? ["aps.alert: a warning"] : [],
                device: index == 5 ? nil : outcome(index), team: team(index),
                notificationID: index == 5 ? nil : UUIDValue(high: 0x1234_5678_9abc_def0, low: UInt64(index)),
                maxPayload: Journal.maxPayload,
                campaignOf: { provider, _, _, _ in provider == .apns ? "m\(index % 2)" : "c9" })
            if index % 4 == 0 {
                encoder.append(
                    TrackingRecord(
                        atMs: 1_700_000_000_100 + Int64(index), preset: "adobe-campaign", event: "receive", token: hexToken,
                        notificationID: "n\(index)", method: "GET", url: "http://127.0.0.1:9/r/?id=h\(index)", status: 200,
                        outcome: "succeeded", attempt: 1, latencyMs: 1.25, error: nil, campaign: index == 8 ? nil : "m\(index % 2)"))
            }
        }
        return encoder.bytes
    }

    /// The team of an APNs request: one for the first connection, another after (repeated in between).
    static func team(_ index: Int) -> TeamID? {
        guard index % 3 != 2 else { return nil }
        return TeamID(index < 6 ? "TEAM123456" : "OTHERTEAM9")
    }

    /// Shown for most (repeated), quiet and not-shown for some, lint findings on two.
    static func outcome(_ index: Int) -> DeviceOutcome {
        switch index {
        case 3: return DeviceOutcome(display: Display(.quiet, .provisional))
        case 7:
            return DeviceOutcome(
                display: Display(.notShown, .permissionDenied),
                lint: [
                    LintFinding("adobe.missing-ids", .error, "_dId missing: no tracking", path: "_dId"),
                    LintFinding("link.not-https", .warning, "'http://x' is http", path: "url"),
                ])
        case 8, 9:
            return DeviceOutcome(
                display: Display(.shown, .alert),
                lint: [LintFinding("braze.delivery-tracking-off", .info, "no bz_p_e", path: "data.bz_p_e")])
        default: return DeviceOutcome(display: Display(.shown, .alert))
        }
    }

    /// A segment's request records and its count of tracking records (failing on a malformed one).
    static func decode(_ bytes: [UInt8]) throws -> ([StoredRequest], Int) {
        var decoder = SegmentDecoder(bytes)
        var requests: [StoredRequest] = []
        var tracking = 0
        while let entry = decoder.next() {
            switch entry {
            case .request(let r): requests.append(r)
            case .tracking: tracking += 1
            }
        }
        XCTAssertFalse(decoder.malformed)
        return (requests, tracking)
    }

    func testSegmentBytesAreUnchanged() throws {
        let bytes = Self.goldenSegment()
        let path = Self.fixtures + "/segment-v5.golden"
        if getenv("PUSHEMU_WRITE_GOLDEN") != nil {
            let file = try XCTUnwrap(fopen(path, "wb"))
            XCTAssertEqual(fwrite(bytes, 1, bytes.count, file), bytes.count)
            fclose(file)
        }
        let golden = try XCTUnwrap(Files.read(path), "missing \(path)")
        XCTAssertEqual(bytes.count, golden.count)
        XCTAssertEqual(bytes, golden, "the journal's segment encoding changed")
        let (requests, tracking) = try Self.decode(golden)
        XCTAssertEqual(requests.count, 12)
        XCTAssertEqual(tracking, 3)
        var attempts: [String?] = []
        var decoder = SegmentDecoder(golden)
        while let e = decoder.next() { if case .tracking(let t) = e { attempts.append(t.campaign) } }
        XCTAssertEqual(attempts, ["m0", "m0", nil], "each attempt's campaign")
        XCTAssertEqual(requests.map(\.campaign), (0..<12).map { $0 % 3 == 2 ? "c9" : "m\($0 % 2)" }, "the requests' campaigns around them")
        for (index, r) in requests.enumerated() {
            let expected = index == 5 ? nil : Self.outcome(index)
            XCTAssertEqual(r.display, expected?.display, "request \(index)")
            XCTAssertEqual(r.lint, expected?.lint ?? [], "request \(index)")
            XCTAssertEqual(r.team, Self.team(index)?.text, "request \(index)")
        }
    }

    /// Format 4 (no team) reads as it did: the same records, campaigns on tracking, no team.
    func testVersion4SegmentStillReads() throws {
        let golden = try XCTUnwrap(Files.read(Self.fixtures + "/segment-v4.golden"))
        XCTAssertEqual(golden[2], 4)
        let (requests, tracking) = try Self.decode(golden)
        XCTAssertEqual(requests.count, 12)
        XCTAssertEqual(tracking, 3)
        for (index, r) in requests.enumerated() {
            XCTAssertEqual(r.display, (index == 5 ? nil : Self.outcome(index))?.display, "request \(index)")
            XCTAssertNil(r.team)
        }
        var attempts: [String?] = []
        var decoder = SegmentDecoder(golden)
        while let e = decoder.next() { if case .tracking(let t) = e { attempts.append(t.campaign) } }
        XCTAssertEqual(attempts, ["m0", "m0", nil])
    }

    /// Format 3 (no campaign on tracking) reads as it did: the same records, outcomes included.
    func testVersion3SegmentStillReads() throws {
        let golden = try XCTUnwrap(Files.read(Self.fixtures + "/segment-v3.golden"))
        XCTAssertEqual(golden[2], 3)
        let (requests, tracking) = try Self.decode(golden)
        XCTAssertEqual(requests.count, 12)
        XCTAssertEqual(tracking, 3)
        for (index, r) in requests.enumerated() {
            let expected = index == 5 ? nil : Self.outcome(index)
            XCTAssertEqual(r.display, expected?.display, "request \(index)")
            XCTAssertEqual(r.campaign, index % 3 == 2 ? "c9" : "m\(index % 2)")
        }
        var decoder = SegmentDecoder(golden)
        while let e = decoder.next() { if case .tracking(let t) = e { XCTAssertNil(t.campaign) } }
    }

    /// Format 2 (no device outcome) reads as it did: the same records, with no display.
    func testVersion2SegmentStillReads() throws {
        let golden = try XCTUnwrap(Files.read(Self.fixtures + "/segment-v2.golden"))
        XCTAssertEqual(golden[2], 2)
        let (requests, tracking) = try Self.decode(golden)
        XCTAssertEqual(requests.count, 12)
        XCTAssertEqual(tracking, 3)
        XCTAssertTrue(requests.allSatisfy { $0.display == nil && $0.lint.isEmpty })
        XCTAssertEqual(requests[4].token, "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820".uppercased())
        XCTAssertEqual(requests[5].reason, "Unregistered")
        XCTAssertEqual(requests[2].campaign, "c9")
    }
}

extension SegmentGoldenTests {
    /// A journal written by the build before the push pipeline (five requests: three APNs
    /// accepted, one BadDeviceToken, one FCM send) exports to exactly what that build exported.
    func testJournalOfTheOldBuildStillReads() throws {
        let dir = "/tmp/pushemu-old-journal-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for name in Files.list(dir) { unlink(dir + "/" + name) }
            rmdir(dir)
        }
        let database = try XCTUnwrap(Files.read(Self.fixtures + "/old-build.sqlite"))
        let file = try XCTUnwrap(fopen(dir + "/journal.sqlite", "wb"))
        XCTAssertEqual(fwrite(database, 1, database.count, file), database.count)
        fclose(file)
        let expected = try XCTUnwrap(Files.read(Self.fixtures + "/old-build.export.ndjson"))
        var lines: [String] = []
        try Journal.export(path: dir + "/journal.sqlite", sinceMs: 0) { lines.append($0) }
        XCTAssertEqual(lines.count, 5)
        XCTAssertEqual(lines.map { $0 + "\n" }.joined(), String(decoding: expected, as: UTF8.self))
    }
}
