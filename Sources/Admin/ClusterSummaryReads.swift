import Journal
import PushCore
import Runtime
import Transport

/// The report, `/campaigns` and `/stats` for the whole cluster. Each node's journal holds the
/// requests that node answered: the answering node asks every node for its campaign digests
/// (`GET /emulator/v1/cluster/summary`, binary) and merges them into one report or one set of
/// campaign totals. The stores are replicated, so `/stats` shows this node's shared counts, the
/// per-node counters (deliveries, notifications, tracking, fan-out, deferred work, event
/// subscribers) summed over the nodes, and each node's whole document under `nodes`.
extension ClusterReads {
    static let summaryPath = "/emulator/v1/cluster/summary"

    /// Sections of `/stats` each node counts for itself, summed over the nodes.
    static let perNodeSections: [StaticString] = ["deliveries", "notifications", "tracking", "fanOut", "deferred", "events"]

    /// `GET /report` (`counts` false) or `GET /campaigns` (`counts` true) for the whole cluster.
    /// With a `scope`, each node reads its own records of the scope (every one since its last
    /// reset of the scope) into digests, merged as the rest.
    func summaries(_ ex: Exchange, sinceMs: Int64, campaign: String?, scope: Scope?, format: CampaignReport.Format, counts: Bool) {
        let accepted = worker.submit { [self] in
            let scoped = scope.map { "&scope=" + PercentEncoding.encode($0.text) } ?? ""
            let (answers, unreachable) = ask(ClusterReads.summaryPath + "?since=\(sinceMs)" + scoped)
            var parts: [[UInt8]] = []
            for a in answers {
                switch a.status {
                case 200: parts.append(a.body)
                case 404: continue // a node without a journal has no requests to add
                default: return ex.respond(.json(a.status, String(decoding: a.body, as: UTF8.self)))
                }
            }
            let now = Clock.nowMs()
            if counts {
                guard let c = ClusterSummaries.counts(parts, sinceMs: sinceMs, campaign: campaign, nowMs: now) else {
                    return ex.respond(AdminAPI.error(502, "a node's campaign summary could not be read"))
                }
                return ex.respond(.json(200, ClusterReads.mark(c.json, unreachable)))
            }
            guard let r = ClusterSummaries.report(parts, sinceMs: sinceMs, campaign: campaign, nowMs: now) else {
                return ex.respond(AdminAPI.error(502, "a node's campaign summary could not be read"))
            }
            var text = r.render(format)
            if !unreachable.isEmpty {
                let names = unreachable.joined(separator: ", ")
                switch format {
                case .json: text = ClusterReads.mark(text, unreachable)
                case .text: text = "partial: no answer from \(names)\n" + text
                case .html:
                    let note = "<p><strong>Partial:</strong> no answer from \(MarkupEscaping.escape(names)).</p>"
                    let parts = text.split(separator: "<body>", maxSplits: 1, omittingEmptySubsequences: false)
                    text = parts.count == 2 ? parts[0] + "<body>" + note + parts[1] : note + text
                }
            }
            var h = HTTPFields()
            h.add(name: "content-type", value: JournalAdminAPI.contentType(format))
            ex.respond(Response(status: 200, headers: h, body: Array(text.utf8)))
        }
        if !accepted { ex.respond(AdminAPI.busy(worker, "slow work")) }
    }

    /// `GET /stats` for the whole cluster: `local` (this node's document) with the per-node
    /// sections summed over the nodes, and every node's document under `nodes`.
    func stats(_ ex: Exchange, local: String, query: String = "") {
        let accepted = worker.submit { [self] in
            let (answers, unreachable) = ask("/emulator/v1/stats" + query)
            let documents = answers.filter { $0.status == 200 }
            var sums: [String: [(String, Int)]] = [:]
            for d in documents {
                d.body.withUnsafeBytes { raw in
                    var t: [JSONToken] = []
                    guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else { return }
                    let v = JSONView(bytes: raw, tokens: t)
                    for section in ClusterReads.perNodeSections {
                        guard let s = v.member(0, section) else { continue }
                        let name = section.description
                        var list = sums[name] ?? []
                        v.forEachMember(s) { k, value in
                            guard let n = v.integer(value) else { return }
                            let key = v.string(k)
                            if let i = list.firstIndex(where: { $0.0 == key }) { list[i].1 += n } else { list.append((key, n)) }
                        }
                        sums[name] = list
                    }
                }
            }
            let text = Array(local.utf8).withUnsafeBytes { raw -> String in
                var t: [JSONToken] = []
                guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else { return local }
                let v = JSONView(bytes: raw, tokens: t)
                var out = JSONObjectWriter()
                out.add("cluster", link.options.cluster)
                v.forEachMember(0) { k, value in
                    let key = v.string(k)
                    if let summed = sums[key] {
                        var section = JSONObjectWriter()
                        for (n, total) in summed { section.add(n, total) }
                        out.add(key, json: section.text)
                    } else {
                        out.add(key, json: String(decoding: v.raw(value), as: UTF8.self))
                    }
                }
                out.add(
                    "nodes",
                    jsonArray: documents.map { d in
                        var node = JSONObjectWriter()
                        node.add("name", d.node)
                        node.add("stats", json: String(decoding: d.body, as: UTF8.self))
                        return node.text
                    })
                return out.text
            }
            ex.respond(.json(200, ClusterReads.mark(text, unreachable)))
        }
        if !accepted { ex.respond(AdminAPI.busy(worker, "slow work")) }
    }

    /// `POST /reset?scope=` for the whole cluster: each node forgets its own notifications of
    /// the scope and starts its report of it afresh, at the instant this node names (the rules,
    /// replicated, go on every node); then `recorded` keeps the reset as one change record. The
    /// notifications summed, the rules as the node that removed most counted them.
    func reset(_ scope: Scope, _ ex: Exchange, recorded: @escaping @Sendable (Int64) -> Void) {
        let accepted = worker.submit { [self] in
            let at = Clock.nowMs()
            let (answers, unreachable) = ask("/emulator/v1/reset?scope=" + PercentEncoding.encode(scope.text) + "&at=\(at)", method: "POST")
            var notifications = 0
            var rules = 0
            for a in answers {
                guard a.status == 200 else { return ex.respond(.json(a.status, String(decoding: a.body, as: UTF8.self))) }
                a.body.withUnsafeBytes { raw in
                    var t: [JSONToken] = []
                    guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else { return }
                    let v = JSONView(bytes: raw, tokens: t)
                    notifications += v.member(0, "notifications").flatMap { v.integer($0) } ?? 0
                    rules = max(rules, v.member(0, "faults").flatMap { v.integer($0) } ?? 0)
                }
            }
            // Kept as a change record (a restart, a node that was away): every node applies it.
            recorded(at)
            var out = JSONObjectWriter()
            out.add("reset", true)
            out.add("scope", scope.text)
            out.add("notifications", notifications)
            out.add("faults", rules)
            ex.respond(.json(200, ClusterReads.mark(out.text, unreachable)))
        }
        if !accepted { ex.respond(AdminAPI.busy(worker, "slow work")) }
    }
}
