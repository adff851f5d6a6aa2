import Foundation
import PushCore
import Runtime
import Transport
import XCTest

@testable import Journal

/// The campaign report from the index's digests: its sketches (log histograms, HyperLogLog),
/// and a summarised report against the exact one over the same journal, in memory and after a
/// reopen from disk (the digests stored with their blocks).
final class CampaignDigestTests: XCTestCase {
    func testLogHistogramBucketsAndPercentiles() {
        var last: UInt16 = 0
        for v in [0, 1, 63, 64, 65, 127, 128, 1_000, 4_095, 4_096, 1 << 20, 1 << 40, UInt64(Int64.max)] as [UInt64] {
            let b = LogHistogram.bucket(v)
            XCTAssertGreaterThanOrEqual(b, last, "buckets grow with the value (\(v))")
            last = b
            let lo = LogHistogram.lowerBound(b)
            XCTAssertLessThanOrEqual(lo, v)
            XCTAssertEqual(LogHistogram.bucket(lo), b, "\(v): its bucket's lower bound is in it")
            XCTAssertLessThanOrEqual(Double(v - lo), Double(v) / 32 + 1, "\(v): within 1/32 of the value")
        }
        var h = LogHistogram()
        var values: [UInt64] = []
        var x: UInt64 = 12_345
        for _ in 0..<20_000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let v = (x >> 33) % 50_000 + (x >> 60) * 100_000
            values.append(v)
            h.add(v)
        }
        values.sort()
        for p in [50.0, 90, 99] {
            let exact = Double(values[Int((p / 100 * Double(values.count)).rounded(.up)) - 1])
            XCTAssertEqual(Double(h.percentile(p)), exact, accuracy: exact * 0.035 + 1, "p\(p)")
        }
        XCTAssertEqual(h.min, values.first)
        XCTAssertEqual(h.max, values.last)
        XCTAssertEqual(h.total, 20_000)
        var out: [UInt8] = []
        h.write(&out)
        var r = SummaryBytes.Reader(bytes: out)
        XCTAssertEqual(LogHistogram.read(&r), h)
        var twice = h
        twice.merge(h)
        XCTAssertEqual(twice.total, 40_000)
        XCTAssertEqual(twice.percentile(50), h.percentile(50))
    }

    func testHyperLogLogEstimatesAndMerges() {
        func hashes(_ range: Range<UInt64>) -> [UInt64] { range.map { SummaryKey.mix($0 &* 0x9e37_79b9_7f4a_7c15) } }
        var small = HyperLogLog()
        for h in hashes(0..<100) { small.add(h) }
        for h in hashes(0..<100) { small.add(h) }
        XCTAssertEqual(Double(small.estimate), 100, accuracy: 2, "a small set counts nearly exactly")
        XCTAssertTrue(small.registers.isEmpty, "a hundred values are kept sparse, not in 4 KiB of registers")
        var other = HyperLogLog()
        for h in hashes(50..<300) { other.add(h) }
        var both = small
        both.merge(other)
        XCTAssertEqual(Double(both.estimate), 300, accuracy: 6, "sparse sketches merge as a union")
        XCTAssertTrue(both.registers.isEmpty)
        for h in hashes(300..<2_000) { both.add(h) }
        XCTAssertFalse(both.registers.isEmpty, "dense past 512 registers")
        XCTAssertEqual(Double(both.estimate), 2_000, accuracy: 60)
        var a = HyperLogLog()
        var b = HyperLogLog()
        for h in hashes(0..<60_000) { a.add(h) }
        for h in hashes(40_000..<100_000) { b.add(h) }
        var union = a
        union.merge(b)
        let error = 3 * HyperLogLog.standardError
        XCTAssertEqual(Double(a.estimate), 60_000, accuracy: 60_000 * error)
        XCTAssertEqual(Double(union.estimate), 100_000, accuracy: 100_000 * error, "the union, not the sum")
        for sketch in [HyperLogLog(), small, union] {
            var out: [UInt8] = []
            sketch.write(&out)
            var r = SummaryBytes.Reader(bytes: out)
            XCTAssertEqual(HyperLogLog.read(&r), sketch)
        }
        var damaged = SummaryBytes.Reader(bytes: [2, 5, 0, 200])
        XCTAssertNil(HyperLogLog.read(&damaged))
    }

    static let base: Int64 = 1_800_000_000_000

    /// 30,000 requests over four campaigns and no campaign (one in seven rejected, varied
    /// latencies, sizes, display outcomes and lint), and tracking attempts of every outcome,
    /// some committed before their request.
    static func fill(_ j: Journal) {
        var x: UInt64 = 99
        func next(_ n: Int) -> Int {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((x >> 33) % UInt64(n))
        }
        let displays = [Display(.shown, .alert), Display(.quiet, .tray), Display(.notShown, .permissionDenied)]
        let lint = [
            LintFinding("adobe-missing-mid", .error, "m", path: "_mId"), LintFinding("long-title", .warning, "t", path: "aps.alert"),
        ]
        var early: [TrackingRecord] = []
        for i in 0..<30_000 {
            let campaign = next(5)
            let rejected = i % 7 == 3
            let at = CampaignDigestTests.base + Int64(i) * 3
            let id = UUIDValue(high: UInt64(i) + 1, low: 7)
            let pad = String(repeating: "x", count: next(3_000))
            let payload = campaign == 4 ? #"{"aps":{"alert":"\#(pad)"}}"# : #"{"aps":{"alert":"\#(pad)"},"_dId":"camp\#(campaign)"}"#
            var device: DeviceOutcome?
            if !rejected { device = DeviceOutcome(display: displays[next(3)], lint: next(4) == 0 ? [lint[next(2)]] : []) }
            let token = String(format: "%064x", UInt64(next(9_000)) &* 0x9e37_79b9_7f4a_7c15)
            j.append(
                RequestRecord(
                    atMs: at, provider: i % 3 == 0 ? .fcm : .apns, connection: 1, environment: "sandbox", token: Array(token.utf8)[...],
                    topic: nil, status: rejected ? (i % 2 == 0 ? 410 : 400) : 200,
                    reason: rejected ? (i % 2 == 0 ? "Unregistered" : "") : "",
                    latencyUs: Int64(20 + next(5_000)), headers: HTTPFields([("apns-topic", "com.example.app")]),
                    payload: Array(payload.utf8)[...], warnings: [], notificationID: rejected ? nil : id, device: device),
                loop: nil
            ) { _ in }
            if !rejected, i % 4 == 0 {
                let outcome = ["succeeded", "succeeded", "failed", "retrying"][next(4)]
                let t = TrackingRecord(
                    atMs: at + Int64(next(3_000)), preset: "adobe-campaign", event: next(3) == 0 ? "open" : "receive", token: token,
                    notificationID: id.description, method: "GET", url: "http://sink/r", status: outcome == "succeeded" ? 200 : 503,
                    outcome: outcome, attempt: outcome == "retrying" ? 1 : 1 + next(2), latencyMs: 2, error: nil,
                    campaign: i % 40 == 0 || campaign == 4 ? nil : "camp\(campaign)")
                // One in ten is journaled without its campaign (as older formats were), after its
                // request: the index finds it by the request's id.
                if i % 40 == 0 { early.append(t) } else { j.append(t) }
            }
            if i % 40 == 39 {
                for t in early { j.append(t) }
                early = []
            }
            if i % 700 == 699 { j.flush() }
        }
        for t in early { j.append(t) }
        j.flush()
    }

    func assertSummarisedMatchesExact(
        _ j: Journal, since: Int64, campaign: String? = nil, file: StaticString = #filePath, line: UInt = #line
    ) {
        let exact = j.report(sinceMs: since, campaign: campaign, exact: true)
        let summed = j.report(sinceMs: since, campaign: campaign, exact: false)
        XCTAssertTrue(exact.exact, file: file, line: line)
        XCTAssertFalse(summed.exact, file: file, line: line)
        XCTAssertGreaterThan(exact.all.totals.sent, 0, file: file, line: line)
        func same(_ a: CampaignReport.Campaign, _ b: CampaignReport.Campaign, isAll: Bool = false) {
            let name = a.campaign ?? "(none)"
            XCTAssertEqual(a.campaign, b.campaign, file: file, line: line)
            XCTAssertEqual(
                [a.totals.sent, a.totals.accepted, a.totals.rejected], [b.totals.sent, b.totals.accepted, b.totals.rejected], name,
                file: file, line: line)
            XCTAssertEqual(a.rejected, b.rejected, name, file: file, line: line)
            XCTAssertEqual(
                a.byProvider.mapValues { [$0.sent, $0.accepted, $0.rejected] },
                b.byProvider.mapValues { [$0.sent, $0.accepted, $0.rejected] }, name, file: file, line: line)
            XCTAssertEqual(
                a.byPlatform.mapValues { [$0.sent, $0.accepted] }, b.byPlatform.mapValues { [$0.sent, $0.accepted] }, name, file: file,
                line: line)
            XCTAssertEqual(a.display, b.display, name, file: file, line: line)
            XCTAssertEqual(a.displayReasons, b.displayReasons, name, file: file, line: line)
            XCTAssertEqual(a.lint, b.lint, name, file: file, line: line)
            XCTAssertEqual(a.lintSeverity, b.lintSeverity, name, file: file, line: line)
            XCTAssertEqual(a.firstMs, b.firstMs, name, file: file, line: line)
            XCTAssertEqual(a.lastMs, b.lastMs, name, file: file, line: line)
            // Since a time, the exact report cannot tell the campaign of an attempt whose request
            // came before it (no campaign's); the summaries were made knowing it. Together they agree.
            if since == 0 || isAll {
                XCTAssertEqual(
                    a.tracking.mapValues { [$0.fired, $0.succeeded, $0.failed, $0.retried, $0.attempts] },
                    b.tracking.mapValues { [$0.fired, $0.succeeded, $0.failed, $0.retried, $0.attempts] }, name, file: file, line: line)
            }
            if since == 0 || isAll {
                XCTAssertEqual(a.timeline.sent, b.timeline.sent, name, file: file, line: line)
                XCTAssertEqual(a.timeline.rejected, b.timeline.rejected, name, file: file, line: line)
                XCTAssertEqual(a.timeline.startMs, b.timeline.startMs, name, file: file, line: line)
                XCTAssertEqual(a.timeline.tracked, b.timeline.tracked, name, file: file, line: line)
            }
            XCTAssertEqual(a.payload.bands, b.payload.bands, name, file: file, line: line)
            XCTAssertEqual(a.payload.min, b.payload.min, name, file: file, line: line)
            XCTAssertEqual(a.payload.max, b.payload.max, name, file: file, line: line)
            XCTAssertEqual(a.payload.mean, b.payload.mean, name, file: file, line: line)
            XCTAssertEqual(a.latency.max, b.latency.max, name, file: file, line: line)
            for p in [50.0, 90, 99] {
                XCTAssertEqual(
                    Double(b.payload.percentile(p)), Double(a.payload.percentile(p)), accuracy: Double(a.payload.percentile(p)) * 0.035 + 1,
                    "\(name) payload p\(p)", file: file, line: line)
                XCTAssertEqual(
                    Double(b.latency.percentile(p)), Double(a.latency.percentile(p)), accuracy: Double(a.latency.percentile(p)) * 0.035 + 1,
                    "\(name) latency p\(p)", file: file, line: line)
            }
            XCTAssertFalse(a.uniqueDevicesEstimated, file: file, line: line)
            XCTAssertTrue(b.uniqueDevicesEstimated, file: file, line: line)
            XCTAssertEqual(
                Double(b.uniqueDevices), Double(a.uniqueDevices), accuracy: Double(a.uniqueDevices) * 3 * HyperLogLog.standardError + 2,
                "\(name) unique devices", file: file, line: line)
        }
        XCTAssertEqual(
            exact.campaigns.map(\.campaign).sorted { ($0 ?? "") < ($1 ?? "") },
            summed.campaigns.map(\.campaign).sorted { ($0 ?? "") < ($1 ?? "") }, file: file, line: line)
        for a in exact.campaigns {
            guard let b = summed.campaigns.first(where: { $0.campaign == a.campaign }) else { continue }
            same(a, b)
        }
        same(exact.all, summed.all, isAll: true)
        XCTAssertTrue(
            summed.json.contains(#""exact":false"#) && summed.json.contains(#""uniqueDevicesError":0.016"#), file: file, line: line)
        XCTAssertTrue(exact.json.contains(#""exact":true"#) && !exact.json.contains("uniqueDevicesError"), file: file, line: line)
    }

    func testTheSummarisedReportIsTheExactOneInMemory() throws {
        let j = try Journal(
            path: nil, durability: .strict, retention: .init(maxRecords: .max, maxAgeMs: .max),
            campaignOf: { _, payload in JournalIndexTests.value(after: "_dId", in: Array(payload)) }, payloadTerms: JournalIndexTests.terms)
        j.start()
        defer { j.stop() }
        Self.fill(j)
        XCTAssertGreaterThanOrEqual(j.indexShape.blocks, 8)
        assertSummarisedMatchesExact(j, since: 0)
        assertSummarisedMatchesExact(j, since: 0, campaign: "camp2")
        assertSummarisedMatchesExact(j, since: CampaignDigestTests.base + 41_111) // inside a block: read record by record
        // Left to itself, a journal this small is reported exactly.
        XCTAssertTrue(j.report().exact)
        XCTAssertFalse(j.reportStatus.running)
    }

    /// A digest's stored form keeps counts larger than the form itself (a block's thousands of
    /// requests are a few bytes), and refuses sizes that cannot fit in it.
    func testStoredFormKeepsLargeCounts() throws {
        var d = CampaignDigest()
        for i in 0..<50_000 {
            d.addRequest(
                provider: 0, status: i % 10 == 0 ? 400 : 200, reason: "BadDeviceToken", atMs: 1_000_000 + Int64(i % 3),
                latencyUs: UInt64(100 + i % 900), size: 120, token: UInt64(i % 7))
        }
        var digests = CampaignDigests()
        let slot = try XCTUnwrap(digests.slot("spring"))
        digests.digests[slot] = d
        let bytes = digests.bytes
        XCTAssertLessThan(bytes.count, 1_000, "far fewer bytes than requests counted")
        let back = try XCTUnwrap(CampaignDigests.read(bytes), "large counts read back")
        let r = CampaignReport.summarised(back, sinceMs: 0, campaign: "spring", nowMs: 0)
        XCTAssertEqual(r.all.totals.sent, 50_000)
        XCTAssertEqual(r.all.totals.rejected, 5_000)
        // A size past what the bytes could hold is refused (not a 2^60-entry loop).
        var bad = bytes
        bad[0] = 0xFF
        bad.insert(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0x0F], at: 1)
        XCTAssertNil(CampaignDigests.read(bad))
    }

    func testDigestsAreStoredWithTheirBlocks() throws {
        let dir = "/tmp/pushemu-digest-test-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        func open() throws -> Journal {
            try Journal(
                path: dir + "/j.sqlite", durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max),
                campaignOf: { _, payload in JournalIndexTests.value(after: "_dId", in: Array(payload)) },
                payloadTerms: JournalIndexTests.terms)
        }
        var j = try open()
        j.start()
        Self.fill(j)
        j.stop()
        // On disk a flush does not wait for the writer: the report is read after a reopen.
        j = try open()
        j.start()
        let before = j.report(exact: false).json
        XCTAssertTrue(before.contains(#""totals":{"campaign":null,"sent":30000,"#), before)
        j.stop()
        j = try open()
        j.start()
        defer { j.stop() }
        // Every whole block's digest was read back: the report reads no record (only the open
        // block, summarised again at the reopen, is taken as it stands).
        XCTAssertEqual(j.index.digests(sinceMs: 0).partial, [], "digests read back from disk, not records")
        XCTAssertEqual(j.index.digests(sinceMs: 0).wholeRecords, 30_000 + Int(j.store.totals().tracking))
        XCTAssertEqual(
            j.report(exact: false).json.replacing(/"generatedAt":\d+/, with: ""), before.replacing(/"generatedAt":\d+/, with: ""),
            "the same summaries after a reopen")
        assertSummarisedMatchesExact(j, since: 0)
    }
}
