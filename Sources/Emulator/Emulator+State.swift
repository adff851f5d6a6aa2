import APNs
import Admin
import CSystem
import FCM
import Faults
import Fleet
import Journal
import Pipeline
import PushCore
import Runtime
import State
import Tracking
import WebPush

extension Emulator {
    /// Every stateful service, listed once: the order in which reset, `/stats`, snapshots,
    /// export and import visit them (credentials first, devices before the registries that
    /// refer to them).
    static func registry(
        _ stores: Stores, faults: FaultEngine, metrics: Metrics, deletions: NotificationDeletions, journal: Journal?,
        fanOut: FanOutWorker, deferred: DeferredDeliveryWorker, stateLog: @escaping @Sendable () -> StateLog?
    ) -> StoreRegistry {
        let log = stores.notifications
        let tracking = stores.trackingLog
        let dispatcher = stores.dispatcher
        let devices = stores.devices
        let quota = stores.fcmProvider.quota
        return StoreRegistry([
            stores.apnsKeys, stores.fcmAccounts, stores.fcmProvider.tokens, stores.devices, stores.apnsDevices, stores.fcmDevices,
            stores.apnsChannels, stores.webPushSubscriptions,
            TransientStore(
                "notifications",
                reset: { _ in log.removeAll() },
                stats: { s in
                    s.add("notifications", "kept", log.count)
                    s.add("notifications", "evicted", log.evicted)
                }),
            deletions,
            TransientStore(
                "tracking", reset: { _ in tracking.removeAll() },
                stats: { s in
                    let c = tracking.counters
                    s.add("tracking", "scheduled", c.scheduled)
                    s.add("tracking", "skipped", devices.stats.trackingSkipped)
                    s.add("tracking", "attempts", c.attempts)
                    s.add("tracking", "succeeded", c.succeeded)
                    s.add("tracking", "failed", c.failed)
                    s.add("tracking", "retried", c.retried)
                    s.add("tracking", "dropped", c.dropped)
                    s.add("tracking", "queued", dispatcher.depth)
                    s.add("tracking", "spooled", dispatcher.spooled)
                    s.add("tracking", "recordsEvicted", c.evicted)
                }),
            TransientStore(
                "events", reset: { _ in },
                stats: { s in s.add("events", "subscribers", devices.events.subscriberCount) }),
            TransientStore(
                "fanOut", reset: { _ in },
                stats: { s in
                    let c = fanOut.counters
                    s.add("fanOut", "pending", c.pending)
                    s.add("fanOut", "completed", c.completed)
                    s.add("fanOut", "delivered", c.delivered)
                    s.add("fanOut", "lastRatePerSecond", Int(c.lastRate))
                }),
            TransientStore(
                "deferred", reset: { _ in },
                stats: { s in
                    let c = deferred.counters
                    s.add("deferred", "lanes", c.lanes)
                    s.add("deferred", "pending", c.pending)
                    s.add("deferred", "completed", c.completed)
                }),
            TransientStore("fcm.quota", reset: { _ in quota.reset() }),
            TransientStore("metrics", reset: { _ in metrics.reset() }),
            faults,
            TransientStore(
                "journal", reset: { _ in },
                stats: { s in
                    if let journal { s.set("journal", json: AdminAPI.journalStats(journal)) } else { s.set("journal", json: "null") }
                }),
            TransientStore(
                "state", reset: { _ in },
                stats: { s in s.set("state", json: stateLog().map(AdminAPI.stateStats) ?? "null") }),
        ])
    }

    /// The state log's durability: the journal's setting (`--durability off`: behind, as relaxed).
    static func stateDurability(_ configuration: EmulatorConfiguration) -> StateLog.Durability {
        switch configuration.durability {
        case .strict?: .strict
        case .sync?: .sync
        case .relaxed?, nil: .relaxed
        }
    }

    /// Opens `<data-dir>/state` (rebuilding every store from it), says on stderr what start
    /// found, registers the credentials the drop-in folders hold, and hands the log to the
    /// journal's writer. nil with `--in-memory`.
    static func openState(
        _ configuration: EmulatorConfiguration, registry: StoreRegistry, stores: Stores, journal: Journal?, earlierData: Bool,
        activity: @escaping @Sendable () -> UInt64
    ) throws -> StateLog? {
        guard !configuration.inMemory else { return nil }
        let directory = configuration.dataDirectory + "/state"
        var options = StateLog.Options()
        options.snapshotIntervalMs = configuration.stateSnapshotIntervalMs
        options.snapshotRecords = configuration.stateSnapshotRecords
        let (log, report): (StateLog, StateLog.StartReport)
        do {
            try Emulator.makeDirectory(configuration.dataDirectory)
            (log, report) = try StateLog.open(
                directory: directory, durability: stateDurability(configuration), registry: registry, options: options,
                activity: activity)
        } catch {
            throw ConfigurationError("the saved state in \(directory): \(error)")
        }
        for w in report.warnings { csys_write_stderr("pushemu: \(w)\n") }
        if report.noSavedState {
            if earlierData {
                csys_write_stderr(
                    "pushemu: no saved state was found in \(directory) (a data directory from an earlier pushemu): starting with its journal and credentials, and saving state from now on\n"
                )
            }
        }
        // Keys and accounts dropped in beside the log (`pushemu credentials --data-dir`, or an
        // earlier version's files), and the OAuth secret an earlier version kept in a file.
        stores.apnsKeys.registerDropIns()
        stores.fcmAccounts.registerDropIns()
        stores.fcmProvider.tokens.keepSecret()
        journal?.drive(log)
        return log
    }

    /// The emulator of a stopped data directory, for the CLI's state commands: built as a start
    /// builds it (its state log read, under the directory's lock), never started.
    package static func offline(dataDirectory: String) throws -> Emulator {
        let configuration = try ServeOptions.parse(
            ["--data-dir", dataDirectory, "--in-memory=false", "--threads", "1", "--durability", "relaxed"], environment: [:])
        return try Emulator(configuration: configuration)
    }

    /// Whether the data directory holds an earlier pushemu's journal or credentials but no state.
    static func holdsEarlierData(_ configuration: EmulatorConfiguration) -> Bool {
        guard !configuration.inMemory else { return false }
        let names = Files.list(configuration.dataDirectory)
        return !names.contains("state") && names.contains { $0 == "journal.sqlite" || $0 == "apns" || $0 == "fcm" }
    }

    /// Reads `--import-state FILE` into the stores (and the log).
    static func importState(_ path: String, registry: StoreRegistry, log: StateLog?) throws {
        let bytes = try Emulator.readFile(path, what: "state", limit: 1 << 30)
        do {
            let records = try registry.parseExport(bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false))
            _ = try registry.apply(imported: records, log: log, nowMs: Clock.nowMs())
            _ = log?.write()
        } catch {
            throw ConfigurationError("--import-state \(path): \(error)")
        }
    }
}

/// The state log's snapshot thread; at stop, the last checkpoint and snapshot, then
/// `--export-state-on-exit`.
struct StateService: EmulatorService {
    let log: StateLog?
    let registry: StoreRegistry
    let exportOnExit: String?

    func start() throws { log?.start() }

    func stop() {
        log?.stop()
        guard let path = exportOnExit else { return }
        var text = ""
        do {
            try registry.export { text += $0 + "\n" }
            try Files.writeAtomically(path, Array(text.utf8))
        } catch {
            csys_write_stderr("pushemu: --export-state-on-exit \(path): \(error)\n")
        }
    }
}
