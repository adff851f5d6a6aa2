import Journal
import PushCore
import State
import Transport

/// `GET /emulator/v1/stats`: every registered store's counts, in the store registry's order
/// (each store writes its own part), then the state's memory. `?scope=`: one scope's counts
/// (`ScopedStats`).
struct StatsAdminAPI: AdminResource {
    let registry: StoreRegistry
    let stateMemory: StateMemory
    /// `?scope=`'s document.
    let scoped: ScopedStats
    /// On a cluster node: the per-node counts summed over the nodes, and each node's document.
    var clusterReads: ClusterReads? = nil

    func register(_ routes: inout RouterGroup) {
        let registry = self.registry
        let memory = stateMemory
        let cluster = clusterReads
        let scoped = self.scoped
        routes.add(.get, "/stats") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            if let scope {
                let doc = scoped.document(scope)
                if let cluster, cluster.takes(ex) {
                    return cluster.stats(ex, local: doc.text, query: "?scope=" + PercentEncoding.encode(scope.text))
                }
                return ex.respond(.json(200, doc.text))
            }
            var doc = StatsDocument()
            registry.addStats(to: &doc)
            doc.add("stateMemory", "usedBytes", memory.usedBytes)
            doc.add("stateMemory", "limitBytes", memory.limit)
            if let cluster, cluster.takes(ex) { return cluster.stats(ex, local: doc.text) }
            ex.respond(.json(200, doc.text))
        }
    }
}

extension AdminAPI {
    /// The journal's part of `/emulator/v1/stats`.
    package static func journalStats(_ journal: Journal) -> String {
        let stats = journal.statistics
        var object = JSONObjectWriter()
        object.add("durability", journal.durability.rawValue)
        object.add("path", journal.path)
        object.add("queued", stats.queued)
        object.add("committed", stats.committed)
        object.add("commits", stats.batches)
        object.add("lastBatch", stats.lastBatch)
        object.add("lastCommitUs", stats.lastCommitUs)
        object.add("dropped", stats.dropped)
        object.add("failedCommits", stats.failedCommits)
        object.add("failing", stats.failing)
        object.add("lastError", stats.lastError)
        object.add("withheldAnswers", stats.withheldAnswers)
        object.add("awaitingStore", stats.awaitingStore)
        object.add("pruned", stats.pruned)
        object.add("storedRequests", stats.storedRequests)
        object.add("storedTracking", stats.storedTracking)
        object.add("writerNice", stats.writerNice)
        let report = journal.reportStatus
        var progress = JSONObjectWriter()
        progress.add("running", report.running)
        progress.add("read", report.read)
        progress.add("total", report.total)
        object.add("exactReport", json: progress.text)
        return object.text
    }

    /// The state log's part of `/emulator/v1/stats`.
    package static func stateStats(_ log: StateLog) -> String {
        let s = log.statistics
        var object = JSONObjectWriter()
        object.add("directory", log.directory)
        object.add("durability", log.durability.rawValue)
        object.add("logBytes", s.logBytes)
        object.add("recordsSinceSnapshot", s.recordsSinceSnapshot)
        object.add("appended", s.appended)
        object.add("failing", log.isFailing)
        object.add("writeFailures", s.writeFailures)
        object.add("lastError", s.lastError)
        object.add("snapshots", s.snapshots)
        object.add("lastSnapshotAt", s.lastSnapshotAtMs)
        object.add("lastSnapshotBytes", s.lastSnapshotBytes)
        object.add("lastSnapshotMs", s.lastSnapshotDurationMs)
        object.add("snapshotFailures", s.snapshotFailures)
        object.add("loadedRecords", s.loadedRecords)
        object.add("droppedAtStart", s.droppedAtStart)
        object.add("loadMs", s.loadMs)
        object.add("deferredRecords", s.deferredRecords)
        return object.text
    }
}
