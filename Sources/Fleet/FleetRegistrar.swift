import CSystem
import Glibc
import PushCore
import Runtime
import Synchronization
import Tracking
import Transport

/// One fleet's bulk registration: where it stands. Shared by the registrar thread (which
/// advances it) and the admin API (which reads, pauses and resumes it).
public final class FleetRegistration: Sendable {
    public enum State: String, Sendable { case running, paused, done }
    let config: RegistrationConfig
    /// Registrations a second at most.
    public let rate: Int
    public let total: Int
    /// The next member index to register (every index below it was sent or skipped).
    let next = Atomic<Int>(0)
    let sent = Atomic<Int>(0)
    /// Members that start uninstalled: their app never registers.
    let skipped = Atomic<Int>(0)
    /// Times the dispatcher's queue was full and the registrar waited (nothing is dropped).
    let waits = Atomic<Int>(0)
    let paused = Atomic<Bool>(false)
    let startedAtMs: Int64
    let finishedAtMs = Atomic<Int64>(0)

    /// Where it stands, as a checkpoint compares it.
    struct Mark: Equatable {
        var next = 0, sent = 0, skipped = 0, waits = 0
        var paused = false
        var finishedAtMs: Int64 = 0
    }
    var mark: Mark {
        Mark(
            next: next.load(ordering: .relaxed), sent: sent.load(ordering: .relaxed), skipped: skipped.load(ordering: .relaxed),
            waits: waits.load(ordering: .relaxed), paused: paused.load(ordering: .relaxed),
            finishedAtMs: finishedAtMs.load(ordering: .relaxed))
    }
    /// The mark last written to the state log.
    let checkpointed = FutexLock(Mark())

    init(config: RegistrationConfig, rate: Int, total: Int, nowMs: Int64) {
        self.config = config
        self.rate = rate
        self.total = total
        startedAtMs = nowMs
    }

    public var state: State {
        if next.load(ordering: .acquiring) >= total { return .done }
        return paused.load(ordering: .relaxed) ? .paused : .running
    }

    /// `{"state","registered","skipped","total","rate","waitedForQueue","startedAt","finishedAt"}`.
    public var json: String {
        let finished = finishedAtMs.load(ordering: .relaxed)
        return "{\"state\":\"\(state.rawValue)\",\"preset\":" + JSONWriter.quote(config.preset)
            + ",\"registered\":\(sent.load(ordering: .relaxed))"
            + ",\"skipped\":\(skipped.load(ordering: .relaxed)),\"total\":\(total),\"rate\":\(rate)"
            + ",\"waitedForQueue\":\(waits.load(ordering: .relaxed)),\"startedAt\":\(startedAtMs),\"finishedAt\":"
            + (finished > 0 ? String(finished) : "null") + "}"
    }
}

/// Registers fleets' devices in bulk, as each member's app would on install, at each fleet's
/// `registerRate`: one thread, woken when a fleet is added or resumed, sleeping when none is
/// running. Calls go to the tracking dispatcher; when its queue is full the registrar waits and
/// tries the same member again, so none is lost and none is sent twice. Progress is per fleet
/// (`FleetRegistration`), pausable and resumable from where it stopped.
public final class FleetRegistrar: @unchecked Sendable { // `thread` is touched by start/stop only
    private let work = FutexLock<[(FleetSpec, FleetRegistration)]>([])
    private let stopping = Atomic<Bool>(false)
    private let wakeFD: Int32
    private var thread: pthread_t?
    weak var store: DeviceStore?
    static let tickMs: Int64 = 5

    public init() { wakeFD = csys_eventfd() }

    deinit { close(wakeFD) }

    public func start() {
        guard thread == nil else { return }
        thread = Threads.spawn { [self] in self.run() }
    }

    public func stop() {
        stopping.store(true, ordering: .releasing)
        wake()
        if let t = thread { pthread_join(t, nil) }
        thread = nil
    }

    func add(_ spec: FleetSpec, _ registration: FleetRegistration) {
        work.withLock { $0.append((spec, registration)) }
        wake()
    }

    /// Forgets every fleet (a reset).
    func removeAll() { work.withLock { $0.removeAll() } }

    /// Pauses or resumes a fleet's registration.
    public func setPaused(_ registration: FleetRegistration, _ paused: Bool) {
        registration.paused.store(paused, ordering: .relaxed)
        store?.logRegistration(registration)
        if !paused { wake() }
    }

    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    private func run() {
        var last = Clock.nowMs()
        var credit: [ObjectIdentifier: Double] = [:]
        while !stopping.load(ordering: .acquiring) {
            let running = work.withLock { list in
                list.removeAll { $0.1.state == .done }
                return list.filter { $0.1.state == .running }
            }
            if running.isEmpty {
                // Asleep until a fleet is added or resumed.
                credit.removeAll()
                sleep(ms: 1000)
                last = Clock.nowMs()
                continue
            }
            let now = Clock.nowMs()
            let elapsed = Double(max(0, min(now - last, 1000)))
            last = now
            for (spec, registration) in running {
                let id = ObjectIdentifier(registration)
                // Credit for the time passed, capped at a tenth of a second's worth (no burst).
                var allowance = min((credit[id] ?? 0) + Double(registration.rate) * elapsed / 1000, Double(registration.rate) / 10 + 1)
                while allowance >= 1, registration.state == .running {
                    guard let store else { return }
                    if !registerNext(spec, registration, store: store, nowMs: now) {
                        registration.waits.add(1, ordering: .relaxed)
                        break
                    }
                    allowance -= 1
                }
                credit[id] = allowance
                if registration.state == .done {
                    credit[id] = nil
                    if registration.finishedAtMs.load(ordering: .relaxed) == 0 {
                        registration.finishedAtMs.store(Clock.nowMs(), ordering: .relaxed)
                    }
                }
            }
            sleep(ms: Int32(FleetRegistrar.tickMs))
        }
    }

    /// Waits `ms` or until `wake()`, then clears the wake-up.
    private func sleep(ms: Int32) {
        var pfd = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, ms) > 0 else { return }
        var drained: UInt64 = 0
        _ = Glibc.read(wakeFD, &drained, 8)
    }

    /// Registers member `next` (or skips it when it starts uninstalled); false when the
    /// dispatcher's queue is full (the member is tried again next time).
    private func registerNext(_ spec: FleetSpec, _ r: FleetRegistration, store: DeviceStore, nowMs: Int64) -> Bool {
        let index = r.next.load(ordering: .relaxed)
        guard index < r.total else { return true }
        if spec.startsUninstalled(index) {
            r.skipped.add(1, ordering: .relaxed)
            r.next.store(index + 1, ordering: .releasing)
            return true
        }
        let token = store.token(spec, index: index)
        let ctx = RegistrationContext(
            event: .register, platform: spec.platform.rawValue, token: token, app: spec.app, hwid: TrackingContext.hardwareID(token),
            atMs: nowMs)
        switch RegistrationPresets.job(r.config, ctx, lastFingerprint: nil) {
        case .skip:
            r.skipped.add(1, ordering: .relaxed)
        case .job(let job, _):
            guard let dispatcher = store.dispatcher, dispatcher.offer(job) else { return false }
            r.sent.add(1, ordering: .relaxed)
        }
        r.next.store(index + 1, ordering: .releasing)
        return true
    }
}
