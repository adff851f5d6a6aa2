import Foundation
import PushCore
import Runtime
import Transport
import XCTest

@testable import Journal

/// The journal's index: a search through it finds exactly what a scan of every record finds
/// (the index only ever narrows what is read), reads few blocks for a selective term, and the
/// campaign counts it keeps equal the report's; across a restart, a crash's tail, a journal
/// written before the index, and retention cutting through a block.
final class JournalIndexTests: XCTestCase {
    /// A seeded generator (xorshift64*): every run writes the same journal.
    struct Seeded {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return Int((state &* 0x2545_f491_4f6c_dd1d) >> 33) % n
        }
    }

    static func value(after key: String, in payload: [UInt8]) -> String? {
        let text = String(decoding: payload, as: UTF8.self)
        guard let r = text.range(of: "\"\(key)\":\"") else { return nil }
        return String(text[r.upperBound...].prefix { $0 != "\"" })
    }

    /// The test's payload reader: campaign ids under `_dId` and `cid`, the alert text in `title`.
    static let terms: PayloadTermsReader = { _, payload in
        let bytes = Array(payload)
        return PayloadTerms(
            campaigns: ["_dId", "cid"].compactMap { value(after: $0, in: bytes) },
            alertText: (value(after: "title", in: bytes) ?? "").lowercased())
    }

    static func token(_ k: Int) -> String {
        k % 50 == 7 ? "UPPER\(k)" : String(format: "%064x", UInt64(k) &* 0x9e37_79b9_7f4a_7c15)
    }

    /// 12,000 requests (one in nine rejected, one in twenty received out of order, up to a
    /// minute early) and 2,000 tracking attempts, committed in many small segments.
    func fill(_ j: Journal, seed: UInt64 = 42) {
        var random = Seeded(state: seed)
        let base: Int64 = 1_800_000_000_000
        for i in 0..<12_000 {
            let campaign = random.next(6)
            let word = ["spring", "winter", "flash", "clearance", "d\u{ED}a de", "\u{FC}ber"][random.next(6)]
            let rejected = i % 9 == 4
            var at = base + Int64(i) * 10
            if i % 20 == 3 { at -= Int64(random.next(60_000)) }
            let payload = #"{"aps":{"alert":{"title":"\#(word) sale \#(i % 97)"}},"_dId":"camp\#(campaign)","cid":"braze\#(campaign % 3)"}"#
            j.append(
                RequestRecord(
                    atMs: at, provider: i % 3 == 0 ? .fcm : .apns, connection: 1, environment: i % 5 == 0 ? "production" : "sandbox",
                    token: Array(Self.token(random.next(3_000)).utf8)[...], topic: Array("com.example.app\(i % 4)".utf8)[...],
                    status: rejected ? 410 : 200, reason: rejected ? "Unregistered" : "", latencyUs: 40,
                    headers: HTTPFields([("apns-topic", "com.example.app\(i % 4)")]), payload: Array(payload.utf8)[...],
                    warnings: i % 13 == 0 ? ["w"] : [], notificationID: rejected ? nil : UUIDValue(high: UInt64(i), low: 99)),
                loop: nil
            ) { _ in }
            if i % 6 == 0 {
                j.append(
                    TrackingRecord(
                        atMs: at + 5, preset: "adobe-campaign", event: "receive", token: Self.token(random.next(3_000)),
                        notificationID: UUIDValue(high: UInt64(i), low: 99).description, method: "GET", url: "http://sink/r",
                        status: 200, outcome: "succeeded", attempt: 1, latencyMs: 2, error: nil))
            }
            // A commit every 500 records or so: many segments a block, and blocks that close near
            // 4,096 records. In memory `flush` makes that commit whatever the machine's load (a
            // sleep alone let a busy CI machine's writer gather 3,000 records a segment: two
            // blocks instead of three); on disk, where `flush` returns at once, the sleep does.
            if i % 500 == 499 {
                j.flush()
                usleep(12_000)
            }
        }
    }

    /// What a filter holds for a record, checked on the built record (the truth the index must keep).
    struct Truth {
        var terms: [IndexTerm]
        func holds(_ e: JournalEntry, records: JournalSearch.Records) -> Bool {
            switch (e, records) {
            case (.request(let r), .notifications):
                guard r.status == 200, r.notificationID != nil else { return false }
                let payload = r.payload.withUnsafeBytes { JournalIndexTests.terms(r.provider, $0) }
                for t in terms {
                    switch t {
                    case .provider(let x): if r.provider != x { return false }
                    case .token(let x): if r.token != x { return false }
                    case .id(let x): if r.notificationID != x.description { return false }
                    case .topic(let x): if r.topic != x { return false }
                    case .environment(let x): if r.environment != x { return false }
                    case .app(let x): if r.headers.first(where: { $0.name == "apns-topic" })?.value != x { return false }
                    case .campaign(let x): if !payload.campaigns.contains(x) { return false }
                    case .hasWarnings: if r.warnings.isEmpty { return false }
                    case .text(let x): if !payload.alertText.contains(x) { return false }
                    case .atOrAfter(let ms): if r.atMs < ms { return false }
                    case .atOrBefore(let ms): if r.atMs > ms { return false }
                    case .nothing: return false
                    case .display, .lint, .hasLint: return false
                    }
                }
                return true
            case (.tracking(let t), .tracking):
                for term in terms {
                    switch term {
                    case .token(let x): if t.token != x { return false }
                    case .atOrAfter(let ms): if t.atMs < ms { return false }
                    case .atOrBefore(let ms): if t.atMs > ms { return false }
                    default: return false
                    }
                }
                return true
            default: return false
            }
        }
    }

    /// Every record, read once per journal state (`compare` filters it for each search).
    var everything: (journal: ObjectIdentifier, count: Int, entries: [JournalEntry])?

    /// Searches in both orders and filters every record for the same terms: the same matches.
    /// Returns how many blocks the newest-first search read.
    func compare(
        _ j: Journal, _ terms: [IndexTerm], _ records: JournalSearch.Records = .notifications, file: StaticString = #filePath,
        line: UInt = #line
    ) -> Int {
        let truth = Truth(terms: terms)
        let stored = j.counts()
        if everything?.journal != ObjectIdentifier(j) || everything?.count != stored.requests + stored.tracking {
            var all: [JournalEntry] = []
            j.scan { e in
                all.append(e)
                return true
            }
            everything = (ObjectIdentifier(j), all.count, all)
        }
        let scanned = everything!.entries.filter { truth.holds($0, records: records) }.map(Self.key)
        var newestBlocks = 0
        for newest in [true, false] {
            var found: [String] = []
            var blocks = 0
            j.search(
                JournalSearch(records: records, terms: terms, newestFirst: newest),
                more: { _ in
                    blocks += 1
                    return true
                },
                each: { e in
                    if truth.holds(e, records: records) { found.append(Self.key(e)) }
                    return true
                })
            XCTAssertEqual(found.sorted(), scanned.sorted(), "\(terms) newest first: \(newest)", file: file, line: line)
            if newest { newestBlocks = blocks }
        }
        return newestBlocks
    }

    static func key(_ e: JournalEntry) -> String {
        switch e {
        case .request(let r): "r\(r.atMs) \(r.token) \(r.notificationID ?? "-")"
        case .tracking(let t): "t\(t.atMs) \(t.token) \(t.notificationID)"
        }
    }

    func inMemory() throws -> Journal {
        try Journal(
            path: nil, durability: .strict, retention: .init(maxRecords: .max, maxAgeMs: .max),
            campaignOf: { _, payload in Self.value(after: "_dId", in: Array(payload)) }, payloadTerms: Self.terms)
    }

    func testSearchFindsExactlyWhatAScanFindsAndReadsFewBlocks() throws {
        let j = try inMemory()
        j.start()
        fill(j)
        j.flush()
        let shape = j.indexShape
        XCTAssertGreaterThanOrEqual(shape.blocks, 3, "14,000 records make three closed blocks and an open one")
        XCTAssertEqual(shape.unindexed, 0)
        var random = Seeded(state: 7)
        var tokensRead: [Int] = []
        for _ in 0..<40 {
            let token = Self.token(random.next(3_000))
            tokensRead.append(compare(j, [.token(token)]))
            _ = compare(j, [.token(token)], .tracking)
        }
        // A token is in one or two blocks (a few pushes each): the others are ruled out.
        XCTAssertLessThanOrEqual(tokensRead.sorted()[tokensRead.count / 2], 3, "\(tokensRead)")
        XCTAssertLessThanOrEqual(compare(j, [.token("not-a-token-anyone-sent")]), 1)
        XCTAssertLessThanOrEqual(compare(j, [.id(UUIDValue(high: 5_000, low: 99))]), 1, "an id is in one block")
        _ = compare(j, [.id(UUIDValue(high: 5_004, low: 99))]) // a rejected request's: none
        for c in 0..<7 { _ = compare(j, [.campaign("camp\(c)")]) }
        _ = compare(j, [.campaign("braze2"), .environment("production")])
        _ = compare(j, [.campaign("camp3"), .text("flash sale 1")])
        _ = compare(j, [.text("clearance"), .topic("com.example.app2"), .hasWarnings])
        _ = compare(j, [.text("sale 96"), .app("com.example.app1")])
        XCTAssertLessThanOrEqual(compare(j, [.text("nowhere to be found")]), 1)
        _ = compare(j, [.text("sa")])
        XCTAssertLessThanOrEqual(compare(j, [.text("zq")]), 1, "a two-letter word nobody wrote")
        XCTAssertLessThanOrEqual(compare(j, [.text("xyz\u{E9}")]), 1, "a non-ASCII word nobody wrote")
        // The same words in the other canonical form (decomposed): found all the same.
        _ = compare(j, [.text("di\u{301}a")])
        _ = compare(j, [.text("u\u{308}ber")])
        _ = compare(j, [.text("d\u{ED}a de sale")])
        _ = compare(j, [.provider(.fcm)])
        _ = compare(j, [.provider(.apns), .text("flash"), .environment("production")])
        let base: Int64 = 1_800_000_000_000
        _ = compare(j, [.atOrAfter(base + 50_000), .atOrBefore(base + 60_000)])
        _ = compare(j, [.atOrAfter(base + 119_000)])
        _ = compare(j, [.token(Self.token(507)), .atOrBefore(base + 30_000)], .tracking)
        XCTAssertEqual(compare(j, [.nothing]), 0, "an impossible search reads nothing")
        j.stop()
    }

    /// Counts per campaign as the report counts them, for everything and since a time inside blocks.
    func assertCountsMatchTheReport(_ j: Journal, since: Int64, file: StaticString = #filePath, line: UInt = #line) {
        let counts = CampaignCounts(j.campaignCounts(sinceMs: since), only: nil, sinceMs: since, nowMs: 0)
        let report = j.report(sinceMs: since)
        XCTAssertEqual(counts.all.totals.sent, report.all.totals.sent, file: file, line: line)
        XCTAssertGreaterThan(counts.all.totals.sent, 0, file: file, line: line)
        XCTAssertEqual(
            counts.campaigns.map {
                "\($0.campaign ?? "-") \($0.totals.sent) \($0.totals.accepted) \($0.rejected) \($0.firstMs) \($0.lastMs)"
            }
            .sorted(),
            report.campaigns.filter { $0.totals.sent > 0 }.map {
                "\($0.campaign ?? "-") \($0.totals.sent) \($0.totals.accepted) \($0.rejected) \($0.firstMs) \($0.lastMs)"
            }.sorted(), file: file, line: line)
        for c in counts.campaigns {
            let r = report.campaigns.first { $0.campaign == c.campaign }
            XCTAssertEqual(
                c.byProvider.mapValues { [$0.sent, $0.accepted] }, r?.byProvider.mapValues { [$0.sent, $0.accepted] }, file: file,
                line: line)
        }
    }

    func testCampaignCountsEqualTheReport() throws {
        let j = try inMemory()
        j.start()
        fill(j)
        assertCountsMatchTheReport(j, since: 0)
        assertCountsMatchTheReport(j, since: 1_800_000_000_000 + 61_234) // inside a block: counted record by record
        let one = CampaignCounts(j.campaignCounts(), only: "camp2", sinceMs: 0, nowMs: 0)
        XCTAssertEqual(one.campaigns.map(\.campaign), ["camp2"])
        XCTAssertEqual(one.all.totals.sent, j.report(campaign: "camp2").all.totals.sent)
        XCTAssertTrue(one.json.contains(#""rejected":{"Unregistered":"#), one.json)
        j.stop()
    }

    func testIndexAcrossARestartACrashAndAJournalWrittenWithoutIt() throws {
        let dir = "/tmp/pushemu-index-test-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        let path = dir + "/j.sqlite"
        func open() throws -> Journal {
            try Journal(
                path: path, durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max),
                campaignOf: { _, payload in Self.value(after: "_dId", in: Array(payload)) }, payloadTerms: Self.terms,
                indexRebuildLimit: 20_000)
        }
        let probes: [[IndexTerm]] = [
            [.token(Self.token(11))], [.token(Self.token(2_999))], [.campaign("camp4")], [.text("winter sale 5")],
            [.id(UUIDValue(high: 11_999, low: 99))],
        ]
        var j = try open()
        j.start()
        fill(j)
        j.stop() // the open block is stored too
        let blocks = j.indexShape.blocks
        j = try open()
        XCTAssertEqual(j.indexShape.blocks, blocks, "every block read back")
        XCTAssertEqual(j.indexShape.openRecords, 0)
        for p in probes { _ = compare(j, p) }
        assertCountsMatchTheReport(j, since: 0)

        // A crash: the last block's row never written. The tail is summarised again at open.
        let db = try SQLiteDatabase(path: path)
        try db.exec("DELETE FROM segment_blocks WHERE first_segment = (SELECT max(first_segment) FROM segment_blocks)")
        j = try open()
        XCTAssertEqual(j.indexShape.blocks + (j.indexShape.openRecords > 0 ? 1 : 0), blocks, "the tail, summarised again")
        XCTAssertEqual(j.indexShape.unindexed, 0)
        for p in probes { _ = compare(j, p) }
        assertCountsMatchTheReport(j, since: 0)

        // A journal written before the index: no blocks, and more records than are summarised at
        // open. They are read whole, never ruled out; new records are indexed from then on.
        j.start()
        fill(j, seed: 43)
        j.stop()
        try db.exec("DROP TABLE segment_blocks")
        j = try open()
        XCTAssertEqual(j.indexShape.blocks, 0)
        XCTAssertEqual(j.indexShape.unindexed, 1)
        for p in probes { _ = compare(j, p) }
        assertCountsMatchTheReport(j, since: 0)
        j.start()
        fill(j, seed: 50)
        j.stop()
        XCTAssertGreaterThan(j.indexShape.blocks, 0)
        for p in probes { _ = compare(j, p) }
        assertCountsMatchTheReport(j, since: 0)
    }

    func testRetentionCuttingThroughABlockKeepsCountsExact() throws {
        let j = try Journal(
            path: nil, durability: .relaxed, retention: .init(maxRecords: 9_000, maxAgeMs: .max),
            campaignOf: { _, payload in Self.value(after: "_dId", in: Array(payload)) }, payloadTerms: Self.terms)
        j.start()
        fill(j)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline && j.counts().requests + j.counts().tracking > 9_300 { usleep(50_000) }
        XCTAssertGreaterThan(j.statistics.pruned, 0)
        assertCountsMatchTheReport(j, since: 0)
        _ = compare(j, [.campaign("camp1")])
        _ = compare(j, [.token(Self.token(123))])
        j.stop()
    }

    /// A cut through the middle of a block (segment by segment, as retention deletes): the
    /// block's remaining segments become unindexed, and its counts are no longer added whole.
    func testACutThroughABlockLeavesItsRestUnindexed() throws {
        let store = MemorySegmentStore()
        let index = SegmentIndex(payloadTerms: Self.terms)
        for s in 0..<20 { // 20 segments of 500 requests: blocks of 9 segments (4,500 requests)
            var e = SegmentEncoder(baseMs: 1_000)
            for i in 0..<500 {
                e.appendRequest(
                    atMs: 1_000 + Int64(s * 500 + i), provider: .apns, connection: 1, environment: "sandbox",
                    token: Array(Self.token(i).utf8)[...], topic: nil, status: 200, reason: "", latencyUs: 1, headers: HTTPFields(),
                    payload: Array(#"{"_dId":"camp\#(s % 2)"}"#.utf8)[...], warnings: [], device: nil,
                    notificationID: UUIDValue(high: UInt64(s), low: UInt64(i)), maxPayload: 5120, campaignOf: { _, _, _, _ in nil })
            }
            let id = try store.append([e])[0]
            _ = e.withBytes { index.add(segmentID: id, $0) }
        }
        XCTAssertEqual(index.shape.blocks, 2)
        XCTAssertEqual(index.shape.openRecords, 1_000)
        let cut = try store.prune(beforeMs: .min, keepRecords: 7_000) // deletes segments 1-6: inside the first block
        XCTAssertEqual(cut.through, 6)
        index.pruned(through: cut.through)
        XCTAssertEqual(index.shape.blocks, 1)
        XCTAssertEqual(index.shape.unindexed, 1)
        let counts = index.counts(sinceMs: .min)
        XCTAssertEqual(counts.partial, [7...9], "the first block's rest is counted record by record")
        XCTAssertEqual(counts.whole.values.reduce(0) { $0 + $1.count }, 5_500, "the second block and the open one")
        XCTAssertEqual(index.candidates(IndexProbe([.token("nobody")])).map(\.segments), [7...9], "and always read")
        index.pruned(through: 12) // through the second block too
        XCTAssertEqual(index.shape.blocks, 0)
        XCTAssertEqual(index.counts(sinceMs: .min).partial, [13...18])
    }

    /// A word's n-grams: its ASCII runs' trigrams (or shorter), none across a non-ASCII byte and
    /// none with the ASCII byte a combining mark may follow.
    func testWordGrams() {
        func grams(_ parts: [String]) -> [UInt64] {
            parts.map { p in Array(p.utf8).withUnsafeBufferPointer { SummaryKey.gram($0) } }
        }
        XCTAssertEqual(IndexProbe.grams(of: "sale"), grams(["sal", "ale"]))
        XCTAssertEqual(IndexProbe.grams(of: "ab"), grams(["ab"]))
        XCTAssertEqual(IndexProbe.grams(of: "d\u{ED}a"), grams(["a"]), "d goes: a mark may join it in the other form")
        XCTAssertEqual(IndexProbe.grams(of: "di\u{301}a"), grams(["d", "a"]))
        XCTAssertEqual(IndexProbe.grams(of: "\u{E9}t\u{E9}"), [])
        XCTAssertEqual(IndexProbe.grams(of: "caf\u{E9} latte"), grams(["ca", " la", "lat", "att", "tte"]))
    }
}
