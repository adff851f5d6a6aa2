import PushCore
import Transport
import XCTest

@testable import Journal

/// The journal's on-disk bytes do not move: a fixed sequence of request and tracking records
/// encodes to exactly the segment in `Tests/Fixtures/Journal/segment-v2.golden`, written by the
/// build before the push pipeline existed. Set `PUSHEMU_WRITE_GOLDEN=1` to rewrite it (only for
/// a deliberate format change, with a new format version).
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
                notificationID: index == 5 ? nil : UUIDValue(high: 0x1234_5678_9abc_def0, low: UInt64(index)),
                maxPayload: Journal.maxPayload,
                campaignOf: { provider, _ in provider == .apns ? "m\(index % 2)" : "c9" })
            if index % 4 == 0 {
                encoder.append(
                    TrackingRecord(
                        atMs: 1_700_000_000_100 + Int64(index), preset: "adobe-campaign", event: "receive", token: hexToken,
                        notificationID: "n\(index)", method: "GET", url: "http://127.0.0.1:9/r/?id=h\(index)", status: 200,
                        outcome: "succeeded", attempt: 1, latencyMs: 1.25, error: nil))
            }
        }
        return encoder.bytes
    }

    func testSegmentBytesAreUnchanged() throws {
        let bytes = Self.goldenSegment()
        let path = Self.fixtures + "/segment-v2.golden"
        if getenv("PUSHEMU_WRITE_GOLDEN") != nil {
            let file = try XCTUnwrap(fopen(path, "wb"))
            XCTAssertEqual(fwrite(bytes, 1, bytes.count, file), bytes.count)
            fclose(file)
        }
        let golden = try XCTUnwrap(Files.read(path), "missing \(path)")
        XCTAssertEqual(bytes.count, golden.count)
        XCTAssertEqual(bytes, golden, "the journal's segment encoding changed")
        var decoder = SegmentDecoder(golden)
        var requests = 0
        var tracking = 0
        while let entry = decoder.next() {
            switch entry {
            case .request: requests += 1
            case .tracking: tracking += 1
            }
        }
        XCTAssertFalse(decoder.malformed)
        XCTAssertEqual(requests, 12)
        XCTAssertEqual(tracking, 3)
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
