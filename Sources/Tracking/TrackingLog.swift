import Observation
import PushCore
import Runtime
import Synchronization
import Transport

/// One tracking attempt and its outcome.
public struct TrackingAttempt: Sendable {
    /// Its place in the log, in the order attempts were recorded.
    public var sequence: UInt64 = 0
    /// What the SDK reported (receive, open, click, registration).
    public var event: TrackingEvent
    /// The tracking preset that made the call (`adobe-campaign`, `moengage`...).
    public var preset: String
    /// The device token the call was made for.
    public var token: String
    /// The id of the notification it reports on.
    public var notificationID: String
    /// The HTTP method of the call.
    public var method: String
    /// The URL called.
    public var url: String
    /// HTTP status, 0 when no response arrived.
    public var status: Int
    /// How long the call took (ms), until its answer or its error.
    public var latencyMs: Double
    /// The transport error (timeout, refused, ...), nil when a response arrived.
    public var error: String?
    /// 1 for the first try.
    public var attempt: Int
    /// "succeeded", "retrying" (a failed try that will be retried) or "failed" (final).
    public var outcome: String
    /// When the attempt ended (ms since the epoch).
    public var atMs: Int64
    /// Events a batched request carried (MoEngage, Braze).
    public var events: Int
    /// The device's platform, "ios" or "android" ("" when not known: read back from the journal).
    public var platform: String
    /// The campaign id of the notification reported on (nil: none, a registration, or not known).
    public var campaign: String?

    /// An attempt with every field given (the dispatcher's, and the journal's reading back).
    public init(
        sequence: UInt64 = 0, event: TrackingEvent, preset: String, token: String, notificationID: String, method: String,
        url: String, status: Int, latencyMs: Double, error: String?, attempt: Int, outcome: String, atMs: Int64, events: Int,
        platform: String = "", campaign: String? = nil
    ) {
        self.campaign = campaign
        self.sequence = sequence
        self.event = event
        self.preset = preset
        self.token = token
        self.notificationID = notificationID
        self.method = method
        self.url = url
        self.status = status
        self.latencyMs = latencyMs
        self.error = error
        self.attempt = attempt
        self.outcome = outcome
        self.atMs = atMs
        self.events = events
        self.platform = platform
    }

    /// The push provider of the device's platform (nil when not known).
    public var provider: PushProvider? {
        switch platform {
        case "ios": .apns
        case "android": .fcm
        default: nil
        }
    }

    /// The attempt as the admin API returns it (`GET /emulator/v1/tracking`).
    public var json: String {
        var s = "{\"event\":\"\(event.rawValue)\",\"preset\":" + JSONWriter.quote(preset) + ",\"token\":" + JSONWriter.quote(token)
        s += ",\"notificationId\":" + JSONWriter.quote(notificationID) + ",\"method\":\"\(method)\",\"url\":" + JSONWriter.quote(url)
        s += ",\"status\":\(status),\"latencyMs\":\((latencyMs * 1000).rounded() / 1000)"
        s += ",\"error\":" + (error.map(JSONWriter.quote) ?? "null")
        s += ",\"attempt\":\(attempt),\"outcome\":\"\(outcome)\",\"at\":\(atMs),\"events\":\(events)"
        if let provider { s += ",\"platform\":\"\(platform)\",\"provider\":\"\(provider.name)\"" }
        s += "}"
        return s
    }
}

/// The most recent tracking attempts (a ring), plus counters that never drop anything.
public final class TrackingLog: Sendable {
    /// Which attempts a query returns (`GET /emulator/v1/tracking?token=&event=&status=&limit=`).
    public struct Filter: Sendable {
        /// Only attempts for this device token.
        public var token: String?
        /// Only attempts for one of these tokens (a scope's devices).
        public var tokens: Set<String>?
        /// Only attempts reporting this event.
        public var event: TrackingEvent?
        /// An HTTP status ("200"), or an outcome ("succeeded", "failed", "retrying").
        public var status: String?
        /// At most this many, newest first.
        public var limit = 100
        /// Every attempt, the newest 100.
        public init() {}
    }

    /// Counts since the start (or the last reset), kept apart from the ring so nothing is lost to eviction.
    public struct Counters: Sendable, Equatable {
        /// Tracking calls scheduled by deliveries.
        public var scheduled: UInt64 = 0
        /// Deliveries whose device makes no call (no SDK, or opted out).
        public var skipped: UInt64 = 0
        /// Tries made, retries included.
        public var attempts: UInt64 = 0
        /// Calls that got a 2xx answer.
        public var succeeded: UInt64 = 0
        /// Calls that failed for good (retries spent, or an answer that is not retried).
        public var failed: UInt64 = 0
        /// Tries that failed and were tried again.
        public var retried: UInt64 = 0
        /// Calls dropped because the dispatcher's queue was full (`--tracking-queue`).
        public var dropped: UInt64 = 0
        /// Attempts pushed out of the ring by newer ones (`--tracking-log-size`).
        public var evicted: UInt64 = 0
    }

    /// Attempt counts by (preset, outcome) and latency by preset, for `/metrics`.
    public struct Metrics: Sendable {
        /// Attempts by preset and outcome.
        public var attempts: [PresetOutcome: UInt64] = [:]
        /// Call latency by preset.
        public var latency: [String: LatencyHistogram] = [:]
    }

    /// A (preset, outcome) pair, the key of `Metrics.attempts`.
    public struct PresetOutcome: Hashable, Sendable {
        /// The preset's name.
        public var preset: String
        /// "succeeded", "retrying" or "failed".
        public var outcome: String
        /// The pair as a tuple, for sorting.
        public var key: (String, String) { (preset, outcome) }
    }

    /// One preset's attempts by outcome (succeeded, retrying, failed) and latency.
    struct PresetStats {
        let preset: String
        var outcomes: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var latency = LatencyHistogram()
    }

    struct State {
        var ring: [TrackingAttempt] = []
        var next = 0
        var sequence: UInt64 = 0
        var counters = Counters()
        /// A handful of presets, searched linearly (no string hashing per attempt).
        var presets: [PresetStats] = []
    }

    let capacity: Int
    private let state = FutexLock(State())
    /// Counted by the submitting threads (event loops) without the lanes' lock.
    private let scheduled = Atomic<UInt64>(0)
    private let dropped = Atomic<UInt64>(0)
    /// Called with every attempt (the journal's hook), on the dispatcher's thread. Set before start.
    public nonisolated(unsafe) var onRecord: (@Sendable (TrackingAttempt) -> Void)?

    /// Each attempt goes to the event stream through it.
    let events: EventBus?

    /// A log keeping the newest `capacity` attempts, publishing each to `events` when given.
    public init(capacity: Int = 100_000, events: EventBus? = nil) {
        self.capacity = max(1, capacity)
        self.events = events
    }

    func record(_ a: TrackingAttempt) {
        onRecord?(a)
        if let events, events.wants(.tracking) {
            events.publish(EmulatorEvent(kind: .tracking, provider: a.provider, token: a.token, status: a.status, reason: a.outcome)) {
                $0.addMembers(ofObject: a.json)
            }
        }
        state.withLock { s in
            s.sequence += 1
            s.counters.attempts += 1
            let p: Int
            if let i = s.presets.firstIndex(where: { $0.preset == a.preset }) {
                p = i
            } else {
                s.presets.append(PresetStats(preset: a.preset))
                p = s.presets.count - 1
            }
            s.presets[p].latency.observe(a.latencyMs / 1000)
            switch a.outcome {
            case "succeeded":
                s.counters.succeeded += 1
                s.presets[p].outcomes.0 += 1
            case "retrying":
                s.counters.retried += 1
                s.presets[p].outcomes.1 += 1
            default:
                s.counters.failed += 1
                s.presets[p].outcomes.2 += 1
            }
            // Stored, then numbered in place (a numbered copy would cost a retain per field).
            if s.ring.count < capacity {
                s.ring.append(a)
                s.ring[s.ring.count - 1].sequence = s.sequence
            } else {
                s.ring[s.next] = a
                s.ring[s.next].sequence = s.sequence
                s.next = (s.next + 1) % capacity
                s.counters.evicted += 1
            }
        }
    }

    func countScheduled() { scheduled.add(1, ordering: .relaxed) }
    func countDropped(_ n: UInt64 = 1) { dropped.add(n, ordering: .relaxed) }

    /// The counts since the start (or the last reset).
    public var counters: Counters {
        var c = state.withLock { $0.counters }
        c.scheduled = scheduled.load(ordering: .relaxed)
        c.dropped = dropped.load(ordering: .relaxed)
        return c
    }

    /// Attempts and latency per preset, for `/metrics`.
    public var metrics: Metrics {
        state.withLock { s in
            var m = Metrics()
            for p in s.presets {
                for (outcome, n) in [("succeeded", p.outcomes.0), ("retrying", p.outcomes.1), ("failed", p.outcomes.2)] where n > 0 {
                    m.attempts[PresetOutcome(preset: p.preset, outcome: outcome)] = n
                }
                m.latency[p.preset] = p.latency
            }
            return m
        }
    }

    /// Matching attempts, oldest first, at most `limit` (the newest). The ring is walked from
    /// the newest and the walk stops at `limit` matches, each tested in place: the lanes record
    /// under the same lock, so a dashboard's `?limit=50` must not copy a 100,000-attempt ring
    /// (it took about 60 ms of a loop, with every lane waiting, in a campaign).
    public func query(_ f: Filter) -> [TrackingAttempt] {
        let limit = max(0, f.limit)
        // A status filter is an HTTP status as written ("200") or an outcome.
        let code = f.status.flatMap { st in Int(st).flatMap { String($0) == st ? $0 : nil } }
        return state.withLock { s in
            var out: [TrackingAttempt] = []
            let n = s.ring.count
            out.reserveCapacity(min(limit, n))
            var k = n
            while k > 0 && out.count < limit {
                k -= 1
                let i = (s.next + k) % n
                if let t = f.token, s.ring[i].token != t { continue }
                if let set = f.tokens, !set.contains(s.ring[i].token) { continue }
                if let e = f.event, s.ring[i].event != e { continue }
                if let st = f.status, s.ring[i].status != code && s.ring[i].outcome != st { continue }
                out.append(s.ring[i])
            }
            out.reverse()
            return out
        }
    }

    /// Forgets every attempt and zeroes the counts (`POST /emulator/v1/reset`).
    public func removeAll() {
        state.withLock { s in
            s.ring.removeAll()
            s.next = 0
            s.counters = Counters()
            s.presets.removeAll()
            scheduled.store(0, ordering: .relaxed)
            dropped.store(0, ordering: .relaxed)
        }
    }
}

extension TrackingLog: MetricsSource {
    /// The SDKs' tracking calls: attempts by preset and outcome, their latency, the drops.
    public func writeMetrics(_ m: inout MetricsText) {
        let t = metrics
        m.family(
            "pushemu_tracking_attempts_total", "counter",
            "Tracking requests sent by simulated SDKs, by preset and outcome (succeeded, retrying, failed).")
        for (k, v) in t.attempts.sorted(by: { ($0.key.preset, $0.key.outcome) < ($1.key.preset, $1.key.outcome) }) {
            m.sample("pushemu_tracking_attempts_total", [("preset", k.preset), ("outcome", k.outcome)], v)
        }
        m.family("pushemu_tracking_duration_seconds", "histogram", "Tracking request latency, by preset.")
        m.histograms("pushemu_tracking_duration_seconds", label: "preset", t.latency.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        m.single("pushemu_tracking_dropped_total", "counter", "Tracking calls dropped because the queue was full.", counters.dropped)
    }
}
