import PushCore
import Runtime
import State
import Synchronization
import Transport

/// The Live Activity broadcast channels APNs keeps (CHAN): per app and environment, at most
/// `maxChannelsPerApp`, each with its message-storage policy and, under Most Recent Message,
/// the last message broadcast on it for up to 8 hours. A channel exists in one environment only.
/// The first team whose provider token manages an app's channels owns them: another team's
/// token is refused (TopicMismatch). One mutex, held for a dictionary operation (creating a
/// channel changes the app's table in place: the same cost at any fill).
///
/// Kept in the state log (store `apns.channels`): a `channel` record per channel made or
/// broadcast on (with its stored message), `channelRemoved`, and `owner` when a team first
/// manages an app's channels.
public final class APNsChannelRegistry: PersistentStore {
    static let maxChannelsPerApp = 10_000
    /// Bounds on what clients can make the registry hold: channels in all, and apps (an app is
    /// remembered once a team manages its channels).
    static let maxChannels = 1_000_000
    static let maxApps = 100_000
    /// How long a Most Recent Message channel keeps its message.
    static let storedMessageLifetimeMs: Int64 = 8 * 3600 * 1000

    /// `message-storage-policy`: 0 keeps nothing (and needs `apns-expiration: 0`), 1 keeps the
    /// most recent message.
    public enum StoragePolicy: Int, Sendable {
        case noMessageStored = 0
        case mostRecentMessage = 1
    }

    /// A broadcast kept for activities that subscribe later.
    public struct StoredMessage: Sendable {
        /// The broadcast's payload, as sent.
        public var payload: [UInt8]
        /// The broadcast's `apns-id`.
        public var notificationID: UUIDValue
        /// When it was received (ms since the epoch).
        public var receivedAtMs: Int64
        /// When it stops being given to new subscribers (`apns-expiration`, ms).
        public var expiresAtMs: Int64
        /// Its `apns-priority`.
        public var priority: Int
    }

    /// One broadcast channel of an app in one environment.
    public struct Channel: Sendable {
        /// The channel id Apple returns (base64 of 16 bytes).
        public var id: String
        /// The app it belongs to.
        public var bundleID: String
        /// Sandbox or production.
        public var environment: APNsEnvironment
        /// Whether the most recent broadcast is kept for activities that subscribe later.
        public var policy: StoragePolicy
        /// When it was created (ms since the epoch).
        public var createdAtMs: Int64
        /// Broadcasts sent on it.
        public var broadcasts: UInt64 = 0
        /// The kept broadcast (`mostRecentMessage`), if any.
        public var stored: StoredMessage?
    }

    struct AppKey: Hashable {
        var bundle: String
        var environment: APNsEnvironment
    }

    struct App {
        var team: String?
        var channels: [String: Channel] = [:]
        /// Channel ids in creation order (the list answer's order).
        var order: [String] = []
    }

    /// Every app's channels, and the channel count over all of them.
    struct Apps {
        var byKey: [AppKey: App] = [:]
        var total = 0
    }
    private let state = FutexLock(Apps())
    private let random = FutexLock(FastRandom())
    /// The store's name in the state log and the store registry.
    public let stateName = "apns.channels"
    /// Where this store's change records go.
    public let changes = ChangeLink(store: "apns.channels")

    /// Its share of `--max-state-memory`.
    public let memory: StateMemory.Account

    /// An empty registry, counting its records against `memory` (`--max-state-memory`).
    public init(memory: StateMemory = StateMemory()) { self.memory = StateMemory.Account(memory) }

    /// A new channel id: 16 random bytes in base64 (Apple's ids are base64 too).
    func newID() -> String {
        let (a, b) = random.withLock { ($0.next(), $0.next()) }
        var bytes: [UInt8] = []
        for word in [a, b] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return APNsChannelRegistry.base64(bytes)
    }

    /// Creates a channel; `cannotCreateChannelConfig` when the app already has the most.
    public func create(
        bundle: String, environment: APNsEnvironment, policy: StoragePolicy, nowMs: Int64
    ) -> Result<Channel, APNsReason> {
        let id = newID()
        return state.withLock { s -> Result<Channel, APNsReason> in
            let key = AppKey(bundle: bundle, environment: environment)
            guard s.byKey[key] != nil || s.byKey.count < APNsChannelRegistry.maxApps else { return .failure(.cannotCreateChannelConfig) }
            guard (s.byKey[key]?.channels.count ?? 0) < APNsChannelRegistry.maxChannelsPerApp, s.total < APNsChannelRegistry.maxChannels,
                memory.take(StateMemory.Cost.channel)
            else {
                return .failure(.cannotCreateChannelConfig)
            }
            s.total += 1
            let channel = Channel(id: id, bundleID: bundle, environment: environment, policy: policy, createdAtMs: nowMs)
            // In place: a copy of the app's table per insert made creation slow down as it filled.
            s.byKey[key, default: App()].channels[id] = channel
            s.byKey[key, default: App()].order.append(id)
            if changes.isLogging { changes.emit(kind: Kind.channel, atMs: nowMs, APNsChannelRegistry.record(channel)) }
            return .success(channel)
        }
    }

    /// The channel `id` of `bundle` in `environment` (nil: none).
    public func channel(_ id: String, bundle: String, environment: APNsEnvironment) -> Channel? {
        state.withLock { $0.byKey[AppKey(bundle: bundle, environment: environment)]?.channels[id] }
    }

    /// Deletes a channel (and its stored message); false when it was not there.
    @discardableResult
    public func delete(_ id: String, bundle: String, environment: APNsEnvironment) -> Bool {
        state.withLock { s -> Bool in
            let key = AppKey(bundle: bundle, environment: environment)
            guard s.byKey[key]?.channels.removeValue(forKey: id) != nil else { return false }
            memory.give(StateMemory.Cost.channel)
            // The order list keeps the id until it is mostly gone ones (a walk of it per
            // delete would hold the lock for the app's whole list).
            if let count = s.byKey[key]?.channels.count, let listed = s.byKey[key]?.order.count, listed > 2 * count + 64 {
                let channels = s.byKey[key]!.channels
                s.byKey[key]?.order.removeAll { channels[$0] == nil }
            }
            s.total -= 1
            if changes.isLogging {
                changes.emit(kind: Kind.channelRemoved, atMs: Clock.nowMs()) { w in
                    w.string(1, id)
                    w.string(2, bundle)
                    w.uint(3, environment == .sandbox ? 0 : 1)
                }
            }
            return true
        }
    }

    /// The app's channel ids, oldest first.
    public func list(bundle: String, environment: APNsEnvironment) -> [String] {
        // Under the lock: a copy of the app kept past it would make the next create copy its table.
        state.withLock { s in
            guard let app = s.byKey[AppKey(bundle: bundle, environment: environment)] else { return [] }
            return app.order.count == app.channels.count ? app.order : app.order.filter { app.channels[$0] != nil }
        }
    }

    /// The team that manages the app's channels (nil: none yet, or certificate auth only).
    public func owner(bundle: String, environment: APNsEnvironment) -> String? {
        state.withLock { $0.byKey[AppKey(bundle: bundle, environment: environment)]?.team }
    }

    /// Whether `team` may manage the app's channels, binding the app to it on first use (nil:
    /// certificate auth, which the certificate's topics already decided).
    public func admits(team: String?, bundle: String, environment: APNsEnvironment) -> Bool {
        guard let team else { return true }
        return state.withLock { s -> Bool in
            let key = AppKey(bundle: bundle, environment: environment)
            if let owner = s.byKey[key]?.team { return owner == team }
            guard s.byKey[key] != nil || s.byKey.count < APNsChannelRegistry.maxApps else { return true } // not remembered
            s.byKey[key, default: App()].team = team
            if changes.isLogging {
                changes.emit(kind: Kind.owner, atMs: Clock.nowMs()) { w in
                    w.string(1, bundle)
                    w.uint(2, environment == .sandbox ? 0 : 1)
                    w.string(3, team)
                }
            }
            return true
        }
    }

    /// Counts a broadcast on the channel and, under Most Recent Message, keeps it (replacing the
    /// last one) until `expiresAtMs` or 8 hours, whichever is first.
    func recordBroadcast(_ id: String, bundle: String, environment: APNsEnvironment, message: StoredMessage) {
        let logged = state.withLock { s -> Bool in
            let key = AppKey(bundle: bundle, environment: environment)
            guard var channel = s.byKey[key]?.channels[id] else { return false }
            channel.broadcasts &+= 1
            if channel.policy == .mostRecentMessage { channel.stored = message }
            s.byKey[key]?.channels[id] = channel
            guard changes.isLogging else { return false }
            changes.emit(kind: Kind.channel, atMs: message.receivedAtMs, APNsChannelRegistry.record(channel))
            return true
        }
        // A broadcast is a push: its channel's change is in the file before its answer leaves.
        if logged { changes.writeNow() }
    }

    /// The message a newly subscribed activity receives: the channel's stored one while it lasts.
    public func storedMessage(_ id: String, bundle: String, environment: APNsEnvironment, nowMs: Int64) -> StoredMessage? {
        guard let stored = channel(id, bundle: bundle, environment: environment)?.stored, stored.expiresAtMs > nowMs else { return nil }
        return stored
    }

    /// Channels held, every app together.
    public var count: Int { state.withLock { $0.total } }

    /// Forgets every channel (`POST /emulator/v1/reset`).
    public func removeAll() {
        state.withLock { $0 = Apps() }
        memory.releaseAll()
    }

    // MARK: state

    enum Kind {
        static let channel = 1
        static let channelRemoved = 2
        static let owner = 3
    }

    static let environments = ["sandbox", "production"]

    /// The record kinds it writes to the state log (channel made, deleted, broadcast kept).
    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: Kind.channel, name: "channel",
                fields: [
                    FieldSchema(1, "id", .string), FieldSchema(2, "bundleId", .string),
                    FieldSchema(3, "environment", .enumeration(APNsChannelRegistry.environments)),
                    FieldSchema(4, "policy", .uint), FieldSchema(5, "createdAt", .int), FieldSchema(6, "broadcasts", .uint),
                    FieldSchema(
                        7, "stored",
                        .message([
                            FieldSchema(1, "payload", .json), FieldSchema(2, "notificationId", .uuid), FieldSchema(3, "receivedAt", .int),
                            FieldSchema(4, "expiresAt", .int), FieldSchema(5, "priority", .int),
                        ])),
                ]),
            RecordSchema(
                kind: Kind.channelRemoved, name: "channelRemoved",
                fields: [
                    FieldSchema(1, "id", .string), FieldSchema(2, "bundleId", .string),
                    FieldSchema(3, "environment", .enumeration(APNsChannelRegistry.environments)),
                ]),
            RecordSchema(
                kind: Kind.owner, name: "owner",
                fields: [
                    FieldSchema(1, "bundleId", .string), FieldSchema(2, "environment", .enumeration(APNsChannelRegistry.environments)),
                    FieldSchema(3, "team", .string),
                ]),
        ]
    }

    static func record(_ c: Channel) -> [UInt8] {
        var w = StateWriter()
        w.string(1, c.id)
        w.string(2, c.bundleID)
        w.uint(3, c.environment == .sandbox ? 0 : 1)
        w.uint(4, UInt64(c.policy.rawValue))
        w.int(5, c.createdAtMs)
        if c.broadcasts > 0 { w.uint(6, c.broadcasts) }
        if let m = c.stored {
            w.message(7) { s in
                s.bytes(1, m.payload)
                s.uuid(2, m.notificationID)
                s.int(3, m.receivedAtMs)
                s.int(4, m.expiresAtMs)
                s.int(5, Int64(m.priority))
            }
        }
        return w.bytes
    }

    /// Applies one record from the state log (at start, or from an import).
    public func apply(_ record: RecordView) throws {
        guard record.version == 1 else {
            throw StateFormatError("apns.channels record version \(record.version) is newer than this pushemu")
        }
        try record.withBody { raw in
            var r = StateReader(raw)
            switch record.kind {
            case Kind.channel:
                var c = Channel(id: "", bundleID: "", environment: .sandbox, policy: .noMessageStored, createdAtMs: 0)
                while let f = try r.next() {
                    switch f {
                    case 1: c.id = try r.string()
                    case 2: c.bundleID = try r.string()
                    case 3: c.environment = try r.uint() == 0 ? .sandbox : .production
                    case 4: c.policy = try r.uint() == 1 ? .mostRecentMessage : .noMessageStored
                    case 5: c.createdAtMs = try r.int()
                    case 6: c.broadcasts = try r.uint()
                    case 7:
                        var m = try r.message()
                        var stored = StoredMessage(
                            payload: [], notificationID: UUIDValue(high: 0, low: 0), receivedAtMs: 0, expiresAtMs: 0, priority: 10)
                        while let g = try m.next() {
                            switch g {
                            case 1: stored.payload = try m.bytes()
                            case 2: stored.notificationID = try m.uuid()
                            case 3: stored.receivedAtMs = try m.int()
                            case 4: stored.expiresAtMs = try m.int()
                            case 5: stored.priority = try m.int(in: 0...10)
                            default: try m.skip()
                            }
                        }
                        c.stored = stored
                    default: try r.skip()
                    }
                }
                guard !c.id.isEmpty, !c.bundleID.isEmpty else { throw StateFormatError("a channel needs an id and a bundleId") }
                let channel = c
                state.withLock { s in
                    let key = AppKey(bundle: channel.bundleID, environment: channel.environment)
                    if s.byKey[key]?.channels[channel.id] == nil {
                        s.byKey[key, default: App()].order.append(channel.id)
                        s.total += 1
                        memory.force(StateMemory.Cost.channel)
                    }
                    s.byKey[key, default: App()].channels[channel.id] = channel
                }
            case Kind.channelRemoved:
                var id = ""
                var bundle = ""
                var env = APNsEnvironment.sandbox
                while let f = try r.next() {
                    switch f {
                    case 1: id = try r.string()
                    case 2: bundle = try r.string()
                    case 3: env = try r.uint() == 0 ? .sandbox : .production
                    default: try r.skip()
                    }
                }
                state.withLock { s in
                    let key = AppKey(bundle: bundle, environment: env)
                    guard s.byKey[key]?.channels.removeValue(forKey: id) != nil else { return }
                    s.byKey[key]?.order.removeAll { $0 == id }
                    s.total -= 1
                }
            case Kind.owner:
                var bundle = ""
                var team = ""
                var env = APNsEnvironment.sandbox
                while let f = try r.next() {
                    switch f {
                    case 1: bundle = try r.string()
                    case 2: env = try r.uint() == 0 ? .sandbox : .production
                    case 3: team = try r.string()
                    default: try r.skip()
                    }
                }
                state.withLock { s in s.byKey[AppKey(bundle: bundle, environment: env), default: App()].team = team }
            default:
                throw StateFormatError("apns.channels has no record kind \(record.kind)")
            }
        }
    }

    /// Apps by bundle id and environment, each app's owner then its channels in creation order.
    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        let apps = state.withLock { s in
            s.byKey.sorted { ($0.key.bundle, $0.key.environment.rawValue) < ($1.key.bundle, $1.key.environment.rawValue) }
        }
        for (key, app) in apps {
            if let team = app.team {
                var w = StateWriter()
                w.string(1, key.bundle)
                w.uint(2, key.environment == .sandbox ? 0 : 1)
                w.string(3, team)
                emit(ChangeRecord(store: stateName, kind: Kind.owner, body: w.bytes))
            }
            for id in app.order {
                if let c = app.channels[id] {
                    emit(ChangeRecord(store: stateName, kind: Kind.channel, body: APNsChannelRegistry.record(c)))
                }
            }
        }
    }

    /// Forgets every channel whatever the scope (channels are state, not credentials).
    public func reset(_ scope: ResetScope) { removeAll() }

    /// Adds its counts to `/emulator/v1/stats`.
    public func addStats(to stats: inout StatsDocument) {
        stats.add("apns", "channels", count)
    }

    /// Standard base64 with padding (RFC 4648 section 4).
    static func base64(_ bytes: [UInt8]) -> String {
        var text = Array(Base64URL.encode(bytes).utf8).map {
            $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0
        }
        while text.count % 4 != 0 { text.append(UInt8(ascii: "=")) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `id` is a well-formed channel id: standard base64 (padded) of 8 to 64 bytes.
    static func isWellFormed(_ id: ArraySlice<UInt8>) -> Bool {
        guard id.count >= 12, id.count <= 88, id.count % 4 == 0,
            !id.contains(UInt8(ascii: "-")), !id.contains(UInt8(ascii: "_")), let bytes = Base64URL.decode(id)
        else { return false }
        return bytes.count >= 8 && bytes.count <= 64
    }
}
