import APNs
import Cluster
import FCM
import Fleet
import Observation
import PushCore
import Runtime
import Tracking
import Transport
import WebPush

/// `/emulator/v1/fleets`: many simulated devices made at once (up to a billion, from a seed,
/// registered at `registerRate`). `POST` makes one; `GET` lists them; `/fleets/{id}` reads one
/// (with its registration's progress), `POST {id}:pauseRegistration|:resumeRegistration`;
/// `/fleets/{id}/tokens` pages its tokens (`offset`, `limit`); a web fleet's
/// `/fleets/{id}/subscriptions` pages its members' subscriptions as `PushSubscription.toJSON()`
/// gives them (what a sender stores and sends to).
struct FleetsAdminAPI: AdminResource {
    /// Fleet's device records.
    let deviceStore: DeviceStore
    /// The Web Push subscriptions (a web fleet's members are made from their fleet), the
    /// server's endpoint choice (`--webpush-endpoints`), and the worker that derives members' keys.
    let webPush: WebPushSubscriptions
    let webPushLocalEndpoints: Bool
    let slowWork: BackgroundWorker
    /// On a cluster node: fleets are numbered in order, so each is made under the cluster's lock.
    var cluster: ClusterLink? = nil
    /// The APNs keys (a `team:` scope's fleets are the iOS fleets its keys may push to).
    var apnsKeys: APNsKeyStore? = nil

    static let maxPage = 100_000
    /// Subscriptions a page, at most: each is a P-256 scalar multiplication (about 20 µs).
    static let maxSubscriptionPage = 10_000

    func register(_ routes: inout RouterGroup) {
        routes.add(.post, "/fleets", maxBodySize: 64 * 1024) { ex in
            guard let cluster else { return ex.respond(createFleet(ex.request)) }
            // Off the loop: the lock and the catching up wait on Redis.
            let accepted = slowWork.submit {
                do {
                    ex.respond(try cluster.serialized("fleets") { createFleet(ex.request) })
                } catch {
                    ex.respond(AdminAPI.error(503, "the fleet was not made: \(error)"))
                }
            }
            if !accepted { ex.respond(AdminAPI.busy(slowWork, "slow work")) }
        }
        routes.add(.get, "/fleets") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            var fleets = deviceStore.allFleets
            if let scope { fleets = FleetsAdminAPI.fleets(fleets, in: scope, keys: apnsKeys?.all ?? []) }
            ex.respond(.json(200, JSONObjectWriter.list("fleets", fleets.map(\.json))))
        }
        // GET: the fleet (with its registration's progress). POST `{id}:pauseRegistration` and
        // `{id}:resumeRegistration`: the bulk registration stops where it is and goes on from there.
        routes.add([.get, .post], "/fleets/{id}") { ex in
            var id = ex.parameter("id").utf8String
            if ex.request.method == .get {
                guard let f = deviceStore.fleet(id: id) else { return ex.respond(AdminAPI.error(404, "no such fleet")) }
                return ex.respond(.json(200, f.json))
            }
            let pause: Bool
            if id.hasSuffix(":pauseRegistration") {
                pause = true
                id.removeLast(":pauseRegistration".count)
            } else if id.hasSuffix(":resumeRegistration") {
                pause = false
                id.removeLast(":resumeRegistration".count)
            } else {
                return ex.respond(AdminAPI.error(404, "POST /emulator/v1/fleets/{id}:pauseRegistration or :resumeRegistration"))
            }
            guard let f = deviceStore.fleet(id: id) else { return ex.respond(AdminAPI.error(404, "no such fleet")) }
            guard let progress = f.registrationProgress else { return ex.respond(AdminAPI.error(409, "fleet \(id) has no registration")) }
            deviceStore.registrar.setPaused(progress, pause)
            ex.respond(.json(200, f.json))
        }
        routes.add(.get, "/fleets/{id}/subscriptions") { ex in subscriptions(ex) }
        routes.add(.get, "/fleets/{id}/tokens") { ex in
            guard let f = deviceStore.fleet(id: ex.parameter("id").utf8String) else {
                return ex.respond(AdminAPI.error(404, "no such fleet"))
            }
            guard let offset = intParameter(ex.request, "offset", default: 0, range: 0...Int(Int32.max) * 256),
                let limit = intParameter(ex.request, "limit", default: 1000, range: 1...FleetsAdminAPI.maxPage)
            else {
                return ex.respond(AdminAPI.error(400, "offset must be >= 0 and limit 1...\(FleetsAdminAPI.maxPage)"))
            }
            let tokens = deviceStore.tokens(f, offset: offset, limit: limit)
            var body: [UInt8] = []
            body.reserveCapacity(tokens.count * (tokens.first?.utf8.count ?? 64 + 3) + 64)
            body.append(contentsOf: Array("{\"fleet\":\"\(f.id)\",\"offset\":\(offset),\"count\":\(f.count),\"tokens\":[".utf8))
            for (i, t) in tokens.enumerated() {
                if i > 0 { body.append(UInt8(ascii: ",")) }
                body.append(UInt8(ascii: "\""))
                body.append(contentsOf: t.utf8)
                body.append(UInt8(ascii: "\""))
            }
            body.append(contentsOf: Array("]}".utf8))
            var h = HTTPFields()
            h.add(name: "content-type", value: "application/json")
            ex.respond(Response(status: 200, headers: h, body: body))
        }
    }

    /// `GET /emulator/v1/fleets/{id}/subscriptions?offset&limit&endpoints=real|local`: a web fleet's
    /// members' subscriptions, `{"fleet","offset","count","subscriptions":[{"endpoint","expirationTime","keys"}]}`,
    /// worked out on the slow-work thread. `endpoints=local` puts them under pushemu's own address.
    func subscriptions(_ ex: Exchange) {
        guard let f = deviceStore.fleet(id: ex.parameter("id").utf8String) else {
            return ex.respond(AdminAPI.error(404, "no such fleet"))
        }
        guard f.platform == .web else {
            return ex.respond(
                AdminAPI.error(400, "\(f.id) is a fleet of \(f.platform.rawValue) devices: only web fleets have subscriptions"))
        }
        guard let offset = intParameter(ex.request, "offset", default: 0, range: 0...Int(Int32.max) * 256),
            let limit = intParameter(ex.request, "limit", default: 1000, range: 1...FleetsAdminAPI.maxSubscriptionPage)
        else {
            return ex.respond(AdminAPI.error(400, "offset must be >= 0 and limit 1...\(FleetsAdminAPI.maxSubscriptionPage)"))
        }
        let endpoints = ex.request.queryParameter("endpoints")
        guard endpoints == nil || endpoints == "real" || endpoints == "local" else {
            return ex.respond(AdminAPI.error(400, "endpoints must be real or local"))
        }
        let local = endpoints.map { $0 == "local" } ?? webPushLocalEndpoints
        let base = local ? ex.request.authority.map { "http://" + String(decoding: $0, as: UTF8.self) } : nil
        let tokens = deviceStore.tokens(f, offset: offset, limit: limit)
        let webPush = self.webPush
        let accepted = slowWork.submit {
            var body = "{\"fleet\":\"\(f.id)\",\"offset\":\(offset),\"count\":\(f.count),\"subscriptions\":["
            body.reserveCapacity(tokens.count * 420 + 64)
            for (i, t) in tokens.enumerated() {
                if i > 0 { body += "," }
                body += webPush.fleetSubscription(token: t, localBase: base)?.json ?? "null"
            }
            body += "]}"
            ex.respond(.json(200, body))
        }
        if !accepted { ex.respond(AdminAPI.busy(slowWork, "slow work")) }
    }

    /// `POST /emulator/v1/fleets` with `{"platform","app","count", optional "environment"|"project",
    /// "seed","behavior","tracking","registration","registerRate","labels", the members' start
    /// "permission","appState","nseInstalled" (`FleetDeviceStates`), their app's "urlSchemes","sounds",
    /// and (Android) the FCM "topics" their members subscribe to, each with its share; (web) the
    /// "browser" (chrome, firefox, safari or edge) and the site's "applicationServerKey"}`.
    func createFleet(_ req: Request) -> Response {
        var platform: DevicePlatform?
        var app: String?
        var count: Int?
        var env: String?
        var seed: UInt64?
        var behavior: Behavior?
        var tracking: TrackingConfig?
        var registration: RegistrationConfig?
        var registerRate = 10_000
        var labels: [String] = []
        var states = FleetDeviceStates()
        var profile = AppProfile()
        var topics: [String: Double] = [:]
        var applicationServerKey: [UInt8]?
        do {
            try JSONObjectReader.read(req.body, example: #"{"platform":"ios","app":"com.example.app","count":1000000}"#) { r in
                let p = try r.string("platform", required: true)!
                guard let known = DevicePlatform(rawValue: p) else { throw r.failure("platform", "must be ios, android or web") }
                platform = known
                app = try r.string("app", required: true)
                count = try r.int("count", in: 1...1_000_000_000, required: true)
                env = try r.string("environment") ?? r.string("project")
                if known == .web {
                    let browser = try r.string("browser") ?? "chrome"
                    guard let service = WebPushService.of(browser: browser) else {
                        throw r.failure("browser", "must be chrome, firefox, safari or edge")
                    }
                    env = service.rawValue
                    guard let text = try r.string("applicationServerKey", required: true),
                        let key = VAPID.decodeKey(Array(text.utf8)[...]), P256Key(publicKey: key) != nil
                    else {
                        throw r.failure(
                            "applicationServerKey", "must be the site's VAPID public key: a P-256 point, 65 bytes uncompressed, base64url")
                    }
                    applicationServerKey = key
                }
                if let i = r.value("seed") {
                    // Any 64-bit seed, exactly (a double would round one past 2^53).
                    guard r.view.tokens[i].kind == .number, let n = UInt64(String(decoding: r.view.raw(i), as: UTF8.self)) else {
                        throw r.failure("seed", "must be an integer from 0 to 18446744073709551615")
                    }
                    seed = n
                }
                if let i = r.value("behavior") { behavior = try Behavior.parse(r.view, i) }
                if let i = r.value("tracking") { tracking = try TrackingConfig.parse(Array(r.view.raw(i))) }
                if let i = r.value("registration") { registration = try RegistrationConfig.parse(Array(r.view.raw(i))) }
                if let n = try r.int("registerRate", in: 1...1_000_000) { registerRate = n }
                if let l = try r.strings("labels") { labels = l }
                if let i = r.value("topics") {
                    let v = r.view
                    let expected = r.failure(
                        "topics",
                        "must be an object of FCM topic names and the share of members subscribed (0 to 1), such as {\"news\": 1.0, \"sports\": 0.3}"
                    )
                    guard v.tokens[i].kind == .object else { throw expected }
                    var bad = false
                    v.forEachMember(i) { k, value in
                        guard let name = FCMFormats.topicName(Array(v.string(k).utf8)), name.count == v.string(k).utf8.count,
                            let share = v.number(value), share >= 0, share <= 1
                        else {
                            bad = true
                            return
                        }
                        topics[String(decoding: name, as: UTF8.self)] = share
                    }
                    if bad { throw expected }
                }
                // Behaviour fields at the top level ({"count":..., "uninstalledRate":0.03}) apply over
                // "behavior" (or the server's default).
                if Behavior.fields.contains(where: { r.has($0) }) {
                    var b = behavior ?? deviceStore.configuration.defaultBehavior
                    try b.read(&r)
                    behavior = b
                }
                try states.read(&r)
                try profile.read(&r)
            }
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        guard let platform, let app, !app.isEmpty, let count else { return AdminAPI.error(400, "platform, app and count are required") }
        guard count >= 1, count <= 1_000_000_000 else { return AdminAPI.error(400, "count must be 1 to 1000000000") }
        if platform == .ios {
            env = env ?? "sandbox"
            guard env == "sandbox" || env == "production" else { return AdminAPI.error(400, "environment must be sandbox or production") }
        }
        do {
            let f = try deviceStore.createFleet(
                platform: platform, app: app, count: count, environment: env, seed: seed,
                behavior: behavior, tracking: tracking, labels: labels, nowMs: Clock.nowMs(), registration: registration,
                registerRate: registerRate, states: states, profile: profile, topics: topics,
                applicationServerKey: applicationServerKey)
            return .json(201, f.json)
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
    }
}

extension FleetsAdminAPI {
    /// A scope's fleets: with `label:`, those carrying it; with `project:`, the Android fleets of
    /// that Firebase project; with `team:`, the iOS fleets the team's APNs keys may push to (a
    /// key without topics may push to every app). A fleet belongs to no team of its own.
    static func fleets(_ all: [FleetSpec], in scope: Scope, keys: [APNsKeyStore.Entry]) -> [FleetSpec] {
        switch scope {
        case .label(let l): return all.filter { $0.labels.contains(l) }
        case .project(let p): return all.filter { $0.platform == .android && $0.environment == p }
        case .team(let t):
            let teamKeys = keys.filter { $0.teamID == t }
            guard !teamKeys.isEmpty else { return [] }
            if teamKeys.contains(where: { $0.topics == nil }) { return all.filter { $0.platform == .ios } }
            let apps = Set(teamKeys.flatMap { $0.topics ?? [] })
            return all.filter { $0.platform == .ios && apps.contains($0.app) }
        }
    }
}
