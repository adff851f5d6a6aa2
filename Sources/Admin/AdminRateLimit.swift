import CSystem
import Transport

/// The admin API's own rate limit, so a flood of admin requests (a test polling in a tight
/// loop, a script gone wrong) cannot take the event loops from the push traffic: a token
/// bucket per event loop, each refilled at `perSecond / loops` with a burst of one second's
/// worth. Each loop touches only its own bucket: nothing is shared between loops. Past it,
/// requests get 429 in the admin error shape with `retry-after: 1`. `/healthz` and `/metrics`
/// are not limited (probes and scrapers must always get through).
final class AdminRateLimit: @unchecked Sendable { // each bucket is used by its own loop only
    final class Bucket {
        var tokens: Double
        var lastNs: UInt64 = 0
        init(tokens: Double) { self.tokens = tokens }
    }

    /// Requests per second over all loops (0: no limit).
    let perSecond: Int
    private let perLoop: Double
    private let buckets: [Bucket]

    init(perSecond: Int, loops: Int) {
        self.perSecond = perSecond
        let n = max(1, loops)
        perLoop = Double(perSecond) / Double(n)
        buckets = (0..<n).map { _ in Bucket(tokens: Double(perSecond) / Double(n)) }
    }

    /// Takes one request's token from `loop`'s bucket; false when it is empty.
    func admit(loop: Int) -> Bool {
        guard perSecond > 0 else { return true }
        let bucket = buckets[loop % buckets.count]
        let now = csys_monotonic_ns()
        if bucket.lastNs != 0 {
            let elapsed = Double(now &- bucket.lastNs) / 1e9
            bucket.tokens = min(perLoop, bucket.tokens + elapsed * perLoop)
        }
        bucket.lastNs = now
        guard bucket.tokens >= 1 else { return false }
        bucket.tokens -= 1
        return true
    }

    static func tooMany(_ perSecond: Int) -> Response {
        var response = AdminAPI.error(429, "more than \(perSecond) admin requests a second (--admin-rate); retry shortly")
        response.headers.add(name: "retry-after", value: "1")
        return response
    }
}
