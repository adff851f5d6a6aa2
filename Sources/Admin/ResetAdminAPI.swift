import Journal
import PushCore
import Runtime
import State
import Transport

/// `POST /emulator/v1/reset`: every store in the store registry back to empty, with one record
/// saying so in the state log, and the journal emptied; `?all=true` also drops the keys and
/// service accounts (see `ResetScope`). Answered once the journal is empty.
struct ResetAdminAPI: AdminResource {
    let registry: StoreRegistry
    let stateLog: StateLog?
    let journal: Journal?

    func register(_ routes: inout RouterGroup) {
        let registry = self.registry
        let stateLog = self.stateLog
        let journal = self.journal
        routes.add(.post, "/reset", maxBodySize: 1024) { ex in
            let scope: ResetScope = ex.request.queryParameter("all") == "true" ? .all : .state
            registry.reset(scope, log: stateLog, nowMs: Clock.nowMs())
            guard let journal else { return ex.respond(.json(200, "{\"reset\":true}")) }
            journal.reset { ex.respond(.json(200, "{\"reset\":true}")) }
        }
    }
}
