import Journal
import PushCore
import Runtime
import Synchronization
import Tracking
import Transport

/// Request counters and latency histograms for `GET /metrics`, kept per event loop (each loop
/// writes only its own shard, so the lock is never contended on the request path).
public final class Metrics: Sendable {
    struct Key: Hashable {
        var provider: PushProvider
        var status: Int
        var reason: String
    }

    typealias Histogram = TrackingLog.LatencyHistogram

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

    /// Seconds: 100 µs to 10 s.
    static let bounds = TrackingLog.LatencyHistogram.bounds

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

    /// The Prometheus text exposition (format 0.0.4).
    public func render(
        openConnections: Int, openStreams: Int, tracking: TrackingLog, queueDepth: Int, devices: Int, fleets: Int, fleetDevices: Int,
        notificationsKept: Int, notificationsEvicted: UInt64, faultRules: Int, faultsFired: UInt64,
        journal: Journal.Stats?
    ) -> String {
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
        var out = ""
        func help(_ name: String, _ type: String, _ text: String) { out += "# HELP \(name) \(text)\n# TYPE \(name) \(type)\n" }
        func label(_ v: String) -> String {
            var s = ""
            for c in v.unicodeScalars {
                switch c {
                case "\\": s += "\\\\"
                case "\"": s += "\\\""
                case "\n": s += "\\n"
                default: s.unicodeScalars.append(c)
                }
            }
            return s
        }
        func histogram(_ name: String, _ labelName: String, _ hs: [(String, Histogram)]) {
            for (l, h) in hs {
                let cumulative = h.cumulative
                for (i, b) in Metrics.bounds.enumerated() {
                    out += "\(name)_bucket{\(labelName)=\"\(label(l))\",le=\"\(b)\"} \(cumulative[i])\n"
                }
                out += "\(name)_bucket{\(labelName)=\"\(label(l))\",le=\"+Inf\"} \(h.count)\n"
                out += "\(name)_sum{\(labelName)=\"\(label(l))\"} \(h.sum)\n"
                out += "\(name)_count{\(labelName)=\"\(label(l))\"} \(h.count)\n"
            }
        }

        help(
            "pushemu_requests_total", "counter",
            "Provider requests answered, by provider, HTTP status and reason (APNs reason or FCM errorCode).")
        for (k, v) in requests.sorted(by: {
            ($0.key.provider.name, $0.key.status, $0.key.reason) < ($1.key.provider.name, $1.key.status, $1.key.reason)
        }) {
            out += "pushemu_requests_total{provider=\"\(k.provider.name)\",status=\"\(k.status)\",reason=\"\(label(k.reason))\"} \(v)\n"
        }
        help("pushemu_request_duration_seconds", "histogram", "Time from a provider request to its answer, injected latency included.")
        histogram(
            "pushemu_request_duration_seconds", "provider", latency.sorted { $0.key.name < $1.key.name }.map { ($0.key.name, $0.value) })
        help("pushemu_open_connections", "gauge", "Open client connections.")
        out += "pushemu_open_connections \(openConnections)\n"
        help("pushemu_open_streams", "gauge", "Open HTTP/2 streams (requests in progress on HTTP/2 connections).")
        out += "pushemu_open_streams \(openStreams)\n"

        let t = tracking.metrics
        help(
            "pushemu_tracking_attempts_total", "counter",
            "Tracking requests sent by simulated SDKs, by preset and outcome (succeeded, retrying, failed).")
        for (k, v) in t.attempts.sorted(by: { ($0.key.preset, $0.key.outcome) < ($1.key.preset, $1.key.outcome) }) {
            out += "pushemu_tracking_attempts_total{preset=\"\(label(k.preset))\",outcome=\"\(k.outcome)\"} \(v)\n"
        }
        help("pushemu_tracking_duration_seconds", "histogram", "Tracking request latency, by preset.")
        histogram("pushemu_tracking_duration_seconds", "preset", t.latency.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        let c = tracking.counters
        help("pushemu_tracking_dropped_total", "counter", "Tracking calls dropped because the queue was full.")
        out += "pushemu_tracking_dropped_total \(c.dropped)\n"
        help("pushemu_tracking_queue_depth", "gauge", "Tracking calls waiting or in flight.")
        out += "pushemu_tracking_queue_depth \(queueDepth)\n"
        help("pushemu_devices", "gauge", "Simulated devices held as records (registered, auto-created, deviated fleet members).")
        out += "pushemu_devices \(devices)\n"
        help("pushemu_fleets", "gauge", "Fleets created.")
        out += "pushemu_fleets \(fleets)\n"
        help("pushemu_fleet_devices", "gauge", "Devices in all fleets.")
        out += "pushemu_fleet_devices \(fleetDevices)\n"
        help("pushemu_notifications_kept", "gauge", "Accepted notifications kept for the admin API.")
        out += "pushemu_notifications_kept \(notificationsKept)\n"
        help("pushemu_notifications_evicted_total", "counter", "Accepted notifications evicted from the in-memory log.")
        out += "pushemu_notifications_evicted_total \(notificationsEvicted)\n"
        help("pushemu_fault_rules", "gauge", "Fault rules in force.")
        out += "pushemu_fault_rules \(faultRules)\n"
        help("pushemu_faults_fired_total", "counter", "Times fault rules fired.")
        out += "pushemu_faults_fired_total \(faultsFired)\n"
        guard let journal else { return out }
        help("pushemu_journal_queue_depth", "gauge", "Journal records waiting for the writer.")
        out += "pushemu_journal_queue_depth \(journal.queued)\n"
        help("pushemu_journal_records_total", "counter", "Journal records committed.")
        out += "pushemu_journal_records_total \(journal.committed)\n"
        help("pushemu_journal_commits_total", "counter", "Journal transactions (group commits).")
        out += "pushemu_journal_commits_total \(journal.batches)\n"
        help("pushemu_journal_last_batch_size", "gauge", "Records in the last group commit.")
        out += "pushemu_journal_last_batch_size \(journal.lastBatch)\n"
        help("pushemu_journal_last_commit_seconds", "gauge", "Duration of the last group commit (write and fsync).")
        out += "pushemu_journal_last_commit_seconds \(Double(journal.lastCommitUs) / 1e6)\n"
        help("pushemu_journal_dropped_total", "counter", "Journal records dropped because the queue was full (relaxed records only).")
        out += "pushemu_journal_dropped_total \(journal.dropped)\n"
        help("pushemu_journal_failed_commits_total", "counter", "Group commits, and strict write-ahead writes, that failed.")
        out += "pushemu_journal_failed_commits_total \(journal.failedCommits)\n"
        help(
            "pushemu_journal_failing", "gauge",
            "1 while the journal cannot store what it is given (a commit or write-ahead write failed and none succeeded since).")
        out += "pushemu_journal_failing \(journal.failing ? 1 : 0)\n"
        help(
            "pushemu_journal_withheld_answers_total", "counter",
            "Strict answers not acknowledged because their record could not be stored (answered 503).")
        out += "pushemu_journal_withheld_answers_total \(journal.withheldAnswers)\n"
        help(
            "pushemu_journal_awaiting_store_records", "gauge",
            "Answered strict records held in their write-ahead files because their commit failed (stored by the next that succeeds).")
        out += "pushemu_journal_awaiting_store_records \(journal.awaitingStore)\n"
        help("pushemu_journal_pruned_total", "counter", "Journal records removed by retention.")
        out += "pushemu_journal_pruned_total \(journal.pruned)\n"
        help("pushemu_journal_stored_records", "gauge", "Journal records stored, by kind.")
        out += "pushemu_journal_stored_records{kind=\"request\"} \(journal.storedRequests)\n"
        out += "pushemu_journal_stored_records{kind=\"tracking\"} \(journal.storedTracking)\n"
        func plain(_ name: String, _ bounds: [Double], _ counts: [UInt64], _ sum: String) {
            var c: UInt64 = 0
            for (i, b) in bounds.enumerated() {
                c += counts[i]
                out += "\(name)_bucket{le=\"\(b)\"} \(c)\n"
            }
            let total = counts.reduce(0, +)
            out += "\(name)_bucket{le=\"+Inf\"} \(total)\n\(name)_sum \(sum)\n\(name)_count \(total)\n"
        }
        help("pushemu_journal_commit_duration_seconds", "histogram", "Duration of group commits (write and fsync).")
        plain("pushemu_journal_commit_duration_seconds", Journal.commitBounds, journal.commitSeconds, String(journal.commitSecondsSum))
        help("pushemu_journal_batch_records", "histogram", "Records per group commit.")
        plain("pushemu_journal_batch_records", Journal.batchBounds, journal.batchRecords, String(journal.batchRecordsSum))
        return out
    }
}
