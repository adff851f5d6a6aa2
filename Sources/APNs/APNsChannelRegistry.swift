import PushCore
import Synchronization
import Transport

/// The Live Activity broadcast channels APNs keeps (CHAN): per app and environment, at most
/// `maxChannelsPerApp`, each with its message-storage policy and, under Most Recent Message,
/// the last message broadcast on it for up to 8 hours. A channel exists in one environment only.
/// The first team whose provider token manages an app's channels owns them: another team's
/// token is refused (TopicMismatch). One mutex, held for a dictionary operation.
public final class APNsChannelRegistry: Sendable {
    public static let maxChannelsPerApp = 10_000
    /// Bounds on what clients can make the registry hold: channels in all, and apps (an app is
    /// remembered once a team manages its channels).
    public static let maxChannels = 1_000_000
    public static let maxApps = 100_000
    /// How long a Most Recent Message channel keeps its message.
    public static let storedMessageLifetimeMs: Int64 = 8 * 3600 * 1000

    /// `message-storage-policy`: 0 keeps nothing (and needs `apns-expiration: 0`), 1 keeps the
    /// most recent message.
    public enum StoragePolicy: Int, Sendable {
        case noMessageStored = 0
        case mostRecentMessage = 1
    }

    /// A broadcast kept for activities that subscribe later.
    public struct StoredMessage: Sendable {
        public var payload: [UInt8]
        public var notificationID: UUIDValue
        public var receivedAtMs: Int64
        public var expiresAtMs: Int64
        public var priority: Int
    }

    public struct Channel: Sendable {
        public var id: String
        public var bundleID: String
        public var environment: APNsEnvironment
        public var policy: StoragePolicy
        public var createdAtMs: Int64
        public var broadcasts: UInt64 = 0
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

    public init() {}

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
            var app = s.byKey[key] ?? App()
            guard app.channels.count < APNsChannelRegistry.maxChannelsPerApp, s.total < APNsChannelRegistry.maxChannels else {
                return .failure(.cannotCreateChannelConfig)
            }
            s.total += 1
            let channel = Channel(id: id, bundleID: bundle, environment: environment, policy: policy, createdAtMs: nowMs)
            app.channels[id] = channel
            app.order.append(id)
            s.byKey[key] = app
            return .success(channel)
        }
    }

    public func channel(_ id: String, bundle: String, environment: APNsEnvironment) -> Channel? {
        state.withLock { $0.byKey[AppKey(bundle: bundle, environment: environment)]?.channels[id] }
    }

    /// Deletes a channel (and its stored message); false when it was not there.
    @discardableResult
    public func delete(_ id: String, bundle: String, environment: APNsEnvironment) -> Bool {
        state.withLock { s -> Bool in
            let key = AppKey(bundle: bundle, environment: environment)
            guard s.byKey[key]?.channels.removeValue(forKey: id) != nil else { return false }
            s.byKey[key]?.order.removeAll { $0 == id }
            s.total -= 1
            return true
        }
    }

    /// The app's channel ids, oldest first.
    public func list(bundle: String, environment: APNsEnvironment) -> [String] {
        state.withLock { $0.byKey[AppKey(bundle: bundle, environment: environment)]?.order ?? [] }
    }

    /// Whether `team` may manage the app's channels, binding the app to it on first use (nil:
    /// certificate auth, which the certificate's topics already decided).
    public func admits(team: String?, bundle: String, environment: APNsEnvironment) -> Bool {
        guard let team else { return true }
        return state.withLock { s -> Bool in
            let key = AppKey(bundle: bundle, environment: environment)
            if let owner = s.byKey[key]?.team { return owner == team }
            guard s.byKey[key] != nil || s.byKey.count < APNsChannelRegistry.maxApps else { return true } // not remembered
            var app = s.byKey[key] ?? App()
            app.team = team
            s.byKey[key] = app
            return true
        }
    }

    /// Counts a broadcast on the channel and, under Most Recent Message, keeps it (replacing the
    /// last one) until `expiresAtMs` or 8 hours, whichever is first.
    public func recordBroadcast(_ id: String, bundle: String, environment: APNsEnvironment, message: StoredMessage) {
        state.withLock { s in
            let key = AppKey(bundle: bundle, environment: environment)
            guard var channel = s.byKey[key]?.channels[id] else { return }
            channel.broadcasts &+= 1
            if channel.policy == .mostRecentMessage { channel.stored = message }
            s.byKey[key]?.channels[id] = channel
        }
    }

    /// The message a newly subscribed activity receives: the channel's stored one while it lasts.
    public func storedMessage(_ id: String, bundle: String, environment: APNsEnvironment, nowMs: Int64) -> StoredMessage? {
        guard let stored = channel(id, bundle: bundle, environment: environment)?.stored, stored.expiresAtMs > nowMs else { return nil }
        return stored
    }

    public var count: Int { state.withLock { $0.total } }

    public func removeAll() { state.withLock { $0 = Apps() } }

    /// Standard base64 with padding (RFC 4648 section 4).
    static func base64(_ bytes: [UInt8]) -> String {
        var text = Array(Base64URL.encode(bytes).utf8).map {
            $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0
        }
        while text.count % 4 != 0 { text.append(UInt8(ascii: "=")) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `id` is a well-formed channel id: standard base64 (padded) of 8 to 64 bytes.
    public static func isWellFormed(_ id: ArraySlice<UInt8>) -> Bool {
        guard id.count >= 12, id.count <= 88, id.count % 4 == 0,
            !id.contains(UInt8(ascii: "-")), !id.contains(UInt8(ascii: "_")), let bytes = Base64URL.decode(id)
        else { return false }
        return bytes.count >= 8 && bytes.count <= 64
    }
}
