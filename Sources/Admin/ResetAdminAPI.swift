import Faults
import Fleet
import Journal
import Observation
import PushCore
import Runtime
import State
import Transport

/// `POST /emulator/v1/reset`: every store in the store registry back to empty, with one record
/// saying so in the state log, and the journal emptied; `?all=true` also drops the keys and
/// service accounts (see `ResetScope`). Answered once the journal is empty.
///
/// `?scope=team:…|project:…|label:…` forgets only that scope's: its notifications (the log's,
/// and the journal's as `DELETE /notifications` forgets them) and the fault rules made in it.
/// Devices, keys and the rest are left (they are not any one scope's).
struct ResetAdminAPI: AdminResource {
    let registry: StoreRegistry
    let stateLog: StateLog?
    let journal: Journal?
    let deletions: NotificationDeletions
    let faults: FaultEngine
    /// On a cluster node: a scoped reset is asked of every node (each forgets its own notifications).
    var clusterReads: ClusterReads? = nil

    func register(_ routes: inout RouterGroup) {
        let registry = self.registry
        let stateLog = self.stateLog
        let journal = self.journal
        let api = self
        routes.add(.post, "/reset", maxBodySize: 1024) { ex in
            let only: Scope?
            do { only = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            if let only {
                if let cluster = api.clusterReads, cluster.takes(ex) {
                    let deletions = api.deletions
                    // Recorded once every node has forgotten its own (a record that reached a
                    // node first would leave it nothing to count).
                    return cluster.reset(only, ex, recorded: { at in _ = deletions.resetScope(only, atMs: at) })
                }
                return api.reset(only, ex)
            }
            let scope: ResetScope = ex.request.queryParameter("all") == "true" ? .all : .state
            registry.reset(scope, log: stateLog, nowMs: Clock.nowMs())
            guard let journal else { return ex.respond(.json(200, "{\"reset\":true}")) }
            journal.reset { ex.respond(.json(200, "{\"reset\":true}")) }
        }
    }
}

extension ResetAdminAPI {
    /// Forgets `scope`'s notifications and rules. On a cluster, the node that took the request
    /// names the time (`at=`) every node resets the scope at.
    func reset(_ scope: Scope, _ ex: Exchange) {
        var atMs = Clock.nowMs()
        var record = true
        if ex.request.headers.first(ClusterReads.localHeader) != nil, let at = ex.request.queryParameter("at"),
            let ms = Int64(at), ms > 0, ms <= atMs + 60_000
        {
            atMs = ms
            record = false // the node that asked records it
        }
        let (outcome, removed) = deletions.resetScope(scope, atMs: atMs, record: record)
        guard outcome == .kept else {
            return ex.respond(
                AdminAPI.error(409, "\(NotificationDeletions.scopeCapacity) scopes' resets are kept already: POST /emulator/v1/reset"))
        }
        var rules = 0
        for rule in faults.all where rule.match.scope == scope.text {
            faults.remove(id: rule.id)
            rules += 1
        }
        var out = JSONObjectWriter()
        out.add("reset", true)
        out.add("scope", scope.text)
        out.add("notifications", removed)
        out.add("faults", rules)
        ex.respond(.json(200, out.text))
    }
}
