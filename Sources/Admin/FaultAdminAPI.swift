import Faults
import PushCore
import Runtime
import Transport

/// `/emulator/v1/faults` and `/emulator/v1/scenarios`.
struct FaultAdminAPI: AdminResource {
    let engine: FaultEngine
    let scenarios: ScenarioRegistry

    func register(_ routes: inout RouterGroup) {
        routes.add(.post, "/faults", maxBodySize: 256 * 1024) { ex in
            do {
                let scope = try Scope.of(ex.request)
                let body = try scope.map { try FaultAdminAPI.scoped(Array(ex.request.body), $0) } ?? Array(ex.request.body)
                // One rule, or a list of them.
                if body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == UInt8(ascii: "[") {
                    let list = try FaultParser.rules(body, nowMs: Clock.nowMs(), id: { engine.newID() }, known: engine.vocabulary)
                    try engine.add(list)
                    return ex.respond(.json(201, JSONObjectWriter.list("faults", list.map(\.json))))
                }
                let rule = try FaultParser.rule(body, id: engine.newID(), nowMs: Clock.nowMs(), known: engine.vocabulary)
                try engine.add(rule)
                ex.respond(.json(201, rule.json))
            } catch {
                ex.respond(AdminAPI.error(400, "\(error)"))
            }
        }
        routes.add(.get, "/faults") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            let rules = engine.all.filter { scope == nil || $0.match.scope == scope?.text }
            ex.respond(.json(200, JSONObjectWriter.list("faults", rules.map(engine.json))))
        }
        routes.add(.delete, "/faults") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            if let scope {
                // Only the rules made in that scope.
                for rule in engine.all where rule.match.scope == scope.text { engine.remove(id: rule.id) }
            } else {
                engine.removeAll()
            }
            ex.respond(.json(200, "{\"faults\":[]}"))
        }
        routes.add([.get, .delete], "/faults/{id}") { ex in
            let id = ex.parameter("id").utf8String
            guard let rule = engine.rule(id: id) else { return ex.respond(AdminAPI.error(404, "no fault \(id)")) }
            if ex.request.method == .delete { engine.remove(id: id) }
            ex.respond(.json(200, engine.json(rule)))
        }
        routes.add(.post, "/scenarios", maxBodySize: 256 * 1024) { ex in
            do {
                // With `?scope=`, every step's rule is made in the scope.
                let scope = try Scope.of(ex.request)
                let body =
                    try scope.map { try FaultAdminAPI.scoped(Array(ex.request.body), $0, rules: FaultAdminAPI.stepRules) }
                    ?? Array(ex.request.body)
                let s = try Scenario.parse(
                    body, id: engine.newScenarioID(), nowMs: Clock.nowMs(), ruleID: { engine.newID() }, known: engine.vocabulary)
                try scenarios.add(s, to: engine)
                ex.respond(.json(201, s.json(nowMs: Clock.nowMs())))
            } catch {
                ex.respond(AdminAPI.error(400, "\(error)"))
            }
        }
        routes.add(.get, "/scenarios") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            let now = Clock.nowMs()
            // A scope's scenarios: those whose every step is a rule made in it.
            let list = scenarios.all.filter { s in scope == nil || s.steps.allSatisfy { $0.rule.match.scope == scope?.text } }
            ex.respond(.json(200, JSONObjectWriter.list("scenarios", list.map { $0.json(nowMs: now) })))
        }
    }
}

extension FaultAdminAPI {
    /// A rule's body (or a list's) with `scope` put in each rule's match (`?scope=` on the POST);
    /// a match that names a scope of its own must name the same one.
    /// `rules` finds the rules' objects in the body (by default: the body, or its elements).
    static func scoped(_ body: [UInt8], _ scope: Scope, rules find: (JSONView) -> [Int] = FaultAdminAPI.bodyRules) throws -> [UInt8] {
        try body.withUnsafeBytes { raw throws -> [UInt8] in
            var t: [JSONToken] = []
            if let e = JSONParser.parse(raw, into: &t) { throw NotificationQuery.QueryError(description: "the body is not JSON: \(e)") }
            let v = JSONView(bytes: raw, tokens: t)
            let rules = find(v)
            // Insertions at byte offsets, made back to front.
            var inserts: [(Int, String)] = []
            let member = "\"scope\":" + JSONWriter.quote(scope.text)
            for r in rules where v.tokens[r].kind == .object {
                if let m = v.member(r, "match"), v.tokens[m].kind == .object {
                    if let own = v.member(m, "scope") {
                        guard v.string(own) == scope.text else {
                            throw NotificationQuery.QueryError(
                                description: "the rule's match names scope \(v.string(own)), not \(scope.text)")
                        }
                        continue
                    }
                    let open = v.raw(m).baseAddress! - raw.baseAddress! + 1
                    inserts.append((open, member + (hasMembers(v, m) ? "," : "")))
                } else {
                    let open = v.raw(r).baseAddress! - raw.baseAddress! + 1
                    inserts.append((open, "\"match\":{" + member + "}" + (hasMembers(v, r) ? "," : "")))
                }
            }
            var out = Array(raw)
            for (at, text) in inserts.sorted(by: { $0.0 > $1.0 }) { out.insert(contentsOf: Array(text.utf8), at: at) }
            return out
        }
    }

    /// A rule body's rules: the body, or each element of a list.
    static func bodyRules(_ v: JSONView) -> [Int] {
        var rules: [Int] = []
        if v.tokens.first?.kind == .array { v.forEachElement(0) { rules.append($0) } } else { rules = [0] }
        return rules
    }

    /// A scenario body's rules: its steps (each has its own `match`).
    static func stepRules(_ v: JSONView) -> [Int] {
        var rules: [Int] = []
        guard v.tokens.first?.kind == .object, let steps = v.member(0, "steps"), v.tokens[steps].kind == .array else { return [] }
        v.forEachElement(steps) { rules.append($0) }
        return rules
    }

    static func hasMembers(_ v: JSONView, _ object: Int) -> Bool {
        var any = false
        v.forEachMember(object) { _, _ in any = true }
        return any
    }
}
