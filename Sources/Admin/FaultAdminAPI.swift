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
        routes.add(.get, "/faults") { ex in
            ex.respond(.json(200, JSONObjectWriter.list("faults", engine.all.map(engine.json))))
        }
        routes.add(.delete, "/faults") { ex in
            engine.removeAll()
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
                let s = try Scenario.parse(
                    ex.request.body, id: engine.newScenarioID(), nowMs: Clock.nowMs(), ruleID: { engine.newID() }, known: engine.vocabulary)
                try scenarios.add(s, to: engine)
                ex.respond(.json(201, s.json(nowMs: Clock.nowMs())))
            } catch {
                ex.respond(AdminAPI.error(400, "\(error)"))
            }
        }
        routes.add(.get, "/scenarios") { ex in
            let now = Clock.nowMs()
            ex.respond(.json(200, JSONObjectWriter.list("scenarios", scenarios.all.map { $0.json(nowMs: now) })))
        }
    }
}
