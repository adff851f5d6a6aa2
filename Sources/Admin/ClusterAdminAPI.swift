import Cluster
import PushCore
import Runtime
import Transport

/// `GET /emulator/v1/cluster`: `{"cluster","node","redis":{"url","connected","lastError",
/// "streamLength"},"nodes":[{"name","url","healthy","lagMs","ratePerSecond","applied",
/// "degraded","self","quotaDemandPerSecond","appliedId"}],"quotaShare","snapshot"}` (`snapshot`: the
/// last compaction this node wrote or loaded), read from Redis on the slow-work thread. 404 on a single node.
struct ClusterAdminAPI: AdminResource {
    let link: ClusterLink?
    let slowWork: BackgroundWorker

    func register(_ routes: inout RouterGroup) {
        let link = self.link
        let slowWork = self.slowWork
        routes.add(.get, "/cluster") { ex in
            guard let link else {
                return ex.respond(AdminAPI.error(404, "pushemu is not in a cluster (serve --cluster redis://HOST:PORT)"))
            }
            let accepted = slowWork.submit { ex.respond(.json(200, ClusterAdminAPI.status(link))) }
            if !accepted { ex.respond(AdminAPI.busy(slowWork, "slow work")) }
        }
    }

    static func status(_ link: ClusterLink) -> String {
        let local = link.local
        var redis = JSONObjectWriter()
        redis.add("url", link.options.url.description)
        var nodes: [String] = []
        do {
            let read = try link.nodes()
            redis.add("connected", true)
            redis.add("streamLength", Int(read.streamLength))
            for n in read.nodes {
                var w = JSONObjectWriter()
                w.add("name", n.name)
                w.add("url", n.url)
                w.add("healthy", n.healthy)
                w.add("lagMs", n.lagMs.map { Int($0) })
                w.add("ratePerSecond", json: n.ratePerSecond.map { String($0) } ?? "null")
                w.add("applied", n.applied.map { Int($0) })
                w.add("degraded", json: n.degraded.map { $0 ? "true" : "false" } ?? "null")
                w.add("self", n.isSelf)
                w.add("quotaDemandPerSecond", Int(n.demandPerSecond))
                w.add("appliedId", n.appliedID)
                nodes.append(w.text)
            }
        } catch {
            redis.add("connected", false)
            redis.add("lastError", "\(error)")
        }
        var out = JSONObjectWriter()
        out.add("cluster", link.options.cluster)
        out.add("node", link.options.node)
        out.add("degraded", link.isDegraded)
        out.add("waiting", local.waiting)
        out.add("quotaShare", json: String(Double(Int(link.quotaShare * 10_000)) / 10_000))
        if let r = local.reseeded {
            var w = JSONObjectWriter()
            w.add("at", r.atMs)
            w.add("records", r.records)
            out.add("reseeded", json: w.text)
        }
        if let e = link.lastSnapshot {
            var w = JSONObjectWriter()
            w.add("wrote", e.wrote)
            w.add("at", e.atMs)
            w.add("through", e.through)
            w.add("records", e.records)
            w.add("bytes", e.bytes)
            w.add("trimmed", e.trimmed)
            out.add("snapshot", json: w.text)
        }
        out.add("redis", json: redis.text)
        out.add("nodes", jsonArray: nodes)
        return out.text
    }
}
