import Faults
import PushCore
import Runtime
import Transport

/// `/emulator/v1/faults` and `/emulator/v1/scenarios`.
struct FaultAdminAPI: Sendable {
    let engine: FaultEngine
    let scenarios: ScenarioRegistry

    func register(_ r: inout Router) {
        r.add(.post, "/emulator/v1/faults", maxBodySize: 256 * 1024) { ex in
            do {
                let body = ex.request.body
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
        r.add(.get, "/emulator/v1/faults") { ex in
            ex.respond(.json(200, JSONObjectWriter.list("faults", engine.all.map(\.json))))
        }
        r.add(.delete, "/emulator/v1/faults") { ex in
            engine.removeAll()
            ex.respond(.json(200, "{\"faults\":[]}"))
        }
        r.add([.get, .delete], "/emulator/v1/faults/{id}") { ex in
            let id = ex.parameter(0).utf8String
            guard let rule = engine.rule(id: id) else { return ex.respond(AdminAPI.error(404, "no fault \(id)")) }
            if ex.request.method == .delete { engine.remove(id: id) }
            ex.respond(.json(200, rule.json))
        }
        r.add(.post, "/emulator/v1/scenarios", maxBodySize: 256 * 1024) { ex in
            do {
                let s = try Scenario.parse(
                    ex.request.body, id: scenarios.newID(), nowMs: Clock.nowMs(), ruleID: { engine.newID() }, known: engine.vocabulary)
                try scenarios.add(s, to: engine)
                ex.respond(.json(201, s.json(nowMs: Clock.nowMs())))
            } catch {
                ex.respond(AdminAPI.error(400, "\(error)"))
            }
        }
        r.add(.get, "/emulator/v1/scenarios") { ex in
            let now = Clock.nowMs()
            ex.respond(.json(200, JSONObjectWriter.list("scenarios", scenarios.all.map { $0.json(nowMs: now) })))
        }
    }
}
