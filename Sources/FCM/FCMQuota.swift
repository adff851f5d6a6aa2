import Runtime
import Synchronization
import Transport

/// FCM's project send quota: a token bucket per project (default 600,000 messages per minute),
/// refilled continuously, so its one-minute windows are not aligned to clock minutes. Every
/// send request takes a token, whatever its outcome (FCM counts 4xx answers too).
///
/// The buckets are shared by every event loop. So that a send does not take a lock shared
/// across loops, a connection takes its project's tokens a few at a time into its own `Lease`
/// and spends them there (`take(_:project:nowMs:)`); what a lease still holds when its
/// connection closes goes back to the bucket. A lease takes `leaseSize` tokens: one (every send
/// goes to the bucket, exactly as without leases) for quotas under 200,000 a minute, so a test's
/// small quota is counted exactly; at most 64, and a 200,000th of the quota, above that (FCM's
/// default 600,000 leases 3, so a thousand open connections hold at most 0.5% of a minute's
/// quota between their sends).
///
/// On a cluster node the buckets hold this node's `share` of the quota (`setShare`), which the
/// cluster rebalances every second by each node's demand (`demand`: tokens taken and sends
/// refused). A share that shrinks cuts the buckets to the new capacity; one that grows adds no
/// tokens (they come with the faster refill), so the nodes together never hold more than
/// one quota's tokens, and never refill faster than the quota's rate.
public final class FCMQuota: Sendable {
    struct Bucket {
        var tokens: Double
        var lastMs: Int64
    }

    struct State {
        var buckets: [String: Bucket] = [:]
        /// This node's part of the quota (1 on its own).
        var share = 1.0
        /// Tokens taken and sends refused, ever.
        var demand = 0
    }

    /// Messages per minute; 0 disables the quota.
    public let perMinute: Int
    /// Tokens a connection's lease takes from its project's bucket at once.
    public let leaseSize: Int
    private let buckets = FutexLock(State())

    public init(perMinute: Int) {
        self.perMinute = perMinute
        leaseSize = min(64, max(1, perMinute / 200_000))
    }

    /// One connection's tokens for one project, confined to the connection's event loop.
    public final class Lease {
        var project: String = ""
        var tokens = 0
        /// The quota its tokens came from (set at the first lease), which gets them back.
        var quota: FCMQuota?
        public init() {}

        deinit {
            if tokens > 0, let quota { quota.giveBack(tokens, project: project) }
        }
    }

    /// A send's token for `project`, through its connection's lease: from the lease while it
    /// holds tokens for `project`, else a new lease of up to `leaseSize` from the bucket. nil
    /// when the request may proceed; otherwise the seconds to wait (for Retry-After).
    public func take(_ lease: Lease, project: String, nowMs: Int64) -> Int? {
        guard perMinute > 0 else { return nil }
        if lease.tokens > 0 {
            if lease.project == project {
                lease.tokens -= 1
                return nil
            }
            giveBack(lease.tokens, project: lease.project)
            lease.tokens = 0
        }
        let (granted, wait) = take(leaseSize, project: project, nowMs: nowMs)
        guard granted > 0 else { return wait }
        lease.quota = self
        if lease.project != project { lease.project = project }
        lease.tokens = granted - 1
        return nil
    }

    /// Takes up to `n` whole tokens from `project`'s bucket: how many, and when none could be
    /// taken, the seconds until one can.
    private func take(_ n: Int, project: String, nowMs: Int64) -> (granted: Int, wait: Int?) {
        buckets.withLock { s -> (Int, Int?) in
            let capacity = Double(perMinute) * s.share
            let perMs = capacity / 60_000
            var bucket = s.buckets[project] ?? Bucket(tokens: capacity, lastMs: nowMs)
            bucket.tokens = min(capacity, bucket.tokens + Double(max(0, nowMs - bucket.lastMs)) * perMs)
            bucket.lastMs = max(bucket.lastMs, nowMs)
            defer { s.buckets[project] = bucket }
            if bucket.tokens >= 1 {
                let granted = min(n, Int(bucket.tokens))
                bucket.tokens -= Double(granted)
                s.demand &+= granted
                return (granted, nil)
            }
            s.demand &+= 1
            return (0, max(1, Int(((1 - bucket.tokens) / perMs / 1000).rounded(.up))))
        }
    }

    /// Returns a closed connection's unspent tokens to `project`'s bucket.
    func giveBack(_ n: Int, project: String) {
        buckets.withLock { s in
            guard var bucket = s.buckets[project] else { return }
            bucket.tokens = min(Double(perMinute) * s.share, bucket.tokens + Double(n))
            s.buckets[project] = bucket
        }
    }

    /// Tokens taken and sends refused since the start (a cluster node's demand, read each second).
    public var demand: Int { buckets.withLock { $0.demand } }

    /// This node's part of the quota, from 0.01 to 1; a bucket holding more than its new
    /// capacity is cut to it.
    public func setShare(_ share: Double) {
        guard share.isFinite else { return }
        let new = min(1, max(0.01, share))
        buckets.withLock { s in
            let capacity = Double(perMinute) * new
            for key in s.buckets.keys where s.buckets[key]!.tokens > capacity { s.buckets[key]!.tokens = capacity }
            s.share = new
        }
    }

    /// This node's part of the quota.
    public var share: Double { buckets.withLock { $0.share } }

    public func reset() { buckets.withLock { $0.buckets.removeAll() } }
}
