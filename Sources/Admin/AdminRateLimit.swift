import CSystem
import Runtime
import Transport

/// The admin API's own rate limit, so a flood of admin requests (a test polling in a tight
/// loop, a script gone wrong) cannot take the event loops from the push traffic: one token
/// bucket for the process, refilled at `perSecond` with a burst of one second's worth, whatever
/// the loop or connection a request arrives on. Admin requests are not the push path: the
/// bucket's short lock is taken by them only. Past it, requests get 429 in the admin error
/// shape with `retry-after: 1`. `/healthz` and `/metrics` are not limited (probes and scrapers
/// must always get through).
final class AdminRateLimit: Sendable {
    struct Bucket {
        var tokens: Double
        var lastNs: UInt64 = 0
    }

    /// Requests per second, for the whole process (0: no limit).
    let perSecond: Int
    private let bucket: FutexLock<Bucket>

    init(perSecond: Int) {
        self.perSecond = perSecond
        bucket = FutexLock(Bucket(tokens: Double(perSecond)))
    }

    /// Takes one request's token; false when the bucket is empty.
    func admit() -> Bool {
        guard perSecond > 0 else { return true }
        let rate = Double(perSecond)
        return bucket.withLock { b in
            // Read under the lock: a time read before it could be older than the last one kept.
            let now = csys_monotonic_ns()
            if b.lastNs != 0, now > b.lastNs {
                let elapsed = Double(now &- b.lastNs) / 1e9
                b.tokens = min(rate, b.tokens + elapsed * rate)
            }
            b.lastNs = now
            guard b.tokens >= 1 else { return false }
            b.tokens -= 1
            return true
        }
    }

    static func tooMany(_ perSecond: Int) -> Response {
        var response = AdminAPI.error(429, "more than \(perSecond) admin requests a second (--admin-rate); retry shortly")
        response.headers.add(name: "retry-after", value: "1")
        return response
    }
}
