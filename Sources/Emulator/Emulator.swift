import APNs
import FCM
import Faults
import Journal
import Fleet
import Tracking
import Glibc
import PushCore
import Transport

/// The composition root: turns a configuration into a running server with its routes.
public final class Emulator: @unchecked Sendable {
    public let configuration: EmulatorConfiguration
    let server: HTTPServer
    public let apnsKeys: APNsKeyStore
    public let apnsDevices: APNsDeviceRegistry
    public let notifications: NotificationLog
    public let fcmAccounts: FCMServiceAccounts
    public let fcmDevices: FCMDeviceRegistry
    public let deviceStore: DeviceStore
    public let trackingLog: TrackingLog
    let dispatcher: TrackingDispatcher
    public let faults: FaultEngine
    public let journal: Journal?
    let scenarios: ScenarioRegistry

    public init(configuration: EmulatorConfiguration) throws {
        self.configuration = configuration
        var sc = ServerConfiguration()
        sc.host = configuration.host
        sc.httpPort = configuration.httpPort
        sc.httpsPort = configuration.httpsPort
        sc.threads = configuration.threads
        sc.tls = try Emulator.tlsConfiguration(configuration)
        sc.maxConcurrentStreams = configuration.maxConcurrentStreams
        sc.limits.maxConnections = configuration.maxConnections
        sc.limits.maxHeaderListSize = configuration.maxHeaderListSize
        sc.timeouts.idle = configuration.idleTimeout
        sc.idleGoAwayDebugData = Array("{\"reason\":\"IdleTimeout\"}".utf8)
        sc.shutdownGoAwayDebugData = Array("{\"reason\":\"Shutdown\"}".utf8)
        let apnsSetup = APNsService.sessionSetup(configuration.apns)
        let fcmStreams = configuration.fcm.streams
        sc.sessionSetup = { ctx in
            if let sni = ctx.serverName, FCMService.applies(toServerName: sni) {
                ctx.initialMaxConcurrentStreams = fcmStreams
            } else {
                apnsSetup(ctx)
            }
        }

        apnsKeys = APNsKeyStore(directory: configuration.inMemory ? nil : configuration.dataDirectory + "/apns/keys")
        if let t = configuration.devices.defaultTracking, t.url.isEmpty, !(t.preset == "pushwoosh" && t.options["appCode"] != nil) {
            throw ConfigurationError("--tracking-preset \(t.preset) needs --tracking-url")
        }
        trackingLog = TrackingLog(capacity: configuration.trackingLogSize)
        dispatcher = TrackingDispatcher(options: configuration.tracking, log: trackingLog)
        deviceStore = DeviceStore(configuration: configuration.devices, dispatcher: dispatcher)
        let strict = configuration.devices.policy == .strict
        apnsDevices = APNsDeviceRegistry(directory: deviceStore, strict: strict)
        notifications = NotificationLog(shards: configuration.threads, capacity: configuration.notificationLogSize)
        let fcmDirectory = configuration.inMemory ? nil : configuration.dataDirectory + "/fcm"
        fcmAccounts = FCMServiceAccounts(directory: fcmDirectory.map { $0 + "/service-accounts" })
        fcmDevices = FCMDeviceRegistry(directory: deviceStore, strict: strict)

        // Faults: rules and shaping applied after the providers decide.
        var shaping = FaultEngine.Shaping()
        shaping.latency = configuration.latency
        faults = FaultEngine(loops: configuration.threads, shaping: shaping, allowOverrideHeader: configuration.allowOverrideHeader)
        scenarios = ScenarioRegistry()
        let deviceAdmin = DeviceAdminAPI(store: deviceStore, apnsDevices: apnsDevices, fcmDevices: fcmDevices, tracking: trackingLog,
                                         dispatcher: dispatcher, log: notifications)
        let faultHandling = FaultHandling(engine: faults, store: deviceStore, stateChange: { token, rotate in
            // The same paths as the admin API's DELETE and :rotate.
            if rotate { _ = deviceAdmin.rotate(token, Clock.nowMs()) } else { deviceAdmin.uninstall(token, Clock.nowMs()) }
        })

        let metrics = Metrics(loops: configuration.threads)
        if let durability = configuration.durability {
            do {
                if !configuration.inMemory { try Emulator.makeDirectory(configuration.dataDirectory) }
                let keys = configuration.campaignKeys
                let retention = Journal.Retention(maxRecords: configuration.journalMaxRecords ?? (configuration.inMemory ? 1_000_000 : 10_000_000),
                                                  maxAgeMs: configuration.journalMaxAgeMs)
                journal = try Journal(path: configuration.inMemory ? nil : configuration.dataDirectory + "/journal.sqlite",
                                      durability: durability, loops: configuration.threads, retention: retention,
                                      campaignOf: { provider, payload in
                                          CampaignID.first(request: PayloadReader(Array(payload)), provider: provider, extra: keys)
                                      })
            } catch let e as ConfigurationError {
                throw e
            } catch {
                throw ConfigurationError("\(error)")
            }
        } else {
            journal = nil
        }
        if let journalForTracking = journal {
          trackingLog.onRecord = { a in
            journalForTracking.appendTracking(atMs: a.atMs, preset: a.preset, event: a.event.rawValue, token: a.token,
                                              notificationID: a.notificationID, method: a.method, url: a.url, status: a.status,
                                              outcome: a.outcome, attempt: a.attempt, latencyMs: a.latencyMs, error: a.error,
                                              events: a.events)
          }
        }
        let apns = APNsService(provider: APNsProvider(configuration: configuration.apns, keys: apnsKeys, devices: apnsDevices),
                               log: notifications, devices: deviceStore, faults: faultHandling,
                               tokenRate: configuration.apnsTokenRate > 0 ? TokenRateLimiter(perMinute: configuration.apnsTokenRate) : nil,
                               adaptiveStreams: configuration.apnsAdaptiveStreams,
                               answers: AnswerRecording(provider: .apns, journal: journal, metrics: metrics))
        let fcmProvider = FCMProvider(configuration: configuration.fcm, accounts: fcmAccounts,
                                      tokens: FCMAccessTokens.load(directory: fcmDirectory), devices: fcmDevices,
                                      quota: FCMQuota(perMinute: configuration.fcm.quotaPerMinute))
        let fcm = FCMService(provider: fcmProvider, log: notifications, devices: deviceStore, faults: faultHandling, metrics: metrics, journal: journal)
        let serverRef = ServerRef()
        let admin = AdminAPI(keys: apnsKeys, devices: apnsDevices, log: notifications, fcmAccounts: fcmAccounts,
                             fcmDevices: fcmDevices, fcmQuota: fcmProvider.quota, store: deviceStore, tracking: trackingLog,
                             dispatcher: dispatcher, faults: faults, scenarios: scenarios, metrics: metrics,
                             openConnections: { serverRef.server?.openConnections ?? 0 },
                             openStreams: { serverRef.server?.openStreams ?? 0 }, journal: journal,
                             campaignKeys: configuration.campaignKeys)
        if configuration.fcmOverloadPercent > 0 {
            var m = FaultMatch()
            m.provider = .fcm
            m.percent = configuration.fcmOverloadPercent
            var e = FaultEffect()
            e.errorCode = "UNAVAILABLE"
            e.retryAfter = 2
            faults.add(FaultRule(id: faults.newID(), match: m, effect: e, seed: 0, createdAtMs: Clock.nowMs(),
                                 matchJSON: "{\"provider\":\"fcm\",\"percent\":\(configuration.fcmOverloadPercent)}",
                                 effectJSON: "{\"errorCode\":\"UNAVAILABLE\",\"retryAfter\":2}"))
        }
        // Rules and a scenario from files, checked now so a bad file fails the start.
        if let path = configuration.faultsFile {
            let engine = faults
            do {
                for r in try FaultParser.rules(try Emulator.readFile(path, what: "faults"), nowMs: Clock.nowMs(), id: { engine.newID() }) { faults.add(r) }
            } catch let e as ConfigurationError { throw e } catch { throw ConfigurationError("--faults \(path): \(error)") }
        }
        if let path = configuration.scenarioFile {
            let engine = faults
            do {
                let sc = try Scenario.parse(try Emulator.readFile(path, what: "scenario"), id: scenarios.newID(), nowMs: Clock.nowMs(),
                                            ruleID: { engine.newID() })
                scenarios.add(sc, to: faults)
            } catch let e as ConfigurationError { throw e } catch { throw ConfigurationError("--scenario \(path): \(error)") }
        }
        let engine = faults
        sc.acceptTLS = { loop in engine.admitHandshake(loop: loop, nowMs: Clock.nowMs()) }
        do {
            server = try HTTPServer(configuration: sc, router: Emulator.router(admin: admin, apns: apns, fcm: fcm))
            serverRef.server = server
        } catch {
            throw ConfigurationError("TLS setup failed: \(error)")
        }
    }

    /// Creates the data directory (unless in memory), binds and starts serving.
    public func start() throws {
        if !configuration.inMemory {
            try Emulator.makeDirectory(configuration.dataDirectory)
        }
        do {
            try server.start()
        } catch {
            throw ConfigurationError("\(error)")
        }
        dispatcher.start()
        journal?.start()
    }

    public var httpAddress: BoundAddress? { server.httpAddress }
    public var httpsAddress: BoundAddress? { server.httpsAddress }

    /// The line scripts wait for.
    public var listeningLine: String {
        "pushemu listening http=\(httpAddress?.description ?? "-") https=\(httpsAddress?.description ?? "-")"
    }

    /// GOAWAY to every connection, drain within the configured time, stop.
    public func shutdown() {
        server.shutdown(drainTimeout: configuration.drainTimeout)
        dispatcher.stop()
        journal?.stop()
    }

    // MARK: wiring

    static func router(admin: AdminAPI, apns: APNsService, fcm: FCMService) -> Router {
        var r = Router()
        let apnsConfiguration = apns.provider.configuration
        r.notFound = { req in
            // Under an APNs host name every unknown path is APNs's 404 BadPath.
            if let a = req.authority, APNsEnvironment.forHost(a) != nil {
                return APNsProvider.errorResponse(.badPath, request: req, configuration: apnsConfiguration)
            }
            return AdminAPI.error(404, "no route for \(req.method.name) \(req.path.utf8String)")
        }
        r.methodNotAllowed = { req, allowed in
            var resp = AdminAPI.error(405, "\(req.method.name) is not allowed on \(req.path.utf8String)")
            resp.headers.add(name: "allow", value: allowed.map(\.name).joined(separator: ", "))
            return resp
        }
        // The hot routes first: they are matched before the admin ones.
        apns.register(&r)   // per-connection state in slot0
        fcm.register(&r)    // per-connection state in slot1
        admin.register(&r)
        return r
    }

    static func tlsConfiguration(_ c: EmulatorConfiguration) throws -> TLSConfiguration {
        let cert: [UInt8], key: [UInt8]
        switch (c.certificatePath, c.keyPath) {
        case (nil, nil):
            cert = Array(DevelopmentCredentials.serverCertificate.utf8)
            key = Array(DevelopmentCredentials.serverKey.utf8)
        case (let cp?, let kp?):
            cert = try readFile(cp, what: "certificate")
            key = try readFile(kp, what: "key")
        case (_?, nil):
            throw ConfigurationError("--cert needs --key")
        case (nil, _?):
            throw ConfigurationError("--key needs --cert")
        }
        let ca = try c.clientCAPath.map { try readFile($0, what: "client CA") }
            ?? Array(DevelopmentCredentials.certificateAuthority.utf8)
        return TLSConfiguration(certificateChainPEM: cert, privateKeyPEM: key, clientCAPEM: ca)
    }

    static func readFile(_ path: String, what: String) throws -> [UInt8] {
        guard let f = fopen(path, "rb") else {
            throw ConfigurationError("cannot read \(what) file '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n > 0 { out.append(contentsOf: buf[0..<n]) }
            if n < buf.count { break }
            if out.count > 16 * 1024 * 1024 { throw ConfigurationError("\(what) file '\(path)' is too large") }
        }
        if ferror(f) != 0 { throw ConfigurationError("cannot read \(what) file '\(path)'") }
        return out
    }

    static func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part + "/"
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw ConfigurationError("cannot create data directory '\(path)': \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// The server, for admin endpoints built before it exists (`/metrics` reads its connections).
final class ServerRef: @unchecked Sendable {   // set once, before the server starts
    var server: HTTPServer?
}
