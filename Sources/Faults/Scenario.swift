import PushCore
import Runtime
import Synchronization
import Transport

/// A timeline of rules switched on and off at offsets from its start:
/// `{"name": "...", "steps": [{"at": "30s", "for": "10s", "match": {...}, "effect": {...}}, ...]}`.
/// Each step becomes a rule whose window is [start + at, start + at + for) (open-ended without
/// `for`), so steps take effect at their planned instant, to the millisecond, on the next request.
public struct Scenario: Sendable {
    public struct Step: Sendable {
        public let atMs: Int64
        public let forMs: Int64?
        public let rule: FaultRule
    }

    public let id: String
    public let name: String
    public let startMs: Int64
    public let steps: [Step]
    /// Kept in the state log (false: from `--scenario` at start).
    public var persistent = true

    public static func parse(
        _ json: [UInt8], id: String, nowMs: Int64, ruleID: () -> String, known: FaultVocabulary = .any
    ) throws -> Scenario {
        try JSONObjectReader.read(
            json, example: #"{"steps": [{"at": "30s", "for": "10s", "match": {...}, "effect": {...}}]}"#
        ) { r in
            let name = try r.string("name") ?? id
            guard let list = r.value("steps") else { throw JSONObjectReader.Failure("steps is required: a scenario needs steps") }
            guard r.view.tokens[list].kind == .array else { throw r.failure("steps", "must be a list of steps") }
            var steps: [Step] = []
            var failure: Error?
            var n = 0
            r.view.forEachElement(list) { s in
                guard failure == nil else { return }
                do { steps.append(try step(r.view, s, index: n, id: ruleID(), startMs: nowMs, known: known)) } catch { failure = error }
                n += 1
            }
            if let failure { throw failure }
            guard !steps.isEmpty else { throw r.failure("steps", "must hold at least one step") }
            return Scenario(id: id, name: name, startMs: nowMs, steps: steps)
        }
    }

    static func step(_ v: JSONView, _ o: Int, index: Int, id: String, startMs: Int64, known: FaultVocabulary = .any) throws -> Step {
        var r = try JSONObjectReader(v, o, path: "steps[\(index)].")
        guard let atI = r.value("at") else { throw r.failure("at", "is required (milliseconds or \"30s\")") }
        guard let at = FaultParser.duration(v, atI) else { throw r.failure("at", "must be milliseconds or a duration such as \"30s\"") }
        var forMs: Int64?
        if let f = r.value("for") {
            guard let d = FaultParser.duration(v, f) else { throw r.failure("for", "must be milliseconds or a duration such as \"10s\"") }
            forMs = d
        }
        guard let e = r.value("effect") else { throw r.failure("effect", "is required") }
        var match = FaultMatch()
        var matchJSON = "{}"
        if let m = r.value("match") {
            match = try FaultParser.parseMatch(v, m)
            matchJSON = String(decoding: v.raw(m), as: UTF8.self)
        }
        match.afterMs = at
        match.forMs = forMs
        let effect = try FaultParser.parseEffect(v, e)
        let seed = UInt64(try r.int("seed", in: 0...Int.max) ?? 0)
        try r.finish()
        if let refusal = known.refusal(effect, provider: match.provider) { throw FaultParser.ParseError(refusal) }
        let rule = FaultRule(
            id: id, match: match, effect: effect, seed: seed, createdAtMs: startMs,
            matchJSON: matchJSON, effectJSON: String(decoding: v.raw(e), as: UTF8.self), stepAtMs: at, stepForMs: forMs)
        return Step(atMs: at, forMs: forMs, rule: rule)
    }

    /// Progress as JSON: each step pending, active or done.
    public func json(nowMs: Int64) -> String {
        let elapsed = nowMs - startMs
        let list = steps.map { s -> String in
            let state = elapsed < s.atMs ? "pending" : (s.forMs.map { elapsed >= s.atMs + $0 } == true ? "done" : "active")
            return "{\"at\":\(s.atMs),\"for\":" + (s.forMs.map { String($0) } ?? "null")
                + ",\"state\":\"\(state)\",\"rule\":\"\(s.rule.id)\",\"fired\":\(s.rule.fired)}"
        }
        return "{\"id\":\"\(id)\",\"name\":" + JSONWriter.quote(name) + ",\"startedAt\":\(startMs),\"elapsedMs\":\(elapsed),\"steps\":["
            + list.joined(separator: ",") + "]}"
    }
}

/// Per-device-token rate limit (APNs answers 429 TooManyRequests to too many pushes for one
/// device): a token bucket per token, sharded by token hash.
public final class TokenRateLimiter: Sendable {
    public let perMinute: Int
    private final class Shard: Sendable { let m = FutexLock<[TokenKey: (tokens: Double, lastMs: Int64)]>([:]) }
    private let shards: [Shard]

    public init(perMinute: Int) {
        self.perMinute = perMinute
        shards = (0..<64).map { _ in Shard() }
    }

    /// True when this push is within the rate.
    public func allow(_ token: ArraySlice<UInt8>, nowMs: Int64) -> Bool {
        guard perMinute > 0 else { return true }
        let k = TokenKey(token)
        let cap = Double(perMinute)
        let perMs = cap / 60_000
        return shards[k.shard(shards.count)].m.withLock { m in
            var b = m[k] ?? (cap, nowMs)
            b.tokens = min(cap, b.tokens + Double(max(0, nowMs - b.lastMs)) * perMs)
            b.lastMs = nowMs
            let ok = b.tokens >= 1
            if ok { b.tokens -= 1 }
            if m.count > 1_000_000 / shards.count { m.removeAll(keepingCapacity: true) } // bounded
            m[k] = b
            return ok
        }
    }
}

/// The scenarios started, for the admin API and stats.
public final class ScenarioRegistry: Sendable {
    let list = FutexLock<[Scenario]>([])
    let next = Atomic<Int>(0)
    public init() {}

    public func newID() -> String { "scenario-\(next.add(1, ordering: .relaxed).newValue)" }

    /// Starts a scenario: its steps become rules of `engine` (both kept in its state log).
    public func add(_ s: Scenario, to engine: FaultEngine) throws(FaultEngine.TooManyRules) {
        try engine.add(scenario: s, to: self)
    }

    /// A scenario from the configuration (`--scenario`): not kept in the state log.
    public func addConfigured(_ s: Scenario, to engine: FaultEngine) {
        list.withLock { $0.append(s) }
        engine.addConfigured(s.steps.map(\.rule))
    }

    public var all: [Scenario] { list.withLock { $0 } }

    public func removeAll() { list.withLock { $0.removeAll() } }

    /// Drops the steps whose rules are gone (`present` says which are not), and the scenarios
    /// left with none: a scenario lasts as long as one of its steps' rules.
    func prune(present: (String) -> Bool) {
        list.withLock { list in
            list = list.compactMap { s in
                let steps = s.steps.filter { present($0.rule.id) }
                if steps.count == s.steps.count { return s }
                guard !steps.isEmpty else { return nil }
                var kept = Scenario(id: s.id, name: s.name, startMs: s.startMs, steps: steps)
                kept.persistent = s.persistent
                return kept
            }
        }
    }

    /// Ids made from now on follow `id` ("scenario-N").
    func noteID(_ id: String) {
        guard id.hasPrefix("scenario-"), let n = Int(id.dropFirst(9)) else { return }
        while true {
            let cur = next.load(ordering: .relaxed)
            if cur >= n || next.compareExchange(expected: cur, desired: n, ordering: .relaxed).exchanged { return }
        }
    }
}
