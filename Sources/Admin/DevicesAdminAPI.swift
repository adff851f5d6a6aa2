import APNs
import FCM
import Fleet
import Observation
import PushCore
import Runtime
import Tracking
import Transport
import WebPush

/// `/emulator/v1/devices`: the simulated devices. `POST` makes one (an app installed on a
/// phone: it registers, receives, tracks); `GET` pages them (`limit`, `label`, `cursor`);
/// `/devices/{token}` reads (`GET`), changes (`PATCH`), uninstalls (`DELETE`) one, and
/// `POST {token}:online|:offline|:rotate` takes it on or off the network or has its app get
/// a new token.
struct DevicesAdminAPI: AdminResource {
    let lifecycle: DeviceLifecycle
    /// Fleet's device records (the simulated devices).
    var deviceStore: DeviceStore { lifecycle.store }
    /// What the gateways know of tokens: APNs's and FCM's registries.
    let apnsDevices: APNsDeviceRegistry
    let fcmDevices: FCMDeviceRegistry
    /// The Web Push services' subscriptions (a web device's keys and endpoint).
    let webPush: WebPushSubscriptions
    /// New subscriptions' endpoints under the admin request's own host by default.
    let webPushLocalEndpoints: Bool
    /// The notifications (a team's or project's devices, for `scope=`).
    var log: NotificationLog? = nil

    func register(_ routes: inout RouterGroup) {
        routes.add(.post, "/devices", maxBodySize: 64 * 1024) { ex in ex.respond(create(ex.request)) }
        routes.add(.get, "/devices") { ex in
            guard let limit = intParameter(ex.request, "limit", default: 100, range: 1...10_000) else {
                return ex.respond(AdminAPI.error(400, "limit must be 1...10000"))
            }
            let label = ex.request.queryParameter("label").flatMap { $0.isEmpty ? nil : percentDecode($0) }
            var after: DeviceStore.PageKey?
            if let text = ex.request.queryParameter("cursor"), !text.isEmpty {
                guard let key = DeviceCursor.key(percentDecode(text)) else {
                    return ex.respond(
                        AdminAPI.error(400, "cursor is not one this server gave (pass the \"next\" of a page back unchanged)"))
                }
                after = key
            }
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            var taken: ((SimDevice) -> Bool)?
            switch scope {
            case .label(let l)?: taken = { $0.labels.contains(l) }
            case .project(let p)?: taken = { $0.fcmProject == p || ($0.platform == .android && $0.environment == p) }
            case .team?:
                let tokens = log.map { scope!.tokens(log: $0, devices: deviceStore) } ?? []
                taken = { tokens.contains($0.token) }
            case nil: break
            }
            let (devices, more) = deviceStore.page(after: after, limit: limit, label: label, where: taken)
            var object = JSONObjectWriter()
            object.add("devices", jsonArray: devices.map { $0.json(fleetID: deviceStore.fleetID($0)) })
            object.add(
                "next",
                more ? devices.last.map { DeviceCursor.text(DeviceStore.PageKey(createdAtMs: $0.createdAtMs, token: $0.token)) } : nil)
            ex.respond(.json(200, object.text))
        }
        routes.add([.get, .delete, .post, .patch], "/devices/{token}", maxBodySize: 64 * 1024) { ex in
            var token = PercentEncoding.decode(ex.parameter("token"), plusAsSpace: false)
            let now = Clock.nowMs()
            switch ex.request.method {
            case .delete:
                uninstall(token, now)
            case .post:
                // `{token}:online` and `{token}:offline` (Google-style custom methods).
                if token.hasSuffix(":rotate") {
                    token.removeLast(7)
                    return ex.respond(rotate(token, now))
                }
                var online: Bool
                if token.hasSuffix(":online") {
                    online = true
                    token.removeLast(7)
                } else if token.hasSuffix(":offline") {
                    online = false
                    token.removeLast(8)
                } else {
                    return ex.respond(AdminAPI.error(404, "POST /emulator/v1/devices/{token}:online, :offline or :rotate"))
                }
                guard ensure(token, now) != nil, deviceStore.setOnline(token: token, online, nowMs: now) != nil else {
                    return ex.respond(AdminAPI.error(404, "no device with token \(token)"))
                }
            case .patch:
                guard let dev = ensure(token, now) else { return ex.respond(AdminAPI.error(404, "no device with token \(token)")) }
                // Topics first (FCM's registry), each checked before anything changes.
                var topics: [String]?
                var err: String?
                do {
                    try JSONObjectReader.read(ex.request.body) { r in
                        if let i = r.value("topics") { topics = try DevicesAdminAPI.topics(r, i) }
                        _ = r.remaining()
                    }
                } catch {
                    return ex.respond(AdminAPI.error(400, "\(error)"))
                }
                if topics != nil && dev.platform != .android { return ex.respond(AdminAPI.error(400, DevicesAdminAPI.topicsAreFCMs)) }
                var registrationGiven = false
                deviceStore.update(token: token) { d in
                    err = DevicesAdminAPI.apply(ex.request.body, to: &d, registrationGiven: &registrationGiven)
                }
                if let err { return ex.respond(AdminAPI.error(400, err)) }
                // A registration given anew: the SDK registers (Adobe's skips it when nothing changed).
                if registrationGiven && dev.uninstalledAtMs == nil {
                    deviceStore.sendRegistration(token: token, event: .register, nowMs: now)
                }
                if let topics, let e = setTopics(token, topics, project: fcmDevices.device(token: token)?.project ?? dev.environment, now) {
                    return ex.respond(AdminAPI.error(400, e))
                }
            default: break
            }
            guard let json = deviceJSON(token) else { return ex.respond(AdminAPI.error(404, "no device with token \(token)")) }
            ex.respond(.json(200, json))
        }
    }

    /// A device as the admin API shows it: the simulated device's record (with its FCM topics
    /// and push count for Android), or what a gateway alone knows of the token.
    func deviceJSON(_ token: String) -> String? {
        switch lifecycle.describe(token) {
        case nil:
            return nil
        case .simulated(let device, let fleetID, let recorded)?:
            var json = device.json(fleetID: fleetID)
            if device.platform == .android, let recorded {
                // FCM's registry adds the device's topics and push count to its record.
                var extra = JSONObjectWriter()
                extra.add("topics", strings: recorded.topics ?? [])
                extra.add("pushes", recorded.pushes)
                json.removeLast()
                json += "," + extra.text.dropFirst()
            }
            if device.platform == .web, let s = webPush.subscription(token: token) {
                // The browser and its subscription, as `PushSubscription.toJSON()` gives it.
                json.removeLast()
                json += ",\"browser\":\"\(s.browser)\",\"subscription\":" + s.json + "}"
            }
            return json
        case .recorded(let known)?:
            // Known only to its gateway: what that gateway records.
            var object = JSONObjectWriter()
            object.add("token", known.token)
            object.add("platform", known.platform.rawValue)
            if known.platform == .ios {
                object.add("app", known.app ?? "")
                object.add("environment", known.environment ?? "sandbox")
            } else {
                object.add("app", known.app)
                object.add("project", known.environment)
            }
            object.add("installed", known.uninstalledAtMs == nil)
            object.add("uninstalledAt", known.uninstalledAtMs)
            if known.platform == .android { object.add("topics", strings: known.topics ?? []) }
            object.add("pushes", known.pushes)
            return object.text
        }
    }

    /// A device record for a token a gateway or fleet knows (see `DeviceLifecycle.ensure`).
    @discardableResult
    func ensure(_ token: String, _ now: Int64) -> SimDevice? { lifecycle.ensure(token, nowMs: now) }

    /// `{token}:rotate` (see `DeviceLifecycle.rotate`).
    func rotate(_ token: String, _ now: Int64) -> Response {
        switch lifecycle.rotate(token, nowMs: now) {
        case .success(let device): return .json(200, device.json(fleetID: nil))
        case .failure(.unknownDevice): return AdminAPI.error(404, "no device with token \(token)")
        case .failure(.uninstalled): return AdminAPI.error(409, "the app on \(token) is uninstalled")
        case .failure(.invalid(let message)): return AdminAPI.error(400, message)
        }
    }

    /// `DELETE /emulator/v1/devices/{token}` (see `DeviceLifecycle.uninstall`).
    func uninstall(_ token: String, _ now: Int64) { lifecycle.uninstall(token, nowMs: now) }

    /// `POST /emulator/v1/devices` with `{"platform","app", optional "token","environment"|"project",
    /// "tracking","behavior","labels","appState","permission","nseInstalled","privacyOptOut",
    /// "urlSchemes","sounds" (`AppProfile`), "topics" (android: FCM topic subscriptions)}`.
    func create(_ req: Request) -> Response {
        var platform: DevicePlatform?
        var app: String?
        var token: String?
        var env: String?
        var project: String?
        var fcmToken: String?
        var wantsFCMToken = false
        var topics: [String]?
        var web = WebSubscribe()
        do {
            // The identity here; the other fields are `apply`'s (which refuses unknown ones).
            try JSONObjectReader.read(req.body, example: #"{"platform":"ios","app":"com.example.app"}"#) { r in
                if let p = try r.string("platform") {
                    guard let known = DevicePlatform(rawValue: p) else { throw r.failure("platform", "must be ios, android or web") }
                    platform = known
                }
                if platform == .web { web = try WebSubscribe.read(&r) }
                app = try r.string("app")
                token = try r.string("token")
                env = try r.string("environment")
                project = try r.string("project")
                if let i = r.value("fcmToken") {
                    switch r.view.tokens[i].kind {
                    case .string: fcmToken = r.view.string(i)
                    case .true: wantsFCMToken = true
                    case .false: break
                    default: throw r.failure("fcmToken", "must be an FCM registration token, or true for a new one")
                    }
                }
                if let i = r.value("topics") { topics = try DevicesAdminAPI.topics(r, i) }
                _ = r.remaining()
            }
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        // Android: the project is the device's; iOS: the environment is APNs's, the project FCM's.
        if platform != .ios, env == nil { env = project }
        guard let platform else { return AdminAPI.error(400, "platform is required: ios, android or web") }
        guard let app, !app.isEmpty else {
            return AdminAPI.error(
                400,
                platform == .web
                    ? "app is required (the site's origin, https://shop.example)" : "app is required (bundle id or package name)")
        }
        if platform == .web { return createWeb(req, app: app, token: token, web, request: req) }
        if platform == .ios && fcmToken == nil && !wantsFCMToken {
            if topics != nil { return AdminAPI.error(400, DevicesAdminAPI.topicsAreFCMs) }
            if project != nil { return AdminAPI.error(400, "project is FCM's: an iOS device has one with \"fcmToken\"") }
        }
        if platform == .android && (fcmToken != nil || wantsFCMToken) {
            return AdminAPI.error(400, "fcmToken is for iOS devices with the Firebase SDK; an android device's token is its FCM token")
        }
        if let fcmToken, !FCMFormats.isRegistrationToken(fcmToken.utf8) {
            return AdminAPI.error(400, "an FCM token is 100 to 4096 characters of [A-Za-z0-9_:-]")
        }
        if platform == .ios {
            env = env ?? "sandbox"
            guard env == "sandbox" || env == "production" else { return AdminAPI.error(400, "environment must be sandbox or production") }
        }
        let now = Clock.nowMs()
        var r = FastRandom()
        let tok = token ?? DeviceLifecycle.randomToken(platform, &r)
        if platform == .ios {
            guard tok.utf8.count >= 64, tok.utf8.count <= 200,
                tok.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || ($0 >= 0x41 && $0 <= 0x46) })
            else {
                return AdminAPI.error(400, "an iOS token is 64 to 200 hexadecimal characters")
            }
        } else {
            guard FCMFormats.isRegistrationToken(tok.utf8) else {
                return AdminAPI.error(400, "an FCM token is 100 to 4096 characters of [A-Za-z0-9_:-]")
            }
        }
        var d = SimDevice(token: tok, platform: platform, app: app, environment: env, createdAtMs: now, seed: r.next())
        if platform == .ios, fcmToken != nil || wantsFCMToken {
            d.fcmToken = fcmToken ?? DeviceLifecycle.randomToken(.android, &r)
            d.fcmProject = project
        }
        if let refused = keep(&d, body: req.body) { return refused }
        if platform == .ios, let e = APNsEnvironment(rawValue: env ?? "sandbox") {
            apnsDevices.register(token: tok, environment: e, bundleID: app)
            if let fcm = d.fcmToken {
                // The Firebase iOS SDK's token: FCM knows it as an iOS app's.
                fcmDevices.register(token: fcm, project: project, app: app, platform: "ios", nowMs: now)
                if let topics, let e = setTopics(fcm, topics, project: project, now) { return AdminAPI.error(400, e) }
            }
        } else if platform == .android {
            fcmDevices.register(token: tok, project: env, app: app, nowMs: now)
            if let topics, let e = setTopics(tok, topics, project: env, now) { return AdminAPI.error(400, e) }
        }
        // The app is installed: its SDK registers the token with the campaign platform.
        deviceStore.sendRegistration(token: tok, event: .register, nowMs: now)
        return .json(201, deviceJSON(tok) ?? d.json(fleetID: nil))
    }

    /// A web device's own fields: its browser, the site's VAPID key, keys for test vectors.
    struct WebSubscribe {
        var browser: String?
        var applicationServerKey: [UInt8]?
        var privateKey: [UInt8]?
        var auth: [UInt8]?
        var localEndpoint: Bool?

        static func read(_ r: inout JSONObjectReader) throws(JSONObjectReader.Failure) -> WebSubscribe {
            var w = WebSubscribe()
            w.browser = try r.string("browser", required: true)
            func key(_ r: inout JSONObjectReader, _ name: String, _ count: Int?) throws(JSONObjectReader.Failure) -> [UInt8]? {
                guard let text = try r.string(name) else { return nil }
                guard let raw = VAPID.decodeKey(Array(text.utf8)[...]), count == nil || raw.count == count else {
                    throw r.failure(name, count.map { "must be \($0) bytes, base64url" } ?? "must be base64url")
                }
                return raw
            }
            w.applicationServerKey = try key(&r, "applicationServerKey", 65)
            if var k = try r.object("keys") {
                w.privateKey = try key(&k, "privateKey", 32)
                w.auth = try key(&k, "auth", 16)
                try k.finish()
            }
            w.localEndpoint = try r.bool("localEndpoint")
            return w
        }
    }

    /// `POST /emulator/v1/devices` for `"platform":"web"`: the browser subscribes through its push
    /// service (`pushManager.subscribe`), and a simulated browser holds the keys. The answer is the
    /// device with `"subscription"` as `PushSubscription.toJSON()` gives it.
    func createWeb(_ req: Request, app: String, token: String?, _ web: WebSubscribe, request: Request) -> Response {
        let now = Clock.nowMs()
        let local = web.localEndpoint ?? webPushLocalEndpoints
        let base = local ? request.authority.map { "http://" + String(decoding: $0, as: UTF8.self) } : nil
        let subscription: WebPushSubscription
        do {
            subscription = try webPush.subscribe(
                browser: web.browser ?? "", app: app, applicationServerKey: web.applicationServerKey, privateKey: web.privateKey,
                auth: web.auth, token: token, localBase: base, nowMs: now)
        } catch {
            return AdminAPI.error(400, error.description)
        }
        var r = FastRandom()
        var d = SimDevice(
            token: subscription.token, platform: .web, app: app, environment: subscription.service.rawValue, createdAtMs: now,
            seed: r.next())
        if let refused = keep(&d, body: req.body) { return refused }
        deviceStore.sendRegistration(token: subscription.token, event: .register, nowMs: now)
        guard let json = deviceJSON(subscription.token) else { return AdminAPI.error(500, "the device was not kept") }
        return .json(201, json)
    }

    /// Applies the body's device fields to `d` and keeps it; the refusal when either fails.
    func keep(_ d: inout SimDevice, body: [UInt8]) -> Response? {
        if let e = DevicesAdminAPI.apply(body, to: &d) { return AdminAPI.error(400, e) }
        do {
            try deviceStore.register(d)
        } catch let e as DeviceStore.StoreError where e.isLimit {
            return AdminAPI.error(507, e.description)
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        return nil
    }

    static let topicsAreFCMs = "topics are FCM topic subscriptions: android devices only"

    /// A `"topics"` array: FCM topic names (`[a-zA-Z0-9-_.~%]{1,900}`, `/topics/` prefix allowed).
    static func topics(_ r: JSONObjectReader, _ val: Int) throws(JSONObjectReader.Failure) -> [String] {
        let v = r.view
        guard v.tokens[val].kind == .array else { throw r.failure("topics", "must be an array of topic names") }
        var list: [String] = []
        var bad: JSONObjectReader.Failure?
        v.forEachElement(val) { i in
            guard v.tokens[i].kind == .string else {
                bad = r.failure("topics", "must be an array of topic names")
                return
            }
            let raw = Array(v.string(i).utf8)
            guard let name = FCMFormats.topicName(raw) else {
                bad = JSONObjectReader.Failure("invalid topic name \(v.string(i)): [a-zA-Z0-9-_.~%]{1,900}")
                return
            }
            list.append(String(decoding: name, as: UTF8.self))
        }
        if let bad { throw bad }
        return list
    }

    /// Makes `topics` the FCM device's subscriptions (subscribing the new ones, unsubscribing the
    /// others), as the Instance ID API would one by one; an error message when FCM would refuse.
    func setTopics(_ token: String, _ topics: [String], project: String?, _ now: Int64) -> String? {
        let current = fcmDevices.device(token: token)?.topics.keys.map { $0 } ?? []
        for t in current where !topics.contains(t) { _ = fcmDevices.unsubscribe(token: token, topic: t) }
        for t in topics {
            switch fcmDevices.subscribe(token: token, topic: t, project: project, nowMs: now) {
            case .ok, .notSubscribed: continue
            case .tooManyTopics: return "TOO_MANY_TOPICS: a device holds at most \(FCMDeviceRegistry.maxTopicsPerDevice) topics"
            case .notFound: return "the device is uninstalled: its token subscribes to nothing"
            case .senderMismatch: return "SENDER_ID_MISMATCH: the device belongs to another project"
            case .invalidArgument: return "not an FCM registration token"
            case .full: return "the FCM registry is full (--max-devices)"
            }
        }
        return nil
    }

    /// Applies the mutable fields of a device body; returns an error message or nil.
    static func apply(_ body: [UInt8], to d: inout SimDevice) -> String? {
        var registrationGiven = false
        return apply(body, to: &d, registrationGiven: &registrationGiven)
    }

    /// Applies the body's device fields; `registrationGiven` says whether it set `registration`.
    static func apply(_ body: [UInt8], to d: inout SimDevice, registrationGiven: inout Bool) -> String? {
        var device = d
        var given = false
        do {
            try JSONObjectReader.read(body) { r in
                // The callers' (topics: FCM's registry).
                for name in [
                    "platform", "app", "token", "environment", "project", "topics", "fcmToken", "browser", "applicationServerKey", "keys",
                    "localEndpoint",
                ] {
                    _ = r.value(name)
                }
                if let i = r.value("tracking") {
                    device.tracking = r.view.tokens[i].kind == .null ? nil : try TrackingConfig.parse(Array(r.view.raw(i)))
                }
                if let i = r.value("registration") {
                    given = true
                    device.registration = r.view.tokens[i].kind == .null ? nil : try RegistrationConfig.parse(Array(r.view.raw(i)))
                }
                if let i = r.value("behavior") {
                    device.behavior = r.view.tokens[i].kind == .null ? nil : try Behavior.parse(r.view, i)
                }
                if let l = try r.strings("labels") { device.labels = l }
                if let s = try r.string("appState") {
                    guard let state = SimDevice.AppState(rawValue: s) else {
                        throw r.failure("appState", "must be foreground, background, killed or offline")
                    }
                    device.appState = state
                }
                if let p = try r.string("permission") {
                    guard let permission = SimDevice.Permission(rawValue: p) else {
                        throw r.failure("permission", "must be authorized, provisional or denied")
                    }
                    device.permission = permission
                }
                if let b = try r.bool("nseInstalled") { device.nseInstalled = b }
                if let b = try r.bool("privacyOptOut") { device.privacyOptOut = b }
                if r.has("urlSchemes") || r.has("sounds") {
                    var profile = device.profile ?? AppProfile()
                    try profile.read(&r)
                    device.profile = profile
                }
            }
        } catch {
            registrationGiven = given
            return "\(error)"
        }
        registrationGiven = given
        d = device
        return nil
    }
}

/// A devices page's `next`: base64url of "createdAtMs.token", opaque to clients.
enum DeviceCursor {
    static func text(_ k: DeviceStore.PageKey) -> String { Base64URL.encode(Array("\(k.createdAtMs).\(k.token)".utf8)) }

    static func key(_ text: String) -> DeviceStore.PageKey? {
        guard text.utf8.count <= 1024, let bytes = Base64URL.decode(text.utf8) else { return nil }
        let s = String(decoding: bytes, as: UTF8.self)
        guard let dot = s.firstIndex(of: "."), let ms = Int64(s[..<dot]) else { return nil }
        let token = String(s[s.index(after: dot)...])
        guard !token.isEmpty else { return nil }
        return DeviceStore.PageKey(createdAtMs: ms, token: token)
    }
}
