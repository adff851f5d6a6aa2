import PushCore
import Synchronization
import Transport

/// What APNs knows about device tokens it has seen: the environment and app each belongs to,
/// and whether the app was uninstalled. A token seen for the first time is bound to the
/// environment and bundle id of that push (`--devices auto`). Sharded by token hash; each shard
/// is locked for a dictionary lookup only. (The simulated-device layer grows out of this.)
public final class APNsDeviceRegistry: Sendable {
    public struct Device: Sendable {
        public var environment: APNsEnvironment
        public var bundleKey: TokenKey
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

    public init(shardCount: Int = 64, capacity: Int = 1_000_000, directory: DeviceDirectory? = nil, strict: Bool = false) {
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
        let shard = shards[key.shard(shards.count)]
        let known = shard.map.withLock { map -> Verdict? in
            guard let i = map.index(forKey: key) else { return nil }
            // Read in place (a copy of the record retained and released its bundle id).
            return APNsDeviceRegistry.admit(&map.values[i], environment: environment, bundleKey: bundleKey)
        }
        if let known { return known }
        // A fleet member or registered device: answered by the device layer, nothing stored here.
        if let directory, let status = directory.status(token: token, platform: .ios) {
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
            if map.count < maxPerShard {
                map[key] = Device(
                    environment: environment, bundleKey: bundleKey,
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
        shards[key.shard(shards.count)].map.withLock {
            $0[key] = Device(
                environment: environment, bundleKey: TokenKey(bundleID), bundleID: bundleID,
                uninstalledAtMs: nil, pushes: 0)
        }
    }

    /// Marks the app uninstalled: later pushes get 410 Unregistered with this time. False if unknown.
    @discardableResult
    public func uninstall(token: String, atMs: Int64) -> Bool {
        let key = TokenKey(token)
        return shards[key.shard(shards.count)].map.withLock { map -> Bool in
            guard var d = map[key] else { return false }
            d.uninstalledAtMs = d.uninstalledAtMs ?? atMs
            map[key] = d
            return true
        }
    }

    public func device(token: String) -> Device? {
        let key = TokenKey(token)
        return shards[key.shard(shards.count)].map.withLock { $0[key] }
    }

    public var count: Int { shards.reduce(0) { acc, s in acc + s.map.withLock { $0.count } } }

    public func removeAll() { for s in shards { s.map.withLock { $0.removeAll() } } }
}
