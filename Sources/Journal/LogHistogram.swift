/// Counts of non-negative values in logarithmic buckets: values below 64 exactly, larger ones in
/// 32 buckets per power of two (a bucket's values within about 3% of one another). Mergeable by
/// adding counts; the minimum, maximum and sum are kept exactly. A campaign report's latency and
/// payload-size percentiles come from these (`CampaignDigest`).
struct LogHistogram: Sendable, Equatable {
    static let subBits = 5
    static let exactBelow: UInt64 = 1 << (subBits + 1)

    private(set) var counts: [UInt16: UInt64] = [:]
    private(set) var total: UInt64 = 0
    private(set) var min: UInt64 = .max
    private(set) var max: UInt64 = 0
    private(set) var sum: UInt64 = 0

    static func bucket(_ v: UInt64) -> UInt16 {
        guard v >= exactBelow else { return UInt16(v) }
        let e = UInt64(63 - v.leadingZeroBitCount) // the leading bit's position, at least subBits + 1
        let sub = (v >> (e - UInt64(subBits))) & ((1 << UInt64(subBits)) - 1)
        return UInt16(exactBelow + (e - UInt64(subBits) - 1) * (1 << UInt64(subBits)) + sub)
    }

    /// The smallest value of bucket `b`.
    static func lowerBound(_ b: UInt16) -> UInt64 {
        let b = UInt64(b)
        guard b >= exactBelow else { return b }
        let k = b - exactBelow
        let e = k >> UInt64(subBits) + UInt64(subBits) + 1
        let sub = k & ((1 << UInt64(subBits)) - 1)
        return (1 << e) | (sub << (e - UInt64(subBits)))
    }

    mutating func add(_ v: UInt64, count n: UInt64 = 1) {
        counts[LogHistogram.bucket(v), default: 0] &+= n
        total &+= n
        min = Swift.min(min, v)
        max = Swift.max(max, v)
        sum &+= v &* n
    }

    mutating func merge(_ o: LogHistogram) {
        guard o.total > 0 else { return }
        for (b, n) in o.counts { counts[b, default: 0] &+= n }
        total &+= o.total
        min = Swift.min(min, o.min)
        max = Swift.max(max, o.max)
        sum &+= o.sum
    }

    /// The value at percentile `p` (nearest rank), as its bucket's smallest value within [min, max]; 0 when empty.
    func percentile(_ p: Double) -> UInt64 {
        guard total > 0 else { return 0 }
        let rank = Swift.max(1, UInt64((p / 100 * Double(total)).rounded(.up)))
        var seen: UInt64 = 0
        for b in counts.keys.sorted() {
            seen += counts[b]!
            if seen >= rank { return Swift.min(max, Swift.max(min, LogHistogram.lowerBound(b))) }
        }
        return max
    }

    // MARK: stored form

    func write(_ out: inout [UInt8]) {
        SummaryBytes.varint(UInt64(counts.count), &out)
        guard !counts.isEmpty else { return }
        SummaryBytes.varint(min, &out)
        SummaryBytes.varint(max, &out)
        SummaryBytes.varint(sum, &out)
        for (b, n) in counts {
            SummaryBytes.varint(UInt64(b), &out)
            SummaryBytes.varint(n, &out)
        }
    }

    static func read(_ r: inout SummaryBytes.Reader) -> LogHistogram? {
        var h = LogHistogram()
        let n = r.varint()
        guard !r.failed, n <= 1 << 16 else { return nil }
        guard n > 0 else { return h }
        h.min = r.varint()
        h.max = r.varint()
        h.sum = r.varint()
        for _ in 0..<n {
            let b = r.varint()
            let c = r.varint()
            guard !r.failed, b <= UInt64(UInt16.max) else { return nil }
            h.counts[UInt16(b), default: 0] &+= c
            h.total &+= c
        }
        return r.failed ? nil : h
    }
}
