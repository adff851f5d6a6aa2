import Observation
import PushCore
import Runtime
import Synchronization
import Transport

/// Request counters and latency histograms for `GET /metrics`, kept per event loop (each loop
/// writes only its own shard, so the lock is never contended on the request path).
public final class Metrics: MetricsSource {
    struct Key: Hashable {
        var provider: PushProvider
        var status: Int
        var reason: String
    }

    typealias Histogram = LatencyHistogram

    /// Its arrays are made by the first `record`, on the shard's loop: buffers allocated there
    /// come from that thread's heap arena, not next to another loop's (made together at start-up,
    /// two loops' counters would share cache lines, passed between their cores at every request).
    struct Shard {
        /// 200s with no reason, the common case, counted without hashing, per provider index
        /// (empty until the first record).
        var ok: [UInt64] = []
        var requests: [Key: UInt64] = [:]
        /// Per provider index (empty until the first record).
        var latency: [Histogram] = []
        mutating func materialize() {
            ok = [UInt64](repeating: 0, count: PushProvider.capacity)
            latency = (0..<PushProvider.capacity).map { _ in Histogram() }
        }
    }

    private final class Box: Sendable {
        let m = FutexLock(Shard())
        private let padding = CacheLinePadding()
    }
    private let shards: [Box]

    public init(loops: Int) { shards = (0...max(1, loops)).map { _ in Box() } }

    /// Counts one answer: its status and reason, and the time to it (injected delay included).
    public func record(loop: Int, provider: PushProvider, status: Int, reason: String, seconds: Double) {
        shards[min(loop, shards.count - 1)].m.withLock { shard in
            if shard.ok.isEmpty { shard.materialize() }
            if status == 200 && reason.isEmpty {
                shard.ok[provider.index] += 1
            } else {
                shard.requests[Key(provider: provider, status: status, reason: reason), default: 0] += 1
            }
            shard.latency[provider.index].observe(seconds)
        }
    }

    public func reset() { for s in shards { s.m.withLock { $0 = Shard() } } }

    /// Answers counted so far, every status (read once a second by the state log, to tell
    /// whether pushes changed anything since its last snapshot).
    public var requestCount: UInt64 {
        shards.reduce(0) { n, s in
            n &+ s.m.withLock { sh in sh.ok.reduce(0, &+) &+ sh.requests.values.reduce(0, &+) }
        }
    }

    /// `pushemu_requests_total` and `pushemu_request_duration_seconds`, summed over the shards.
    public func writeMetrics(_ m: inout MetricsText) {
        var requests: [Key: UInt64] = [:]
        var latency: [PushProvider: Histogram] = [:]
        for s in shards {
            s.m.withLock { sh in
                guard !sh.ok.isEmpty else { return }
                for (k, v) in sh.requests { requests[k, default: 0] += v }
                for provider in PushProvider.all {
                    let index = provider.index
                    if sh.ok[index] > 0 { requests[Key(provider: provider, status: 200, reason: ""), default: 0] += sh.ok[index] }
                    if sh.latency[index].count > 0 { latency[provider, default: Histogram()].merge(sh.latency[index]) }
                }
            }
        }
        m.family(
            "pushemu_requests_total", "counter",
            "Provider requests answered, by provider, HTTP status and reason (APNs reason or FCM errorCode).")
        for (k, v) in requests.sorted(by: {
            ($0.key.provider.name, $0.key.status, $0.key.reason) < ($1.key.provider.name, $1.key.status, $1.key.reason)
        }) {
            m.sample("pushemu_requests_total", [("provider", k.provider.name), ("status", "\(k.status)"), ("reason", k.reason)], v)
        }
        m.family("pushemu_request_duration_seconds", "histogram", "Time from a provider request to its answer, injected latency included.")
        m.histograms(
            "pushemu_request_duration_seconds", label: "provider",
            latency.sorted { $0.key.name < $1.key.name }.map { ($0.key.name, $0.value) })
    }
}
