import APNs
import Admin
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

/// The composition root: turns a configuration into a running emulator. It builds each layer
/// once, plugs the gateways (APNs, FCM) into one `PushPipeline` each, puts their routes and the
/// admin API on one router, and starts and stops the services in one list. It holds no request
/// logic of its own.
///
/// ```
/// configuration -> stores (keys, accounts, registries, devices, log)   Emulator+Stores.swift
///               -> journal, fault engine                               Emulator+Journal/+Faults
///               -> the store registry; the state log read into it       Emulator+State.swift
///               -> rules and scenarios from files, --import-state       Emulator+Faults/+State
///               -> gateways -> pipelines -> router (+ admin)            here
///               -> services: journal, tracking dispatcher, fan-out worker, HTTP server (started in order, stopped in reverse)
/// ```
package final class Emulator: Sendable {
    package let configuration: EmulatorConfiguration
    /// What the emulator keeps (keys, accounts, registries, devices, logs).
    package let stores: Stores
    package let faults: FaultEngine
    package let journal: Journal?
    /// Every stateful service, once (reset, stats, snapshots, export and import go through it).
    package let registry: StoreRegistry
    /// `<data-dir>/state` (nil with `--in-memory`).
    package let stateLog: StateLog?
    /// Topic, condition and broadcast deliveries (tests wait on it).
    package let fanOut: FanOutWorker
    /// This node's link to its cluster (nil: a single node).
    package let cluster: ClusterLink?
    let server: HTTPServer
    /// Every route: the gateways' first, then the admin API's (what the server serves; tests
    /// drive it without sockets through `EmbeddedTransport`).
    package let router: Router
    let services: [any EmulatorService]

    package var apnsKeys: APNsKeyStore { stores.apnsKeys }
    package var apnsDevices: APNsDeviceRegistry { stores.apnsDevices }
    package var fcmAccounts: FCMServiceAccounts { stores.fcmAccounts }
    package var fcmDevices: FCMDeviceRegistry { stores.fcmDevices }
    package var deviceStore: DeviceStore { stores.devices }
    package var notifications: NotificationLog { stores.notifications }
    package var trackingLog: TrackingLog { stores.trackingLog }

    /// `gateways` are plugged in after APNs and FCM (a test's toy gateway; each with its own
    /// `PushProvider` index and routes).
    package init(configuration: EmulatorConfiguration, gateways extraGateways: [GatewayPlugin] = []) throws {
        self.configuration = configuration
        let stores = try Stores(configuration)
        self.stores = stores
        // Before the journal makes its files: whether an earlier pushemu left a data directory here.
        let earlierData = Emulator.holdsEarlierData(configuration)
        let journal = try Emulator.makeJournal(configuration, tracking: stores.trackingLog)
        self.journal = journal
        // Fleet members counted without a record read their inbox from the journal.
        if let journal { stores.devices.readInboxes(from: JournalDeliveryHistory(journal)) }
        let faults = Emulator.makeFaultEngine(configuration)
        let scenarios = faults.scenarios
        self.faults = faults
        let metrics = Metrics(loops: configuration.threads)
        let lifecycle = DeviceLifecycle(
            store: stores.devices, records: [stores.apnsDevices, stores.fcmDevices, stores.webPushSubscriptions])
        let pipelineServices = PipelineServices(
            log: stores.notifications, lifecycle: lifecycle, faults: faults, journal: journal,
            metrics: metrics, deferred: DeferredDeliveryWorker(lanes: configuration.deferredLanes))
        fanOut = pipelineServices.fanOut

        // The state: every store registered once, then rebuilt from the data directory's log.
        let deletionLabels = stores.devices
        let deletions = NotificationDeletions(
            log: stores.notifications, campaignKeys: configuration.campaignKeys,
            labels: { deletionLabels.device(token: $0)?.labels ?? [] })
        let logBox = StateLogBox()
        let registry = Emulator.registry(
            stores, faults: faults, metrics: metrics, deletions: deletions, journal: journal, fanOut: pipelineServices.fanOut,
            deferred: pipelineServices.deferred, stateLog: { logBox.log })
        self.registry = registry
        let devices = stores.devices
        let stateLog = try Emulator.openState(
            configuration, registry: registry, stores: stores, journal: journal, earlierData: earlierData,
            activity: { devices.stats.delivered &+ metrics.requestCount })
        logBox.log = stateLog
        self.stateLog = stateLog
        let cluster = try Emulator.joinCluster(
            configuration, registry: registry, stateLog: stateLog, metrics: metrics, faults: faults, fcmQuota: stores.fcmProvider.quota,
            fcmTokens: stores.fcmProvider.tokens)
        self.cluster = cluster
        if let cluster { stores.devices.events.name(node: cluster.options.node) }
        // What the configuration adds at each start (not kept), then an import.
        try Emulator.addConfiguredFaults(configuration, to: faults)
        if let path = configuration.importState { try Emulator.importState(path, registry: registry, log: stateLog) }

        // The gateways, each in its own pipeline: one line each.
        let apnsRules = APNsProvider(
            configuration: configuration.apns, keys: stores.apnsKeys, devices: stores.apnsDevices, channels: stores.apnsChannels)
        let gateways =
            [
                GatewayPlugin(
                    APNsGateway(rules: apnsRules, adaptiveStreams: configuration.apnsAdaptiveStreams),
                    tokenRate: configuration.apnsTokenRate > 0 ? TokenRateLimiter(perMinute: configuration.apnsTokenRate) : nil),
                GatewayPlugin(FCMGateway(rules: stores.fcmProvider)),
                GatewayPlugin(WebPushGateway(subscriptions: stores.webPushSubscriptions)),
            ] + extraGateways

        let gauges = ServerGauges()
        let slowWork = BackgroundWorker(capacity: 64)
        let journalReads = BackgroundWorker(capacity: 64, nice: 5)
        let admin = AdminAPI(
            gateways: .init(
                apnsKeys: stores.apnsKeys, apnsDevices: stores.apnsDevices, apnsChannels: stores.apnsChannels,
                fcmAccounts: stores.fcmAccounts,
                fcmDevices: stores.fcmDevices, fcmQuota: stores.fcmProvider.quota, webPush: stores.webPushSubscriptions,
                webPushLocalEndpoints: configuration.webPushLocalEndpoints),
            devices: .init(lifecycle: lifecycle, tracking: stores.trackingLog, dispatcher: stores.dispatcher),
            records: .init(
                log: stores.notifications, journal: journal, metrics: metrics, campaignKeys: configuration.campaignKeys,
                fanOut: pipelineServices.fanOut, deferred: pipelineServices.deferred),
            faults: faults, scenarios: scenarios,
            gauges: .init(openConnections: { gauges.server?.openConnections ?? 0 }, openStreams: { gauges.server?.openStreams ?? 0 }),
            metricsSources: [metrics, stores.trackingLog, stores.dispatcher, stores.devices, stores.notifications, faults]
                + [journal as (any MetricsSource)?, stateLog].compactMap { $0 },
            state: .init(registry: registry, log: stateLog, deletions: deletions, cluster: cluster),
            slowWork: slowWork, journalReads: journalReads,
            adminRate: configuration.adminRate, developmentCA: ProxyEnvironment.developmentCA)

        // One router: the push routes first (they are matched before the admin ones). The routes
        // that change state (the gateways' own, the admin API's) answer once their changes are
        // as durable as --durability says.
        var router = Router()
        var blocked: (@Sendable () -> String?)?
        if let link = cluster {
            blocked = { link.isDegraded ? link.degradedReason : nil }
        }
        let gate = stateLog.map { log in
            StateGate(log: log, blocked: blocked) { ex, message in
                ex.request.path.starts(with: Array("/emulator/".utf8)) ? AdminAPI.error(503, message) : ex.unavailableAnswer
            }
        }
        for gateway in gateways { gateway.install(into: &router, services: pipelineServices, gate: gate) }
        admin.register(&router, gate: gate)
        router.notFound = { request in
            for gateway in gateways { if let response = gateway.notFound(request) { return response } }
            return AdminAPI.error(404, "no route for \(request.method.name) \(request.path.utf8String)")
        }
        router.bodyTooLarge = { request in AdminAPI.error(413, "the body of \(request.method.name) \(request.path.utf8String) is too large")
        }
        router.unavailable = { _ in
            var response = AdminAPI.error(503, "pushemu is shedding load (its buffer budget is spent); retry shortly")
            response.headers.add(name: "retry-after", value: "1")
            return response
        }
        router.methodNotAllowed = { request, allowed in
            var response = AdminAPI.error(405, "\(request.method.name) is not allowed on \(request.path.utf8String)")
            response.headers.add(name: "allow", value: allowed.map(\.name).joined(separator: ", "))
            return response
        }

        self.router = router
        var serverConfiguration = try Emulator.serverConfiguration(configuration)
        serverConfiguration.sessionSetup = { connection in
            for gateway in gateways where gateway.setUpConnection(connection) { return }
        }
        serverConfiguration.acceptTLS = { loop in faults.admitHandshake(loop: loop, nowMs: Clock.nowMs()) }
        do {
            server = try HTTPServer(configuration: serverConfiguration, router: router)
        } catch {
            throw ConfigurationError("TLS setup failed: \(error)")
        }
        gauges.server = server
        services = [
            JournalService(journal: journal),
            StateService(log: stateLog, registry: registry, exportOnExit: configuration.exportStateOnExit),
            ClusterService(link: cluster),
            DispatcherService(dispatcher: stores.dispatcher),
            RegistrarService(registrar: stores.devices.registrar),
            FanOutService(worker: pipelineServices.fanOut), DeferredDeliveryService(worker: pipelineServices.deferred),
            SlowWorkService(worker: slowWork),
            SlowWorkService(worker: journalReads), HeapReclaimService(reclaimer: HeapReclaimer()),
            ServerService(server: server, configuration: configuration),
        ]
    }

    /// Starts every service in order: the journal, the tracking dispatcher, then the server
    /// (binding its listeners; the data directory is made first unless in memory).
    package func start() throws {
        try start(listening: true)
    }

    /// `start()`; with `listening: false` every service but the server (for tests that drive
    /// `router` through an `EmbeddedTransport`: nothing is bound).
    package func start(listening: Bool) throws {
        let startedMs = Clock.nowMs()
        for service in services where listening || !(service is ServerService) { try service.start() }
        // A node on a port chosen at bind time advertises the one it got.
        if let cluster, configuration.advertise == nil, configuration.httpPort == 0, let port = httpAddress?.port {
            cluster.advertise(Emulator.advertiseURL(configuration, hostname: Emulator.hostname(), port: port))
        }
        // A journal from an earlier run holds notifications the log never had: inspection
        // reads reach into it for anything older than this start.
        if let journal, journal.counts().requests > 0 { stores.notifications.markHistory(before: startedMs) }
    }

    package var httpAddress: BoundAddress? { server.httpAddress }
    package var httpsAddress: BoundAddress? { server.httpsAddress }

    /// The line scripts wait for.
    package var listeningLine: String {
        "pushemu listening http=\(httpAddress?.description ?? "-") https=\(httpsAddress?.description ?? "-")"
    }

    /// Stops every service in reverse order: GOAWAY to every connection and drain within the
    /// configured time, then the dispatcher, then the journal.
    package func shutdown() {
        for service in services.reversed() where !(service is ServerService) || server.httpAddress != nil || server.httpsAddress != nil {
            service.stop()
        }
    }

    /// The transport's settings from the configuration (listeners, limits, TLS, GOAWAY texts).
    static func serverConfiguration(_ configuration: EmulatorConfiguration) throws -> ServerConfiguration {
        var server = ServerConfiguration()
        server.host = configuration.host
        server.httpPort = configuration.httpPort
        server.httpsPort = configuration.httpsPort
        server.extraTLSPorts = configuration.apns.managePorts.keys.sorted()
        server.threads = configuration.threads
        server.tls = try Emulator.tlsConfiguration(configuration)
        server.intercept = Emulator.interceptConfiguration(configuration, clientCA: server.tls?.clientCAPEM)
        server.maxConcurrentStreams = configuration.maxConcurrentStreams
        server.limits.maxConnections = configuration.maxConnections
        server.limits.maxHeaderListSize = configuration.maxHeaderListSize
        server.limits.maxBufferedBytes = configuration.maxBufferedBytes
        server.timeouts.idle = configuration.idleTimeout
        server.timeouts.requestHead = configuration.headTimeout
        server.timeouts.requestBody = configuration.bodyTimeout
        server.timeouts.send = configuration.bodyTimeout
        server.idleGoAwayDebugData = Array("{\"reason\":\"IdleTimeout\"}".utf8)
        server.shutdownGoAwayDebugData = Array("{\"reason\":\"Shutdown\"}".utf8)
        return server
    }
}

/// The state log, for the registry's `/stats` entry made before the log is opened.
final class StateLogBox: @unchecked Sendable { // set once, before the server starts
    weak var log: StateLog?
}

/// The server, for the admin gauges built before it exists (`/metrics` reads its connections).
final class ServerGauges: @unchecked Sendable { // set once, before the server starts
    var server: HTTPServer?
}
