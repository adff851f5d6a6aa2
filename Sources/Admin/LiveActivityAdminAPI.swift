import APNs
import Fleet
import Observation
import PushCore
import Runtime
import Transport

/// The Live Activity admin endpoints: what an iOS app does with ActivityKit, on a simulated
/// device, and the device's inbox.
///
/// - `POST /emulator/v1/devices/{token}/activities` with `{"attributesType","attributes","contentState",
///   "channel","staleDate"}`: the app starts an activity (`Activity.request`); 201 with the
///   activity and its push token. With `channel` it listens to that broadcast channel.
/// - `GET /emulator/v1/devices/{token}/activities` and `.../activities/{id}`.
/// - `POST /emulator/v1/devices/{token}/activities/{id}/channel` with `{"channel":"<id>"}`:
///   subscribes it to a channel; a Most Recent Message channel hands it its stored message.
/// - `DELETE /emulator/v1/devices/{token}/activities/{id}`: the user ends it.
/// - `POST /emulator/v1/devices/{token}/push-to-start` with `{"attributesType"}`: the device's
///   push-to-start token for that type (`Activity<T>.pushToStartToken`).
/// - `GET /emulator/v1/devices/{token}/inbox`: what the device received, oldest first.
/// - `GET /emulator/v1/apns/channels?app=&environment=`: the broadcast channels APNs holds.
struct LiveActivityAdminAPI: AdminResource {
    let store: DeviceStore
    let channels: APNsChannelRegistry
    let log: NotificationLog
    /// On a cluster node: a device's inbox gathered from every node (each holds what its own
    /// pushes delivered).
    var clusterReads: ClusterReads? = nil

    func register(_ routes: inout RouterGroup) {
        routes.add([.get, .post], "/devices/{token}/activities", maxBodySize: 64 * 1024) { ex in
            let token = PercentEncoding.decode(ex.parameter("token"), plusAsSpace: false)
            if ex.request.method == .get {
                guard let device = store.device(token: token) else {
                    return ex.respond(AdminAPI.error(404, "no device with token \(token)"))
                }
                return ex.respond(.json(200, JSONObjectWriter.list("activities", device.activities.map(\.json))))
            }
            ex.respond(start(token, ex.request, shard: ex.eventLoop.index))
        }
        routes.add([.get, .delete], "/devices/{token}/activities/{id}") { ex in
            let token = PercentEncoding.decode(ex.parameter("token"), plusAsSpace: false)
            let id = PercentEncoding.decode(ex.parameter("id"), plusAsSpace: false)
            if ex.request.method == .delete {
                return ex.respond(answer(store.endActivity(token: token, activityID: id, nowMs: Clock.nowMs()), status: 200))
            }
            guard let activity = store.device(token: token)?.activities.first(where: { $0.id == id }) else {
                return ex.respond(AdminAPI.error(404, "no activity \(id) on device \(token)"))
            }
            ex.respond(.json(200, activity.json))
        }
        routes.add(.post, "/devices/{token}/activities/{id}/channel", maxBodySize: 4096) { ex in
            let token = PercentEncoding.decode(ex.parameter("token"), plusAsSpace: false)
            let id = PercentEncoding.decode(ex.parameter("id"), plusAsSpace: false)
            ex.respond(subscribe(token, id, ex.request, shard: ex.eventLoop.index))
        }
        routes.add(.post, "/devices/{token}/push-to-start", maxBodySize: 4096) { ex in
            let token = PercentEncoding.decode(ex.parameter("token"), plusAsSpace: false)
            let type: String
            do {
                type = try JSONObjectReader.read(ex.request.body, example: #"{"attributesType":"<ActivityAttributes type name>"}"#) { r in
                    let t = try r.string("attributesType", required: true)!
                    guard !t.isEmpty else { throw r.failure("attributesType", "must name the ActivityKit attributes type") }
                    return t
                }
            } catch {
                return ex.respond(AdminAPI.error(400, "\(error)"))
            }
            switch store.pushToStartToken(token: token, attributesType: type) {
            case .success(let t): ex.respond(.json(201, t.json))
            case .failure(let e): ex.respond(LiveActivityAdminAPI.error(e))
            }
        }
        routes.add(.get, "/devices/{token}/inbox") { ex in
            let token = PercentEncoding.decode(ex.parameter("token"), plusAsSpace: false)
            if let cluster = clusterReads, cluster.takes(ex) { return cluster.answerList(ex, ClusterReads.inboxList, limit: 100_000) }
            guard let device = store.device(token: token) else { return ex.respond(AdminAPI.error(404, "no device with token \(token)")) }
            ex.respond(.json(200, JSONObjectWriter.list("inbox", device.inboxEntries.map(LiveActivityAdminAPI.entryJSON))))
        }
        routes.add(.get, "/apns/channels") { ex in
            guard let app = ex.request.queryParameter("app").map(percentDecode), !app.isEmpty else {
                return ex.respond(AdminAPI.error(400, "app (the bundle id) is required"))
            }
            let environment = ex.request.queryParameter("environment") ?? "sandbox"
            guard let env = APNsEnvironment(rawValue: environment) else {
                return ex.respond(AdminAPI.error(400, "environment must be sandbox or production"))
            }
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            // A team's channels: the app's, when that team manages them.
            if let scope, scope != .team(channels.owner(bundle: app, environment: env) ?? "") {
                return ex.respond(.json(200, JSONObjectWriter.list("channels", [String]())))
            }
            let list = channels.list(bundle: app, environment: env).compactMap { channels.channel($0, bundle: app, environment: env) }
            ex.respond(.json(200, JSONObjectWriter.list("channels", list.map { LiveActivityAdminAPI.channelJSON($0, store) })))
        }
    }

    func answer(_ result: Result<LiveActivity, DeviceStore.LiveActivityError>, status: Int) -> Response {
        switch result {
        case .success(let a): .json(status, a.json)
        case .failure(let e): LiveActivityAdminAPI.error(e)
        }
    }

    static func error(_ e: DeviceStore.LiveActivityError) -> Response {
        switch e {
        case .unknownDevice, .unknownActivity: AdminAPI.error(404, e.description)
        case .ended, .uninstalled, .full: AdminAPI.error(409, e.description)
        case .notIOS: AdminAPI.error(400, e.description)
        }
    }

    /// The app starts an activity.
    func start(_ token: String, _ request: Request, shard: Int) -> Response {
        var type = ""
        var attributes = "{}"
        var contentState = "{}"
        var staleDate: Int64?
        var channel: String?
        do {
            try JSONObjectReader.read(request.body, example: #"{"attributesType":"<type>","attributes":{},"contentState":{}}"#) { r in
                type = try r.string("attributesType", required: true)!
                guard !type.isEmpty else { throw r.failure("attributesType", "must name the ActivityKit attributes type") }
                for (name, keep) in [("attributes", 0), ("contentState", 1)] {
                    guard let i = r.value(name) else { continue }
                    guard r.view.tokens[i].kind == .object else { throw r.failure(name, "must be an object") }
                    let text = String(decoding: r.view.raw(i), as: UTF8.self)
                    if keep == 0 { attributes = text } else { contentState = text }
                }
                if let s = try r.double("staleDate", in: 0...(1e11 - 1)) { staleDate = Int64(s) }
                channel = try r.string("channel")
            }
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        if let channel, let problem = checkChannel(channel, token) { return problem }
        let result = store.startActivity(
            token: token, attributesType: type, attributes: attributes, contentState: contentState, channel: channel,
            staleDate: staleDate, nowMs: Clock.nowMs())
        if case .success(let a) = result, let channel { handOver(channel, to: a, token, shard: shard) }
        return answer(result.map { a in store.device(token: token)?.activities.first { $0.id == a.id } ?? a }, status: 201)
    }

    /// An activity subscribes to a channel.
    func subscribe(_ token: String, _ id: String, _ request: Request, shard: Int) -> Response {
        let channel: String
        do {
            channel = try JSONObjectReader.read(request.body, example: #"{"channel":"<channel id>"}"#) { r in
                try r.string("channel", required: true)!
            }
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        if let problem = checkChannel(channel, token) { return problem }
        let result = store.subscribeActivity(token: token, activityID: id, channel: channel)
        if case .success(let a) = result { handOver(channel, to: a, token, shard: shard) }
        return answer(result.map { a in store.device(token: token)?.activities.first { $0.id == a.id } ?? a }, status: 200)
    }

    /// The channel must exist for the device's app and environment.
    func checkChannel(_ channel: String, _ token: String) -> Response? {
        guard let device = store.device(token: token) else { return AdminAPI.error(404, "no device with token \(token)") }
        guard device.platform == .ios else { return AdminAPI.error(400, DeviceStore.LiveActivityError.notIOS.description) }
        let env = APNsEnvironment(rawValue: device.environment ?? "sandbox") ?? .sandbox
        guard channels.channel(channel, bundle: device.app ?? "", environment: env) != nil else {
            return AdminAPI.error(404, "no broadcast channel \(channel) for \(device.app ?? "") in \(env.rawValue)")
        }
        return nil
    }

    /// A Most Recent Message channel's stored message reaches an activity that subscribes.
    func handOver(_ channel: String, to activity: LiveActivity, _ token: String, shard: Int) {
        guard let device = store.device(token: token), let app = device.app else { return }
        let env = APNsEnvironment(rawValue: device.environment ?? "sandbox") ?? .sandbox
        guard let stored = channels.storedMessage(channel, bundle: app, environment: env, nowMs: Clock.nowMs()) else { return }
        var delivery = Delivery(
            provider: .apns, platform: .ios, token: activity.pushToken, app: app, environment: env.rawValue,
            notificationID: stored.notificationID, messageName: nil, receivedAtMs: Clock.nowMs(), payload: stored.payload)
        delivery.channelID = channel
        var headers = HTTPFields()
        headers.add(name: "apns-channel-id", value: channel)
        headers.add(name: "apns-push-type", value: "liveactivity")
        log.append(
            shard: shard, id: delivery.notificationID, provider: .apns, receivedAtMs: delivery.receivedAtMs, environment: env.rawValue,
            token: delivery.tokenBytes, topic: Array(channel.utf8)[...], headers: headers, payload: delivery.payload,
            payloadIsJSON: true, warnings: [])
        store.deliver(delivery)
    }

    static func entryJSON(_ e: SimDevice.InboxEntry) -> String {
        var o = JSONObjectWriter()
        o.add("notificationId", e.notificationID.description)
        o.add("receivedAt", e.receivedAtMs)
        o.add("collapseId", e.collapseID)
        o.add("displayed", e.displayed)
        o.add("activityId", e.activityID)
        o.add("activityEvent", e.activityEvent)
        o.add("channel", e.channelID)
        return o.text
    }

    static func channelJSON(_ c: APNsChannelRegistry.Channel, _ store: DeviceStore) -> String {
        var o = JSONObjectWriter()
        o.add("id", c.id)
        o.add("app", c.bundleID)
        o.add("environment", c.environment.rawValue)
        o.add("messageStoragePolicy", c.policy.rawValue)
        o.add("createdAt", c.createdAtMs)
        o.add("broadcasts", c.broadcasts)
        o.add(
            "subscribers",
            store.liveActivityTokens(subscribedTo: c.id, bundleID: c.bundleID, environment: c.environment.rawValue).count)
        o.add("storedMessageAt", c.stored?.receivedAtMs)
        return o.text
    }
}
