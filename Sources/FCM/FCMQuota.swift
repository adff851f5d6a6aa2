import Synchronization

/// FCM's project send quota: a token bucket per project (default 600,000 messages per minute),
/// refilled continuously, so its one-minute windows are not aligned to clock minutes. Every
/// send request takes a token, whatever its outcome (FCM counts 4xx answers too).
public final class FCMQuota: Sendable {
    struct Bucket {
        var tokens: Double
        var lastMs: Int64
    }

    /// Messages per minute; 0 disables the quota.
    public let perMinute: Int
    private let buckets = Mutex<[String: Bucket]>([:])

    public init(perMinute: Int) { self.perMinute = perMinute }

    /// nil when the request may proceed; otherwise the seconds to wait (for Retry-After).
    public func take(project: String, nowMs: Int64) -> Int? {
        guard perMinute > 0 else { return nil }
        let capacity = Double(perMinute)
        let perMs = capacity / 60_000
        return buckets.withLock { b -> Int? in
            var bucket = b[project] ?? Bucket(tokens: capacity, lastMs: nowMs)
            bucket.tokens = min(capacity, bucket.tokens + Double(max(0, nowMs - bucket.lastMs)) * perMs)
            bucket.lastMs = nowMs
            defer { b[project] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return max(1, Int(((1 - bucket.tokens) / perMs / 1000).rounded(.up)))
        }
    }

    public func reset() { buckets.withLock { $0.removeAll() } }
}
