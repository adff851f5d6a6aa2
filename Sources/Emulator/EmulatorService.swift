import Fleet
import Journal
import Pipeline
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

/// A worker thread of the admin API (key generation; journal reads).
struct SlowWorkService: EmulatorService {
    let worker: BackgroundWorker
    func start() throws { worker.start() }
    func stop() { worker.stop() }
}

/// The HTTP server: binds and serves; stops with GOAWAY and a drain.
struct ServerService: EmulatorService {
    let server: HTTPServer
    let configuration: EmulatorConfiguration

    func start() throws {
        if !configuration.inMemory { try Emulator.makeDirectory(configuration.dataDirectory) }
        do {
            try server.start()
        } catch {
            throw ConfigurationError("\(error)")
        }
    }

    func stop() { server.shutdown(drainTimeout: configuration.drainTimeout) }
}
