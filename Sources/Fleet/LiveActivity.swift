import PushCore
import Runtime
import Synchronization
import Transport

/// A Live Activity on a simulated iOS device, as ActivityKit holds it: its attributes type and
/// static attributes, its content state, its own push token (the update token a provider
/// sends `liveactivity` pushes to) and the broadcast channel it listens to (ActivityKit's
/// `pushType: .channel(id)`: one at most).
public struct LiveActivity: Sendable {
    public enum State: String, Sendable { case active, ended }

    public var id: String
    public var attributesType: String
    /// JSON texts, as the app (or the push that started the activity) gave them.
    public var attributes: String
    public var contentState: String
    public var pushToken: String
    public var channel: String?
    public var state = State.active
    /// `app` (started in the app) or `push-to-start`.
    public var startedBy: String
    var startedAtMs: Int64
    var updatedAtMs: Int64
    /// Updates received (pushes and broadcasts, the start excluded).
    public var updates: UInt64 = 0
    /// `aps.timestamp` of the last content update (seconds): older updates are ignored, as ActivityKit does.
    var lastTimestamp: Int64?
    /// `aps.stale-date` and `aps.dismissal-date` (seconds), when a push gave them.
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    var endedAtMs: Int64?

    public var json: String {
        var o = JSONObjectWriter()
        o.add("id", id)
        o.add("attributesType", attributesType)
        o.add("attributes", json: attributes)
        o.add("contentState", json: contentState)
        o.add("pushToken", pushToken)
        o.add("channel", channel)
        o.add("state", state.rawValue)
        o.add("startedBy", startedBy)
        o.add("startedAt", startedAtMs)
        o.add("updatedAt", updatedAtMs)
        o.add("updates", updates)
        o.add("timestamp", lastTimestamp)
        o.add("staleDate", staleDate)
        o.add("dismissalDate", dismissalDate)
        o.add("endedAt", endedAtMs)
        return o.text
    }
}

/// A push-to-start token: a `liveactivity` push with `"event":"start"` sent to it starts an
/// activity of its attributes type.
public struct PushToStartToken: Sendable {
    public var attributesType: String
    public var token: String

    public var json: String {
        var o = JSONObjectWriter()
        o.add("attributesType", attributesType)
        o.add("token", token)
        return o.text
    }
}

/// Who a Live Activity token belongs to: the device, and the activity (nil: a push-to-start token).
struct LiveTokenOwner: Sendable {
    var device: String
    var activityID: String?
}

/// The device layer's Live Activity indexes: every activity and push-to-start token by its push
/// token, and every channel's subscribed activities (by channel, app and environment). One
/// mutex each, held for a dictionary operation; nothing on the device-push path takes them
/// unless the token is unknown to the device records.
final class LiveActivityIndex: Sendable {
    struct ChannelKey: Hashable {
        var channel: String
        var bundle: String
        var environment: String
    }

    private let tokens = FutexLock<[TokenKey: LiveTokenOwner]>([:])
    private let channels = FutexLock<[ChannelKey: Set<String>]>([:])
    /// Whether any token was ever added (a fast "no" for every unknown token until then).
    private let used = Atomic<Bool>(false)

    func owner(of key: TokenKey) -> LiveTokenOwner? {
        guard used.load(ordering: .relaxed) else { return nil }
        return tokens.withLock { $0[key] }
    }

    func add(token: String, owner: LiveTokenOwner) {
        used.store(true, ordering: .relaxed)
        tokens.withLock { $0[TokenKey(token)] = owner }
    }

    func remove(token: String) { _ = tokens.withLock { $0.removeValue(forKey: TokenKey(token)) } }

    func subscribe(_ token: String, to key: ChannelKey) { _ = channels.withLock { $0[key, default: []].insert(token) } }

    func unsubscribe(_ token: String, from key: ChannelKey) {
        channels.withLock { map in
            map[key]?.remove(token)
            if map[key]?.isEmpty == true { map[key] = nil }
        }
    }

    func subscribers(_ key: ChannelKey) -> [String] { channels.withLock { $0[key].map(Array.init) ?? [] } }

    var tokenCount: Int { tokens.withLock { $0.count } }

    func removeAll() {
        tokens.withLock { $0.removeAll() }
        channels.withLock { $0.removeAll() }
    }
}
