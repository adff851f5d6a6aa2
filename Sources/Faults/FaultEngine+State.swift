import PushCore
import Runtime
import State
import Transport

/// The fault engine as a store of the state log (`faults`): rules in their order, their counts,
/// and scenarios. A rule's match and effect are kept as the JSON they were given, and parsed
/// again when applied; counts are written at each checkpoint (once a second while they change,
/// and at every firing of a `first N` rule, so that N holds across a kill).
extension FaultEngine {
    enum Kind {
        static let rule = 1
        static let ruleRemoved = 2
        static let rulesCleared = 3
        static let counts = 4
        static let scenario = 5
    }

    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: Kind.rule, name: "rule",
                fields: [
                    FieldSchema(1, "id", .string), FieldSchema(2, "match", .json), FieldSchema(3, "effect", .json),
                    FieldSchema(4, "seed", .uint), FieldSchema(5, "createdAt", .int), FieldSchema(6, "stepAt", .int),
                    FieldSchema(7, "stepFor", .int), FieldSchema(8, "seen", .uint), FieldSchema(9, "fired", .uint),
                ]),
            RecordSchema(kind: Kind.ruleRemoved, name: "ruleRemoved", fields: [FieldSchema(1, "id", .string)]),
            RecordSchema(kind: Kind.rulesCleared, name: "rulesCleared", fields: []),
            RecordSchema(
                kind: Kind.counts, name: "counts",
                fields: [FieldSchema(1, "id", .string), FieldSchema(2, "seen", .uint), FieldSchema(3, "fired", .uint)]),
            RecordSchema(
                kind: Kind.scenario, name: "scenario",
                fields: [
                    FieldSchema(1, "id", .string), FieldSchema(2, "name", .string), FieldSchema(3, "startedAt", .int),
                    FieldSchema(
                        4, "steps", .message([FieldSchema(1, "at", .int), FieldSchema(2, "for", .int), FieldSchema(3, "rule", .string)]),
                        repeated: true),
                ]),
        ]
    }

    static func record(_ r: FaultRule, counts: Bool = false) -> [UInt8] {
        var w = StateWriter()
        w.string(1, r.id)
        w.bytes(2, Array(r.matchJSON.utf8))
        w.bytes(3, Array(r.effectJSON.utf8))
        if r.seed != 0 { w.uint(4, r.seed) }
        w.int(5, r.createdAtMs)
        if let at = r.stepAtMs { w.int(6, at) }
        if let f = r.stepForMs { w.int(7, f) }
        if counts {
            w.uint(8, r.seenCount)
            w.uint(9, r.fired)
        }
        return w.bytes
    }

    static func record(_ s: Scenario) -> [UInt8] {
        var w = StateWriter()
        w.string(1, s.id)
        w.string(2, s.name)
        w.int(3, s.startMs)
        for step in s.steps {
            w.message(4) { m in
                m.int(1, step.atMs)
                if let f = step.forMs { m.int(2, f) }
                m.string(3, step.rule.id)
            }
        }
        return w.bytes
    }

    /// Writes a rule's counts now (a `first N` rule fired: N must hold across a kill).
    func keepCounts(_ r: FaultRule) {
        guard r.persistent, changes.isLogging else { return }
        let (seen, fired) = (r.seenCount, r.fired)
        r.checkpointed.withLock { $0 = (seen, fired) }
        changes.emit(kind: Kind.counts, atMs: Clock.nowMs()) { w in
            w.string(1, r.id)
            w.uint(2, seen)
            w.uint(3, fired)
        }
        changes.writeNow()
    }

    /// Logs the counts of every rule whose counts moved since the last checkpoint.
    public func checkpoint() {
        guard changes.isLogging else { return }
        for r in all where r.persistent {
            let (seen, fired) = (r.seenCount, r.fired)
            let moved = r.checkpointed.withLock { c -> Bool in
                guard c.seen != seen || c.fired != fired else { return false }
                c = (seen, fired)
                return true
            }
            if moved {
                changes.emit(kind: Kind.counts, atMs: Clock.nowMs()) { w in
                    w.string(1, r.id)
                    w.uint(2, seen)
                    w.uint(3, fired)
                }
            }
        }
    }

    public func apply(_ record: RecordView) throws {
        guard record.version == 1 else { throw StateFormatError("faults record version \(record.version) is newer than this pushemu") }
        try record.withBody { raw in
            var r = StateReader(raw)
            switch record.kind {
            case Kind.rule:
                var id = ""
                var matchJSON = "{}"
                var effectJSON = "{}"
                var seed: UInt64 = 0
                var created: Int64 = 0
                var stepAt: Int64?
                var stepFor: Int64?
                var seen: UInt64?
                var fired: UInt64?
                while let f = try r.next() {
                    switch f {
                    case 1: id = try r.string()
                    case 2: matchJSON = try r.string()
                    case 3: effectJSON = try r.string()
                    case 4: seed = try r.uint()
                    case 5: created = try r.int()
                    case 6: stepAt = try r.int()
                    case 7: stepFor = try r.int()
                    case 8: seen = try r.uint()
                    case 9: fired = try r.uint()
                    default: try r.skip()
                    }
                }
                let rule = try FaultEngine.rule(
                    id: id, matchJSON: matchJSON, effectJSON: effectJSON, seed: seed, createdAtMs: created, stepAtMs: stepAt,
                    stepForMs: stepFor)
                let existing = self.rule(id: id)
                withRules { list in
                    if existing != nil, let i = list.firstIndex(where: { $0.id == id }) {
                        rule.seen.store(seen ?? list[i].seenCount, ordering: .relaxed)
                        rule.firedCount.store(fired ?? list[i].fired, ordering: .relaxed)
                        list[i] = rule
                    } else {
                        rule.seen.store(seen ?? 0, ordering: .relaxed)
                        rule.firedCount.store(fired ?? 0, ordering: .relaxed)
                        list.append(rule)
                    }
                    rule.checkpointed.withLock { $0 = (rule.seenCount, rule.fired) }
                }
                noteID(id)
            case Kind.ruleRemoved:
                var id = ""
                while let f = try r.next() { if f == 1 { id = try r.string() } else { try r.skip() } }
                withRules { $0.removeAll { $0.id == id } }
                pruneScenarios()
            case Kind.rulesCleared:
                withRules { $0.removeAll { $0.persistent } }
                pruneScenarios()
            case Kind.counts:
                var id = ""
                var seen: UInt64 = 0
                var fired: UInt64 = 0
                while let f = try r.next() {
                    switch f {
                    case 1: id = try r.string()
                    case 2: seen = try r.uint()
                    case 3: fired = try r.uint()
                    default: try r.skip()
                    }
                }
                if let rule = self.rule(id: id) {
                    rule.seen.store(seen, ordering: .relaxed)
                    rule.firedCount.store(fired, ordering: .relaxed)
                    rule.checkpointed.withLock { $0 = (seen, fired) }
                }
            case Kind.scenario:
                var id = ""
                var name = ""
                var started: Int64 = 0
                var steps: [(Int64, Int64?, String)] = []
                while let f = try r.next() {
                    switch f {
                    case 1: id = try r.string()
                    case 2: name = try r.string()
                    case 3: started = try r.int()
                    case 4:
                        var m = try r.message()
                        var at: Int64 = 0
                        var forMs: Int64?
                        var rule = ""
                        while let g = try m.next() {
                            switch g {
                            case 1: at = try m.int()
                            case 2: forMs = try m.int()
                            case 3: rule = try m.string()
                            default: try m.skip()
                            }
                        }
                        steps.append((at, forMs, rule))
                    default: try r.skip()
                    }
                }
                // Steps whose rules were removed since are gone (none left: so is the scenario).
                var made: [Scenario.Step] = []
                for (at, forMs, ruleID) in steps {
                    guard let rule = self.rule(id: ruleID) else { continue }
                    made.append(Scenario.Step(atMs: at, forMs: forMs, rule: rule))
                }
                guard !made.isEmpty else { break }
                let scenario = Scenario(id: id, name: name, startMs: started, steps: made)
                scenarios.list.withLock { list in
                    if let i = list.firstIndex(where: { $0.id == id }) { list[i] = scenario } else { list.append(scenario) }
                }
                scenarios.noteID(id)
            default:
                throw StateFormatError("faults has no record kind \(record.kind)")
            }
        }
    }

    /// A rule from its record's fields (the JSON it was given, parsed again).
    static func rule(
        id: String, matchJSON: String, effectJSON: String, seed: UInt64, createdAtMs: Int64, stepAtMs: Int64?, stepForMs: Int64?
    ) throws -> FaultRule {
        let text = "{\"match\":" + matchJSON + ",\"effect\":" + effectJSON + "}"
        let parsed: FaultRule
        do {
            parsed = try FaultParser.rule(Array(text.utf8), id: id, nowMs: createdAtMs)
        } catch {
            throw StateFormatError("rule \(id): \(error)")
        }
        var match = parsed.match
        if let stepAtMs {
            match.afterMs = stepAtMs
            match.forMs = stepForMs
        }
        return FaultRule(
            id: id, match: match, effect: parsed.effect, seed: seed, createdAtMs: createdAtMs, matchJSON: matchJSON, effectJSON: effectJSON,
            stepAtMs: stepAtMs, stepForMs: stepForMs)
    }

    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        for r in all where r.persistent {
            emit(ChangeRecord(store: stateName, kind: Kind.rule, body: FaultEngine.record(r, counts: true)))
        }
        for s in scenarios.all where s.persistent {
            emit(ChangeRecord(store: stateName, kind: Kind.scenario, body: FaultEngine.record(s)))
        }
    }

    public func reset(_ scope: ResetScope) {
        withRules { $0.removeAll() }
        scenarios.removeAll()
    }

    /// The kept rules and scenarios (not the configuration's).
    public func resetKept() {
        withRules { $0.removeAll { $0.persistent } }
        scenarios.list.withLock { $0.removeAll { $0.persistent } }
    }

    public func reserve(records: Int) { withRules { $0.reserveCapacity($0.count + records) } }

    public func addStats(to stats: inout StatsDocument) {
        let rules = all
        stats.add("faults", "rules", rules.count)
        stats.add("faults", "fired", rules.reduce(0) { $0 + $1.fired })
        let now = Clock.nowMs()
        stats.set("scenarios", json: "[" + scenarios.all.map { $0.json(nowMs: now) }.joined(separator: ",") + "]")
    }
}
