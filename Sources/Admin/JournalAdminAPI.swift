import Glibc
import Journal
import Observation
import PushCore
import Runtime
import Tracking
import Transport

/// The journal's endpoints: `GET /emulator/v1/report`, and the inspection endpoints' reach into
/// the journal for notifications and tracking attempts the in-memory logs no longer hold.
/// Journal reads run on the journal-read worker (a report over millions of records never
/// stalls a loop, and a flood of them queues at most its capacity, then 503); the answer is
/// sent from there.
struct JournalAdminAPI: AdminResource {
    let journal: Journal
    let reads: BackgroundWorker
    /// On a cluster node: the report and campaign totals for the whole cluster.
    var clusterReads: ClusterReads? = nil
    /// A token's device's labels (for `scope=label:`).
    var labels: @Sendable (String) -> [String] = { _ in [] }
    /// When each scope was last reset (a scope's report counts what came after).
    var deletions: NotificationDeletions? = nil

    func register(_ routes: inout RouterGroup) {
        let journal = self.journal
        let reads = self.reads
        let cluster = clusterReads
        let labels = self.labels
        let deletions = self.deletions
        routes.add(.get, "/report") { ex in
            let q = ex.request
            let format = q.queryParameter("format").flatMap { $0.isEmpty ? nil : $0 } ?? "json"
            guard let f = CampaignReport.Format(rawValue: format) else {
                return ex.respond(AdminAPI.error(400, "format must be json, text or html"))
            }
            guard let sinceMs = JournalAdminAPI.since(q) else { return ex.respond(JournalAdminAPI.badSince) }
            let campaign = q.queryParameter("campaign").flatMap { $0.isEmpty ? nil : percentDecode($0) }
            let exact: Bool?
            switch q.queryParameter("exact") {
            case nil, "": exact = nil
            case "true": exact = true
            case "false": exact = false
            default: return ex.respond(AdminAPI.error(400, "exact must be true or false"))
            }
            let scope: Scope?
            do { scope = try Scope.of(q) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            if let cluster, cluster.takes(ex) {
                return cluster.summaries(ex, sinceMs: sinceMs, campaign: campaign, scope: scope, format: f, counts: false)
            }
            let accepted = reads.submit {
                let report =
                    scope.map { s in
                        journal.report(
                            sinceMs: sinceMs, campaign: campaign, include: JournalAdminAPI.taking(s, labels, after: deletions?.resetMs(s)))
                    }
                    ?? journal.report(sinceMs: sinceMs, campaign: campaign, exact: exact)
                let text = report.render(f)
                var h = HTTPFields()
                h.add(name: "content-type", value: JournalAdminAPI.contentType(f))
                ex.respond(Response(status: 200, headers: h, body: Array(text.utf8)))
            }
            if !accepted { ex.respond(AdminAPI.busy(reads, "journal reads")) }
        }
        // Campaign totals from the index's block counts: milliseconds on any journal.
        routes.add(.get, "/campaigns") { ex in
            let q = ex.request
            guard let sinceMs = JournalAdminAPI.since(q) else { return ex.respond(JournalAdminAPI.badSince) }
            let campaign = q.queryParameter("campaign").flatMap { $0.isEmpty ? nil : percentDecode($0) }
            let scope: Scope?
            do { scope = try Scope.of(q) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            if let cluster, cluster.takes(ex) {
                return cluster.summaries(ex, sinceMs: sinceMs, campaign: campaign, scope: scope, format: .json, counts: true)
            }
            let accepted = reads.submit {
                let tallies =
                    scope.map {
                        journal.campaignCounts(sinceMs: sinceMs, include: JournalAdminAPI.taking($0, labels, after: deletions?.resetMs($0)))
                    }
                    ?? journal.campaignCounts(sinceMs: sinceMs)
                let counts = CampaignCounts(tallies, only: campaign, sinceMs: sinceMs, nowMs: Clock.nowMs())
                ex.respond(.json(200, counts.json))
            }
            if !accepted { ex.respond(AdminAPI.busy(reads, "journal reads")) }
        }
        // This node's campaign digests, for the node that answers a cluster's report.
        if cluster != nil {
            routes.add(.get, "/cluster/summary") { ex in
                guard let sinceMs = JournalAdminAPI.since(ex.request) else { return ex.respond(JournalAdminAPI.badSince) }
                let scope: Scope?
                do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
                let accepted = reads.submit {
                    var h = HTTPFields()
                    h.add(name: "content-type", value: "application/octet-stream")
                    let bytes =
                        scope.map { s in
                            journal.summaryBytes(sinceMs: sinceMs, include: JournalAdminAPI.taking(s, labels, after: deletions?.resetMs(s)))
                        } ?? journal.summaryBytes(sinceMs: sinceMs)
                    ex.respond(Response(status: 200, headers: h, body: bytes))
                }
                if !accepted { ex.respond(AdminAPI.busy(reads, "journal reads")) }
            }
        }
    }

    /// Whether a stored request is in `scope`.
    /// Whether a stored request is in `scope`, and after the scope's last reset (`after`).
    static func taking(_ scope: Scope, _ labels: @escaping @Sendable (String) -> [String], after: Int64?) -> (StoredRequest) -> Bool {
        let resetMs = after ?? .min
        return { r in
            r.atMs > resetMs && scope.holds(provider: r.provider, environment: r.environment, team: r.team, token: r.token, labels: labels)
        }
    }

    /// The `since` parameter (0 when absent); nil when it is not a time.
    static func since(_ q: Request) -> Int64? {
        guard let v = q.queryParameter("since").flatMap({ $0.isEmpty ? nil : percentDecode($0) }) else { return 0 }
        return TimeArgument.parse(v, nowMs: Clock.nowMs())
    }

    static let badSince = AdminAPI.error(
        400, "since takes milliseconds since the epoch, an ISO 8601 UTC time, or an age such as 30m, 12h, 7d")

    static func contentType(_ f: CampaignReport.Format) -> String {
        switch f {
        case .json: "application/json"
        case .text: "text/plain; charset=utf-8"
        case .html: "text/html; charset=utf-8"
        }
    }

    /// Accepted notifications from the journal matching `filter` that the in-memory log no longer
    /// has (`known` ids excluded), newest first, at most `limit`.
    func notifications(
        _ filter: NotificationLog.Filter, campaignKeys: [String], excluding known: Set<UUIDValue>,
        limit: Int
    ) -> [PushNotification] {
        var out: [PushNotification] = []
        guard limit > 0 else { return out }
        let search = JournalSearch(records: .notifications, terms: JournalAdminAPI.terms(filter), newestFirst: true)
        journal.search(
            search, more: { _ in out.count < limit },
            each: { e in
                guard let n = JournalAdminAPI.notification(e, filter), !known.contains(n.id) else { return true }
                out.append(n)
                return out.count < limit
            })
        return out
    }

    /// `NotificationLog.page` over the journal: the matching notifications strictly between the
    /// bounds, the first or last `filter.limit` in (receive time, id) order, ascending. The
    /// journal's index gives the blocks that may hold matches, newest (oldest) first by their
    /// newest (oldest) record; once `limit` are held, a block whose every record is older
    /// (newer) than the page's last one cannot change it, and the search ends there. At most
    /// twice `limit` are held.
    func page(
        _ filter: NotificationLog.Filter, after: NotificationLog.PageKey?, before: NotificationLog.PageKey?, newest: Bool
    ) -> [PushNotification] {
        var out: [PushNotification] = []
        let limit = max(0, filter.limit)
        guard limit > 0 else { return out }
        func trim() {
            out.sort { NotificationLog.PageKey($0) < NotificationLog.PageKey($1) }
            out = newest ? Array(out.suffix(limit)) : Array(out.prefix(limit))
        }
        var terms = JournalAdminAPI.terms(filter)
        if let after { terms.append(.atOrAfter(after.atMs)) }
        if let before { terms.append(.atOrBefore(before.atMs)) }
        let search = JournalSearch(records: .notifications, terms: terms, newestFirst: newest)
        journal.search(
            search,
            more: { bound in
                trim()
                guard out.count >= limit else { return true }
                return newest ? bound >= out[0].receivedAtMs : bound <= out[out.count - 1].receivedAtMs
            },
            each: { e in
                guard let n = JournalAdminAPI.notification(e, filter) else { return true }
                let key = NotificationLog.PageKey(n)
                if let after, !(after < key) { return true }
                if let before, !(key < before) { return true }
                out.append(n)
                if out.count >= 2 * limit { trim() }
                return true
            })
        trim()
        return out
    }

    /// What the journal's index can test of `filter`: its terms, with its provider, token, topic and id.
    static func terms(_ filter: NotificationLog.Filter) -> [IndexTerm] {
        var terms = filter.indexTerms
        if let p = filter.provider { terms.append(.provider(p)) }
        if let t = filter.token { terms.append(.token(t)) }
        if let t = filter.topic { terms.append(.topic(t)) }
        if let id = filter.id { terms.append(.id(id)) }
        return terms
    }

    /// A journal record as the notification the log kept, when it is an accepted one `filter` matches.
    static func notification(_ e: JournalEntry, _ filter: NotificationLog.Filter) -> PushNotification? {
        guard case .request(let r) = e, PushProvider.accepts(r.status), let idText = r.notificationID,
            let id = UUIDValue.parseCanonicalLowercase(Array(idText.utf8))
        else { return nil }
        if let want = filter.id, want != id { return nil }
        if let p = filter.provider, p != r.provider { return nil }
        if let t = filter.token, t != r.token { return nil }
        if let t = filter.topic, t != r.topic { return nil }
        var headers = HTTPFields()
        for (n, v) in r.headers { headers.add(name: n, value: v) }
        let isJSON = r.payload.withUnsafeBytes { raw -> Bool in
            var tokens: [JSONToken] = []
            return !raw.isEmpty && JSONParser.parse(raw, into: &tokens) == nil
        }
        var n = PushNotification(
            id: id, provider: r.provider, receivedAtMs: r.atMs, environment: r.environment,
            token: Array(r.token.utf8)[...], topic: r.topic.map { Array($0.utf8)[...] }, headers: headers,
            payload: r.payload, payloadIsJSON: isJSON, warnings: r.warnings)
        n.display = r.display
        n.lint = r.lint
        n.team = r.team
        if let m = filter.matches, !m(n) { return nil }
        return n
    }

    /// Tracking attempts from the journal matching `filter`, newest first, at most `limit`, older
    /// than `beforeMs` (what the in-memory log still holds is newer).
    func tracking(_ filter: TrackingLog.Filter, beforeMs: Int64, limit: Int) -> [TrackingAttempt] {
        var out: [TrackingAttempt] = []
        guard limit > 0 else { return out }
        var terms: [IndexTerm] = [beforeMs > .min ? .atOrBefore(beforeMs - 1) : .nothing]
        if let t = filter.token { terms.append(.token(t)) }
        let search = JournalSearch(records: .tracking, terms: terms, newestFirst: true)
        journal.search(
            search, more: { _ in out.count < limit },
            each: { e in
                guard case .tracking(let t) = e, t.atMs < beforeMs, let event = TrackingEvent(rawValue: t.event) else { return true }
                if let tok = filter.token, tok != t.token { return true }
                if let set = filter.tokens, !set.contains(t.token) { return true }
                if let ev = filter.event, ev != event { return true }
                if let st = filter.status, String(t.status) != st && t.outcome != st { return true }
                out.append(
                    TrackingAttempt(
                        event: event, preset: t.preset, token: t.token, notificationID: t.notificationID, method: t.method,
                        url: t.url, status: t.status, latencyMs: t.latencyMs, error: t.error, attempt: t.attempt,
                        outcome: t.outcome, atMs: t.atMs, events: t.events))
                return out.count < limit
            })
        return out
    }
}
