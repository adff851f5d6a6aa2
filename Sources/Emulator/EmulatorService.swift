import Cluster
import Fleet
import Glibc
import Journal
import Pipeline
import Runtime
import Tracking
import Transport

/// Something the emulator starts and stops with itself (`Emulator.services`: started in list
/// order, stopped in reverse). Both are called from the thread that runs the emulator.
protocol EmulatorService: Sendable {
    func start() throws
    func stop()
}

/// The journal's writer thread (nothing when the journal is off).
struct JournalService: EmulatorService {
    let journal: Journal?
    func start() throws { journal?.start() }
    func stop() { journal?.stop() }
}

/// The tracking dispatcher's lanes.
struct DispatcherService: EmulatorService {
    let dispatcher: TrackingDispatcher
    func start() throws { dispatcher.start() }
    func stop() { dispatcher.stop() }
}

/// The fleets' bulk registration: stopped before the dispatcher it feeds.
struct RegistrarService: EmulatorService {
    let registrar: FleetRegistrar
    func start() throws { registrar.start() }
    func stop() { registrar.stop() }
}

/// The fan-out worker (topic, condition and broadcast deliveries); stopping delivers what it
/// accepted first.
struct FanOutService: EmulatorService {
    let worker: FanOutWorker
    func start() throws { worker.start() }
    func stop() { worker.stop() }
}

/// The link to the cluster: joined (the stream applied) before the server listens, left after it stops.
struct ClusterService: EmulatorService {
    let link: ClusterLink?
    func start() throws {
        do {
            try link?.start()
        } catch {
            throw ConfigurationError("cannot join the cluster: \(error)")
        }
    }
    func stop() { link?.stop() }
}

/// The deferred-delivery worker (Web Push messages decrypted and delivered after their answer).
struct DeferredDeliveryService: EmulatorService {
    let worker: DeferredDeliveryWorker
    func start() throws { worker.start() }
    func stop() { worker.stop() }
}

/// A worker thread of the admin API (key generation; journal reads).
struct SlowWorkService: EmulatorService {
    let worker: BackgroundWorker
    func start() throws { worker.start() }
    func stop() { worker.stop() }
}

/// Memory given back to the kernel after bursts (`HeapReclaimer`).
struct HeapReclaimService: EmulatorService {
    let reclaimer: HeapReclaimer
    func start() throws { reclaimer.start() }
    func stop() { reclaimer.stop() }
}

/// The HTTP server: binds and serves; stops with GOAWAY and a drain.
struct ServerService: EmulatorService {
    let server: HTTPServer
    let configuration: EmulatorConfiguration

    func start() throws {
        if !configuration.inMemory { try Emulator.makeDirectory(configuration.dataDirectory) }
        do {
            try server.start()
        } catch TransportError.system(let what, let code) where code == EADDRINUSE {
            throw ConfigurationError("\(TransportError.system(what, code))" + ServerService.portInUseHint(what, configuration))
        } catch {
            throw ConfigurationError("\(error)")
        }
    }

    /// What to do about a port in use: it may be another pushemu (ask it), or start on a free
    /// port (`0`; the listening line says which).
    static func portInUseHint(_ what: String, _ configuration: EmulatorConfiguration) -> String {
        let http = what.hasSuffix(":\(configuration.httpPort)")
        let flag = http ? "--http-port" : "--https-port"
        var hint = " (another program has it"
        if http {
            let host = configuration.host == "0.0.0.0" || configuration.host == "::" ? "127.0.0.1" : configuration.host
            let shown = host.contains(":") ? "[\(host)]" : host
            hint += "; if it is a pushemu, `pushemu stats --server http://\(shown):\(configuration.httpPort)` asks it"
        }
        return hint + "; start with \(flag) 0 for a free port, or \(flag) with another)"
    }

    func stop() { server.shutdown(drainTimeout: configuration.drainTimeout) }
}
