import PushCore

/// One campaign's records in a journal block, as the campaign report shows them, mergeable over
/// blocks (and journals): answers per provider and reason, display and lint counts, per-second
/// counts, tracking by event, latency and payload-size histograms (`LogHistogram`) and unique
/// devices (`HyperLogLog`). The index builds one per campaign per block on the writer thread, so
/// a report over a hundred million records merges a few tens of thousands of digests instead of
/// reading the records.
struct CampaignDigest: Sendable {
    struct Second: Sendable, Equatable {
        var sent = 0
        var accepted = 0
        var rejected = 0
    }

    var byProvider: [UInt8: CampaignReport.Outcomes] = [:]
    var rejected: [String: Int] = [:]
    /// By the stored display bytes (outcome << 8 | reason).
    var display: [UInt16: Int] = [:]
    var lint: [String: Int] = [:]
    var lintSeverity: [String: String] = [:]
    var firstMs = Int64.max
    var lastMs = Int64.min
    var seconds: [Int64: Second] = [:]
    var tracking: [String: CampaignReport.TrackingCounts] = [:]
    var trackedSeconds: [String: [Int64: Int]] = [:]
    var latency = LogHistogram()
    var payload = LogHistogram()
    /// Payload sizes in the report's 512-byte bands (exact).
    var payloadBands = [Int](repeating: 0, count: CampaignReport.bands.count)
    var devices = HyperLogLog()

    var requests: Int { byProvider.values.reduce(0) { $0 + $1.sent } }

    mutating func addRequest(
        provider: UInt8, status: Int, reason: @autoclosure () -> String, atMs: Int64, latencyUs: UInt64, size: Int, token: UInt64?
    ) {
        var p = byProvider[provider] ?? CampaignReport.Outcomes()
        p.sent += 1
        var s = seconds[CampaignDigest.second(atMs)] ?? Second()
        s.sent += 1
        if PushProvider.accepts(status) {
            p.accepted += 1
            s.accepted += 1
        } else {
            p.rejected += 1
            s.rejected += 1
            let r = reason()
            rejected[r.isEmpty ? "HTTP \(status)" : r, default: 0] += 1
        }
        byProvider[provider] = p
        seconds[CampaignDigest.second(atMs)] = s
        firstMs = min(firstMs, atMs)
        lastMs = max(lastMs, atMs)
        latency.add(latencyUs)
        payload.add(UInt64(max(0, size)))
        payloadBands[CampaignDigest.band(size)] += 1
        if let token { devices.add(token) }
    }

    mutating func addOutcome(display stored: UInt16?, lint findings: [(code: String, severity: String)]) {
        if let stored { display[stored, default: 0] += 1 }
        for f in findings {
            lint[f.code, default: 0] += 1
            lintSeverity[f.code] = f.severity
        }
    }

    mutating func addTracking(event: String, outcome: String, attempt: Int, events: Int, atMs: Int64) {
        var k = tracking[event] ?? CampaignReport.TrackingCounts()
        let n = max(1, events)
        k.attempts += 1
        if attempt <= 1 { k.fired += n }
        switch outcome {
        case "succeeded":
            k.succeeded += n
            trackedSeconds[event, default: [:]][CampaignDigest.second(atMs), default: 0] += n
        case "retrying": k.retried += 1
        default: k.failed += n
        }
        tracking[event] = k
    }

    static func second(_ ms: Int64) -> Int64 { ms >= 0 ? ms / 1000 : (ms - 999) / 1000 }
    static func band(_ size: Int) -> Int { size >= 4096 ? CampaignReport.bands.count - 1 : max(0, size) / 512 }

    mutating func merge(_ o: CampaignDigest) {
        for (k, v) in o.byProvider {
            var p = byProvider[k] ?? CampaignReport.Outcomes()
            p.sent += v.sent
            p.accepted += v.accepted
            p.rejected += v.rejected
            byProvider[k] = p
        }
        for (k, v) in o.rejected { rejected[k, default: 0] += v }
        for (k, v) in o.display { display[k, default: 0] += v }
        for (k, v) in o.lint { lint[k, default: 0] += v }
        for (k, v) in o.lintSeverity { lintSeverity[k] = v }
        firstMs = min(firstMs, o.firstMs)
        lastMs = max(lastMs, o.lastMs)
        for (k, v) in o.seconds {
            var s = seconds[k] ?? Second()
            s.sent += v.sent
            s.accepted += v.accepted
            s.rejected += v.rejected
            seconds[k] = s
        }
        for (event, v) in o.tracking {
            var k = tracking[event] ?? CampaignReport.TrackingCounts()
            k.fired += v.fired
            k.succeeded += v.succeeded
            k.failed += v.failed
            k.retried += v.retried
            k.attempts += v.attempts
            tracking[event] = k
        }
        for (event, m) in o.trackedSeconds {
            for (s, n) in m { trackedSeconds[event, default: [:]][s, default: 0] += n }
        }
        latency.merge(o.latency)
        payload.merge(o.payload)
        for i in payloadBands.indices { payloadBands[i] += o.payloadBands[i] }
        devices.merge(o.devices)
    }

    /// The report's summary of the campaign named `name`.
    func campaign(_ name: String?) -> CampaignReport.Campaign {
        var c = CampaignReport.Campaign(campaign: name)
        for (provider, o) in byProvider {
            let p = PushProvider.stored(provider)
            c.byProvider[p.name, default: CampaignReport.Outcomes()].add(o)
            c.byPlatform[p.platformName, default: CampaignReport.Outcomes()].add(o)
            c.totals.add(o)
        }
        c.rejected = rejected
        for (stored, n) in display {
            guard let d = Display(stored: (UInt8(stored >> 8), UInt8(stored & 0xFF))) else { continue }
            c.display[d.outcome.name, default: 0] += n
            c.displayReasons[d.outcome.name + " " + d.reason.code, default: 0] += n
        }
        c.lint = lint
        c.lintSeverity = lintSeverity
        c.firstMs = firstMs
        c.lastMs = lastMs
        c.tracking = tracking
        c.uniqueDevices = devices.estimate
        c.uniqueDevicesEstimated = true
        var bands: [String: Int] = [:]
        for (i, n) in payloadBands.enumerated() where n > 0 { bands[CampaignReport.bands[i]] = n }
        c.payload = CampaignReport.Distribution(histogram: payload, bands: bands)
        c.latency = CampaignReport.Distribution(histogram: latency, bands: [:])
        c.timeline = CampaignReport.timeline(seconds: seconds.mapValues { ($0.sent, $0.accepted, $0.rejected) }, tracked: trackedSeconds)
        return c
    }

    // MARK: stored form

    func write(_ out: inout [UInt8]) {
        func text(_ s: String) {
            SummaryBytes.varint(UInt64(s.utf8.count), &out)
            out.append(contentsOf: s.utf8)
        }
        func counts(_ m: [String: Int]) {
            SummaryBytes.varint(UInt64(m.count), &out)
            for (k, v) in m {
                text(k)
                SummaryBytes.varint(UInt64(v), &out)
            }
        }
        SummaryBytes.varint(UInt64(byProvider.count), &out)
        for (p, o) in byProvider {
            out.append(p)
            SummaryBytes.varint(UInt64(o.sent), &out)
            SummaryBytes.varint(UInt64(o.accepted), &out)
            SummaryBytes.varint(UInt64(o.rejected), &out)
        }
        counts(rejected)
        SummaryBytes.varint(UInt64(display.count), &out)
        for (k, v) in display {
            SummaryBytes.varint(UInt64(k), &out)
            SummaryBytes.varint(UInt64(v), &out)
        }
        counts(lint)
        SummaryBytes.varint(UInt64(lintSeverity.count), &out)
        for (k, v) in lintSeverity {
            text(k)
            text(v)
        }
        SummaryBytes.varint(SummaryBytes.zigzag(firstMs), &out)
        SummaryBytes.varint(SummaryBytes.zigzag(lastMs), &out)
        SummaryBytes.varint(UInt64(seconds.count), &out)
        for (k, v) in seconds {
            SummaryBytes.varint(SummaryBytes.zigzag(k), &out)
            SummaryBytes.varint(UInt64(v.sent), &out)
            SummaryBytes.varint(UInt64(v.accepted), &out)
            SummaryBytes.varint(UInt64(v.rejected), &out)
        }
        SummaryBytes.varint(UInt64(tracking.count), &out)
        for (event, k) in tracking {
            text(event)
            for n in [k.fired, k.succeeded, k.failed, k.retried, k.attempts] { SummaryBytes.varint(UInt64(n), &out) }
        }
        SummaryBytes.varint(UInt64(trackedSeconds.count), &out)
        for (event, m) in trackedSeconds {
            text(event)
            SummaryBytes.varint(UInt64(m.count), &out)
            for (s, n) in m {
                SummaryBytes.varint(SummaryBytes.zigzag(s), &out)
                SummaryBytes.varint(UInt64(n), &out)
            }
        }
        latency.write(&out)
        payload.write(&out)
        for n in payloadBands { SummaryBytes.varint(UInt64(n), &out) }
        devices.write(&out)
    }

    static func read(_ r: inout SummaryBytes.Reader) -> CampaignDigest? {
        var d = CampaignDigest()
        // A collection's size is bounded by the bytes that would hold it; a counter is not (a
        // block's 4,096 requests are counted in a few bytes).
        let limit = UInt64(r.bytes.count)
        func size() -> Int? {
            let n = r.varint()
            return r.failed || n > limit ? nil : Int(n)
        }
        func count() -> Int? {
            let n = r.varint()
            return r.failed || n > UInt64(Int.max) ? nil : Int(n)
        }
        func text() -> String? { r.text(r.varint()) }
        func counts() -> [String: Int]? {
            guard let n = size() else { return nil }
            var m: [String: Int] = [:]
            for _ in 0..<n {
                guard let k = text(), let v = count() else { return nil }
                m[k] = v
            }
            return m
        }
        guard let providers = size() else { return nil }
        for _ in 0..<providers {
            guard let p = r.byte(), let s = count(), let a = count(), let j = count() else { return nil }
            d.byProvider[p] = CampaignReport.Outcomes(sent: s, accepted: a, rejected: j)
        }
        guard let rejected = counts(), let displays = size() else { return nil }
        d.rejected = rejected
        for _ in 0..<displays {
            let k = r.varint()
            guard let v = count(), k <= UInt64(UInt16.max) else { return nil }
            d.display[UInt16(k)] = v
        }
        guard let lint = counts(), let severities = size() else { return nil }
        d.lint = lint
        for _ in 0..<severities {
            guard let k = text(), let v = text() else { return nil }
            d.lintSeverity[k] = v
        }
        d.firstMs = SummaryBytes.unzigzag(r.varint())
        d.lastMs = SummaryBytes.unzigzag(r.varint())
        guard let secs = size() else { return nil }
        for _ in 0..<secs {
            let k = SummaryBytes.unzigzag(r.varint())
            guard let s = count(), let a = count(), let j = count() else { return nil }
            d.seconds[k] = Second(sent: s, accepted: a, rejected: j)
        }
        guard let events = size() else { return nil }
        for _ in 0..<events {
            guard let e = text(), let f = count(), let s = count(), let x = count(), let t = count(), let a = count() else { return nil }
            d.tracking[e] = CampaignReport.TrackingCounts(fired: f, succeeded: s, failed: x, retried: t, attempts: a)
        }
        guard let tracked = size() else { return nil }
        for _ in 0..<tracked {
            guard let e = text(), let n = size() else { return nil }
            var m: [Int64: Int] = [:]
            for _ in 0..<n {
                let s = SummaryBytes.unzigzag(r.varint())
                guard let v = count() else { return nil }
                m[s] = v
            }
            d.trackedSeconds[e] = m
        }
        guard let l = LogHistogram.read(&r), let p = LogHistogram.read(&r) else { return nil }
        d.latency = l
        d.payload = p
        for i in d.payloadBands.indices {
            guard let n = count() else { return nil }
            d.payloadBands[i] = n
        }
        guard let h = HyperLogLog.read(&r), !r.failed else { return nil }
        d.devices = h
        return d
    }
}

/// The digests of one block (or of any run of records), by campaign; at most `limit`
/// campaigns, past which it is `overflowed` and a report reads the block's records instead.
struct CampaignDigests: Sendable {
    /// Campaigns a block's digests hold at most (a run read for a report: any number).
    var limit = 64

    var names: [String?] = []
    var digests: [CampaignDigest] = []
    var index: [String?: Int] = [:]
    var overflowed = false

    /// Whether `i` holds anything (a campaign's first record may be before a report's `since`).
    func holds(_ i: Int) -> Bool { digests[i].requests > 0 || !digests[i].tracking.isEmpty }

    /// The digest of `campaign` (nil: the block holds too many campaigns).
    mutating func slot(_ campaign: String?) -> Int? {
        if let i = index[campaign] { return i }
        guard !overflowed else { return nil }
        guard digests.count < limit else {
            overflowed = true
            names = []
            digests = []
            index = [:]
            return nil
        }
        names.append(campaign)
        digests.append(CampaignDigest())
        index[campaign] = digests.count - 1
        return digests.count - 1
    }

    /// A tracking attempt of `campaign` (nothing when the block holds too many campaigns).
    mutating func add(_ a: TrackingAttribution.Attempt, campaign: String?) {
        guard let i = slot(campaign) else { return }
        digests[i].addTracking(event: a.event, outcome: a.outcome, attempt: a.attempt, events: a.events, atMs: a.atMs)
    }

    mutating func merge(_ o: CampaignDigests) {
        for (name, d) in zip(o.names, o.digests) {
            if let i = index[name] {
                digests[i].merge(d)
            } else {
                names.append(name)
                digests.append(d)
                index[name] = digests.count - 1
            }
        }
    }

    /// `varint count` then each: campaign (0: none, else length + 1 and its bytes) and its digest.
    var bytes: [UInt8] {
        var out: [UInt8] = []
        SummaryBytes.varint(UInt64(digests.count), &out)
        for (name, d) in zip(names, digests) {
            SummaryBytes.campaign(name, &out)
            d.write(&out)
        }
        return out
    }

    static func read(_ b: [UInt8], limit: Int = CampaignDigests().limit) -> CampaignDigests? {
        var r = SummaryBytes.Reader(bytes: b)
        var out = CampaignDigests()
        out.limit = limit
        let n = r.varint()
        guard !r.failed, n <= UInt64(out.limit) else { return nil }
        for _ in 0..<n {
            guard let name = r.campaign(), let d = CampaignDigest.read(&r), out.index[name] == nil else { return nil }
            out.names.append(name)
            out.digests.append(d)
            out.index[name] = out.digests.count - 1
        }
        return r.failed || r.at != b.count ? nil : out
    }
}

extension CampaignReport {
    /// A report from merged digests (`exact` false: unique devices estimated, percentiles from
    /// histograms), campaigns in the order of their first request.
    static func summarised(_ d: CampaignDigests, sinceMs: Int64, campaign only: String?, nowMs: Int64) -> CampaignReport {
        var all = CampaignDigest()
        var list: [Campaign] = []
        for (i, name) in d.names.enumerated() where d.holds(i) {
            all.merge(d.digests[i])
            if only == nil || name == only { list.append(d.digests[i].campaign(name)) }
        }
        list.sort { ($0.firstMs, $0.campaign ?? "") < ($1.firstMs, $1.campaign ?? "") }
        let total = only == nil ? all.campaign(nil) : (list.first ?? CampaignDigest().campaign(only))
        var r = CampaignReport(generatedAtMs: nowMs, sinceMs: sinceMs, campaigns: list, all: total)
        r.exact = false
        return r
    }
}
