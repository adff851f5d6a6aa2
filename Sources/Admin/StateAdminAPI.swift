import PushCore
import Runtime
import State
import Transport

/// `/emulator/v1/state`: the whole state as an export (`GET`), an export read in (`POST`,
/// `?replace=true` resets first), and a snapshot taken now (`POST /emulator/v1/state/snapshot`).
/// Exports and imports run on the slow-work thread (a large state takes seconds); the answer
/// to an import leaves once its records are as durable as `--durability` says.
struct StateAdminAPI: AdminResource {
    let registry: StoreRegistry
    let log: StateLog?
    let slowWork: BackgroundWorker

    /// The largest import over HTTP; larger ones go through `serve --import-state` or `pushemu
    /// state import --data-dir` on a stopped emulator.
    static let maxImportBytes = 64 << 20

    func register(_ routes: inout RouterGroup) {
        routes.add(.get, "/state", maxBodySize: 0) { ex in
            let registry = self.registry
            submit(ex) {
                var lines: [UInt8] = []
                do {
                    try registry.export { line in
                        lines.append(contentsOf: line.utf8)
                        lines.append(UInt8(ascii: "\n"))
                    }
                } catch {
                    return AdminAPI.error(500, "the state could not be exported: \(error)")
                }
                var h = HTTPFields()
                h.add(name: "content-type", value: "application/x-ndjson")
                h.add(name: "content-disposition", value: "attachment; filename=\"pushemu-state.jsonl\"")
                return Response(status: 200, headers: h, body: lines)
            }
        }
        routes.add(.post, "/state", maxBodySize: StateAdminAPI.maxImportBytes) { ex in
            let body = ex.request.body
            let replace = ex.request.queryParameter("replace") == "true"
            let registry = self.registry
            let log = self.log
            submit(ex) {
                do {
                    let records = try registry.parseExport(body.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false))
                    if replace { registry.reset(.state, log: log, nowMs: Clock.nowMs()) }
                    let counts = try registry.apply(imported: records, log: log, nowMs: Clock.nowMs())
                    var stores = JSONObjectWriter()
                    for (name, n) in counts { stores.add(name, n) }
                    var out = JSONObjectWriter()
                    out.add("imported", records.count)
                    out.add("stores", json: stores.text)
                    return .json(200, out.text)
                } catch {
                    return AdminAPI.error(400, "\(error)")
                }
            }
        }
        routes.add(.post, "/state/snapshot", maxBodySize: 0) { ex in
            guard let log else { return ex.respond(AdminAPI.error(409, "this emulator keeps no state on disk (--in-memory)")) }
            submit(ex) {
                do {
                    let path = try log.takeSnapshot()
                    var out = JSONObjectWriter()
                    out.add("snapshot", path)
                    out.add("bytes", log.statistics.lastSnapshotBytes)
                    return .json(200, out.text)
                } catch {
                    return AdminAPI.error(503, "\(error)")
                }
            }
        }
    }

    /// Runs `work` on the slow-work thread and answers with what it returns (503 when its queue is full).
    private func submit(_ ex: Exchange, _ work: @escaping @Sendable () -> Response) {
        if !slowWork.submit({ ex.respond(work()) }) { ex.respond(AdminAPI.busy(slowWork, "slow admin jobs")) }
    }
}
