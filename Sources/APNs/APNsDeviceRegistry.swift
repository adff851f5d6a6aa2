import PushCore
import Runtime
import State
import Synchronization
import Transport

/// What APNs knows about device tokens it has seen: the environment and app each belongs to,
/// and whether the app was uninstalled. A token seen for the first time is bound to the
/// environment and bundle id of that push (`--devices auto`). Sharded by token hash; each shard
/// is locked for a dictionary lookup only. (The simulated-device layer grows out of this.)
///
/// In the state log as store `apns.tokens`: a `token` record for each explicit registration and
/// uninstall; what pushes bind on first sight, and push counts, are kept by snapshots.
public final class APNsDeviceRegistry: PersistentStore {
    public struct Device: Sendable {
        /// The token (snapshots and exports name it).
        public var token: String
        public var environment: APNsEnvironment
        var bundleKey: TokenKey
        public var bundleID: String
        public var uninstalledAtMs: Int64?
        public var pushes: UInt64
    }

    public enum Verdict: Equatable, Sendable {
        case ok
        case wrongEnvironment
        case notForTopic
        case unregistered(timestampMs: Int64)
        /// `--devices strict`: a token nobody issued.
        case unknown
    }

    private final class Shard: Sendable {
        let map = FutexLock<[TokenKey: Device]>([:])
    }

    private let shards: [Shard]
    private let maxPerShard: Int
    /// The device layer (fleets, registered devices), asked about tokens with no binding here.
    let directory: DeviceDirectory?
    /// Unknown tokens are refused instead of bound on first sight.
    let strict: Bool
    public let stateName = "apns.tokens"
    public let changes = ChangeLink(store: "apns.tokens")

    /// Its share of `--max-state-memory`.
    public let memory: StateMemory.Account
    /// A snapshot's tokens not applied yet (see `ensure`).
    let waiting = DeferredRecords(store: "apns.tokens")
    public var deferred: DeferredRecords? { waiting }

    /// Applies the snapshot's record for `key` if it still waits: before any lookup by token.
    @inline(__always) func ensure(_ key: TokenKey) {
        if waiting.isPending { waiting.materialize(key) { try applyRecord($0) } }
    }

    public init(
        shardCount: Int = 64, capacity: Int = 1_000_000, directory: DeviceDirectory? = nil, strict: Bool = false,
        memory: StateMemory = StateMemory()
    ) {
        self.memory = StateMemory.Account(memory)
        shards = (0..<shardCount).map { _ in Shard() }
        maxPerShard = max(1, capacity / shardCount)
        self.directory = directory
        self.strict = strict
    }

    /// Checks a push to `token` and binds the token on first sight. `bundle` is the topic's bundle id.
    public func check(token: ArraySlice<UInt8>, environment: APNsEnvironment, bundle: ArraySlice<UInt8>) -> Verdict {
        check(token: token, environment: environment, bundle: bundle, bundleKey: TokenKey(bundle))
    }

    /// As above, with the bundle's key already computed (callers cache it per connection).
    public func check(
        token: ArraySlice<UInt8>, environment: APNsEnvironment, bundle: ArraySlice<UInt8>,
        bundleKey: TokenKey, tokenKey: TokenKey? = nil
    ) -> Verdict {
        let key = tokenKey ?? TokenKey(token)
        ensure(key)
        let shard = shards[key.shard(shards.count)]
        let known = shard.map.withLock { map -> Verdict? in
            guard let i = map.index(forKey: key) else { return nil }
            // Read in place (a copy of the record retained and released its bundle id).
            return APNsDeviceRegistry.admit(&map.values[i], environment: environment, bundleKey: bundleKey)
        }
        if let known { return known }
        // A fleet member or registered device: answered by the device layer, nothing stored here.
        if let directory, let status = directory.status(token: token, key: key, platform: .ios) {
            switch status {
            case .uninstalled(let at): return .unregistered(timestampMs: at)
            case .installed(let app, let env):
                if let env, env != environment.rawValue { return .wrongEnvironment }
                if var app, !app.withUTF8({ Bytes.equal(bundle, $0) }) { return .notForTopic }
                return .ok
            }
        }
        if strict { return .unknown }
        return shard.map.withLock { map -> Verdict in
            if map[key] != nil { return .ok }
            if map.count < maxPerShard, memory.take(StateMemory.Cost.apnsToken) {
                map[key] = Device(
                    token: String(decoding: token, as: UTF8.self), environment: environment, bundleKey: bundleKey,
                    bundleID: String(decoding: bundle, as: UTF8.self), uninstalledAtMs: nil, pushes: 1)
            }
            return .ok
        }
    }

    /// The push path's verdict on a known token, counting the push.
    private static func admit(_ d: inout Device, environment: APNsEnvironment, bundleKey: TokenKey) -> Verdict {
        if d.environment != environment { return .wrongEnvironment }
        if let at = d.uninstalledAtMs { return .unregistered(timestampMs: at) }
        if d.bundleKey != bundleKey { return .notForTopic }
        d.pushes &+= 1
        return .ok
    }

    /// Registers a token explicitly (replacing what was known).
    public func register(token: String, environment: APNsEnvironment, bundleID: String) {
        let key = TokenKey(token)
        ensure(key)
        shards[key.shard(shards.count)].map.withLock {
            let d = Device(
                token: token, environment: environment, bundleKey: TokenKey(bundleID), bundleID: bundleID, uninstalledAtMs: nil, pushes: 0)
            $0[key] = d
            if changes.isLogging { changes.emit(kind: 1, atMs: Clock.nowMs(), APNsDeviceRegistry.record(token, d)) }
        }
    }

    /// Marks the app uninstalled: later pushes get 410 Unregistered with this time. False if unknown.
    @discardableResult
    public func uninstall(token: String, atMs: Int64) -> Bool {
        let key = TokenKey(token)
        ensure(key)
        return shards[key.shard(shards.count)].map.withLock { map -> Bool in
            guard var d = map[key] else { return false }
            d.uninstalledAtMs = d.uninstalledAtMs ?? atMs
            map[key] = d
            if changes.isLogging { changes.emit(kind: 1, atMs: atMs, APNsDeviceRegistry.record(token, d)) }
            return true
        }
    }

    public func device(token: String) -> Device? {
        let key = TokenKey(token)
        ensure(key)
        return shards[key.shard(shards.count)].map.withLock { $0[key] }
    }

    public var count: Int {
        // A waiting record's key is in no shard (a lookup applies it first): counted apart.
        waiting.count + shards.reduce(0) { acc, s in acc + s.map.withLock { $0.count } }
    }

    public func removeAll() {
        waiting.discard()
        for s in shards { s.map.withLock { $0.removeAll() } }
        memory.releaseAll()
    }

    // MARK: state

    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: 1, name: "token",
                fields: [
                    FieldSchema(1, "token", .string), FieldSchema(2, "environment", .enumeration(["sandbox", "production"])),
                    FieldSchema(3, "bundleId", .string), FieldSchema(4, "uninstalledAt", .int), FieldSchema(5, "pushes", .uint),
                ])
        ]
    }

    static func record(_ token: String, _ d: Device) -> [UInt8] {
        var w = StateWriter()
        w.string(1, token)
        w.uint(2, d.environment == .sandbox ? 0 : 1)
        w.string(3, d.bundleID)
        w.int(4, d.uninstalledAtMs)
        if d.pushes > 0 { w.uint(5, d.pushes) }
        return w.bytes
    }

    /// A waiting token record's key: its token (field 1).
    public func deferredKey(_ record: RecordView) -> TokenKey? {
        guard record.kind == 1, record.version == 1 else { return nil }
        return record.key(field: 1)
    }

    public func applyDeferred(_ record: RecordView) throws { try applyRecord(record) }

    public func apply(_ record: RecordView) throws {
        // A change after the snapshot: its token's saved record first, as a start applying all would.
        if waiting.isPending, let key = deferredKey(record) { ensure(key) }
        try applyRecord(record)
    }

    private func applyRecord(_ record: RecordView) throws {
        guard record.kind == 1, record.version == 1 else {
            throw StateFormatError("apns.tokens has no record kind \(record.kind) version \(record.version)")
        }
        var token = ""
        var pushes: UInt64?
        var d = Device(token: "", environment: .sandbox, bundleKey: TokenKey(""), bundleID: "", uninstalledAtMs: nil, pushes: 0)
        try record.withBody { raw in
            var r = StateReader(raw)
            while let f = try r.next() {
                switch f {
                case 1: token = try r.string()
                case 2: d.environment = try r.uint() == 0 ? .sandbox : .production
                case 3: d.bundleID = try r.string()
                case 4: d.uninstalledAtMs = try r.int()
                case 5: pushes = try r.uint()
                default: try r.skip()
                }
            }
        }
        guard !token.isEmpty else { throw StateFormatError("an apns.tokens record needs a token") }
        d.token = token
        d.bundleKey = TokenKey(d.bundleID)
        let key = TokenKey(token)
        let device = d
        let added = shards[key.shard(shards.count)].map.withLock { m -> Bool in
            var next = device
            next.pushes = pushes ?? m[key]?.pushes ?? 0
            return m.updateValue(next, forKey: key) == nil
        }
        if added { memory.force(StateMemory.Cost.apnsToken) }
    }

    /// Nothing in order: every record names its own token (see `snapshotIndependent`).
    public func snapshot(_ emit: (ChangeRecord) -> Void) {}

    /// Every token, sorted.
    public func snapshotIndependent(_ emit: (ChangeRecord) -> Void) {
        var all: [(String, Device)] = []
        for s in shards { s.map.withLock { m in for (_, d) in m { all.append((d.token, d)) } } }
        all.sort { $0.0 < $1.0 }
        for (t, d) in all { emit(ChangeRecord(store: stateName, kind: 1, body: APNsDeviceRegistry.record(t, d))) }
    }

    public func reset(_ scope: ResetScope) { removeAll() }

    public func reserve(records: Int) {
        let each = records / shards.count + records / (shards.count * 8) + 16
        for s in shards { s.map.withLock { $0.reserveCapacity($0.count + each) } }
    }

    public func addStats(to stats: inout StatsDocument) {
        stats.add("devices", "apnsTokens", count)
    }
}
