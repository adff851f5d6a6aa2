import Cluster
import Journal
import PushCore
import State
import Transport

/// `GET /healthz`: 200 `{"status":"ok"}`; 503 `{"status":"failing",...}` while the journal or
/// the state log cannot store what it is given (a full disk): pushes are then answered 503
/// under strict durability, and a probe should see it. A cluster node that lost its Redis
/// answers 200 `{"status":"degraded","cluster":{...}}`: it serves pushes, refuses changes.
/// Never rate-limited.
struct HealthAdminAPI: AdminResource {
    let journal: Journal?
    let stateLog: StateLog?
    let cluster: ClusterLink?

    func register(_ routes: inout RouterGroup) {
        let journal = self.journal
        let stateLog = self.stateLog
        let cluster = self.cluster
        routes.add([.get, .head], "/healthz", maxBodySize: 0) { ex in
            let journalFailing = journal?.isFailing ?? false
            let stateFailing = stateLog?.isFailing ?? false
            if !journalFailing && !stateFailing, let cluster, cluster.isDegraded {
                var c = JSONObjectWriter()
                c.add("degraded", true)
                c.add("reason", cluster.degradedReason)
                var body = JSONObjectWriter()
                body.add("status", "degraded")
                body.add("cluster", json: c.text)
                return ex.respond(.json(200, body.text))
            }
            guard journalFailing || stateFailing else { return ex.respond(.json(200, "{\"status\":\"ok\"}")) }
            var body = JSONObjectWriter()
            body.add("status", "failing")
            if journalFailing, let journal {
                var j = JSONObjectWriter()
                j.add("failing", true)
                j.add("error", journal.lastError)
                body.add("journal", json: j.text)
            }
            if stateFailing, let stateLog {
                var l = JSONObjectWriter()
                l.add("failing", true)
                l.add("error", stateLog.statistics.lastError)
                body.add("stateLog", json: l.text)
            }
            ex.respond(.json(503, body.text))
        }
    }
}
