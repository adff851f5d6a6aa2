import APNs
import Cluster
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
import WebPush

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
        /// APNs signing keys (`/emulator/v1/apns/keys`).
        package let apnsKeys: APNsKeyStore
        /// APNs device tokens the gateway has seen.
        package let apnsDevices: APNsDeviceRegistry
        /// APNs broadcast channels.
        package let apnsChannels: APNsChannelRegistry
        /// FCM service accounts (`/emulator/v1/fcm/service-accounts`).
        package let fcmAccounts: FCMServiceAccounts
        /// FCM registration tokens and topic subscriptions.
        package let fcmDevices: FCMDeviceRegistry
        /// FCM's per-project quota.
        package let fcmQuota: FCMQuota
        /// Web Push subscriptions (simulated browsers' keys and endpoints).
        package let webPush: WebPushSubscriptions
        /// Whether a new subscription's endpoint is under pushemu's own address by default.
        package let webPushLocalEndpoints: Bool

        /// The gateways' stores, as the composition root made them.
        package init(
            apnsKeys: APNsKeyStore, apnsDevices: APNsDeviceRegistry, apnsChannels: APNsChannelRegistry = APNsChannelRegistry(),
            fcmAccounts: FCMServiceAccounts, fcmDevices: FCMDeviceRegistry, fcmQuota: FCMQuota,
            webPush: WebPushSubscriptions = WebPushSubscriptions(), webPushLocalEndpoints: Bool = false
        ) {
            self.webPush = webPush
            self.webPushLocalEndpoints = webPushLocalEndpoints
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
        /// Devices' lifecycle: ensure, uninstall, rotate, describe.
        package let lifecycle: DeviceLifecycle
        /// The SDK tracking attempts.
        package let tracking: TrackingLog
        /// Where tracking and registration calls go.
        package let dispatcher: TrackingDispatcher

        /// The device layer and its tracking, as the composition root made them.
        package init(lifecycle: DeviceLifecycle, tracking: TrackingLog, dispatcher: TrackingDispatcher) {
            self.lifecycle = lifecycle
            self.tracking = tracking
            self.dispatcher = dispatcher
        }
    }

    /// What was recorded: the notification log, the journal (nil when off), the metrics.
    package struct Records: Sendable {
        /// The in-memory notification log.
        package let log: NotificationLog
        /// The journal (nil with `--journal off`).
        package let journal: Journal?
        /// Request metrics.
        package let metrics: Metrics
        /// `--campaign-key`: extra payload paths that name a campaign.
        package let campaignKeys: [String]
        /// Topic, condition and broadcast deliveries still to make (`stats.fanOut`).
        package let fanOut: FanOutWorker?
        /// Pushes answered and not yet delivered (Web Push decryption; `stats.deferred`).
        package let deferred: DeferredDeliveryWorker?

        /// What was recorded, and the payload keys that name a campaign.
        package init(
            log: NotificationLog, journal: Journal?, metrics: Metrics, campaignKeys: [String], fanOut: FanOutWorker? = nil,
            deferred: DeferredDeliveryWorker? = nil
        ) {
            self.fanOut = fanOut
            self.deferred = deferred
            self.log = log
            self.journal = journal
            self.metrics = metrics
            self.campaignKeys = campaignKeys
        }
    }

    /// The state: the store registry (reset, stats, export, import), the state log (nil with
    /// `--in-memory`), and the record of deleted notifications (the registry resets it).
    package struct StateParts: Sendable {
        /// Every store, for reset, stats, export and import.
        package let registry: StoreRegistry
        /// The state log (nil in memory).
        package let log: StateLog?
        /// Notifications deleted through the admin API (reset with the stores).
        package let deletions: NotificationDeletions
        /// This node's link to its cluster (nil: a single node).
        package let cluster: ClusterLink?

        /// The state parts, as the composition root made them.
        package init(registry: StoreRegistry, log: StateLog?, deletions: NotificationDeletions, cluster: ClusterLink? = nil) {
            self.registry = registry
            self.log = log
            self.deletions = deletions
            self.cluster = cluster
        }
    }

    /// The transport's gauges (read when `/metrics` is scraped).
    package struct ServerGauges: Sendable {
        /// Connections open now.
        package let openConnections: @Sendable () -> Int
        /// HTTP/2 streams open now.
        package let openStreams: @Sendable () -> Int

        /// Gauges read from the server when `/metrics` is scraped.
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

    /// The admin API over the emulator's parts (the composition root's call).
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

    /// The resources under `/emulator/v1`, in the order their routes are tried.
    var resources: [any AdminResource] {
        let lifecycle = devicesLayer.lifecycle
        let deviceStore = lifecycle.store
        let clusterReads = state.cluster.map { ClusterReads(link: $0, worker: slowWork) }
        let journalAPI = records.journal.map {
            JournalAdminAPI(
                journal: $0, reads: journalReads, clusterReads: clusterReads,
                labels: { [deviceStore] in deviceStore.device(token: $0)?.labels ?? [] }, deletions: state.deletions)
        }
        var list: [any AdminResource] = [
            APNsKeysAdminAPI(keys: gateways.apnsKeys),
            FCMServiceAccountsAdminAPI(fcmAccounts: gateways.fcmAccounts, slowWork: slowWork),
            NotificationsAdminAPI(
                log: records.log, journal: records.journal, journalReads: journalReads, deletions: state.deletions,
                campaignKeys: records.campaignKeys, fanOut: records.fanOut, deferred: records.deferred, tracking: devicesLayer.tracking,
                deviceStore: deviceStore, clusterReads: clusterReads),
            DevelopmentCAAdminAPI(pem: developmentCA),
            StatsAdminAPI(
                registry: state.registry, stateMemory: deviceStore.memory.memory,
                scoped: ScopedStats(
                    log: records.log, deletions: state.deletions, faults: faults, scenarios: scenarios, deviceStore: deviceStore,
                    apnsKeys: gateways.apnsKeys, fcmAccounts: gateways.fcmAccounts),
                clusterReads: clusterReads),
            StateAdminAPI(registry: state.registry, log: state.log, slowWork: slowWork),
            ClusterAdminAPI(link: state.cluster, slowWork: slowWork),
            DevicesAdminAPI(
                lifecycle: lifecycle, apnsDevices: gateways.apnsDevices, fcmDevices: gateways.fcmDevices, webPush: gateways.webPush,
                webPushLocalEndpoints: gateways.webPushLocalEndpoints, log: records.log),
            FleetsAdminAPI(
                deviceStore: deviceStore, webPush: gateways.webPush, webPushLocalEndpoints: gateways.webPushLocalEndpoints,
                slowWork: slowWork, cluster: state.cluster, apnsKeys: gateways.apnsKeys),
            TrackingAdminAPI(
                tracking: devicesLayer.tracking, journal: journalAPI,
                scopeTokens: { [log = records.log] in $0.tokens(log: log, devices: deviceStore) }, clusterReads: clusterReads),
            LiveActivityAdminAPI(store: deviceStore, channels: gateways.apnsChannels, log: records.log, clusterReads: clusterReads),
            FaultAdminAPI(engine: faults, scenarios: scenarios),
            ResetAdminAPI(
                registry: state.registry, stateLog: state.log, journal: records.journal, deletions: state.deletions, faults: faults,
                clusterReads: clusterReads),
        ]
        if let journalAPI { list.append(journalAPI) }
        return list
    }

    /// Adds the admin routes, in three groups by the middleware they need:
    ///
    /// - the probes (`/healthz`, `/metrics`): only the browser guard; never rate-limited or
    ///   held, so probes and scrapers always get through;
    /// - `/emulator/v1`: the rate limit (`--admin-rate`) and the browser guard; then, but for the
    ///   event stream (a long-lived read), `gate`: the state log's durability gate (an answer
    ///   that changed state leaves once the change is durable);
    /// - the dashboard (`/`, `/ui/*`): as `/emulator/v1`.
    package func register(_ r: inout Router, gate: StateGate? = nil) {
        let guarded: [any RouterMiddleware] = [BrowserGuard()]
        let limited: [any RouterMiddleware] = rateLimit.perSecond > 0 ? [rateLimit] : []
        let held: [any RouterMiddleware] = gate.map { [$0] } ?? []
        r.group(middleware: guarded) { probes in
            HealthAdminAPI(journal: records.journal, stateLog: state.log, cluster: state.cluster).register(&probes)
            MetricsAdminAPI(
                sources: metricsSources, gauges: gauges, stateMemory: devicesLayer.lifecycle.store.memory.memory,
                node: state.cluster?.options.node
            )
            .register(&probes)
        }
        let resources = self.resources
        r.group("/emulator/v1", middleware: limited + guarded) { api in
            EventsAdminAPI(
                bus: devicesLayer.lifecycle.store.events, cluster: state.cluster,
                labels: { [store = devicesLayer.lifecycle.store] in store.device(token: $0)?.labels ?? [] }
            ).register(&api)
            api.group("", middleware: held) { changing in
                for resource in resources { resource.register(&changing) }
            }
        }
        r.group(middleware: limited + guarded + held) { ui in WebUI().register(&ui) }
    }

    /// 503 with `retry-after` for a worker whose queue is full.
    static func busy(_ worker: BackgroundWorker, _ what: String) -> Response {
        var response = AdminAPI.error(503, "\(worker.capacity) \(what) are waiting already; retry shortly")
        response.headers.add(name: "retry-after", value: "1")
        return response
    }

    /// The admin API's error shape.
    package static func error(_ code: Int, _ message: String) -> Response { .json(code, errorBody(code, message)) }

    /// Its body: `{"error":{"code","message"}}`.
    static func errorBody(_ code: Int, _ message: String) -> String {
        var error = JSONObjectWriter()
        error.add("code", code)
        error.add("message", message)
        var object = JSONObjectWriter()
        object.add("error", json: error.text)
        return object.text
    }
}

func intParameter(_ r: Request, _ name: String, default d: Int, range: ClosedRange<Int>) -> Int? {
    guard let v = r.queryParameter(name), !v.isEmpty else { return d }
    guard let n = Int(v), range.contains(n) else { return nil }
    return n
}

/// Decodes %XX escapes and '+' in a query value.
func percentDecode(_ s: String) -> String { PercentEncoding.decode(Array(s.utf8)[...], plusAsSpace: true) }
