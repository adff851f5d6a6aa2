import APNs
import FCM
import Faults
import Fleet
import Journal
import Observation
import Pipeline
import PushCore
import Runtime
import State
import Tracking
import Transport

/// The admin layer: the emulator's own endpoints, `/healthz`, `/metrics` and `/emulator/v1/...`.
/// It only parses requests and formats answers; every change and query goes to the layer that
/// owns it (the gateways' key stores and registries, Fleet's device lifecycle, the fault engine,
/// the journal). Errors follow one shape, `{"error":{"code":N,"message":"..."}}`; lists are
/// wrapped in an object; long polls take `wait=SECONDS`.
///
/// Handlers run on the event loop of the admin request's connection, like every route.
package struct AdminAPI: Sendable {
    /// What the gateways keep that the admin API manages (keys, accounts, token registries, quota).
    package struct Gateways: Sendable {
        package let apnsKeys: APNsKeyStore
        package let apnsDevices: APNsDeviceRegistry
        package let apnsChannels: APNsChannelRegistry
        package let fcmAccounts: FCMServiceAccounts
        package let fcmDevices: FCMDeviceRegistry
        package let fcmQuota: FCMQuota

        package init(
            apnsKeys: APNsKeyStore, apnsDevices: APNsDeviceRegistry, apnsChannels: APNsChannelRegistry = APNsChannelRegistry(),
            fcmAccounts: FCMServiceAccounts, fcmDevices: FCMDeviceRegistry, fcmQuota: FCMQuota
        ) {
            self.apnsKeys = apnsKeys
            self.apnsDevices = apnsDevices
            self.apnsChannels = apnsChannels
            self.fcmAccounts = fcmAccounts
            self.fcmDevices = fcmDevices
            self.fcmQuota = fcmQuota
        }
    }

    /// The device layer and its tracking.
    package struct Devices: Sendable {
        package let lifecycle: DeviceLifecycle
        package let tracking: TrackingLog
        package let dispatcher: TrackingDispatcher

        package init(lifecycle: DeviceLifecycle, tracking: TrackingLog, dispatcher: TrackingDispatcher) {
            self.lifecycle = lifecycle
            self.tracking = tracking
            self.dispatcher = dispatcher
        }
    }

    /// What was recorded: the notification log, the journal (nil when off), the metrics.
    package struct Records: Sendable {
        package let log: NotificationLog
        package let journal: Journal?
        package let metrics: Metrics
        /// `--campaign-key`: extra payload paths that name a campaign.
        package let campaignKeys: [String]
        /// Topic, condition and broadcast deliveries still to make (`stats.fanOut`).
        package let fanOut: FanOutWorker?

        package init(log: NotificationLog, journal: Journal?, metrics: Metrics, campaignKeys: [String], fanOut: FanOutWorker? = nil) {
            self.fanOut = fanOut
            self.log = log
            self.journal = journal
            self.metrics = metrics
            self.campaignKeys = campaignKeys
        }
    }

    /// The state: the store registry (reset, stats, export, import), the state log (nil with
    /// `--in-memory`), and the record of deleted notifications (the registry resets it).
    package struct StateParts: Sendable {
        package let registry: StoreRegistry
        package let log: StateLog?
        package let deletions: NotificationDeletions

        package init(registry: StoreRegistry, log: StateLog?, deletions: NotificationDeletions) {
            self.registry = registry
            self.log = log
            self.deletions = deletions
        }
    }

    /// The transport's gauges (read when `/metrics` is scraped).
    package struct ServerGauges: Sendable {
        package let openConnections: @Sendable () -> Int
        package let openStreams: @Sendable () -> Int

        package init(openConnections: @escaping @Sendable () -> Int, openStreams: @escaping @Sendable () -> Int) {
            self.openConnections = openConnections
            self.openStreams = openStreams
        }
    }

    let gateways: Gateways
    let devicesLayer: Devices
    let records: Records
    let faults: FaultEngine
    let scenarios: ScenarioRegistry
    let gauges: ServerGauges
    /// What `/metrics` shows, in order: the request counters first, then each service's families.
    let metricsSources: [any MetricsSource]
    /// Admin work too slow for an event loop (RSA-2048 key generation: about 180 ms).
    let slowWork: BackgroundWorker
    /// Journal reads (reports, notification queries reaching into the journal): a worker of
    /// their own, so a report over millions of records delays no key generation, and a flood
    /// of them queues at most its capacity (then 503).
    let journalReads: BackgroundWorker
    let rateLimit: AdminRateLimit
    let state: StateParts
    /// What `DELETE /emulator/v1/notifications` removed, for the reads that reach into the journal.
    var deletions: NotificationDeletions { state.deletions }
    /// The development CA, PEM (`GET /emulator/v1/ca.pem`; empty: none).
    let developmentCA: String

    package init(
        gateways: Gateways, devices: Devices, records: Records, faults: FaultEngine, scenarios: ScenarioRegistry,
        gauges: ServerGauges, metricsSources: [any MetricsSource], state: StateParts, slowWork: BackgroundWorker = BackgroundWorker(),
        journalReads: BackgroundWorker = BackgroundWorker(), adminRate: Int = 0, developmentCA: String = ""
    ) {
        self.developmentCA = developmentCA
        self.state = state
        self.slowWork = slowWork
        self.journalReads = journalReads
        self.rateLimit = AdminRateLimit(perSecond: adminRate)
        self.gateways = gateways
        self.devicesLayer = devices
        self.records = records
        self.faults = faults
        self.scenarios = scenarios
        self.gauges = gauges
        self.metricsSources = metricsSources
    }

    var keys: APNsKeyStore { gateways.apnsKeys }
    var devices: APNsDeviceRegistry { gateways.apnsDevices }
    var fcmAccounts: FCMServiceAccounts { gateways.fcmAccounts }
    var fcmDevices: FCMDeviceRegistry { gateways.fcmDevices }
    var fcmQuota: FCMQuota { gateways.fcmQuota }
    var store: DeviceStore { devicesLayer.lifecycle.store }
    var tracking: TrackingLog { devicesLayer.tracking }
    var dispatcher: TrackingDispatcher { devicesLayer.dispatcher }
    var log: NotificationLog { records.log }
    var journal: Journal? { records.journal }
    var metrics: Metrics { records.metrics }
    var campaignKeys: [String] { records.campaignKeys }

    /// Adds the admin routes. `gate`: the state log's durability gate, around every route (a
    /// route that changed nothing is not held).
    package func register(_ r: inout Router, gate: StateGate? = nil) {
        let first = r.routes.count
        defer {
            if let gate { r.wrapHandlers(from: first, except: ["/healthz", "/metrics", "/emulator/v1/events"]) { gate.wrap($0) } }
            // A browser on another site cannot drive it (BrowserGuard), on every admin route.
            r.wrapHandlers(from: first) { handler in
                { ex in
                    if let refusal = BrowserGuard.refusal(ex.request) { return ex.respond(refusal) }
                    try handler(ex)
                }
            }
            let limit = rateLimit
            if limit.perSecond > 0 {
                r.wrapHandlers(from: first, except: ["/healthz", "/metrics"]) { handler in
                    { ex in
                        guard limit.admit() else { return ex.respond(AdminRateLimit.tooMany(limit.perSecond)) }
                        try handler(ex)
                    }
                }
            }
        }
        // 200 {"status":"ok"}; 503 {"status":"failing",...} while the journal or the state log
        // cannot store what it is given (a full disk): pushes are then answered 503 under
        // strict durability, and a probe should see it.
        let healthLog = state.log
        r.add([.get, .head], "/healthz", maxBodySize: 0) { ex in
            let journalFailing = journal?.isFailing ?? false
            let stateFailing = healthLog?.isFailing ?? false
            guard journalFailing || stateFailing else { return ex.respond(.json(200, "{\"status\":\"ok\"}")) }
            var body = JSONObjectWriter()
            body.add("status", "failing")
            if journalFailing, let journal {
                var j = JSONObjectWriter()
                j.add("failing", true)
                j.add("error", journal.lastError)
                body.add("journal", json: j.text)
            }
            if stateFailing, let healthLog {
                var l = JSONObjectWriter()
                l.add("failing", true)
                l.add("error", healthLog.statistics.lastError)
                body.add("stateLog", json: l.text)
            }
            ex.respond(.json(503, body.text))
        }
        let sources = metricsSources
        let memory = store.memory.memory
        r.add(.get, "/metrics") { ex in
            var m = MetricsText()
            // The requests first, then the transport's gauges, then each service's families.
            sources.first?.writeMetrics(&m)
            m.single("pushemu_open_connections", "gauge", "Open client connections.", gauges.openConnections())
            m.single(
                "pushemu_open_streams", "gauge", "Open HTTP/2 streams (requests in progress on HTTP/2 connections).", gauges.openStreams())
            for source in sources.dropFirst() { source.writeMetrics(&m) }
            m.single(
                "pushemu_state_memory_bytes", "gauge",
                "What the stored state takes by its measured costs (device records, tokens, subscriptions, channels).", memory.usedBytes)
            m.single("pushemu_state_memory_limit_bytes", "gauge", "--max-state-memory.", memory.limit)
            var h = HTTPFields()
            h.add(name: "content-type", value: "text/plain; version=0.0.4; charset=utf-8")
            ex.respond(Response(status: 200, headers: h, body: Array(m.text.utf8)))
        }
        r.add(.post, "/emulator/v1/apns/keys", maxBodySize: 64 * 1024) { ex in ex.respond(createKey(ex.request)) }
        r.add(.get, "/emulator/v1/apns/keys") { ex in
            ex.respond(.json(200, JSONObjectWriter.list("keys", keys.all.map(keyJSON))))
        }
        registerNotifications(&r)
        registerEvents(&r)
        WebUI().register(&r)
        let ca = developmentCA
        r.add(.get, "/emulator/v1/ca.pem", maxBodySize: 0) { ex in
            var h = HTTPFields()
            h.add(name: "content-type", value: "application/x-pem-file")
            h.add(name: "content-disposition", value: "attachment; filename=\"pushemu-development-ca.pem\"")
            ex.respond(
                ca.isEmpty
                    ? AdminAPI.error(404, "this server has no development CA") : Response(status: 200, headers: h, body: Array(ca.utf8)))
        }
        r.add(.get, "/emulator/v1/devices/{token}/notifications") { ex in
            var f = NotificationLog.Filter()
            f.token = ex.parameter(0).utf8String
            guard let wait = intParameter(ex.request, "wait", default: 0, range: 0...300),
                let limit = intParameter(ex.request, "limit", default: 10_000, range: 1...10_000)
            else {
                return ex.respond(AdminAPI.error(400, "limit must be 1...10000 and wait 0...300 seconds"))
            }
            f.limit = limit
            list(ex, f, wait: wait)
        }
        var deviceAdmin = DeviceAdminAPI(
            lifecycle: devicesLayer.lifecycle, apnsDevices: devices, fcmDevices: fcmDevices,
            tracking: tracking, dispatcher: dispatcher, log: log)
        // Every store's counts, in the registry's order.
        let registry = state.registry
        let stateMemory = store.memory.memory
        r.add(.get, "/emulator/v1/stats") { ex in
            var doc = StatsDocument()
            registry.addStats(to: &doc)
            doc.add("stateMemory", "usedBytes", stateMemory.usedBytes)
            doc.add("stateMemory", "limitBytes", stateMemory.limit)
            ex.respond(.json(200, doc.text))
        }
        StateAdminAPI(registry: registry, log: state.log, slowWork: slowWork).register(&r)
        if let journal { deviceAdmin.journal = JournalAdminAPI(journal: journal, reads: journalReads) }
        deviceAdmin.register(&r)
        LiveActivityAdminAPI(store: devicesLayer.lifecycle.store, channels: gateways.apnsChannels, log: log).register(&r)
        if let journal { JournalAdminAPI(journal: journal, reads: journalReads).register(&r) }
        FaultAdminAPI(engine: faults, scenarios: scenarios).register(&r)
        r.add(.post, "/emulator/v1/fcm/service-accounts", maxBodySize: 64 * 1024) { ex in
            // What the answer needs is read here, on the loop; the key is made on the slow-work thread.
            let body = ex.request.body
            let scheme = ex.connection.transport == .tls ? "https" : "http"
            let host = ex.request.authority.map { String(decoding: $0, as: UTF8.self) } ?? "127.0.0.1:\(ex.connection.localPort)"
            let accepted = slowWork.submit { ex.respond(createServiceAccount(body, tokenURI: "\(scheme)://\(host)/token")) }
            if !accepted {
                var busy = AdminAPI.error(503, "\(slowWork.capacity) key generations are waiting already; retry shortly")
                busy.headers.add(name: "retry-after", value: "1")
                ex.respond(busy)
            }
        }
        r.add(.get, "/emulator/v1/fcm/service-accounts") { ex in
            ex.respond(.json(200, JSONObjectWriter.list("serviceAccounts", fcmAccounts.all.map(AdminAPI.serviceAccountJSON))))
        }
        let stateLog = state.log
        r.add(.post, "/emulator/v1/reset", maxBodySize: 1024) { ex in
            // Every registered store, and one record saying so in the state log.
            let scope: ResetScope = ex.request.queryParameter("all") == "true" ? .all : .state
            registry.reset(scope, log: stateLog, nowMs: Clock.nowMs())
            // The journal too (what was recorded before the reset); answered once it is empty.
            guard let journal else { return ex.respond(.json(200, "{\"reset\":true}")) }
            journal.reset { ex.respond(.json(200, "{\"reset\":true}")) }
        }
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
    /// 10 s) for the topic and broadcast sends answered before the request to be delivered, so
    /// a test that sends and then asks sees every device it reached.
    func longPoll(_ ex: Exchange, waitSeconds: Int, limit: Int, _ query: @escaping @Sendable () -> [PushNotification]) {
        let started = Clock.nowMs()
        let deadline = started + Int64(waitSeconds) * 1000
        let fanOut = records.fanOut
        let mark = fanOut?.submittedMark ?? 0
        @Sendable func attempt() {
            if let fanOut, !fanOut.hasFinished(mark), Clock.nowMs() < started + 10_000 {
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

    /// 503 with `retry-after` for a worker whose queue is full.
    static func busy(_ worker: BackgroundWorker, _ what: String) -> Response {
        var response = AdminAPI.error(503, "\(worker.capacity) \(what) are waiting already; retry shortly")
        response.headers.add(name: "retry-after", value: "1")
        return response
    }

    func createKey(_ req: Request) -> Response {
        var teamID: String?
        var keyID: String?
        var pem: String?
        var env: APNsEnvironment?
        var topics: [String]?
        if !req.body.isEmpty {
            do {
                try JSONObjectReader.read(req.body) { r in
                    teamID = try r.string("teamId")
                    keyID = try r.string("keyId")
                    pem = try r.string("publicKeyPem")
                    if let e = try r.string("environment") {
                        guard let known = APNsEnvironment(rawValue: e) else {
                            throw r.failure("environment", "must be sandbox or production")
                        }
                        env = known
                    }
                    topics = try r.strings("topics")
                }
            } catch {
                return AdminAPI.error(400, "\(error)")
            }
        }
        do {
            if let pem {
                guard let teamID, let keyID else { return AdminAPI.error(400, "teamId and keyId are required with publicKeyPem") }
                let e = try keys.register(teamID: teamID, keyID: keyID, publicKeyPEM: pem, environment: env, topics: topics)
                return .json(201, keyJSON(e))
            }
            let (e, privatePEM) = try keys.generate(teamID: teamID, keyID: keyID, environment: env, topics: topics)
            var object = keyObject(e)
            object.add("privateKeyPem", privatePEM)
            return .json(201, object.text)
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
    }

    func keyObject(_ e: APNsKeyStore.Entry) -> JSONObjectWriter {
        var object = JSONObjectWriter()
        object.add("teamId", e.teamID)
        object.add("keyId", e.keyID)
        if let environment = e.environment { object.add("environment", environment.rawValue) }
        if let topics = e.topics { object.add("topics", strings: topics) }
        return object
    }

    func keyJSON(_ e: APNsKeyStore.Entry) -> String {
        keyObject(e).text
    }

    /// `{"projectId": P}` generates an account; adding `clientEmail`, `privateKeyId` and
    /// `publicKeyPem` registers an existing one. Answers 201 with the service-account JSON
    /// (for a generated account, the complete key file, `token_uri` pointing at this emulator).
    /// `POST /emulator/v1/fcm/service-accounts` (run on the slow-work thread: it reads only its arguments).
    func createServiceAccount(_ body: [UInt8], tokenURI: String) -> Response {
        var fields: [String: String] = [:]
        do {
            try JSONObjectReader.read(body, example: #"{"projectId":"my-project"}"#) { r in
                fields["projectId"] = try r.string("projectId", required: true)
                for name in ["clientEmail", "privateKeyId", "publicKeyPem"] { fields[name] = try r.string(name) }
            }
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        guard let project = fields["projectId"] else { return AdminAPI.error(400, "projectId is required") }
        do {
            if let pem = fields["publicKeyPem"] {
                guard let email = fields["clientEmail"], let kid = fields["privateKeyId"] else {
                    return AdminAPI.error(400, "clientEmail and privateKeyId are required with publicKeyPem")
                }
                let a = try fcmAccounts.register(projectID: project, clientEmail: email, privateKeyID: kid, publicKeyPEM: pem)
                return .json(201, FCMServiceAccounts.accountJSON(a))
            }
            if fields["clientEmail"] != nil || fields["privateKeyId"] != nil {
                return AdminAPI.error(400, "clientEmail and privateKeyId are only accepted with publicKeyPem")
            }
            let (_, json) = try fcmAccounts.generate(projectID: project, tokenURI: tokenURI)
            return .json(201, json)
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
    }

    /// The admin API's error shape.
    package static func error(_ code: Int, _ message: String) -> Response {
        var error = JSONObjectWriter()
        error.add("code", code)
        error.add("message", message)
        var object = JSONObjectWriter()
        object.add("error", json: error.text)
        return .json(code, object.text)
    }
}

func intParameter(_ r: Request, _ name: String, default d: Int, range: ClosedRange<Int>) -> Int? {
    guard let v = r.queryParameter(name), !v.isEmpty else { return d }
    guard let n = Int(v), range.contains(n) else { return nil }
    return n
}

/// Decodes %XX escapes and '+' in a query value.
func percentDecode(_ s: String) -> String { PercentEncoding.decode(Array(s.utf8)[...], plusAsSpace: true) }

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
        return object.text
    }

    /// An FCM service account as `GET /emulator/v1/fcm/service-accounts` lists it.
    static func serviceAccountJSON(_ account: FCMServiceAccounts.Account) -> String {
        var object = JSONObjectWriter()
        object.add("projectId", account.projectID)
        object.add("projectNumber", String(account.projectNumber))
        object.add("clientEmail", account.clientEmail)
        object.add("clientId", String(account.clientID))
        object.add("privateKeyId", account.privateKeyID)
        return object.text
    }
}
