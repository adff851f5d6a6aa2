import PushCore
import Synchronization
import Transport

/// What a reset forgets: the emulator's state, or that and the credentials too
/// (`POST /emulator/v1/reset?all=true`).
public enum ResetScope: Sendable {
    case state
    case all
}

/// A stateful service of the emulator. Each registers once with the `StoreRegistry`, which is
/// the only list of them: reset, `/emulator/v1/stats`, snapshots, export and import all go
/// through it, so a new store is added in one place and no reset can forget it.
public protocol StateStore: AnyObject, Sendable {
    /// Its name in the registry, the state log, the export and `/stats` ("devices", "faults"...).
    var stateName: String { get }
    /// Forgets its state (a credentials store only with `.all`).
    func reset(_ scope: ResetScope)
    /// Its members of `/emulator/v1/stats`, if any.
    func addStats(to stats: inout StatsDocument)
}

extension StateStore {
    /// None by default.
    public func addStats(to stats: inout StatsDocument) {}
}

/// `/emulator/v1/stats` as the stores write it: objects by name (the order their first member
/// came in), to which several stores may add members (`devices` has the device layer's counts
/// and each gateway's token count), and whole values.
public struct StatsDocument {
    private var order: [String] = []
    private var objects: [String: JSONObjectWriter] = [:]
    private var values: [String: String] = [:]

    /// An empty document.
    public init() {}

    private mutating func note(_ section: String) {
        if objects[section] == nil && values[section] == nil { order.append(section) }
    }

    /// Adds a member to the object `section`.
    public mutating func add<N: BinaryInteger>(_ section: String, _ name: String, _ value: N?) {
        note(section)
        objects[section, default: JSONObjectWriter()].add(name, value)
    }

    /// Adds a string member to the object `section` (null for nil).
    public mutating func add(_ section: String, _ name: String, _ value: String?) {
        note(section)
        objects[section, default: JSONObjectWriter()].add(name, value)
    }

    /// Adds a boolean member to the object `section`.
    public mutating func add(_ section: String, _ name: String, _ value: Bool) {
        note(section)
        objects[section, default: JSONObjectWriter()].add(name, value)
    }

    /// Adds a member whose value is JSON made elsewhere (null for nil).
    public mutating func add(_ section: String, _ name: String, json: String?) {
        note(section)
        objects[section, default: JSONObjectWriter()].add(name, json: json)
    }

    /// Sets `section` to a JSON value made elsewhere (an array, an object).
    public mutating func set(_ section: String, json: String) {
        note(section)
        values[section] = json
    }

    /// The document as JSON text.
    public var text: String {
        var out = JSONObjectWriter()
        for name in order { out.add(name, json: values[name] ?? objects[name]?.text ?? "null") }
        return out.text
    }
}

/// A store whose state outlives the process: it states every change as a `ChangeRecord`
/// (through `changes`), applies records (its own at start, an import's, another node's), and
/// writes its whole state as records for a snapshot or an export.
public protocol PersistentStore: StateStore {
    /// Where its changes go (the registry connects it to the log; unconnected, nothing is kept).
    var changes: ChangeLink { get }
    /// Every kind of record it writes.
    var recordSchemas: [RecordSchema] { get }
    /// Applies one of its records. Idempotent; a record of an unknown kind or a newer version
    /// than `recordSchemas` says is refused (`StateFormatError`).
    func apply(_ record: RecordView) throws
    /// Its whole state as records that `apply` turns back into it, in a deterministic order:
    /// the records that must be applied in order; then `snapshotIndependent`'s.
    func snapshot(_ emit: (ChangeRecord) -> Void)
    /// The rest of its state: records independent of one another (each names its own key, none
    /// needs another applied first: device records by token), in a deterministic order. A start
    /// applies them, after every store's ordered records, on several threads.
    func snapshotIndependent(_ emit: (ChangeRecord) -> Void)
    /// Logs what the push path changed since the last call and should survive a kill (counts,
    /// progress): called by the log's thread once a second, and at stop.
    func checkpoint()
    /// About `records` of its records follow (a snapshot's): room for them, made once.
    func reserve(records: Int)
    /// `apply` for each of `batch`, in order.
    func apply(batch: [RecordView]) throws
    /// Where it keeps a snapshot's records that a start left unapplied (nil: it applies all).
    var deferred: DeferredRecords? { get }
    /// The key under which one of its snapshot's independent records may wait, unapplied, until
    /// first asked for (nil: applied at start). Called on the start's threads.
    func deferredKey(_ record: RecordView) -> TokenKey?
    /// Applies a record that waited (`deferred`'s lock held: it must not ask `deferred` again).
    func applyDeferred(_ record: RecordView) throws
    /// Forgets its kept state before another copy of it is loaded (a cluster's snapshot): what
    /// the configuration made at start, and is not kept, stays. `reset(.all)` by default.
    func resetKept()
    /// `deferredKey` of each of `records`, in order (one call for a start's chunk).
    func deferredKeys(_ records: [RecordView]) -> [TokenKey?]
}

extension PersistentStore {
    /// Applies records in order (a start's chunk of a snapshot); a store may take its shared
    /// locks once for all of them.
    public func apply(batch: [RecordView]) throws {
        for r in batch { try apply(r) }
    }

    /// Nothing to checkpoint by default (a store whose pushes change nothing kept).
    public func checkpoint() {}
    /// No sizing by default.
    public func reserve(records: Int) {}
    /// No independent records by default.
    public func snapshotIndependent(_ emit: (ChangeRecord) -> Void) {}
    /// Nothing deferred by default.
    public var deferred: DeferredRecords? { nil }
    /// Nothing deferred by default.
    public func deferredKey(_ record: RecordView) -> TokenKey? { nil }
    /// `apply` by default.
    public func applyDeferred(_ record: RecordView) throws { try apply(record) }
    /// Everything, by default.
    public func resetKept() { reset(.all) }
    /// `deferredKey` of each, by default.
    public func deferredKeys(_ records: [RecordView]) -> [TokenKey?] { records.map { deferredKey($0) } }

    /// Applies every record still waiting from the snapshot (before reading the whole store).
    public func applyAllDeferred() {
        guard let d = deferred, d.isPending else { return }
        d.applyAll { try applyDeferred($0) }
    }

    /// Every record of its state (`snapshot`'s, then `snapshotIndependent`'s).
    func allRecords(_ emit: (ChangeRecord) -> Void) {
        snapshot(emit)
        applyAllDeferred()
        snapshotIndependent(emit)
    }
}

/// A store's handle on the state log: the store calls `emit` with each change it applied,
/// inside the lock that ordered the change, so the log holds a store's changes in the order
/// they took effect. A cheap no-op while no log is connected (`--in-memory`).
public final class ChangeLink: @unchecked Sendable { // `log` is set once, before serving
    /// The store's name its records carry.
    public let store: String
    /// Weak: the log refers to the stores (through the registry), not the other way round.
    weak var log: StateLog?

    /// A link for the store `store`, connected when the log opens.
    public init(store: String) { self.store = store }

    /// Whether changes are kept (encode a record only then).
    @inline(__always) public var isLogging: Bool { log != nil }

    /// Appends a change the store has applied. Returns its position in the log (0: not kept).
    @discardableResult
    public func emit(kind: Int, version: Int = 1, atMs: Int64, _ body: [UInt8]) -> UInt64 {
        guard let log else { return 0 }
        return log.append(ChangeRecord(store: store, kind: kind, version: version, body: body, atMs: atMs))
    }

    /// As `emit`, building the body only when it is kept.
    @discardableResult
    public func emit(kind: Int, version: Int = 1, atMs: Int64, _ body: (inout StateWriter) -> Void) -> UInt64 {
        guard let log else { return 0 }
        var w = StateWriter()
        body(&w)
        return log.append(ChangeRecord(store: store, kind: kind, version: version, body: w.bytes, atMs: atMs))
    }

    /// Writes what was emitted now where the durability asks for it (strict, relaxed: to the
    /// file). For a change no admin answer waits on (one a push caused): it is in the file before
    /// that push's answer leaves.
    public func writeNow() {
        guard let log, log.durability != .sync else { return }
        _ = log.write()
    }
}

/// Every stateful service, in the order they were registered (the order reset, stats, snapshots
/// and exports follow). Built by the composition root before the server starts.
public final class StoreRegistry: Sendable {
    /// Every store, in registration order.
    public let stores: [any StateStore]
    let persistent: [String: any PersistentStore]
    let persistentByBytes: [([UInt8], any PersistentStore)]

    /// A registry of `stores` (names must be unique).
    public init(_ stores: [any StateStore]) {
        self.stores = stores
        var persistent: [String: any PersistentStore] = [:]
        for s in stores {
            precondition(!s.stateName.hasPrefix("#"), "store names starting with # are the registry's")
            if let p = s as? any PersistentStore {
                precondition(persistent[s.stateName] == nil, "two stores named \(s.stateName)")
                persistent[s.stateName] = p
            }
        }
        self.persistent = persistent
        persistentByBytes = persistent.map { (Array($0.key.utf8), $0.value) }
    }

    /// The stores whose state is kept, in registration order.
    var persistentStores: [any PersistentStore] { stores.compactMap { $0 as? any PersistentStore } }

    /// Connects every persistent store to `log`.
    func connect(_ log: StateLog) {
        for s in persistentStores { s.changes.log = log }
    }

    /// The registry's own record kinds (store "#registry").
    enum Kind {
        static let reset = 1
    }
    static let storeName = "#registry"
    static let resetFields = [FieldSchema(1, "all", .bool)]

    /// Resets every store (and logs the reset, so a restart does not bring the state back).
    public func reset(_ scope: ResetScope, log: StateLog?, nowMs: Int64) {
        for s in stores { s.reset(scope) }
        if let log {
            var w = StateWriter()
            w.bool(1, scope == .all)
            _ = log.append(ChangeRecord(store: StoreRegistry.storeName, kind: Kind.reset, body: w.bytes, atMs: nowMs))
        }
    }

    /// Empties every store whose state is kept (a cluster node about to load the cluster's
    /// snapshot), logging the reset with `origin` so that it is not shipped to the others.
    public func resetPersistent(log: StateLog?, origin: String, nowMs: Int64) {
        for s in stores { (s as? any PersistentStore)?.resetKept() }
        if let log {
            var w = StateWriter()
            w.bool(1, true)
            _ = log.append(ChangeRecord(store: StoreRegistry.storeName, kind: Kind.reset, body: w.bytes, atMs: nowMs, origin: origin))
        }
    }

    /// Applies a record to its store (or a registry record to every store). A record for a store
    /// this pushemu does not have is refused.
    public func apply(_ record: ChangeRecord) throws {
        if record.store == StoreRegistry.storeName {
            guard record.kind == Kind.reset, record.version == 1 else {
                throw StateFormatError(
                    "a \(record.store) record of kind \(record.kind) version \(record.version) (newer than this pushemu)")
            }
            let all = try record.body.withUnsafeBytes { raw -> Bool in
                var r = StateReader(raw)
                var all = false
                while let f = try r.next() { if f == 1 { all = try r.bool() } else { try r.skip() } }
                return all
            }
            for s in stores { s.reset(all ? .all : .state) }
            return
        }
        guard let store = persistent[record.store] else {
            throw StateFormatError("a record for store '\(record.store)', which this pushemu does not have (written by a newer version?)")
        }
        try record.body.withUnsafeBytes {
            try store.apply(RecordView(kind: record.kind, version: record.version, atMs: record.atMs, body: $0))
        }
    }

    /// The store a record names, by the name's bytes (a start compares, it does not make Strings).
    func store(named name: UnsafeRawBufferPointer) -> (any PersistentStore)? {
        for (n, s) in persistentByBytes where n.count == name.count && n.elementsEqual(name) { return s }
        return nil
    }

    /// `/emulator/v1/stats`, from every store.
    public func addStats(to stats: inout StatsDocument) {
        for s in stores { s.addStats(to: &stats) }
    }

    /// The schema of a store's record kind.
    func schema(store: String, kind: Int) -> RecordSchema? {
        if store == StoreRegistry.storeName {
            return kind == Kind.reset ? RecordSchema(kind: Kind.reset, name: "reset", fields: StoreRegistry.resetFields) : nil
        }
        return persistent[store]?.recordSchemas.first { $0.kind == kind }
    }

    func schema(store: String, name: String) -> RecordSchema? {
        if store == StoreRegistry.storeName {
            return name == "reset" ? RecordSchema(kind: Kind.reset, name: "reset", fields: StoreRegistry.resetFields) : nil
        }
        return persistent[store]?.recordSchemas.first { $0.name == name }
    }
}

/// A service that keeps nothing across a restart but takes part in reset and `/stats` (the
/// notification log, the tracking log, metrics, quotas), registered through closures by the
/// composition root, which is the one place that lists every store.
public final class TransientStore: StateStore {
    /// Its name in the registry and in `/stats`.
    public let stateName: String
    private let onReset: @Sendable (ResetScope) -> Void
    private let onStats: @Sendable (inout StatsDocument) -> Void

    /// A store that resets and reports through the given closures.
    public init(
        _ name: String, reset: @escaping @Sendable (ResetScope) -> Void,
        stats: @escaping @Sendable (inout StatsDocument) -> Void = { _ in }
    ) {
        stateName = name
        onReset = reset
        onStats = stats
    }

    /// Runs the reset closure.
    public func reset(_ scope: ResetScope) { onReset(scope) }
    /// Runs the stats closure.
    public func addStats(to stats: inout StatsDocument) { onStats(&stats) }
}
