import PushCore
import Runtime
import Synchronization
import Transport

/// The journal's index: a `BlockSummary` for each run of consecutive segments holding about
/// `blockRecords` records, so a search reads only the blocks that may hold what it asks for,
/// newest (or oldest) first, and a campaign count adds the blocks' counts without reading a record.
///
/// The writer thread adds each committed segment to the open block (`add`), which closes once it
/// holds `blockRecords` records and is then stored beside the segments; readers take a snapshot
/// (`candidates`, `counts`) from any thread. Segments no block describes (a journal written
/// before the index, a block cut by retention, a long tail after a crash) are `unindexed`:
/// always read, never ruled out. Summarising happens on the writer thread, from the segment's
/// bytes: the event loops do nothing for the index.
final class SegmentIndex: Sendable {
    static let blockRecords = 4096
    /// A tail of up to this many records after the last stored block (what a crash left, or a
    /// journal written before the index) is summarised at open (about a quarter of a second); a
    /// longer one stays unindexed.
    static let rebuildLimit = 65_536

    struct State: @unchecked Sendable { // the attribution is only used under the index's lock
        var closed: [BlockSummary] = []
        var unindexed: [ClosedRange<Int64>] = []
        var open = BlockSummary(firstSegment: 1)
        /// Tracking attempts to their requests' campaigns, for the blocks' digests.
        var attribution = TrackingAttribution()
    }

    /// A run of segments a search reads: its records' time range (unknown: the widest).
    struct Candidate: Sendable {
        var segments: ClosedRange<Int64>
        var minMs: Int64
        var maxMs: Int64
    }

    private let state = FutexLock(State())
    private let payloadTerms: PayloadTermsReader?

    init(payloadTerms: PayloadTermsReader?) { self.payloadTerms = payloadTerms }

    // MARK: the writer thread

    /// Adds a committed segment (the next id) to the open block; returns the block it closed.
    func add(segmentID: Int64, _ bytes: UnsafeRawBufferPointer) -> BlockSummary? {
        state.withLock { s -> BlockSummary? in
            if s.open.records == 0 { s.open = BlockSummary(firstSegment: segmentID) }
            SegmentIndex.summarise(bytes, into: &s.open, terms: payloadTerms, attribution: s.attribution)
            for (a, c) in s.attribution.resolve() { s.open.digests.add(a, campaign: c) }
            s.open.lastSegment = segmentID
            guard s.open.records >= SegmentIndex.blockRecords else { return nil }
            s.open.seen = []
            let closed = s.open
            s.closed.append(closed)
            s.open = BlockSummary(firstSegment: segmentID + 1)
            return closed
        }
    }

    /// Closes the open block (at stop), returning it when it holds anything.
    func closeOpen() -> BlockSummary? {
        state.withLock { s -> BlockSummary? in
            guard s.open.records > 0 else { return nil }
            for (a, c) in s.attribution.resolve(giveUp: true) { s.open.digests.add(a, campaign: c) }
            s.open.seen = []
            let closed = s.open
            s.closed.append(closed)
            s.open = BlockSummary(firstSegment: closed.lastSegment + 1)
            return closed
        }
    }

    /// Retention deleted every segment up to `cut`: blocks wholly before it go; one it cuts
    /// through keeps its remaining segments as unindexed (its counts would be wrong).
    func pruned(through cut: Int64) {
        state.withLock { s in
            var kept: [BlockSummary] = []
            for b in s.closed {
                if b.lastSegment <= cut { continue }
                if b.firstSegment <= cut {
                    s.unindexed.append(cut + 1...b.lastSegment)
                } else {
                    kept.append(b)
                }
            }
            s.closed = kept
            if s.open.records > 0, s.open.firstSegment <= cut {
                if s.open.lastSegment > cut { s.unindexed.append(cut + 1...s.open.lastSegment) }
                s.open = BlockSummary(firstSegment: s.open.lastSegment + 1)
            }
            s.unindexed = s.unindexed.compactMap { r in
                r.upperBound <= cut ? nil : max(r.lowerBound, cut + 1)...r.upperBound
            }
        }
    }

    func removeAll() { state.withLock { $0 = State() } }

    /// Campaign digests merged over whole blocks whose records are all at or after `sinceMs`,
    /// and the runs the caller must read record by record (unindexed ranges, blocks that straddle
    /// `sinceMs`, blocks without digests).
    func digests(sinceMs: Int64) -> (whole: CampaignDigests, partial: [ClosedRange<Int64>], wholeRecords: Int) {
        let s = state.withLock { s in
            // The open block is copied as it stands (its digests are whole for what it holds).
            (closed: s.closed, unindexed: s.unindexed, open: s.open)
        }
        var whole = CampaignDigests()
        var partial = s.unindexed
        var records = 0
        for b in s.closed + [s.open] where b.records > 0 && b.maxMs >= sinceMs {
            guard b.minMs >= sinceMs, b.digested else {
                partial.append(b.firstSegment...b.lastSegment)
                continue
            }
            whole.merge(b.digests)
            records += b.records
        }
        return (whole, partial.sorted { $0.lowerBound < $1.lowerBound }, records)
    }

    /// Takes up what `store` holds at open: its stored blocks, the segments none describes
    /// (unindexed), and the tail after the last block, summarised again into the open block when
    /// it is short (what a crash left). Returns the records left unindexed.
    func restore(from store: SegmentStore, rebuildLimit: Int = SegmentIndex.rebuildLimit) -> Int {
        var s = State()
        guard let span = store.span() else {
            state.withLock { $0 = s }
            return 0
        }
        var next = span.lowerBound
        var unindexed = 0
        for b in store.blocks() where b.lastSegment >= next {
            if b.firstSegment < next {
                // Cut by retention before its row was deleted: its counts no longer hold.
                s.unindexed.append(next...b.lastSegment)
            } else {
                if b.firstSegment > next { s.unindexed.append(next...b.firstSegment - 1) }
                s.closed.append(b)
            }
            next = b.lastSegment + 1
        }
        for r in s.unindexed { unindexed += store.records(from: r.lowerBound) - store.records(from: r.upperBound + 1) }
        s.open = BlockSummary(firstSegment: span.upperBound + 1)
        if next <= span.upperBound {
            let tail = store.records(from: next)
            if tail <= rebuildLimit {
                // Summarised as the writer would have: blocks closed (and stored) at the same size.
                var open = BlockSummary(firstSegment: next)
                store.read(ids: next...span.upperBound, newestFirst: false) { seg in
                    if open.records == 0 { open = BlockSummary(firstSegment: seg.id) }
                    seg.data.withUnsafeBytes { SegmentIndex.summarise($0, into: &open, terms: payloadTerms, attribution: s.attribution) }
                    for (a, c) in s.attribution.resolve() { open.digests.add(a, campaign: c) }
                    open.lastSegment = seg.id
                    if open.records >= SegmentIndex.blockRecords {
                        open.seen = []
                        try? store.appendBlock(open)
                        s.closed.append(open)
                        open = BlockSummary(firstSegment: seg.id + 1)
                    }
                    return true
                }
                if open.records > 0 { s.open = open }
            } else {
                s.unindexed.append(next...span.upperBound)
                unindexed += tail
            }
        }
        state.withLock { $0 = s }
        return unindexed
    }

    /// Summarises a segment's records into `block`: keys for every searchable value (a repeated
    /// value only where the segment first writes it), the time range, and the requests' counts
    /// (only those at or after `countsFromMs` when `keys` is false: a count over part of a block).
    static func summarise(
        _ b: UnsafeRawBufferPointer, into block: inout BlockSummary, terms: PayloadTermsReader?, keys: Bool = true,
        countsFromMs: Int64 = .min, attribution: TrackingAttribution
    ) {
        var cursor = SegmentCursor(b)
        var v = RecordView()
        var lastProvider: UInt8 = 0xFF
        // Requests are counted in runs of the same campaign, provider and outcome (a campaign's
        // segment is one run or a few): the key is built only where a run ends.
        var run = CountRun()
        // The campaign digest requests go to, and their device outcome, read again only where a
        // record writes them anew.
        var digest = Optional<Int>.none
        var campaign: String?
        var outcome = (display: Optional<UInt16>.none, lint: [(code: String, severity: String)]())
        var first = true
        if keys, terms == nil { block.textIndexed = false }
        func text(_ slot: SegmentEncoder.Slot) -> String? {
            cursor.value(slot).map { String(decoding: UnsafeRawBufferPointer(rebasing: b[$0]), as: UTF8.self) }
        }
        while cursor.next(b, into: &v) {
            block.minMs = min(block.minMs, v.atMs)
            block.maxMs = max(block.maxMs, v.atMs)
            let tokenBytes = UnsafeRawBufferPointer(rebasing: b[v.token])
            let token = v.token.isEmpty && !keys ? 0 : SummaryKey.token(tokenBytes, packed: v.tokenPacked)
            guard v.isRequest else {
                block.tracking += 1
                if keys { block.insert(token) }
                // Format 4 keeps the campaign with the attempt, in the requests' field: the next
                // request reads its own again.
                if v.wrote(.campaign) { first = true }
                guard v.atMs >= countsFromMs else { continue }
                let campaign = cursor.version >= 4 ? text(.campaign) : nil
                var a = TrackingAttribution.Attempt(
                    id: UUIDValue(high: 0, low: 0), event: text(.event) ?? "", outcome: text(.outcome) ?? "", attempt: v.attempt,
                    events: v.events, atMs: v.atMs)
                if campaign != nil || v.id.isEmpty {
                    // Its own campaign, or a registration's (it names no notification): none.
                    block.digests.add(a, campaign: campaign)
                } else if let id = UUIDValue.parseCanonicalLowercase(UnsafeRawBufferPointer(rebasing: b[v.id])) {
                    // Older formats, and attempts journaled without a campaign: their request's.
                    a.id = id
                    if let c = attribution.campaign(of: id) {
                        block.digests.add(a, campaign: c)
                    } else if !attribution.wait(a) {
                        block.digests.add(a, campaign: nil)
                    }
                }
                continue
            }
            block.requests += 1
            if first || v.wrote(.campaign) || v.wrote(.reason) || !run.continues(v) { run.flush(into: &block, cursor, b, v) }
            if first || v.wrote(.campaign) {
                campaign = text(.campaign)
                digest = block.digests.slot(campaign)
            }
            if first || v.wrote(.device) {
                outcome = SegmentIndex.outcome(cursor.value(.device).map { UnsafeRawBufferPointer(rebasing: b[$0]) })
            }
            first = false
            if let id = SegmentCursor.id(v, b) {
                attribution.note(id, campaign: campaign, fanOut: v.provider == PushProvider.fcm.storedByte && cursor.value(.topic) != nil)
            }
            if v.atMs >= countsFromMs {
                run.count(v.atMs)
                if let digest {
                    block.digests.digests[digest].addRequest(
                        provider: v.provider, status: v.status, reason: text(.reason) ?? "", atMs: v.atMs, latencyUs: v.latency,
                        size: v.size,
                        token: v.token.isEmpty ? nil : token)
                    if outcome.display != nil || !outcome.lint.isEmpty {
                        block.digests.digests[digest].addOutcome(display: outcome.display, lint: outcome.lint)
                    }
                }
            }
            guard keys else { continue }
            if v.provider != lastProvider { block.insertOnce(SummaryKey.provider(v.provider)) }
            insertKeys(v, cursor, b, token: token, into: &block)
            // A payload the block summarised already (every segment writes its first whole) is
            // not read again: reading one costs more than a segment's other records together.
            if let terms, let payload = cursor.value(.payload), v.wrote(.payload) || v.provider != lastProvider {
                let bytes = UnsafeRawBufferPointer(rebasing: b[payload])
                if block.seen.insert(SummaryKey.bytes(.payload, bytes) ^ UInt64(v.provider)).inserted {
                    let found = terms(PushProvider.stored(v.provider), bytes)
                    for c in found.campaigns { block.insertOnce(SummaryKey.text(.campaign, c)) }
                    block.insertText(found.alertText)
                }
            }
            lastProvider = v.provider
        }
        run.flush(into: &block, cursor, b, nil)
    }

    /// The stored device outcome's display (outcome << 8 | reason) and lint findings.
    static func outcome(_ d: UnsafeRawBufferPointer?) -> (display: UInt16?, lint: [(code: String, severity: String)]) {
        guard let d, d.count >= 2 else { return (nil, []) }
        let display = Display(stored: (d[0], d[1])) != nil ? UInt16(d[0]) << 8 | UInt16(d[1]) : nil
        var lint: [(code: String, severity: String)] = []
        if d.count > 2 {
            for line in UnsafeRawBufferPointer(rebasing: d[2...]).split(separator: UInt8(ascii: "\n")) {
                if let f = LintFinding(storedLine: String(decoding: line, as: UTF8.self)[...]) {
                    lint.append((f.code, f.severity.rawValue))
                }
            }
        }
        return (display, lint)
    }

    /// Consecutive requests of one campaign, provider and outcome, counted without their key.
    private struct CountRun {
        var key: BlockSummary.CountKey?
        var provider: UInt8 = 0
        var status = 0
        var tally = BlockSummary.Tally()

        /// Whether `v` has the run's provider and outcome (its campaign and reason were not written anew).
        func continues(_ v: RecordView) -> Bool { key != nil && v.provider == provider && v.status == status }

        mutating func count(_ atMs: Int64) {
            tally.count += 1
            tally.firstMs = min(tally.firstMs, atMs)
            tally.lastMs = max(tally.lastMs, atMs)
        }

        /// Adds the run to `block` and starts the next with `v`'s key (nil: the end).
        mutating func flush(into block: inout BlockSummary, _ cursor: SegmentCursor, _ b: UnsafeRawBufferPointer, _ v: RecordView?) {
            if let key, tally.count > 0 { block.count(key, tally) }
            tally = BlockSummary.Tally()
            guard let v else { return }
            func text(_ slot: SegmentEncoder.Slot) -> String? {
                cursor.value(slot).map { String(decoding: UnsafeRawBufferPointer(rebasing: b[$0]), as: UTF8.self) }
            }
            let reason = text(.reason) ?? ""
            key = BlockSummary.CountKey(
                campaign: text(.campaign), provider: v.provider,
                rejection: PushProvider.accepts(v.status) ? "" : (reason.isEmpty ? "HTTP \(v.status)" : reason))
            provider = v.provider
            status = v.status
        }
    }

    /// A request's own keys, and those of the repeatable fields it wrote.
    private static func insertKeys(
        _ v: RecordView, _ cursor: SegmentCursor, _ b: UnsafeRawBufferPointer, token: UInt64, into block: inout BlockSummary
    ) {
        func field(_ slot: SegmentEncoder.Slot) -> UnsafeRawBufferPointer? {
            cursor.value(slot).map { UnsafeRawBufferPointer(rebasing: b[$0]) }
        }
        block.insert(token)
        if let id = SegmentCursor.id(v, b) { block.insert(SummaryKey.id(id)) }
        if v.wrote(.environment), let e = field(.environment) { block.insertOnce(SummaryKey.bytes(.environment, e)) }
        if v.wrote(.topic), let t = field(.topic) { block.insertOnce(SummaryKey.bytes(.topic, t)) }
        if v.wrote(.headers), let h = field(.headers), block.seen.insert(SummaryKey.bytes(.headers, h)).inserted {
            for (name, value) in SegmentCursor.headers(h) where name == "apns-topic" {
                block.insertOnce(SummaryKey.text(.app, AppTopic.bundle(ofTopic: value)))
            }
        }
        if v.wrote(.warnings), field(.warnings) != nil { block.insertOnce(SummaryKey.flag(.hasWarnings)) }
        if v.wrote(.device), let d = field(.device), d.count >= 2 {
            if let display = Display(stored: (d[0], d[1])) { block.insertOnce(SummaryKey.text(.display, display.outcome.name)) }
            if d.count > 2 {
                block.insertOnce(SummaryKey.flag(.hasLint))
                for line in UnsafeRawBufferPointer(rebasing: d[2...]).split(separator: UInt8(ascii: "\n")) {
                    if let f = LintFinding(storedLine: String(decoding: line, as: UTF8.self)[...]) {
                        block.insertOnce(SummaryKey.text(.lint, f.code))
                    }
                }
            }
        }
    }

    // MARK: reading (any thread)

    /// The runs of segments that may hold what `probe` asks for: unindexed ranges, then blocks
    /// whose filter and time range allow it.
    func candidates(_ probe: IndexProbe) -> [Candidate] {
        guard !probe.impossible else { return [] }
        let s = state.withLock { $0 }
        var out = s.unindexed.map { Candidate(segments: $0, minMs: .min, maxMs: .max) }
        func consider(_ b: BlockSummary) {
            guard b.records > 0, b.maxMs >= probe.fromMs, b.minMs <= probe.toMs, b.mayMatch(probe) else { return }
            out.append(Candidate(segments: b.firstSegment...b.lastSegment, minMs: b.minMs, maxMs: b.maxMs))
        }
        for b in s.closed { consider(b) }
        consider(s.open)
        return out
    }

    /// Request counts per campaign, provider and outcome over whole blocks whose records are all at
    /// or after `sinceMs`, and the runs the caller must count record by record (unindexed ranges,
    /// blocks that straddle `sinceMs`).
    func counts(sinceMs: Int64) -> (whole: [BlockSummary.CountKey: BlockSummary.Tally], partial: [ClosedRange<Int64>]) {
        let s = state.withLock { $0 }
        var whole: [BlockSummary.CountKey: BlockSummary.Tally] = [:]
        var partial = s.unindexed
        for b in s.closed + [s.open] where b.records > 0 && b.maxMs >= sinceMs {
            guard b.minMs >= sinceMs else {
                partial.append(b.firstSegment...b.lastSegment)
                continue
            }
            for (k, t) in b.counts { whole[k, default: BlockSummary.Tally()].add(t) }
        }
        return (whole, partial)
    }

    /// Blocks, unindexed ranges and the records the open block holds (for /stats and tests).
    var shape: (blocks: Int, unindexed: Int, openRecords: Int) {
        state.withLock { ($0.closed.count, $0.unindexed.count, $0.open.records) }
    }
}
