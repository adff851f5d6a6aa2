import APNs
import FCM
import Fleet
import Observation
import PushCore
import Runtime
import Tracking
import Transport

/// `GET /emulator/v1/tracking?token=&event=&status=&limit=&wait=`: the tracking calls the
/// simulated devices' SDKs made (receive, open, register...), with their outcomes, newest
/// last; long-polls with `wait`. Completed from the journal once the in-memory log has
/// evicted anything.
struct TrackingAdminAPI: AdminResource {
    let tracking: TrackingLog
    /// Tracking attempts the in-memory log no longer holds come from here.
    let journal: JournalAdminAPI?
    /// For `scope=`: the scope's devices' tokens (see `Scope.tokens`).
    var scopeTokens: (@Sendable (Scope) -> Set<String>)? = nil
    /// On a cluster node: every node's tracking calls, merged.
    var clusterReads: ClusterReads? = nil

    func register(_ routes: inout RouterGroup) {
        routes.add(.get, "/tracking") { ex in
            var f = TrackingLog.Filter()
            let q = ex.request
            f.token = q.queryParameter("token").flatMap { $0.isEmpty ? nil : percentDecode($0) }
            if let e = q.queryParameter("event"), !e.isEmpty {
                guard let ev = TrackingEvent(rawValue: e) else {
                    return ex.respond(AdminAPI.error(400, "event must be receive, open, register, unregister or appOpen"))
                }
                f.event = ev
            }
            f.status = q.queryParameter("status").flatMap { $0.isEmpty ? nil : $0 }
            do {
                if let scope = try Scope.of(q) { f.tokens = scopeTokens?(scope) ?? [] }
            } catch {
                return ex.respond(AdminAPI.error(400, "\(error)"))
            }
            guard let limit = intParameter(q, "limit", default: 100, range: 1...100_000),
                let wait = intParameter(q, "wait", default: 0, range: 0...300)
            else {
                return ex.respond(AdminAPI.error(400, "limit must be 1...100000 and wait 0...300 seconds"))
            }
            f.limit = limit
            if let cluster = clusterReads, cluster.takes(ex) { return cluster.answerList(ex, ClusterReads.trackingList, limit: limit) }
            let filter = f
            let deadline = Clock.nowMs() + Int64(wait) * 1000
            let journal = self.journal
            @Sendable func answer(_ found: [TrackingAttempt]) {
                if !found.isEmpty || Clock.nowMs() >= deadline {
                    ex.respond(.json(200, JSONObjectWriter.list("tracking", found.map(\.json))))
                } else {
                    ex.eventLoop.schedule(afterNanoseconds: 25_000_000) { attempt() }
                }
            }
            @Sendable func attempt() {
                let found = tracking.query(filter)
                guard let journal, found.count < filter.limit, tracking.counters.evicted > 0 else { return answer(found) }
                // Reaching into the journal: on the journal-read worker, the answer back on the loop.
                let accepted = journal.reads.submit {
                    let before = found.first?.atMs ?? Int64.max
                    let all = journal.tracking(filter, beforeMs: before, limit: filter.limit - found.count).reversed() + found
                    ex.eventLoop.execute { answer(all) }
                }
                if !accepted { ex.respond(AdminAPI.busy(journal.reads, "journal reads")) }
            }
            attempt()
        }
    }
}
