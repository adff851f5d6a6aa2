import Cluster
import Fleet
import Journal
import Observation
import Pipeline
import PushCore
import Runtime
import Tracking
import Transport

/// The notification inspection endpoints:
///
/// - `GET /emulator/v1/notifications?provider=&token=&topic=&campaign=&q=&limit=&wait=`: the
///   matching notifications, oldest first, at most `limit` (1-10,000; 100) of the newest, as
///   `{"notifications":[...],"next":CURSOR}`; `next` (null when there are no older ones) gives
///   the page of older ones. With `order=asc|desc` or `cursor=`, a page in (receive time, id)
///   order, from the oldest (`asc`) or the newest (`desc`, the default with a cursor); `next`
///   (null on the last page) continues after the page's last one, and stays valid while new
///   pushes arrive. `/emulator/v1/devices/{token}/notifications` answers the same for a device.
/// - `GET /emulator/v1/notifications/latest?...`: the newest match, whole (404 when none; `wait=`
///   long-polls for one).
/// - `GET /emulator/v1/notifications/{id}`: one notification, whole: the record, the device it
///   reached, and the tracking calls it caused with their outcomes.
/// - `DELETE /emulator/v1/notifications?...`: forgets the matches (`{"deleted": N}`, N counted in
///   memory); the journal keeps its records for export and the report, and its reads here skip them.
///
/// `q` is `NotificationQuery`'s search. Answers come from the in-memory log, completed from the
/// journal once the log has evicted anything (journal reads run on the journal-read worker).
struct NotificationsAdminAPI: AdminResource {
    let log: NotificationLog
    /// The journal (nil when off) and the worker its reads run on.
    let journal: Journal?
    let journalReads: BackgroundWorker
    /// What `DELETE /emulator/v1/notifications` removed, for the reads that reach into the journal.
    let deletions: NotificationDeletions
    /// `--campaign-key`: extra payload paths that name a campaign.
    let campaignKeys: [String]
    /// Topic, condition and broadcast deliveries still to make: a long poll waits for them.
    let fanOut: FanOutWorker?
    let deferred: DeferredDeliveryWorker?
    /// For a whole notification: the tracking calls it caused and the device it reached.
    let tracking: TrackingLog
    let deviceStore: DeviceStore
    /// On a cluster node: reads for the whole cluster (nil on a single node).
    var clusterReads: ClusterReads? = nil

    /// A token's device's labels (for `scope=label:`).
    var deviceLabels: @Sendable (String) -> [String] {
        let store = deviceStore
        return { store.device(token: $0)?.labels ?? [] }
    }

    func register(_ routes: inout RouterGroup) {
        let api = self
        routes.add(.get, "/notifications") { ex in
            let q = ex.request
            if let reads = api.clusterReads, reads.takes(ex) {
                let limit = intParameter(q, "limit", default: 100, range: 1...10_000) ?? 100
                return reads.answer(ex, .list(order: q.queryParameter("order"), limit: limit))
            }
            let query: NotificationQuery
            do { query = try NotificationQuery.parse(q, nowMs: Clock.nowMs(), labels: api.deviceLabels) } catch {
                return ex.respond(AdminAPI.error(400, "\(error)"))
            }
            guard let limit = intParameter(q, "limit", default: 100, range: 1...10_000),
                let wait = intParameter(q, "wait", default: 0, range: 0...300)
            else {
                return ex.respond(AdminAPI.error(400, "limit must be 1...10000 and wait 0...300 seconds"))
            }
            api.list(ex, query.filter(campaignKeys: api.campaignKeys, limit: limit), wait: wait)
        }
        routes.add(.delete, "/notifications") { ex in
            let query: NotificationQuery
            do { query = try NotificationQuery.parse(ex.request, nowMs: Clock.nowMs(), labels: api.deviceLabels) } catch {
                return ex.respond(AdminAPI.error(400, "\(error)"))
            }
            guard api.journal != nil else {
                return ex.respond(
                    .json(200, "{\"deleted\":\(api.log.remove(query.filter(campaignKeys: api.campaignKeys, limit: Int.max)))}"))
            }
            // Kept as a change record: the journal's records it hides stay hidden after a
            // restart, and a cluster's other nodes forget theirs.
            let (outcome, removed) = api.deletions.delete(
                query: ex.request.query.map { String(decoding: $0, as: UTF8.self) } ?? "", upToMs: Clock.nowMs())
            switch outcome {
            case .kept: ex.respond(.json(200, "{\"deleted\":\(removed)}"))
            case .full:
                ex.respond(
                    AdminAPI.error(
                        409,
                        "\(NotificationDeletions.capacity) filtered deletions are kept already: DELETE without filters, or POST /emulator/v1/reset"
                    ))
            case .invalid(let why): ex.respond(AdminAPI.error(400, why))
            }
        }
        routes.add(.get, "/notifications/{id}") { ex in
            let id = ex.parameter("id").utf8String
            if let reads = api.clusterReads, reads.takes(ex) { return reads.answer(ex, id == "latest" ? .latest : .one) }
            if id == "latest" { return api.latest(ex) }
            guard let uuid = UUIDValue.parseCanonicalLowercase(Array(id.lowercased().utf8)) else {
                return ex.respond(
                    AdminAPI.error(404, "no notification \(id) (ids are UUIDs: an apns-id, or the id an FCM message name ends in)"))
            }
            var one = NotificationLog.Filter()
            one.id = uuid
            one.limit = 1
            let filter = one
            let query: @Sendable () -> [PushNotification] = { api.withJournal(api.log.query(filter), filter) }
            api.runQuery(ex, query) { found in
                guard let n = found.first else { return ex.respond(AdminAPI.error(404, "no notification \(id) is recorded")) }
                ex.respond(.json(200, api.whole(n)))
            }
        }
        routes.add(.get, "/devices/{token}/notifications") { ex in
            if let reads = api.clusterReads, reads.takes(ex) {
                return reads.answer(
                    ex, .list(order: nil, limit: intParameter(ex.request, "limit", default: 10_000, range: 1...10_000) ?? 10_000))
            }
            var f = NotificationLog.Filter()
            f.token = ex.parameter("token").utf8String
            guard let wait = intParameter(ex.request, "wait", default: 0, range: 0...300),
                let limit = intParameter(ex.request, "limit", default: 10_000, range: 1...10_000)
            else {
                return ex.respond(AdminAPI.error(400, "limit must be 1...10000 and wait 0...300 seconds"))
            }
            f.limit = limit
            api.list(ex, f, wait: wait)
        }
    }

    /// The answer of a notifications list: the newest `filter.limit` matches oldest first (long-
    /// polled for up to `wait` seconds while there are none), or with `order` or `cursor` a
    /// page. Either way `next` continues it: after the plain answer, the page of older ones
    /// (newest first, as a cursor without `order` gives), so a client can page from the first.
    func list(_ ex: Exchange, _ filter: NotificationLog.Filter, wait: Int) {
        let q = ex.request
        let order = q.queryParameter("order").flatMap { $0.isEmpty ? nil : $0 }
        let cursorText = q.queryParameter("cursor").flatMap { $0.isEmpty ? nil : percentDecode($0) }
        guard order != nil || cursorText != nil else {
            var wider = filter
            wider.limit = filter.limit + 1 // one more tells whether there are older ones
            let probe = wider
            let api = self
            return longPoll(ex, waitSeconds: wait, limit: filter.limit) { api.withJournal(api.log.query(probe), probe) }
        }
        guard order == nil || order == "asc" || order == "desc" else {
            return ex.respond(AdminAPI.error(400, "order must be asc or desc"))
        }
        var cursor: NotificationLog.PageKey?
        if let cursorText {
            guard let c = NotificationCursor(text: cursorText) else {
                return ex.respond(AdminAPI.error(400, "cursor is not one this server gave (pass the \"next\" of a page back unchanged)"))
            }
            cursor = c.key
        }
        page(ex, filter, cursor: cursor, newest: order != "asc")
    }

    /// A page of `filter`'s matches after (ascending) or before (descending) `cursor`.
    func page(_ ex: Exchange, _ filter: NotificationLog.Filter, cursor: NotificationLog.PageKey?, newest: Bool) {
        var wider = filter
        wider.limit = filter.limit + 1 // one more tells whether there is a next page
        let probe = wider
        let after = newest ? nil : cursor
        let before = newest ? cursor : nil
        let api = self
        let query: @Sendable () -> [PushNotification] = {
            var found = api.log.page(probe, after: after, before: before, newest: newest)
            // A newest-first page that memory fills with notifications all newer than anything
            // memory may lack is complete: the journal's others sort after it.
            if newest, found.count >= probe.limit, let oldest = found.first, let horizon = api.log.completeAfterMs,
                oldest.receivedAtMs > horizon
            {
                return found
            }
            if let journal = api.journal, api.log.mayMissOlder {
                let older = JournalAdminAPI(journal: journal, reads: api.journalReads).page(
                    api.deletions.excluding(probe), after: after, before: before, newest: newest)
                var seen = Set(found.map(\.id))
                found += older.filter { seen.insert($0.id).inserted }
                found.sort { NotificationLog.PageKey($0) < NotificationLog.PageKey($1) }
                found = newest ? Array(found.suffix(probe.limit)) : Array(found.prefix(probe.limit))
            }
            return found
        }
        runQuery(ex, query) { found in
            var list = newest ? Array(found.reversed()) : found
            let more = list.count > filter.limit
            if more { list.removeLast() }
            let next = more ? list.last.map { NotificationCursor(key: NotificationLog.PageKey($0)).text } : nil
            var out = JSONObjectWriter()
            out.add("notifications", jsonArray: list.map(\.json))
            out.add("next", json: next.map(JSONWriter.quote) ?? "null")
            ex.respond(.json(200, out.text))
        }
    }

    /// `GET /emulator/v1/notifications/latest`: the newest match, whole.
    func latest(_ ex: Exchange) {
        let q = ex.request
        let query: NotificationQuery
        do { query = try NotificationQuery.parse(q, nowMs: Clock.nowMs(), labels: deviceLabels) } catch {
            return ex.respond(AdminAPI.error(400, "\(error)"))
        }
        guard let wait = intParameter(q, "wait", default: 0, range: 0...300) else {
            return ex.respond(AdminAPI.error(400, "wait must be 0...300 seconds"))
        }
        let filter = query.filter(campaignKeys: campaignKeys, limit: 1)
        let api = self
        let deadline = Clock.nowMs() + Int64(wait) * 1000
        // The last to arrive: the log's list is in arrival order within a millisecond (pages
        // order by id there, and two pushes in one millisecond would come out either way);
        // the journal is asked only when memory holds no match, and lists oldest first.
        let newestMatch: @Sendable () -> [PushNotification] = { api.withJournal(api.log.query(filter), filter) }
        @Sendable func attempt() {
            api.runQuery(ex, newestMatch) { found in
                if let n = found.last {
                    return ex.respond(.json(200, api.whole(n)))
                }
                guard Clock.nowMs() < deadline else { return ex.respond(AdminAPI.error(404, "no notification matches")) }
                ex.eventLoop.schedule(afterNanoseconds: 25_000_000) { attempt() }
            }
        }
        attempt()
    }

    /// A notification with the device it reached and the tracking calls it caused.
    func whole(_ n: PushNotification) -> String {
        let token = String(decoding: n.token, as: UTF8.self)
        var attempts = TrackingLog.Filter()
        attempts.token = token
        attempts.limit = 10_000
        let id = n.id.description
        let calls = tracking.query(attempts).filter { $0.notificationID == id }
        let device = deviceStore.device(token: token)
        var s = String(n.json.dropLast())
        s += ",\"device\":" + (device.map { $0.json(fleetID: deviceStore.fleetID($0)) } ?? "null")
        s += ",\"tracking\":[" + calls.map(\.json).joined(separator: ",") + "]}"
        return s
    }

    /// The in-memory log's answer, completed from the journal (oldest first, up to the limit) once
    /// the log has evicted anything.
    func withJournal(_ found: [PushNotification], _ filter: NotificationLog.Filter) -> [PushNotification] {
        guard let journal, found.count < filter.limit, log.mayMissOlder else { return found }
        let older = JournalAdminAPI(journal: journal, reads: journalReads).notifications(
            deletions.excluding(filter), campaignKeys: campaignKeys, excluding: Set(found.map(\.id)),
            limit: filter.limit - found.count)
        return older.reversed() + found
    }

    /// Answers with the matching notifications now, or polls until some exist or `waitSeconds` pass.
    /// Answers `query` once it finds something or `waitSeconds` pass. It first waits (up to
    /// 10 s) for the topic and broadcast sends, and the Web Push messages, answered before the request
    /// to be delivered, so
    /// a test that sends and then asks sees every device it reached.
    func longPoll(_ ex: Exchange, waitSeconds: Int, limit: Int, _ query: @escaping @Sendable () -> [PushNotification]) {
        let started = Clock.nowMs()
        let deadline = started + Int64(waitSeconds) * 1000
        let mark = fanOut?.submittedMark ?? 0
        let deferredMark = deferred?.submittedMark ?? []
        @Sendable func attempt() {
            let delivering = (fanOut.map { !$0.hasFinished(mark) } ?? false) || (deferred.map { !$0.hasFinished(deferredMark) } ?? false)
            if delivering, Clock.nowMs() < started + 10_000 {
                ex.eventLoop.schedule(afterNanoseconds: 2_000_000) { attempt() }
                return
            }
            runQuery(ex, query) { found in
                if !found.isEmpty || Clock.nowMs() >= deadline {
                    // The query asked for one more than `limit`: an older one means a next page.
                    let list = found.suffix(limit)
                    let next = found.count > limit ? list.first.map { NotificationCursor(key: NotificationLog.PageKey($0)).text } : nil
                    var out = JSONObjectWriter()
                    out.add("notifications", jsonArray: list.map(\.json))
                    out.add("next", json: next.map(JSONWriter.quote) ?? "null")
                    ex.respond(.json(200, out.text))
                } else {
                    ex.eventLoop.schedule(afterNanoseconds: 25_000_000) { attempt() }
                }
            }
        }
        attempt()
    }

    /// Runs a notification query and hands its result to `then` on the exchange's loop: at once
    /// without a journal, else on the journal-read worker (a query can reach into the journal).
    func runQuery(
        _ ex: Exchange, _ query: @escaping @Sendable () -> [PushNotification],
        then: @escaping @Sendable ([PushNotification]) -> Void
    ) {
        guard journal != nil else { return then(query()) }
        let accepted = journalReads.submit {
            let found = query()
            ex.eventLoop.execute { then(found) }
        }
        if !accepted { ex.respond(AdminAPI.busy(journalReads, "journal reads")) }
    }
}
