import PushCore

/// A campaign dry run summarised from the journal: per campaign (the id the payload carries, or
/// none), what was sent and how it was answered, and what the devices' SDKs tracked.
public struct CampaignReport: Sendable {
    /// Requests sent and how they were answered.
    public struct Outcomes: Sendable {
        /// Requests received.
        public var sent = 0
        /// Requests answered 200.
        public var accepted = 0
        /// Requests answered with an error.
        public var rejected = 0

        mutating func add(_ o: Outcomes) {
            sent += o.sent
            accepted += o.accepted
            rejected += o.rejected
        }
    }

    /// Values a report summarises (payload sizes, answer latencies): every value, sorted (an
    /// exact report), or a `LogHistogram` (a report from the journal's summaries).
    public struct Distribution: Sendable {
        var sorted: [Int64] = []
        var histogram: LogHistogram?
        /// Counts in the report's payload bands (exact either way).
        var bands: [String: Int] = [:]

        init() {}
        init(sorted: [Int64], bands: [String: Int]) {
            self.sorted = sorted
            self.bands = bands
        }
        init(histogram: LogHistogram, bands: [String: Int]) {
            self.histogram = histogram
            self.bands = bands
        }

        var min: Int64 { histogram.map { $0.total == 0 ? 0 : Int64($0.min) } ?? sorted.first ?? 0 }
        var max: Int64 { histogram.map { Int64($0.max) } ?? sorted.last ?? 0 }
        var mean: Int64 {
            if let h = histogram { return h.total == 0 ? 0 : Int64(h.sum / h.total) }
            return sorted.isEmpty ? 0 : sorted.reduce(0, +) / Int64(sorted.count)
        }
        /// The value at percentile `p` (nearest rank; from a histogram, its bucket's smallest value).
        func percentile(_ p: Double) -> Int64 {
            if let h = histogram { return Int64(h.percentile(p)) }
            return sorted.percentile(p)
        }
    }

    /// One tracking event's calls (receive, open...).
    public struct TrackingCounts: Sendable {
        /// Events whose first attempt was made.
        public var fired = 0
        /// Events delivered (2xx), failed for good, and attempts that failed and were retried.
        public var succeeded = 0
        /// Events whose calls failed for good.
        public var failed = 0
        /// Attempts that failed and were tried again.
        public var retried = 0
        /// Every try made.
        public var attempts = 0
    }

    /// Counts per time bucket (sent, accepted, rejected; tracking events delivered by kind).
    public struct Timeline: Sendable {
        /// The start of the first bucket (ms since the epoch).
        public var startMs: Int64 = 0
        var bucketMs: Int64 = 1000
        /// Requests received per bucket.
        public var sent: [Int] = []
        /// Requests accepted per bucket.
        public var accepted: [Int] = []
        /// Requests rejected per bucket.
        public var rejected: [Int] = []
        /// Tracking events delivered per bucket, by event.
        public var tracked: [String: [Int]] = [:]
    }

    /// One campaign's summary.
    public struct Campaign: Sendable {
        /// nil: requests whose payload carries no campaign id (and tracking not matched to one).
        public var campaign: String?
        /// Requests and their answers, all providers together.
        public var totals = Outcomes()
        /// Rejections by APNs reason or FCM errorCode ("HTTP <status>" when the answer had none).
        public var rejected: [String: Int] = [:]
        /// Requests and answers per provider (`apns`, `fcm`).
        public var byProvider: [String: Outcomes] = [:]
        /// Requests and answers per platform (`ios`, `android`).
        public var byPlatform: [String: Outcomes] = [:]
        /// Distinct device tokens pushed to.
        public var uniqueDevices = 0
        /// Whether `uniqueDevices` is a HyperLogLog estimate (a report from summaries; standard
        /// error `HyperLogLog.standardError`) rather than a count.
        public var uniqueDevicesEstimated = false
        /// Payload sizes (bytes).
        var payload = Distribution()
        /// Answer latencies (microseconds).
        var latency = Distribution()
        /// Tracking calls per event.
        public var tracking: [String: TrackingCounts] = [:]
        /// Delivered notifications by display outcome ("shown", "quiet", "not-shown"), and by
        /// outcome and reason ("not-shown permission-denied").
        public var display: [String: Int] = [:]
        /// Delivered notifications by outcome and reason (`not-shown permission-denied`).
        public var displayReasons: [String: Int] = [:]
        /// SDK lint findings by code, and each code's severity.
        public var lint: [String: Int] = [:]
        /// Each lint code's severity.
        public var lintSeverity: [String: String] = [:]
        /// When its first request was received (ms since the epoch).
        public var firstMs: Int64 = .max
        /// When its last request was received (ms since the epoch).
        public var lastMs: Int64 = .min
        /// Its requests and tracking over time.
        public var timeline = Timeline()

        /// Delivered tracking events of `event` per accepted request (0 when nothing was accepted).
        public func rate(_ event: String) -> Double {
            totals.accepted == 0 ? 0 : Double(tracking[event]?.succeeded ?? 0) / Double(totals.accepted)
        }
    }

    var generatedAtMs: Int64
    /// Records before this were left out (ms since the epoch; 0: none).
    public var sinceMs: Int64
    /// Whether every record was read (false: merged from the journal's block summaries, with
    /// unique devices estimated and percentiles from histograms).
    public var exact = true
    /// One summary per campaign id, the requests without one included.
    public var campaigns: [Campaign]
    /// Every campaign together.
    public var all: Campaign

    /// Reads `entries` (in write order) into a report; `campaign`: only that one (nil: all).
    public static func build(
        sinceMs: Int64, campaign only: String?, nowMs: Int64,
        _ entries: ((JournalEntry) -> Bool) -> Void
    ) -> CampaignReport {
        var builders: [Builder] = []
        var index: [String?: Int] = [:]
        // A notification's campaign by its id, for the tracking attempts its devices made; an FCM
        // topic or condition send's device records share the first half of the send's id.
        var byNotification: [UUIDValue: Int32] = [:]
        var byFanOut: [UInt64: Int32] = [:]
        let total = Builder(campaign: nil)
        var unresolved: [TrackingRecord] = []
        func campaignIndex(_ t: TrackingRecord) -> Int? {
            let id = UUIDValue.parseCanonicalLowercase(Array(t.notificationID.utf8))
            return (id.flatMap { byNotification[$0] ?? byFanOut[$0.high] }).map(Int.init)
        }
        func builder(_ c: String?) -> Int {
            if let i = index[c] { return i }
            builders.append(Builder(campaign: c))
            index[c] = builders.count - 1
            return builders.count - 1
        }
        entries { e in
            switch e {
            case .request(let r):
                let i = builder(r.campaign)
                if let id = r.notificationID, let key = UUIDValue.parseCanonicalLowercase(Array(id.utf8)) {
                    byNotification[key] = Int32(i)
                    if r.provider == .fcm, r.topic != nil { byFanOut[key.high] = Int32(i) }
                }
                if only == nil || r.campaign == only { builders[i].add(r) }
                total.add(r)
            case .tracking(let t):
                // A tracking attempt can be committed before its request (the device fired while
                // the answer waited for the commit): resolved once everything is read.
                // Format 4 keeps the campaign with the attempt.
                if let c = t.campaign {
                    let i = builder(c)
                    if only == nil || c == only { builders[i].add(t) }
                    total.add(t)
                    return true
                }
                guard let i = campaignIndex(t) else {
                    // A registration names no notification: no campaign, nothing to wait for
                    // (a fleet's million registrations are not held until the end).
                    if t.notificationID.isEmpty {
                        let n = builder(nil)
                        if only == nil { builders[n].add(t) }
                        total.add(t)
                    } else {
                        unresolved.append(t)
                    }
                    return true
                }
                if only == nil || builders[i].c.campaign == only { builders[i].add(t) }
                total.add(t)
            }
            return true
        }
        for t in unresolved {
            let i = campaignIndex(t) ?? builder(nil)
            if only == nil || builders[i].c.campaign == only { builders[i].add(t) }
            total.add(t)
        }
        var list = builders.filter { $0.touched }.map { $0.finish() }
        if let only { list = list.filter { $0.campaign == only } }
        let all = only == nil ? total.finish() : (list.first ?? Builder(campaign: only).finish())
        return CampaignReport(generatedAtMs: nowMs, sinceMs: sinceMs, campaigns: list, all: all)
    }

    /// Accumulates one campaign.
    final class Builder {
        var c: Campaign
        var tokens = Set<UInt64>()
        var payloadSizes: [Int64] = []
        var latenciesUs: [Int64] = []
        var seconds: [Int64: (sent: Int, accepted: Int, rejected: Int)] = [:]
        var trackedSeconds: [String: [Int64: Int]] = [:]
        var touched = false

        init(campaign: String?) { c = Campaign(campaign: campaign) }

        func add(_ r: StoredRequest) {
            touched = true
            let ok = PushProvider.accepts(r.status)
            c.totals.sent += 1
            var p = c.byProvider[r.provider.name] ?? Outcomes()
            var f = c.byPlatform[r.provider.platformName] ?? Outcomes()
            p.sent += 1
            f.sent += 1
            if ok {
                c.totals.accepted += 1
                p.accepted += 1
                f.accepted += 1
            } else {
                c.totals.rejected += 1
                p.rejected += 1
                f.rejected += 1
                c.rejected[r.reason.isEmpty ? "HTTP \(r.status)" : r.reason, default: 0] += 1
            }
            c.byProvider[r.provider.name] = p
            c.byPlatform[r.provider.platformName] = f
            // A request that named no device (MissingDeviceToken, a topic send's own record) counts none.
            if !r.token.isEmpty { tokens.insert(CampaignReport.hash(r.token)) }
            if let d = r.display {
                c.display[d.outcome.name, default: 0] += 1
                c.displayReasons[d.outcome.name + " " + d.reason.code, default: 0] += 1
            }
            for f in r.lint {
                c.lint[f.code, default: 0] += 1
                c.lintSeverity[f.code] = f.severity.rawValue
            }
            payloadSizes.append(Int64(r.payloadSize))
            latenciesUs.append(r.latencyUs)
            c.firstMs = min(c.firstMs, r.atMs)
            c.lastMs = max(c.lastMs, r.atMs)
            let s = r.atMs / 1000
            var b = seconds[s] ?? (0, 0, 0)
            b.sent += 1
            if ok { b.accepted += 1 } else { b.rejected += 1 }
            seconds[s] = b
        }

        func add(_ t: TrackingRecord) {
            touched = true
            var k = c.tracking[t.event] ?? TrackingCounts()
            let n = max(1, t.events)
            k.attempts += 1
            if t.attempt <= 1 { k.fired += n }
            switch t.outcome {
            case "succeeded":
                k.succeeded += n
                trackedSeconds[t.event, default: [:]][t.atMs / 1000, default: 0] += n
            case "retrying": k.retried += 1
            default: k.failed += n
            }
            c.tracking[t.event] = k
        }

        func finish() -> Campaign {
            var out = c
            out.uniqueDevices = tokens.count
            var bands: [String: Int] = [:]
            for s in payloadSizes { bands[CampaignReport.band(Int(s)), default: 0] += 1 }
            out.payload = Distribution(sorted: payloadSizes.sorted(), bands: bands)
            out.latency = Distribution(sorted: latenciesUs.sorted(), bands: [:])
            out.timeline = CampaignReport.timeline(seconds: seconds, tracked: trackedSeconds)
            return out
        }
    }

    /// Per-second counts in at most 60 buckets over the span, whole seconds.
    static func timeline(seconds: [Int64: (sent: Int, accepted: Int, rejected: Int)], tracked trackedSeconds: [String: [Int64: Int]])
        -> Timeline
    {
        let secs = Array(seconds.keys) + trackedSeconds.values.flatMap(\.keys)
        guard let lo = secs.min(), let hi = secs.max() else { return Timeline() }
        let width = max(1, (hi - lo + 1 + 59) / 60)
        let n = Int((hi - lo) / width) + 1
        var t = Timeline(
            startMs: lo * 1000, bucketMs: width * 1000, sent: Array(repeating: 0, count: n),
            accepted: Array(repeating: 0, count: n), rejected: Array(repeating: 0, count: n))
        for (s, b) in seconds {
            let i = Int((s - lo) / width)
            t.sent[i] += b.sent
            t.accepted[i] += b.accepted
            t.rejected[i] += b.rejected
        }
        for (event, m) in trackedSeconds {
            var row = Array(repeating: 0, count: n)
            for (s, k) in m { row[Int((s - lo) / width)] += k }
            t.tracked[event] = row
        }
        return t
    }

    /// FNV-1a of a token (unique devices are counted by 64-bit hash: no string kept per device).
    static func hash(_ s: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in s.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }
}

extension Array where Element: BinaryInteger {
    /// The value at percentile `p` (0...100) of a sorted array (nearest rank); 0 when empty.
    func percentile(_ p: Double) -> Element {
        guard !isEmpty else { return 0 }
        let rank = Int((p / 100 * Double(count)).rounded(.up))
        return self[Swift.min(count - 1, Swift.max(0, rank - 1))]
    }
}
