import Glibc
import PushCore

/// The answers a rule may give: APNs's reasons and FCM's error codes (the composition root
/// lists them from the gateways). A rule naming anything else is refused, with the nearest
/// name, unless its effect says `"custom": true`.
public struct FaultVocabulary: Sendable {
    public let reasons: [String]
    public let errorCodes: [String]

    public init(reasons: [String], errorCodes: [String]) {
        self.reasons = reasons
        self.errorCodes = errorCodes
    }

    /// No check (a rule read back from the state log was checked when it was made).
    public static let any = FaultVocabulary(reasons: [], errorCodes: [])

    var checks: Bool { !reasons.isEmpty || !errorCodes.isEmpty }

    /// Why `e` cannot be sent as it is, if it cannot: APNs's reasons for a rule of APNs (or of
    /// any provider), FCM's codes for one of FCM (or any); another gateway's rules are its own.
    func refusal(_ e: FaultEffect, provider: PushProvider?) -> String? {
        guard checks, !e.custom else { return nil }
        let checked: [(String?, [String], String, String)] = [
            (provider == nil || provider == .apns ? e.reason : nil, reasons, "reason", "APNs's reasons"),
            (provider == nil || provider == .fcm ? e.errorCode : nil, errorCodes, "errorCode", "FCM's error codes"),
        ]
        for (value, list, field, provider) in checked {
            guard let value, !list.isEmpty, !list.contains(value) else { continue }
            let hint = NearestName.suggest(value, in: list).map { " (did you mean \($0)?)" } ?? ""
            return "effect.\(field) '\(value)' is not one of \(provider)\(hint); to send it anyway, add \"custom\": true to the effect"
        }
        return nil
    }
}

/// Reads fault rules: the admin API's `{"match": {...}, "effect": {...}, "seed": N}`, a file
/// holding a list of them (`--faults`), and the `x-pushemu-fault` override header.
public enum FaultParser {
    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
        init(_ d: String) { description = d }
    }

    /// One rule from its JSON object text.
    public static func rule(_ json: [UInt8], id: String, nowMs: Int64, known: FaultVocabulary = .any) throws -> FaultRule {
        try json.withUnsafeBytes { raw in
            var t: [JSONToken] = []
            guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else {
                throw ParseError("a fault rule is a JSON object: {\"match\": {...}, \"effect\": {...}, \"seed\": N}")
            }
            return try rule(JSONView(bytes: raw, tokens: t), 0, id: id, nowMs: nowMs, known: known)
        }
    }

    /// Rules from a file's JSON: a list of rule objects (or `{"faults": [...]}`).
    public static func rules(_ json: [UInt8], nowMs: Int64, id: () -> String, known: FaultVocabulary = .any) throws -> [FaultRule] {
        try json.withUnsafeBytes { raw in
            var t: [JSONToken] = []
            // Room for every rule in force (about a dozen tokens each), and a bound on memory.
            var limits = JSONLimits()
            limits.maxTokens = 1 << 23
            if let e = JSONParser.parse(raw, into: &t, limits: limits) { throw ParseError("the faults file is not valid JSON: \(e)") }
            guard !t.isEmpty else { throw ParseError("the faults file is not valid JSON") }
            let v = JSONView(bytes: raw, tokens: t)
            var list = 0
            if t[0].kind == .object, let f = v.member(0, "faults") { list = f }
            guard v.tokens[list].kind == .array else { throw ParseError("the faults file holds a JSON list of rules") }
            var out: [FaultRule] = []
            var err: Error?
            v.forEachElement(list) { e in
                guard err == nil else { return }
                do { out.append(try rule(v, e, id: id(), nowMs: nowMs, known: known)) } catch { err = error }
            }
            if let err { throw err }
            return out
        }
    }

    static func rule(_ v: JSONView, _ obj: Int, id: String, nowMs: Int64, known: FaultVocabulary = .any) throws -> FaultRule {
        var r = try JSONObjectReader(v, obj, what: "a fault rule is a JSON object: {\"match\": {...}, \"effect\": {...}, \"seed\": N}")
        var match = FaultMatch()
        var matchJSON = "{}"
        if let i = r.value("match") {
            matchJSON = String(decoding: v.raw(i), as: UTF8.self)
            match = try parseMatch(v, i)
        }
        guard let e = r.value("effect") else { throw JSONObjectReader.Failure("effect is required: a fault rule needs an effect") }
        let effectJSON = String(decoding: v.raw(e), as: UTF8.self)
        let effect = try parseEffect(v, e)
        let seed = UInt64(try r.int("seed", in: 0...Int.max) ?? 0)
        _ = r.value("id") // the server's own (a rule read back)
        try r.finish()
        if let refusal = known.refusal(effect, provider: match.provider) { throw ParseError(refusal) }
        return FaultRule(id: id, match: match, effect: effect, seed: seed, createdAtMs: nowMs, matchJSON: matchJSON, effectJSON: effectJSON)
    }

    static func parseMatch(_ v: JSONView, _ o: Int) throws -> FaultMatch {
        var r = try JSONObjectReader(v, o, path: "match.")
        var m = FaultMatch()
        if let s = try r.string("provider") {
            guard let p = PushProvider.named(s) else { throw r.failure("provider", "must be \(PushProvider.namesForMessages)") }
            m.provider = p
        }
        if let t = try r.string("token") { m.tokens = [t] }
        if let list = try r.strings("tokens") { m.tokens = Set(list) }
        m.topic = try r.string("topic")
        m.project = try r.string("project") ?? r.string("environment")
        m.pathPrefix = try r.string("path")
        if let s = try r.string("route") {
            guard let route = RouteKind.named(s) else {
                throw r.failure("route", "must be " + RouteKind.allCases.map(\.name).joined(separator: ", "))
            }
            m.route = route
        }
        m.fleet = try r.string("fleet")
        m.label = try r.string("label")
        if let scope = try r.string("scope") { try applyScope(scope, to: &m, r) }
        if let h = try r.stringPairs("header") { m.headers = h.map { ($0.0.lowercased(), $0.1) } }
        m.percent = try r.double("percent", in: 0...100)
        m.every = try r.int("every", in: 1...1_000_000_000)
        m.first = try r.int("first", in: 0...1_000_000_000)
        for (names, label) in [(["after", "afterMs"], "after"), (["for", "forMs"], "for")] {
            for name in names {
                guard let i = r.value(name) else { continue }
                guard let d = duration(v, i) else {
                    throw r.failure(name, "must be milliseconds or a duration such as \"30s\" (at most ten years)")
                }
                if label == "after" { m.afterMs = d } else { m.forMs = d }
            }
        }
        try r.finish()
        return m
    }

    static func parseEffect(_ v: JSONView, _ o: Int) throws -> FaultEffect {
        var r = try JSONObjectReader(v, o, path: "effect.")
        var e = FaultEffect()
        if let n = try r.int("status", in: 100...599) { e.status = n }
        e.reason = try r.string("reason")
        e.errorCode = try r.string("errorCode")
        if let i = r.value("retryAfter") {
            guard let n = v.integer(i), n >= 0, n <= maxRetryAfter else {
                throw r.failure("retryAfter", "must be seconds (at most a year)")
            }
            e.retryAfter = n
        }
        for name in ["delayMs", "delay"] {
            guard let i = r.value(name) else { continue }
            if let d = duration(v, i, limit: maxDelayMs) {
                e.delay = .fixed(Double(d))
            } else if v.tokens[i].kind == .object {
                e.delay = try distribution(v, i)
            } else {
                throw r.failure(name, "must be milliseconds (at most an hour) or {\"dist\": ...}")
            }
        }
        if let i = r.value("goaway") {
            switch v.tokens[i].kind {
            case .string: e.goaway = v.string(i)
            case .true: e.goaway = ""
            case .false: break
            default: throw r.failure("goaway", "must be a reason or true")
            }
        }
        e.rst = try r.bool("rst") ?? false
        e.close = try r.bool("close") ?? false
        for name in ["stallMs", "stall"] {
            guard let i = r.value(name) else { continue }
            guard let d = duration(v, i, limit: maxDelayMs) else { throw r.failure(name, "must be milliseconds (at most an hour)") }
            e.stallMs = d
        }
        e.uninstall = try r.bool("uninstall") ?? false
        e.rotate = try r.bool("rotate") ?? false
        e.dropHandshake = try r.bool("dropHandshake") ?? false
        e.custom = try r.bool("custom") ?? false
        try r.finish()
        return e
    }

    /// A delay distribution; every parameter finite and within an hour (lognormal: `mu` at most
    /// ln of an hour, `sigma` at most 10), so no draw is anything but a finite delay.
    static func distribution(_ v: JSONView, _ o: Int) throws -> DelayDistribution {
        var dist: String?
        var nums: [String: Double] = [:]
        var bad: String?
        v.forEachMember(o) { k, val in
            if v.keyEquals(k, "dist") {
                dist = v.string(val)
            } else if let n = v.number(val), n.isFinite {
                nums[v.string(k)] = n
            } else {
                bad = "delay.\(v.string(k)) must be a finite number"
            }
        }
        if let bad { throw ParseError(bad) }
        let hour = Double(maxDelayMs)
        if let out = nums.first(where: { ["min", "max", "mean", "stddev", "ms", "value"].contains($0.key) && $0.value > hour }) {
            throw ParseError("delay.\(out.key) must be at most \(maxDelayMs) ms (an hour)")
        }
        if let mu = nums["mu"], mu > log(hour) || mu < -50 { throw ParseError("lognormal mu must be from -50 to ln(3600000) = 15.1") }
        if let sigma = nums["sigma"], sigma > 10 { throw ParseError("lognormal sigma must be at most 10") }
        switch dist {
        case "uniform"?:
            guard let a = nums["min"], let b = nums["max"], a >= 0, b >= a else { throw ParseError("uniform needs min <= max (ms)") }
            return .uniform(a, b)
        case "normal"?:
            guard let m = nums["mean"], let s = nums["stddev"], m >= 0, s >= 0 else {
                throw ParseError("normal needs mean and stddev (ms)")
            }
            return .normal(mean: m, stddev: s)
        case "lognormal"?:
            guard let mu = nums["mu"], let s = nums["sigma"], s >= 0 else { throw ParseError("lognormal needs mu and sigma (of ln ms)") }
            return .lognormal(mu: mu, sigma: s)
        case "fixed"?:
            guard let ms = nums["ms"] ?? nums["value"], ms >= 0 else { throw ParseError("fixed needs ms") }
            return .fixed(ms)
        default:
            throw ParseError("delay dist must be fixed, uniform, normal or lognormal")
        }
    }

    /// The longest duration a rule, a scenario or the override header may name (a window's
    /// start or length, a step's offset): ten years, in milliseconds. Longer ones are refused
    /// before any arithmetic (a time plus 2^63 ms traps).
    public static let maxDurationMs: Int64 = 10 * 365 * 86_400_000
    /// The longest delay or stall: an hour, in milliseconds (what `FaultEngine.send` carries out).
    static let maxDelayMs: Int64 = 3_600_000
    /// The largest `retryAfter`: a year, in seconds.
    static let maxRetryAfter = 31_536_000

    /// Milliseconds from a number or a string such as "250ms", "30s", "2m", at most `limit`.
    static func duration(_ v: JSONView, _ i: Int, limit: Int64 = maxDurationMs) -> Int64? {
        if let n = v.integer(i) { return n >= 0 && Int64(n) <= limit ? Int64(n) : nil }
        if v.tokens[i].kind == .string { return duration(v.string(i), limit: limit) }
        return nil
    }

    public static func duration(_ s: String, limit: Int64 = maxDurationMs) -> Int64? {
        var digits = s
        var scale: Double = 1
        if s.hasSuffix("ms") {
            digits = String(s.dropLast(2))
        } else if s.hasSuffix("s") {
            digits = String(s.dropLast())
            scale = 1000
        } else if s.hasSuffix("m") {
            digits = String(s.dropLast())
            scale = 60_000
        }
        // Compared as a Double first: a product past Int64's range must never be converted.
        guard let d = Double(digits), d >= 0, d.isFinite, d * scale <= Double(limit) else { return nil }
        return Int64(d * scale)
    }

    /// `status=503;reason=ServiceUnavailable;errorCode=UNAVAILABLE;retryAfter=5;delay=200ms;
    /// goaway=Shutdown;rst;close;stall=5s;uninstall`
    public static func overrideEffect(_ header: String) throws -> FaultEffect {
        var e = FaultEffect()
        for part in header.split(separator: ";") {
            // Empty sides kept: "=" or "=5" is a part with an empty name, never a missing one.
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map { String($0).trimmingCharacters() }
            let k = kv[0]
            let val = kv.count > 1 ? kv[1] : ""
            switch k {
            case "status":
                guard let n = Int(val), (100...599).contains(n) else { throw ParseError("status") }
                e.status = n
            case "reason": e.reason = val
            case "errorCode": e.errorCode = val
            case "retryAfter", "retry-after":
                guard let n = Int(val), n >= 0, n <= maxRetryAfter else { throw ParseError("retryAfter (seconds, at most a year)") }
                e.retryAfter = n
            case "delay":
                guard let d = duration(val, limit: maxDelayMs) else { throw ParseError("delay (at most an hour)") }
                e.delay = .fixed(Double(d))
            case "goaway": e.goaway = val
            case "rst": e.rst = true
            case "close": e.close = true
            case "stall":
                guard let d = duration(val, limit: maxDelayMs) else { throw ParseError("stall (at most an hour)") }
                e.stallMs = d
            case "uninstall": e.uninstall = true
            case "" where val.isEmpty: continue
            default: throw ParseError("unknown override '\(k)'")
            }
        }
        return e
    }
}

extension String {
    func trimmingCharacters() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

extension FaultParser {
    /// A match's `scope`: `team:TEAMID` (the APNs team whose credentials sent the push),
    /// `project:PROJECTID` (an FCM project) or `label:NAME` (devices with the label); it must not
    /// contradict the match's own provider, project or label.
    static func applyScope(_ text: String, to m: inout FaultMatch, _ r: JSONObjectReader) throws {
        let scope: PushScope
        do {
            scope = try PushScope.parse(text)
        } catch {
            throw r.failure("scope", error.problem)
        }
        switch scope {
        case .team(let value):
            guard m.provider == nil || m.provider == .apns else { throw r.failure("scope", "team: is for APNs pushes") }
            m.provider = .apns
            m.team = value
        case .project(let value):
            guard m.provider == nil || m.provider == .fcm, m.project == nil || m.project == value else {
                throw r.failure("scope", "project: is for FCM pushes, and names the match's project")
            }
            m.provider = .fcm
            m.project = value
        case .label(let value):
            guard m.label == nil || m.label == value else { throw r.failure("scope", "label: names the match's label") }
            m.label = value
        }
        m.scope = text
    }
}
