import PushCore

/// Live Activities on simulated iOS devices: started by the app (the admin API) or by a
/// push-to-start push, updated and ended by `liveactivity` pushes to their own tokens and by
/// broadcasts on the channel they subscribe to.
extension DeviceStore {
    /// Activities a device keeps (active and ended); the oldest ended one makes room.
    static let maxActivitiesPerDevice = 64
    /// Push-to-start tokens a device keeps (one per attributes type).
    static let maxPushToStartTokens = 32

    public enum LiveActivityError: Error, Equatable, CustomStringConvertible {
        case unknownDevice, notIOS, uninstalled, unknownActivity, ended, full

        public var description: String {
            switch self {
            case .unknownDevice: "no device with this token"
            case .notIOS: "Live Activities are an iOS feature: the device is not an iOS device"
            case .uninstalled: "the app is uninstalled"
            case .unknownActivity: "no activity with this id on the device"
            case .ended: "the activity has ended"
            case .full: "the device holds \(DeviceStore.maxActivitiesPerDevice) active activities already"
            }
        }
    }

    /// A Live Activity token: 160 hex characters, as ActivityKit's are.
    static func liveActivityToken(_ random: inout FastRandom) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(160)
        for _ in 0..<10 {
            var x = random.next()
            for _ in 0..<8 {
                out.append(hex[Int(x & 0xF)])
                out.append(hex[Int((x >> 4) & 0xF)])
                x >>= 8
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Changes an iOS device's record, or says why it cannot be.
    private func withIOSDevice<T>(_ token: String, _ body: (inout SimDevice) -> Result<T, LiveActivityError>) -> Result<
        T, LiveActivityError
    > {
        var result: Result<T, LiveActivityError> = .failure(.unknownDevice)
        update(token: token) { d in
            guard d.platform == .ios else {
                result = .failure(.notIOS)
                return
            }
            guard d.uninstalledAtMs == nil else {
                result = .failure(.uninstalled)
                return
            }
            result = body(&d)
        }
        return result
    }

    /// Room for one more activity: the oldest ended one goes when the device is full.
    private static func makeRoom(_ d: inout SimDevice) -> Bool {
        if d.activities.count < maxActivitiesPerDevice { return true }
        guard let i = d.activities.firstIndex(where: { $0.state == .ended }) else { return false }
        d.activities.remove(at: i)
        return true
    }

    func channelKey(_ channel: String, _ d: SimDevice) -> LiveActivityIndex.ChannelKey {
        LiveActivityIndex.ChannelKey(channel: channel, bundle: d.app ?? "", environment: d.environment ?? "sandbox")
    }

    /// Starts an activity in the app (`Activity.request`): it gets its own push token and, with
    /// `channel`, listens to that broadcast channel.
    public func startActivity(
        token: String, attributesType: String, attributes: String, contentState: String, channel: String?,
        staleDate: Int64?, nowMs: Int64
    ) -> Result<LiveActivity, LiveActivityError> {
        var random = FastRandom()
        let activity = LiveActivity(
            id: UUIDValue.random(&random).description.uppercased(), attributesType: attributesType, attributes: attributes,
            contentState: contentState, pushToken: DeviceStore.liveActivityToken(&random), channel: channel, startedBy: "app",
            startedAtMs: nowMs, updatedAtMs: nowMs, staleDate: staleDate)
        var key: LiveActivityIndex.ChannelKey?
        let result = withIOSDevice(token) { d -> Result<LiveActivity, LiveActivityError> in
            guard DeviceStore.makeRoom(&d) else { return .failure(.full) }
            d.activities.append(activity)
            key = channel.map { channelKey($0, d) }
            return .success(activity)
        }
        if case .success = result {
            live.add(token: activity.pushToken, owner: LiveTokenOwner(device: token, activityID: activity.id))
            if let key { live.subscribe(activity.pushToken, to: key) }
        }
        return result
    }

    /// Subscribes an activity to a broadcast channel (replacing the one it had).
    public func subscribeActivity(token: String, activityID: String, channel: String) -> Result<LiveActivity, LiveActivityError> {
        var previous: LiveActivityIndex.ChannelKey?
        var key: LiveActivityIndex.ChannelKey?
        let result = withIOSDevice(token) { d -> Result<LiveActivity, LiveActivityError> in
            guard let i = d.activities.firstIndex(where: { $0.id == activityID }) else { return .failure(.unknownActivity) }
            guard d.activities[i].state == .active else { return .failure(.ended) }
            previous = d.activities[i].channel.map { channelKey($0, d) }
            d.activities[i].channel = channel
            key = channelKey(channel, d)
            return .success(d.activities[i])
        }
        if case .success(let activity) = result, let key {
            if let previous, previous != key { live.unsubscribe(activity.pushToken, from: previous) }
            live.subscribe(activity.pushToken, to: key)
        }
        return result
    }

    /// Ends an activity (the user dismissed it, or the app ended it).
    public func endActivity(token: String, activityID: String, nowMs: Int64) -> Result<LiveActivity, LiveActivityError> {
        var key: LiveActivityIndex.ChannelKey?
        let result = withIOSDevice(token) { d -> Result<LiveActivity, LiveActivityError> in
            guard let i = d.activities.firstIndex(where: { $0.id == activityID }) else { return .failure(.unknownActivity) }
            if d.activities[i].state == .active {
                d.activities[i].state = .ended
                d.activities[i].endedAtMs = nowMs
                key = d.activities[i].channel.map { channelKey($0, d) }
            }
            return .success(d.activities[i])
        }
        if case .success(let activity) = result, let key { live.unsubscribe(activity.pushToken, from: key) }
        return result
    }

    /// The device's push-to-start token for an attributes type (made on first request, as
    /// `Activity<T>.pushToStartToken` is).
    public func pushToStartToken(token: String, attributesType: String) -> Result<PushToStartToken, LiveActivityError> {
        var random = FastRandom()
        let fresh = PushToStartToken(attributesType: attributesType, token: DeviceStore.liveActivityToken(&random))
        var made = false
        let result = withIOSDevice(token) { d -> Result<PushToStartToken, LiveActivityError> in
            if let existing = d.pushToStartTokens.first(where: { $0.attributesType == attributesType }) { return .success(existing) }
            guard d.pushToStartTokens.count < DeviceStore.maxPushToStartTokens else { return .failure(.full) }
            d.pushToStartTokens.append(fresh)
            made = true
            return .success(fresh)
        }
        if made { live.add(token: fresh.token, owner: LiveTokenOwner(device: token, activityID: nil)) }
        return result
    }

    /// What APNs is told about a Live Activity or push-to-start token: its device's app and
    /// environment; an ended activity's token is no longer valid (410).
    func liveTokenStatus(_ token: ArraySlice<UInt8>) -> DeviceStatus? {
        guard let owner = live.owner(of: TokenKey(token)) else { return nil }
        let k = TokenKey(owner.device)
        return shard(k).map.withLock { m -> DeviceStatus? in
            guard let i = m.index(forKey: k) else { return nil }
            let d = m.values[i]
            if let at = d.uninstalledAtMs { return .uninstalled(atMs: at) }
            if let id = owner.activityID, let a = d.activities.first(where: { $0.id == id }), a.state == .ended {
                return .uninstalled(atMs: a.endedAtMs ?? d.createdAtMs)
            }
            return .installed(app: d.app, environment: d.environment)
        }
    }

    public func liveActivityTokens(subscribedTo channelID: String, bundleID: String, environment: String) -> [String] {
        live.subscribers(LiveActivityIndex.ChannelKey(channel: channelID, bundle: bundleID, environment: environment))
    }

    /// The aps keys of a Live Activity push that ActivityKit reads.
    struct LivePush {
        var event: String?
        var contentState: String?
        var attributesType: String?
        var attributes: String?
        var timestamp: Int64?
        var staleDate: Int64?
        var dismissalDate: Int64?
        var inputPushChannel: String?
        var hasAlert = false

        init(_ payload: ArraySlice<UInt8>) {
            Array(payload).withUnsafeBytes { raw in
                var tokens: [JSONToken] = []
                guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return }
                let v = JSONView(bytes: raw, tokens: tokens)
                guard let aps = v.member(0, "aps"), v.tokens[aps].kind == .object else { return }
                func string(_ key: StaticString) -> String? {
                    v.member(aps, key).flatMap { v.tokens[$0].kind == .string ? v.string($0) : nil }
                }
                func object(_ key: StaticString) -> String? {
                    v.member(aps, key).flatMap { v.tokens[$0].kind == .object ? String(decoding: v.raw($0), as: UTF8.self) : nil }
                }
                func seconds(_ key: StaticString) -> Int64? {
                    v.member(aps, key).flatMap { v.number($0) }.flatMap { $0.isFinite && $0 >= 0 && $0 < 1e12 ? Int64($0) : nil }
                }
                event = string("event")
                contentState = object("content-state")
                attributesType = string("attributes-type")
                attributes = object("attributes")
                timestamp = seconds("timestamp")
                staleDate = seconds("stale-date")
                dismissalDate = seconds("dismissal-date")
                inputPushChannel = string("input-push-channel")
                hasAlert = v.member(aps, "alert") != nil
            }
        }
    }

    /// A push to a Live Activity's token (or a broadcast reaching it), or to a push-to-start
    /// token: ActivityKit starts, updates or ends the activity; the push enters the inbox.
    func deliverLive(_ d: Delivery, owner: LiveTokenOwner) {
        let push = LivePush(d.payload)
        let k = TokenKey(owner.device)
        let inboxSize = configuration.inboxSize
        var random = FastRandom()
        var started: LiveActivity?
        var startedKey: LiveActivityIndex.ChannelKey?
        var endedKey: LiveActivityIndex.ChannelKey?
        var view: SDKView?
        var fleet: Int?
        // On the record in place: a copy of a device with its activities costs a retain per field.
        func apply(_ dev: inout SimDevice) -> Bool {
            guard dev.uninstalledAtMs == nil else { return false }
            var activityID: String?
            if let id = owner.activityID {
                guard let a = dev.activities.firstIndex(where: { $0.id == id }), dev.activities[a].state == .active else { return false }
                activityID = id
                switch push.event {
                case "update", "end":
                    // ActivityKit ignores an update older than the content it shows.
                    if let t = push.timestamp, let last = dev.activities[a].lastTimestamp, t < last { break }
                    if let state = push.contentState { dev.activities[a].contentState = state }
                    if let t = push.timestamp { dev.activities[a].lastTimestamp = t }
                    if let s = push.staleDate { dev.activities[a].staleDate = s }
                    dev.activities[a].updates += 1
                    dev.activities[a].updatedAtMs = d.receivedAtMs
                    if push.event == "end" {
                        dev.activities[a].state = .ended
                        dev.activities[a].endedAtMs = d.receivedAtMs
                        if let s = push.dismissalDate { dev.activities[a].dismissalDate = s }
                        endedKey = dev.activities[a].channel.map { channelKey($0, dev) }
                    }
                default: break // a start to an update token starts nothing (the lint warned)
                }
            } else {
                // A push-to-start token: only a start of the token's attributes type starts an activity.
                guard push.event == "start", let type = push.attributesType,
                    dev.pushToStartTokens.contains(where: { $0.attributesType == type && $0.token.utf8.elementsEqual(d.tokenBytes) }),
                    DeviceStore.makeRoom(&dev)
                else { return false }
                let a = LiveActivity(
                    id: UUIDValue.random(&random).description.uppercased(), attributesType: type,
                    attributes: push.attributes ?? "{}", contentState: push.contentState ?? "{}",
                    pushToken: DeviceStore.liveActivityToken(&random), channel: push.inputPushChannel,
                    startedBy: "push-to-start", startedAtMs: d.receivedAtMs, updatedAtMs: d.receivedAtMs,
                    lastTimestamp: push.timestamp, staleDate: push.staleDate)
                dev.activities.append(a)
                started = a
                startedKey = a.channel.map { channelKey($0, dev) }
                activityID = a.id
            }
            DeviceStore.addToInbox(&dev, d, inboxSize: inboxSize)
            dev.normalizeInbox()
            if !dev.inbox.isEmpty {
                dev.inbox[dev.inbox.count - 1].live = SimDevice.InboxEntry.LiveFacts(
                    activityID: activityID, activityEvent: push.event, channelID: d.channelID)
            }
            if push.hasAlert { view = SDKView(dev) }
            fleet = dev.fleet
            return true
        }
        let applied = shard(k).map.withLock { m -> Bool in
            guard let i = m.index(forKey: k) else { return false }
            guard apply(&m.values[i]) else { return false }
            logDevice(m.values[i], atMs: d.receivedAtMs)
            return true
        }
        // A push changed the activity: in the state log's file before its answer leaves.
        if applied { changes.writeNow() }
        // Not applied (an ended activity, a push-to-start token sent anything but a start of its
        // type): ActivityKit shows nothing, and nothing is recorded on the device.
        guard applied else { return }
        counters.delivered.add(1, ordering: .relaxed)
        if let a = started {
            live.add(token: a.pushToken, owner: LiveTokenOwner(device: owner.device, activityID: a.id))
            if let key = startedKey { live.subscribe(a.pushToken, to: key) }
        }
        // The ended activity's token is the one this push came to.
        if let endedKey { live.unsubscribe(d.token, from: endedKey) }
        // An alert on the activity's push shows a banner the user may tap (the app's SDK sees the open).
        if let view { _ = track(view, d, fleet: fleet.flatMap { fleetRef($0) }, atMs: d.receivedAtMs) }
    }
}
