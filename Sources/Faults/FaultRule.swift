import Glibc
import PushCore
import Runtime
import Synchronization
import Transport

/// A latency distribution, in milliseconds.
public enum DelayDistribution: Sendable, Equatable {
    case fixed(Double)
    case uniform(Double, Double)
    case normal(mean: Double, stddev: Double)
    case lognormal(mu: Double, sigma: Double)

    /// One value from the distribution (ms), from the rule's seeded random numbers.
    public func draw(_ r: inout FastRandom) -> Double {
        switch self {
        case .fixed(let v): return v
        case .uniform(let a, let b): return a + (b - a) * r.nextDouble()
        case .normal(let m, let s): return max(0, m + s * DelayDistribution.gaussian(&r))
        case .lognormal(let mu, let sigma): return DelayDistribution.exp(mu + sigma * DelayDistribution.gaussian(&r))
        }
    }

    static func gaussian(_ r: inout FastRandom) -> Double {
        // Box-Muller.
        let u1 = max(r.nextDouble(), 1e-12)
        let u2 = r.nextDouble()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }

    static func exp(_ x: Double) -> Double { Glibc.exp(x) }
}

/// What a rule matches. Unset fields match anything.
public struct FaultMatch: Sendable {
    /// Only requests to this provider.
    public var provider: PushProvider?
    /// Only pushes to one of these device tokens.
    public var tokens: Set<String>?
    /// Only pushes to this APNs topic or FCM topic.
    public var topic: String?
    /// FCM project, or APNs environment.
    public var project: String?
    var pathPrefix: String?
    /// Only requests on this kind of route (`send`, `broadcast`, `token`, `channels`).
    public var route: RouteKind?
    /// Lowercased header name -> exact value.
    public var headers: [(String, String)] = []
    /// Only pushes to members of this fleet (`fleet-N`).
    public var fleet: String?
    /// Only pushes to devices carrying this label.
    public var label: String?
    /// Only pushes sent with this APNs team's credentials.
    public var team: String?
    /// The `scope` the rule was made in (`team:…`, `project:…`, `label:…`), as given.
    public var scope: String?
    /// Selectors: a percentage (seeded), every Nth matching request, the first N, a time window
    /// (milliseconds after the rule was added).
    public var percent: Double?
    /// Every Nth matching request.
    public var every: Int?
    /// The first N matching requests only.
    public var first: Int?
    /// Not before this many ms after the rule was added.
    public var afterMs: Int64?
    /// For this many ms (after `afterMs`), then no more.
    public var forMs: Int64?
    /// A match for every request.
    public init() {}

    /// Whether the rule needs to know the device (fleet or label).
    var needsDevice: Bool { fleet != nil || label != nil }
}

/// What a rule does.
public struct FaultEffect: Sendable {
    /// The HTTP status to answer with (the provider's body for it).
    public var status: Int?
    /// APNs reason.
    public var reason: String?
    /// FCM errorCode.
    public var errorCode: String?
    /// A `Retry-After` header (seconds) on the answer.
    public var retryAfter: Int?
    /// Delay the answer by a value drawn from this distribution.
    public var delay: DelayDistribution?
    /// GOAWAY after the response: with `{"reason": R}` debug data (APNs style), or none when empty.
    public var goaway: String?
    /// Reset the stream (RST_STREAM) instead of answering.
    public var rst = false
    /// Close the connection after the answer.
    public var close = false
    /// Hold the response this long (a stalled server: clients time out).
    public var stallMs: Int64?
    /// Mark the device uninstalled (later pushes get the provider's unregistered error).
    public var uninstall = false
    /// Give the device a new token (the old one becomes unregistered).
    public var rotate = false
    /// Drop TLS connections as their handshake starts (selectors apply; request matches do not).
    public var dropHandshake = false
    /// The `reason` or `errorCode` is the sender's own, not one of the provider's (not checked).
    public var custom = false
    /// An effect that does nothing.
    public init() {}

    /// Whether it replaces the provider's answer (a status, reason or error code).
    public var answers: Bool { status != nil || reason != nil || errorCode != nil }
}

/// An effect that fired, held by reference. The request path hands it on (to the deferred
/// answer, `send`, device state changes); an optional `FaultEffect` value was copied and
/// destroyed field by field at each hand-off even when no fault applied (about 700
/// instructions per request, callgrind).
public final class FiredFault: Sendable {
    /// What the rule does.
    public let effect: FaultEffect
    /// The rule that fired ("override" for the override header's effect).
    public let ruleID: String
    /// The fired effect of rule `ruleID`.
    public init(_ effect: FaultEffect, ruleID: String = "override") {
        self.effect = effect
        self.ruleID = ruleID
    }
}

/// One fault rule, with its own deterministic selector state and counters.
public final class FaultRule: Sendable {
    /// The rule's id, as the admin API names it.
    public let id: String
    /// Which requests it applies to.
    public let match: FaultMatch
    /// What it does to them.
    public let effect: FaultEffect
    /// `effect` by reference (made once, handed on each time the rule fires).
    let firedEffect: FiredFault
    /// The seed of its percentage selector: the same seed picks the same requests.
    public let seed: UInt64
    /// When it was added (ms since the epoch); its time window counts from here.
    public let createdAtMs: Int64
    /// The rule's JSON as given (for the admin API).
    public let matchJSON: String
    /// The effect's JSON as given (for the admin API).
    public let effectJSON: String
    /// Kept in the state log (false: made from the configuration at each start: `--faults`,
    /// `--fcm-overload`, `--scenario`).
    public let persistent: Bool
    /// A scenario step's window (ms after `createdAtMs`), which its `matchJSON` does not hold.
    let stepAtMs: Int64?
    let stepForMs: Int64?
    let seen = Atomic<UInt64>(0)
    let firedCount = Atomic<UInt64>(0)
    /// A `first N` rule whose cluster-wide count passed N: it never fires again, so Redis is
    /// not asked any more.
    let clusterExhausted = Atomic<Bool>(false)
    /// Its selector counts requests (`first`, `every`): in a cluster the count is the cluster's.
    var countsRequests: Bool { match.first != nil || match.every != nil }
    /// Its name in the cluster's counts: the id and when it was made (an id a reset frees may
    /// name another rule later; that one counts from zero).
    var clusterKey: String { id + "@" + String(createdAtMs) }
    /// The counts last written to the state log (the checkpoint thread's alone).
    let checkpointed = FutexLock<(seen: UInt64, fired: UInt64)>((0, 0))
    // The match in bytes, prepared once: the request path compares bytes, never builds Strings.
    let provider: PushProvider?
    let project: String?
    /// Up to 16 tokens are compared in a row (two words each); more go through a set.
    let tokenList: [TokenKey]?
    let tokenKeys: Set<TokenKey>?
    let topicBytes: [UInt8]?
    let pathBytes: [UInt8]?
    let headerBytes: [([UInt8], [UInt8])]
    let needsDevice: Bool
    let fleet: String?
    let label: String?
    /// The time window (`after`, `for`), as instants: nil where it is open-ended.
    let windowOpensAtMs: Int64?
    let windowClosesAtMs: Int64?

    /// A rule as read from the admin API, `--faults` or a scenario step.
    public init(
        id: String, match: FaultMatch, effect: FaultEffect, seed: UInt64, createdAtMs: Int64, matchJSON: String, effectJSON: String,
        persistent: Bool = true, stepAtMs: Int64? = nil, stepForMs: Int64? = nil
    ) {
        self.id = id
        self.persistent = persistent
        self.stepAtMs = stepAtMs
        self.stepForMs = stepForMs
        self.match = match
        self.effect = effect
        firedEffect = FiredFault(effect, ruleID: id)
        self.seed = seed
        self.createdAtMs = createdAtMs
        self.matchJSON = matchJSON
        self.effectJSON = effectJSON
        provider = match.provider
        project = match.project
        needsDevice = match.needsDevice
        fleet = match.fleet
        label = match.label
        let keys = match.tokens.map { $0.map { TokenKey($0) } }
        tokenList = keys.flatMap { $0.count <= 16 ? $0 : nil }
        tokenKeys = keys.flatMap { $0.count > 16 ? Set($0) : nil }
        topicBytes = match.topic.map { Array($0.utf8) }
        pathBytes = match.pathPrefix.map { Array($0.utf8) }
        headerBytes = match.headers.map { (Array($0.0.utf8), Array($0.1.utf8)) }
        // Durations are bounded when parsed (no overflow), the sums saturate all the same.
        let opens = match.afterMs.map { createdAtMs.addingReportingOverflow($0) }.map { $0.overflow ? Int64.max : $0.partialValue }
        windowOpensAtMs = opens
        windowClosesAtMs = match.forMs.map { f in
            let (v, o) = (opens ?? createdAtMs).addingReportingOverflow(f)
            return o ? Int64.max : v
        }
    }

    /// How many times it has fired.
    public var fired: UInt64 { firedCount.load(ordering: .relaxed) }
    /// How many requests met its conditions (before its selectors).
    public var seenCount: UInt64 { seen.load(ordering: .relaxed) }

    /// The same rule made from the configuration (not kept in the state log).
    public func configured() -> FaultRule {
        FaultRule(
            id: id, match: match, effect: effect, seed: seed, createdAtMs: createdAtMs, matchJSON: matchJSON, effectJSON: effectJSON,
            persistent: false, stepAtMs: stepAtMs, stepForMs: stepForMs)
    }

    /// Applies the selectors to the n-th request that met the conditions (n from 1).
    func selects(_ n: UInt64, nowMs: Int64) -> Bool {
        if let a = match.afterMs, nowMs < createdAtMs + a { return false }
        if let f = match.forMs, nowMs >= createdAtMs + (match.afterMs ?? 0) + f { return false }
        if let first = match.first, n > UInt64(max(0, first)) { return false }
        if let every = match.every, every > 0, n % UInt64(every) != 0 { return false }
        if let p = match.percent {
            var r = FastRandom(seed: seed ^ (n &* 0x9E37_79B9_7F4A_7C15))
            _ = r.next()
            if r.nextDouble() * 100 >= p { return false }
        }
        return true
    }

    /// The rule as the admin API returns it, with its counts.
    public var json: String { json(seen: seen.load(ordering: .relaxed), fired: fired) }

    /// With the given counts (a cluster's).
    public func json(seen: UInt64, fired: UInt64) -> String {
        "{\"id\":\"\(id)\",\"match\":\(matchJSON),\"effect\":\(effectJSON),\"seed\":\(seed),\"createdAt\":\(createdAtMs),\"seen\":\(seen),\"fired\":\(fired)}"
    }
}
