import CSystem
import Observation
import PushCore
import Runtime
import State
import Synchronization
import Tracking
import Transport

/// A fleet: `count` devices whose tokens derive from (secret, index). Nothing is stored per
/// device until one deviates (is uninstalled, subscribes, receives a push, changes state).
///
/// The tokens depend only on (seed, platform, app, count): the same four give the same tokens in
/// any process on any machine (`identity`), so a platform that imported a fleet's tokens finds
/// them again after a restart, on another node, or in another run.
public struct FleetSpec: Sendable {
    /// The fleet's number, in creation order; its id is `fleet-N`.
    public var number: Int
    /// The id the admin API and the CLI name the fleet by.
    public var id: String { "fleet-\(number)" }
    /// Whether its members are iOS (APNs tokens) or Android (FCM registration tokens).
    public var platform: DevicePlatform
    /// The app (bundle id or package name) every member has installed.
    public var app: String
    /// The APNs environment (iOS) or Firebase project (Android) its members' tokens belong to.
    public var environment: String?
    /// How many members it has; their tokens are indexes 0..<count.
    public var count: Int
    /// The keyed hash's key for the members' tokens (derived from the four above).
    public var secret: UInt64
    /// The 24 bits every member's token carries to name its fleet (derived, like `secret`).
    public var tag: Int
    /// The seed the caller chose: with platform, app and count it fixes the tokens.
    public var seed: UInt64
    /// How its members behave (open rate, delays, uninstalls, offline share).
    public var behavior: Behavior
    /// What its members' SDK sends to the platform's servers (nil: no tracking).
    public var tracking: TrackingConfig?
    /// How its apps register their tokens (its own, or the server's when it was created), and
    /// how far the bulk registration is.
    public var registration: RegistrationConfig? = nil
    /// Registration calls a second, at most, for the bulk registration.
    public var registerRate = 10_000
    /// How far the bulk registration has gone (nil: none started).
    public var registrationProgress: FleetRegistration? = nil
    /// How its members start: permission, app state, extension (`FleetDeviceStates`).
    public var states = FleetDeviceStates()
    /// The URL schemes and sounds its app declares.
    public var profile: AppProfile? = nil
    /// Labels to find the fleet and its members by (`?label=`).
    public var labels: [String]
    /// FCM topics and the share of members subscribed to each (drawn from the seed: 1 is every
    /// member); Android fleets only.
    public var topics: [String: Double] = [:]
    /// When it was created (ms since the epoch).
    public var createdAtMs: Int64
    var uninstalledCount: Int?
    /// Web: the site's VAPID public key its members subscribed with (65 bytes). Their push
    /// service is `environment` (fcm, mozilla, apple, wns), as a web device's `service`.
    public var applicationServerKey: [UInt8]? = nil

    /// The (tag, secret) of a fleet's tokens: a keyed mix of its seed, platform, app and count.
    public static func identity(seed: UInt64, platform: DevicePlatform, app: String, count: Int) -> (tag: Int, secret: UInt64) {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in app.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        let p: UInt64 =
            switch platform {
            case .ios: 0x6970_686F_6E65
            case .android: 0x616E_6472_6F69_64
            case .web: 0x7765_62
            }
        let base = FleetTokens.mix(seed ^ FleetTokens.mix(h ^ p) ^ FleetTokens.mix(UInt64(count) &+ 0x5BD1_E995))
        return (Int(FleetTokens.mix(base ^ 0x7461_67) >> 40), FleetTokens.mix(base ^ 0x243F_6A88_85A3_08D3))
    }

    /// Web: its tokens' shape (its push service's).
    var webShape: FleetTokens.WebShape { FleetTokens.WebShape(service: environment ?? "") ?? .fcm }

    /// Whether member `index` starts uninstalled (drawn from the seed: reproducible).
    public func startsUninstalled(_ index: Int) -> Bool {
        guard behavior.uninstalledRate > 0 else { return false }
        let x = FleetTokens.mix(seed ^ FleetTokens.mix(UInt64(index)))
        return Double(x >> 11) * (1.0 / 9_007_199_254_740_992.0) < behavior.uninstalledRate
    }

    /// The fleet as the admin API returns it (`GET /emulator/v1/fleets/{id}`).
    public var json: String {
        var s = "{\"id\":\"\(id)\",\"platform\":\"\(platform.rawValue)\",\"app\":" + JSONWriter.quote(app) + ",\"count\":\(count)"
        if platform == .web {
            // The browser and the push service it subscribed through, and the site's key.
            let browser = ["fcm": "chrome", "mozilla": "firefox", "apple": "safari", "wns": "edge"][environment ?? ""]
            s += ",\"browser\":" + (browser.map(JSONWriter.quote) ?? "null") + ",\"service\":"
            s += environment.map(JSONWriter.quote) ?? "null"
            s += ",\"applicationServerKey\":" + (applicationServerKey.map { JSONWriter.quote(Base64URL.encode($0)) } ?? "null")
        } else {
            s += platform == .ios ? ",\"environment\":" : ",\"project\":"
            s += environment.map(JSONWriter.quote) ?? "null"
        }
        s += ",\"seed\":\(seed),\"behavior\":\(behavior.json),\"tracking\":" + (tracking?.json ?? "null")
        s += ",\"registration\":" + (registration?.json ?? "null") + ",\"registerRate\":\(registerRate)"
        s += ",\"registrationProgress\":" + (registrationProgress?.json ?? "null")
        s += ",\"states\":" + states.json + ",\"profile\":" + (profile?.json ?? "null")
        s += ",\"labels\":[" + labels.map(JSONWriter.quote).joined(separator: ",") + "]"
        s += ",\"topics\":{" + topics.keys.sorted().map { JSONWriter.quote($0) + ":\(topics[$0]!)" }.joined(separator: ",") + "}"
        s += ",\"createdAt\":\(createdAtMs)}"
        return s
    }
}

/// The simulated-device layer: registered devices, fleets, delivery and SDK behaviour.
///
/// Devices that exist as records (registered, auto-created on first push, or fleet members that
/// deviated) live in 64 shards keyed by token hash, each behind its own mutex held for a
/// dictionary operation. Fleets are a small array read under a mutex. A delivery updates the
/// device's inbox and schedules its SDK's tracking calls on the dispatcher; it never waits.
public final class DeviceStore: DeviceDirectory, WebFleetDirectory, PersistentStore, @unchecked Sendable {
    /// What a push to an unknown token does (`--devices`): `auto` creates a device; `strict` refuses it as the service refuses a token it never issued (APNs `BadDeviceToken`, FCM `INVALID_ARGUMENT`).
    public enum Policy: String, Sendable { case auto, strict }

    /// The device layer's settings, from the serve options.
    public struct Configuration: Sendable {
        /// How unknown tokens are treated (`--devices`).
        public var policy = Policy.auto
        /// What devices send when neither they nor their fleet say (`--tracking-preset`, `--tracking`).
        public var defaultTracking: TrackingConfig?
        /// How devices register with the campaign platform when neither they nor their fleet say (`--registration`).
        public var defaultRegistration: RegistrationConfig?
        /// How devices behave when neither they nor their fleet say (`--behavior`).
        public var defaultBehavior = Behavior()
        /// Notifications kept in each device's inbox (`--inbox-size`).
        public var inboxSize = 100
        /// Notifications kept for an offline FCM device.
        var pendingLimit = 100
        /// Payload paths that name a campaign before the presets' own (`--campaign-key`): the
        /// campaign a tracking call is journaled with.
        public var campaignKeys: [String] = []
        /// Device records kept at most (registered, auto-created, deviated fleet members). A push
        /// to a device beyond the limit is delivered and tracked all the same, but its record
        /// (inbox, state) is not kept: counted in `Counters.unstored`.
        public var maxDevices = 5_000_000
        /// The defaults of `pushemu serve`.
        public init() {}
    }

    /// Counts of what deliveries did, summed over the thread stripes (`stats`).
    public struct Counters: Sendable {
        /// Notifications delivered to a device.
        public var delivered: UInt64 = 0
        /// Notifications held for an offline device, to be delivered when it comes online.
        public var heldOffline: UInt64 = 0
        /// Notifications dropped because an offline device's queue was full.
        public var droppedOffline: UInt64 = 0
        /// Deliveries whose tracking was not scheduled (no SDK, or the device opted out).
        public var trackingSkipped: UInt64 = 0
        var trackingScheduled: UInt64 = 0
        /// Deliveries to devices whose record could not be kept (the record limit was reached).
        public var unstored: UInt64 = 0
    }

    /// The settings it was made with.
    public let configuration: Configuration
    /// `configuration.defaultTracking != nil`, computed once (asking copies the configuration).
    private let hasDefaultTracking: Bool
    /// `configuration.defaultRegistration != nil` (`DeviceStore+Registration`).
    let hasDefaultRegistration: Bool
    /// Where SDK tracking and registration calls go (nil: nothing is sent).
    public let dispatcher: TrackingDispatcher?
    /// The one key every process uses for fleet tokens' headers: a token names its fleet's tag
    /// and its index the same way everywhere (the fleet's own secret keeps tokens unforgeable).
    static let codec = FleetTokens(secret: (0x7075_7368_656D_7531, 0x9E37_79B9_7F4A_7C15))
    var codec: FleetTokens { DeviceStore.codec }
    /// A fleet never changes once created: the hot path holds it by reference (a `FleetSpec`
    /// copy costs a retain and a release per field, once or twice per push).
    final class FleetRef: Sendable {
        let spec: FleetSpec
        /// `spec.tracking != nil`, without copying the configuration to find out.
        let tracks: Bool
        /// Its members start as any device does (authorized, background, extension installed).
        let defaultStates: Bool
        /// What pushes did to its members that have no record (four bytes a pushed member).
        let members: FleetMemberCounts
        /// Its members' FCM topic subscriptions.
        let topics: FleetTopics
        init(_ spec: FleetSpec, members: FleetMemberCounts, topics: FleetTopics) {
            self.spec = spec
            tracks = spec.tracking != nil
            defaultStates = spec.states.isDefault
            self.members = members
            self.topics = topics
        }
    }
    /// A fleet's reference, with new member counts (taken from the state memory's account) and
    /// subscriptions unless given (the same fleet applied again keeps them).
    func makeRef(_ spec: FleetSpec, members: FleetMemberCounts? = nil, topics: FleetTopics? = nil) -> FleetRef {
        let account = memory
        return FleetRef(
            spec, members: members ?? FleetMemberCounts(count: spec.count, onPage: { account.force($0) }),
            topics: topics ?? FleetTopics(shares: spec.topics, seed: spec.seed))
    }
    /// Where fleet members without a record find their inbox (the journal, given by the
    /// composition root; nil: they show none).
    let history = FutexLock<(any DeliveryHistory)?>(nil)
    /// Has fleet members without a record read their inbox from `h`.
    public func readInboxes(from h: any DeliveryHistory) { history.withLock { $0 = h } }
    /// Fleets by number (`fleet-N` is at N-1), and by the tag their tokens carry.
    struct Fleets {
        var list: [FleetRef] = []
        var byTag: [Int: [FleetRef]] = [:]
    }
    let fleets = FutexLock(Fleets())
    /// Live Activity push tokens and push-to-start tokens, and channel subscriptions
    /// (`DeviceStore+LiveActivities.swift`).
    let live = LiveActivityIndex()
    /// iOS devices' FCM registration tokens (the Firebase iOS SDK's), to their APNs tokens.
    let fcmTokens = FutexLock<[TokenKey: String]>([:])

    func fleetRef(_ n: Int) -> FleetRef? { fleets.withLock { n >= 1 && n <= $0.list.count ? $0.list[n - 1] : nil } }

    /// The fleets whose tokens carry `tag` (usually one).
    func fleetRefs(tag: Int) -> [FleetRef] { fleets.withLock { $0.byTag[tag] ?? [] } }
    final class Shard: Sendable {
        let map = FutexLock<[TokenKey: SimDevice]>([:])
        /// The last fleet member this shard's `status` recognised and had no record for: the
        /// provider asks for the status, then delivers, so the delivery that follows finds the
        /// member here instead of rebuilding its token a second time.
        let verified = FutexLock<Verified?>(nil)
        /// Loops locking neighbouring shards do not share a line.
        private let padding = CacheLinePadding()
    }
    struct Verified: Sendable {
        let key: TokenKey
        let ref: FleetRef
        let index: Int
    }
    let shards: [Shard]
    final class AtomicCounters: Sendable {
        let delivered = Atomic<UInt64>(0), heldOffline = Atomic<UInt64>(0), droppedOffline = Atomic<UInt64>(0)
        let trackingSkipped = Atomic<UInt64>(0), trackingScheduled = Atomic<UInt64>(0), unstored = Atomic<UInt64>(0)
        private let padding = CacheLinePadding()

        /// Adds this stripe's counts to `c`.
        func sum(into c: inout Counters) {
            c.delivered &+= delivered.load(ordering: .relaxed)
            c.heldOffline &+= heldOffline.load(ordering: .relaxed)
            c.droppedOffline &+= droppedOffline.load(ordering: .relaxed)
            c.trackingSkipped &+= trackingSkipped.load(ordering: .relaxed)
            c.trackingScheduled &+= trackingScheduled.load(ordering: .relaxed)
            c.unstored &+= unstored.load(ordering: .relaxed)
        }

        func reset() {
            delivered.store(0, ordering: .relaxed)
            heldOffline.store(0, ordering: .relaxed)
            droppedOffline.store(0, ordering: .relaxed)
            trackingSkipped.store(0, ordering: .relaxed)
            trackingScheduled.store(0, ordering: .relaxed)
            unstored.store(0, ordering: .relaxed)
        }
    }
    /// Counted per push by every loop: one stripe per thread (`ThreadStripes`), summed by `stats`.
    let counterStripes = (0..<DeviceStore.counterStripeCount).map { _ in AtomicCounters() }
    static let counterStripeCount = 32
    /// The calling thread's stripe of the counters.
    var counters: AtomicCounters { counterStripes[ThreadStripes.index(count: DeviceStore.counterStripeCount)] }

    /// Registers fleets' devices in bulk (started and stopped with the dispatcher's service).
    public let registrar = FleetRegistrar()
    /// The store's name in the state log and the store registry.
    public let stateName = "devices"
    /// Where this store's change records go (the state log, once attached).
    public let changes = ChangeLink(store: "devices")

    /// Device changes and late deliveries go to the event stream through it.
    public let events: EventBus

    /// Its share of `--max-state-memory` (device records).
    public let memory: StateMemory.Account

    /// A device layer with the given settings, sending its calls through `dispatcher`, publishing to `events`.
    public init(
        configuration: Configuration = Configuration(), dispatcher: TrackingDispatcher?, events: EventBus = EventBus(),
        memory: StateMemory = StateMemory()
    ) {
        self.memory = StateMemory.Account(memory)
        self.configuration = configuration
        self.events = events
        hasDefaultTracking = configuration.defaultTracking != nil
        hasDefaultRegistration = configuration.defaultRegistration != nil
        self.dispatcher = dispatcher
        shards = (0..<64).map { _ in Shard() }
        registrar.store = self
    }

    /// The shard of `k`, its saved record applied first if it still waits (`waiting`).
    @inline(__always) func shard(_ k: TokenKey) -> Shard {
        if waiting.isPending { waiting.materialize(k) { try applyDeferred($0) } }
        return shards[k.shard(shards.count)]
    }
    /// A snapshot's device records not applied yet (see `deferredKey`).
    let waiting = DeferredRecords(store: "devices")
    public var deferred: DeferredRecords? { waiting }

    // MARK: fleets

    /// Why a device or fleet could not be made, in words the admin API passes on.
    public struct StoreError: Error, CustomStringConvertible {
        /// What went wrong, for the admin API's message.
        public let description: String
        /// A limit was reached (the record count, the state memory): not the request's fault.
        public var isLimit = false
    }

    /// Fleets kept at most: a token's 24-bit tag must name one of them.
    public static let maxFleets = 65_536
    /// Topics a fleet's definition subscribes its members to, at most.
    public static let maxFleetTopics = 100

    /// Creates a fleet and returns it (with its deterministic tokens), or throws a `StoreError` at a limit or for a bad spec.
    public func createFleet(
        platform: DevicePlatform, app: String, count: Int, environment: String?, seed: UInt64?,
        behavior: Behavior?, tracking: TrackingConfig?, labels: [String], nowMs: Int64,
        registration: RegistrationConfig? = nil, registerRate: Int = 10_000, states: FleetDeviceStates = FleetDeviceStates(),
        profile: AppProfile? = nil, topics: [String: Double] = [:], applicationServerKey: [UInt8]? = nil
    ) throws -> FleetSpec {
        guard count >= 1, count <= 1 << 40 else { throw StoreError(description: "count must be 1 to 2^40") }
        if platform == .web {
            guard FleetTokens.WebShape(service: environment ?? "") != nil else {
                throw StoreError(description: "a web fleet's service must be fcm, mozilla, apple or wns")
            }
            guard applicationServerKey?.count == 65 else {
                throw StoreError(description: "a web fleet needs its site's applicationServerKey (a P-256 public key, 65 bytes)")
            }
        }
        guard topics.isEmpty || platform == .android else {
            throw StoreError(description: "topics are FCM topics: only an Android fleet's members (FCM registration tokens) subscribe")
        }
        guard topics.count <= DeviceStore.maxFleetTopics, topics.values.allSatisfy({ $0 >= 0 && $0 <= 1 }) else {
            throw StoreError(description: "topics takes at most \(DeviceStore.maxFleetTopics) topics, each with a share from 0 to 1")
        }
        guard (1...1_000_000).contains(registerRate) else { throw StoreError(description: "registerRate must be 1 to 1000000 a second") }
        // Without a seed, a random one (below 2^53: exact in JavaScript too), shown and accepted back.
        let seed = seed ?? (csys_random_u64() >> 11)
        let (tag, secret) = FleetSpec.identity(seed: seed, platform: platform, app: app, count: count)
        let spec = try fleets.withLock { f in
            // The fleet number has no place in a token; each fleet costs a little memory.
            guard f.list.count < DeviceStore.maxFleets else {
                throw StoreError(description: "fleet limit reached (\(DeviceStore.maxFleets) fleets; POST /emulator/v1/reset removes them)")
            }
            if let twin = (f.byTag[tag] ?? []).first(where: {
                $0.spec.seed == seed && $0.spec.platform == platform && $0.spec.app == app && $0.spec.count == count
                    && (platform != .web || $0.spec.environment == environment)
            }) {
                throw StoreError(
                    description: "\(twin.spec.id) has the same seed, platform, app and count, so the same tokens: give another seed")
            }
            var spec = FleetSpec(
                number: f.list.count + 1, platform: platform, app: app, environment: environment, count: count,
                secret: secret, tag: tag, seed: seed, behavior: behavior ?? configuration.defaultBehavior,
                tracking: tracking, labels: labels, createdAtMs: nowMs)
            spec.registerRate = registerRate
            spec.states = states
            spec.profile = profile.flatMap { $0.isEmpty ? nil : $0 }
            spec.topics = topics
            spec.applicationServerKey = platform == .web ? applicationServerKey : nil
            // Its apps register as they install: with the fleet's registration, else the server's.
            if let config = registration ?? configuration.defaultRegistration, dispatcher != nil {
                spec.registration = config
                spec.registrationProgress = FleetRegistration(config: config, rate: registerRate, total: count, nowMs: nowMs)
            }
            let ref = makeRef(spec)
            f.list.append(ref)
            f.byTag[tag, default: []].append(ref)
            if changes.isLogging { changes.emit(kind: Kind.fleet, atMs: nowMs, DeviceStore.record(spec)) }
            return spec
        }
        if let progress = spec.registrationProgress { registrar.add(spec, progress) }
        if events.wants(.device) {
            let event = EmulatorEvent(
                kind: .device, provider: platform == .ios ? .apns : .fcm, environment: environment ?? "", reason: "fleet-created")
            events.publish(event) { w in
                w.add("at", nowMs)
                w.add("change", "fleet-created")
                w.add("fleet", "fleet-\(spec.number)")
                w.add("platform", platform.rawValue)
                w.add("app", app)
                w.add("count", count)
            }
        }
        return spec
    }

    /// The fleet with this id (`fleet-N`), if any.
    public func fleet(id: String) -> FleetSpec? {
        guard id.hasPrefix("fleet-"), let n = Int(id.dropFirst(6)) else { return nil }
        return fleetRef(n)?.spec
    }

    /// Every fleet, in creation order.
    public var allFleets: [FleetSpec] { fleets.withLock { $0.list.map(\.spec) } }

    /// The token of member `index` of `f` (hex for iOS, an FCM registration token for Android).
    public func token(_ f: FleetSpec, index: Int) -> String {
        if f.platform == .web { return codec.webToken(f.webShape, fleet: f.tag, secret: f.secret, index: index) }
        return codec.token(f.platform, fleet: f.tag, secret: f.secret, index: index)
    }

    /// The tokens of members `offset..<offset+limit` of `f`, for the admin API's token pages.
    public func tokens(_ f: FleetSpec, offset: Int, limit: Int) -> [String] {
        guard offset < f.count else { return [] }
        return (offset..<min(f.count, offset + limit)).map { token(f, index: $0) }
    }

    /// The fleet member a token is, if it is one (O(1): invert the header, check the hash).
    func member(_ token: ArraySlice<UInt8>, platform: DevicePlatform) -> (FleetRef, Int)? {
        if platform == .web {
            guard let (shape, tag, index) = codec.claimWeb(token) else { return nil }
            for ref in fleetRefs(tag: tag) where ref.spec.platform == .web && ref.spec.webShape == shape && index < ref.spec.count {
                if codec.matchesWeb(token, shape: shape, fleet: tag, secret: ref.spec.secret, index: index) { return (ref, index) }
            }
            return nil
        }
        guard let (tag, index) = codec.claim(token, platform: platform) else { return nil }
        for ref in fleetRefs(tag: tag) where ref.spec.platform == platform && index < ref.spec.count {
            if codec.matches(token, platform: platform, fleet: tag, secret: ref.spec.secret, index: index) { return (ref, index) }
        }
        return nil
    }

    /// An Android fleet member's token, from its Firebase installation id (its first 22
    /// characters), when a fleet has that member.
    public func registrationToken(forInstallation fid: ArraySlice<UInt8>) -> String? {
        guard let (tag, index) = codec.claim(installation: fid) else { return nil }
        for ref in fleetRefs(tag: tag) where ref.spec.platform == .android && index < ref.spec.count {
            let token = codec.token(.android, fleet: tag, secret: ref.spec.secret, index: index)
            if token.utf8.prefix(22).elementsEqual(fid) { return token }
        }
        return nil
    }

    func materialize(_ ref: FleetRef, index: Int, token: String) -> SimDevice {
        let f = ref.spec
        var d = SimDevice(
            token: token, platform: f.platform, app: f.app, environment: f.environment, createdAtMs: f.createdAtMs,
            seed: f.seed ^ FleetTokens.mix(UInt64(index)))
        d.fleet = f.number
        d.fleetIndex = index
        d.labels = f.labels
        if f.startsUninstalled(index) { d.uninstalledAtMs = f.createdAtMs }
        if !ref.defaultStates { f.states.apply(to: &d, seed: d.seed) }
        return d
    }

    // MARK: devices

    /// The device record for `token`: registered, auto-created, or a fleet member's (computed).
    public func device(token: String) -> SimDevice? {
        let k = TokenKey(token)
        if let d = shard(k).map.withLock({ $0[k] }) { return d }
        for p in DevicePlatform.allCases {
            if let (f, i) = member(Array(token.utf8)[...], platform: p) { return memberView(f, index: i, token: token) }
        }
        return nil
    }

    /// The id of the fleet `d` belongs to (nil: not a fleet member).
    public func fleetID(_ d: SimDevice) -> String? { d.fleet.map { "fleet-\($0)" } }

    /// Registers a device (replacing one with the same token), and its FCM token if it has one.
    public func register(_ d: SimDevice) throws {
        let k = TokenKey(d.token)
        let old = try shard(k).map.withLock { m -> SimDevice? in
            if m[k] == nil {
                if m.count >= configuration.maxDevices / shards.count {
                    throw StoreError(description: "device limit reached (--max-devices)", isLimit: true)
                }
                guard memory.take(StateMemory.Cost.deviceRecord) else {
                    throw StoreError(
                        description:
                            "the state memory limit is reached (--max-state-memory, \(memory.memory.limit >> 20) MiB: 768 B a device record)",
                        isLimit: true)
                }
            }
            let old = m[k]
            m[k] = d
            logDevice(d, atMs: Clock.nowMs())
            return old
        }
        if let old, let f = old.fcmToken, f != d.fcmToken { _ = fcmTokens.withLock { $0.removeValue(forKey: TokenKey(f)) } }
        if let fcm = d.fcmToken { fcmTokens.withLock { $0[TokenKey(fcm)] = d.token } }
        if events.wants(.device) { publishChange("registered", d) }
    }

    /// A `device` event for the stream (call only while `events.wants(.device)`).
    func publishChange(_ change: String, _ d: SimDevice, atMs: Int64 = Clock.nowMs()) {
        let event = EmulatorEvent(
            kind: .device, provider: d.platform == .ios ? .apns : d.platform == .web ? .webpush : .fcm, token: d.token,
            environment: d.environment ?? "",
            reason: change)
        events.publish(event) { w in
            w.add("at", atMs)
            w.add("change", change)
            w.add("token", d.token)
            w.add("platform", d.platform.rawValue)
            w.add("app", d.app)
            w.add("fleet", fleetID(d))
            w.add("appState", d.appState.rawValue)
            w.add("installed", d.uninstalledAtMs == nil)
        }
    }

    /// Changes a device (materializing a fleet member). nil if unknown.
    @discardableResult
    public func update(token: String, _ body: (inout SimDevice) -> Void) -> SimDevice? {
        let k = TokenKey(token)
        let bytes = Array(token.utf8)[...]
        var fleetView: (SimDevice, FleetRef, Int)?
        if shard(k).map.withLock({ $0.index(forKey: k) == nil }) {
            for p in DevicePlatform.allCases {
                if let (f, i) = member(bytes, platform: p) { fleetView = (memberView(f, index: i, token: token), f, i) }
            }
        }
        return shard(k).map.withLock { m -> SimDevice? in
            if m.index(forKey: k) == nil, let (v, f, i) = fleetView {
                m[k] = v
                memory.force(StateMemory.Cost.deviceRecord) // a change asked of a fleet member: kept
                f.members.set(i, FleetMemberCounts.Counts(word: 0)) // its counts are the record's now
            }
            guard let i = m.index(forKey: k) else { return nil }
            body(&m.values[i])
            logDevice(m.values[i], atMs: Clock.nowMs())
            return m.values[i]
        }
    }

    /// Marks the device uninstalled at `atMs` (later pushes get the provider's unregistered error); nil when there is no such device.
    public func uninstall(token: String, atMs: Int64) -> SimDevice? {
        let d = update(token: token) { d in if d.uninstalledAtMs == nil { d.uninstalledAtMs = atMs } }
        if let d, events.wants(.device) { publishChange("uninstalled", d, atMs: atMs) }
        return d
    }

    /// Devices held as records (registered, auto-created, deviated fleet members).
    public var recordCount: Int {
        // A waiting record's key is in no shard (a lookup applies it first): counted apart.
        waiting.count + shards.reduce(0) { $0 + $1.map.withLock { $0.count } }
    }

    /// Where a page of devices ends: the last one's creation time and token.
    public struct PageKey: Sendable, Comparable {
        /// When the last device on the page was created (ms since the epoch).
        public var createdAtMs: Int64
        /// The last device's token (ties on creation time are ordered by token).
        public var token: String
        /// A page boundary after the device created at `createdAtMs` with `token`.
        public init(createdAtMs: Int64, token: String) {
            self.createdAtMs = createdAtMs
            self.token = token
        }
        /// Orders by creation time, then token.
        public static func < (a: PageKey, b: PageKey) -> Bool {
            a.createdAtMs != b.createdAtMs ? a.createdAtMs < b.createdAtMs : a.token < b.token
        }
    }

    /// The devices held as records in (creation time, token) order after `after`, at most
    /// `limit`, and whether more follow. One pass over the records, holding at most a few
    /// pages of keys at a time; the devices themselves are read at the end.
    public func page(
        after: PageKey?, limit: Int, label: String? = nil, where taken: ((SimDevice) -> Bool)? = nil
    ) -> (devices: [SimDevice], more: Bool) {
        let limit = max(1, limit)
        var keys: [PageKey] = []
        applyAllDeferred()
        for s in shards {
            s.map.withLock { m in
                for d in m.values where (label == nil || d.labels.contains(label!)) && (taken?(d) ?? true) {
                    let k = PageKey(createdAtMs: d.createdAtMs, token: d.token)
                    if let after, !(after < k) { continue }
                    keys.append(k)
                }
            }
            if keys.count > 4 * (limit + 1) {
                keys.sort()
                keys.removeLast(keys.count - (limit + 1))
            }
        }
        keys.sort()
        let more = keys.count > limit
        let devices = keys.prefix(limit).compactMap { k in
            shard(TokenKey(k.token)).map.withLock { $0[TokenKey(k.token)] }
        }
        return (devices, more)
    }

    /// What deliveries have done since the start (or the last reset).
    public var stats: Counters {
        var c = Counters()
        for s in counterStripes { s.sum(into: &c) }
        return c
    }

    /// Forgets every device and fleet, and gives their memory back (`POST /emulator/v1/reset`).
    public func removeAll() {
        waiting.discard()
        memory.releaseAll()
        for s in shards {
            s.map.withLock { $0.removeAll() }
            s.verified.withLock { $0 = nil }
        }
        fleets.withLock { $0 = Fleets() }
        registrar.removeAll()
        live.removeAll()
        fcmTokens.withLock { $0.removeAll() }
        for s in counterStripes { s.reset() }
        if events.wants(.device) {
            events.publish(EmulatorEvent(kind: .device, provider: nil, reason: "reset")) { w in
                w.add("at", Clock.nowMs())
                w.add("change", "reset")
            }
        }
    }

    /// A `delivered` event: a notification reached a device after its answer.
    public func publishDelivered(_ d: Delivery, _ outcome: DeviceOutcome, atMs: Int64) {
        let token = d.tokenBytes.utf8String
        events.publish(EmulatorEvent(kind: .delivered, provider: d.provider, token: token, environment: d.environment ?? "")) { w in
            w.add("at", atMs)
            w.add("provider", d.provider.name)
            w.add("id", id: d.notificationID)
            w.add("token", token)
            w.add("environment", d.environment)
            w.add("display", json: EventJSON.display(outcome.display))
            w.add("lint", outcome.lint.count)
        }
    }

    // MARK: WebFleetDirectory

    /// A web fleet member's subscription: the fleet's service, site and key, the member's keys
    /// (derived from the fleet's secret), and whether it unsubscribed (was uninstalled).
    public func webFleetMember(token: ArraySlice<UInt8>) -> WebFleetMember? {
        guard let (ref, index) = member(token, platform: .web), let key = ref.spec.applicationServerKey else { return nil }
        let f = ref.spec
        var gone: Int64?
        if case .uninstalled(let at)? = status(token: token, platform: .web) { gone = at }
        let (seed, auth) = FleetTokens.webKeys(secret: f.secret, index: index)
        return WebFleetMember(
            service: f.environment ?? "fcm", app: f.app, applicationServerKey: key, keySeed: seed, auth: auth,
            createdAtMs: f.createdAtMs, goneAtMs: gone)
    }

    // MARK: DeviceDirectory

    /// What the gateway needs to know about a token: whether it is known, installed, and its environment (nil: no such device).
    public func status(token: ArraySlice<UInt8>, platform: DevicePlatform) -> DeviceStatus? {
        status(token: token, key: TokenKey(token), platform: platform)
    }

    /// `status(token:platform:)` with the token's key computed by the caller.
    public func status(token: ArraySlice<UInt8>, key k: TokenKey, platform: DevicePlatform) -> DeviceStatus? {
        // Only the fields the answer needs leave the lock (a whole record copied out costs a
        // retain per field).
        func fields(_ d: inout SimDevice) -> DeviceStatus?? { // inout: read in place (a `let` copies the record)
            guard d.platform == platform else { return .some(nil) }
            if let at = d.uninstalledAtMs { return .uninstalled(atMs: at) }
            return .installed(app: d.app, environment: d.environment)
        }
        let recorded = shard(k).map.withLock { m -> DeviceStatus?? in
            guard let i = m.index(forKey: k) else { return nil }
            return fields(&m.values[i])
        }
        if let recorded, let status = recorded { return status }
        guard let (ref, i) = member(token, platform: platform) else {
            return platform == .ios ? liveTokenStatus(token) : nil
        }
        shard(k).verified.withLock { $0 = Verified(key: k, ref: ref, index: i) }
        let f = ref.spec
        if f.startsUninstalled(i) { return .uninstalled(atMs: f.createdAtMs) }
        return .installed(app: f.app, environment: f.environment)
    }

    // MARK: delivery

    /// Hands an accepted notification to its device: inbox (or the offline queue), then the
    /// SDK's tracking calls. A token never seen becomes a device (`--devices auto`). Returns
    /// what the device made of it: displayed or not, and the SDK's lint of the payload.
    ///
    /// `parsedPayload`: the provider's tokenization of `d.payload` when it has one (read during
    /// this call only; the SDKs then read the payload without parsing it again). `lintMemo`: the
    /// calling loop's memory of the last payload read and linted (see `SDKLintMemo`).
    @discardableResult
    public func deliver(_ d: Delivery, parsedPayload: JSONTokenBuffer? = nil, lintMemo: SDKLintMemo? = nil) -> DeviceOutcome {
        let k = d.tokenKey ?? TokenKey(d.tokenBytes)
        let sh = shard(k)
        let inboxSize = configuration.inboxSize
        let tracks = dispatcher != nil
        let defaultTracking = hasDefaultTracking
        let pendingLimit = configuration.pendingLimit

        /// What the SDK needs rides in a box: the outcome stays a few words, not a record copied
        /// at every return.
        final class Copied {
            let device: SDKView
            init(_ d: SDKView) { device = d }
        }
        enum Outcome {
            case absent, uninstalled, held, droppedOffline
            case delivered(Copied?, fleet: Int?, state: DisplayRules.DeviceState)
        }
        // One in-place access to the record (no copies of the device struct).
        func onRecord(_ dev: inout SimDevice, fleetTracks: Bool) -> Outcome {
            if dev.uninstalledAtMs != nil { return .uninstalled }
            if dev.appState == .offline {
                if d.platform == .ios { // APNs holds it (FCM to an iOS app goes through APNs too)
                    if d.expiresAtMs == 0 {
                        dev.dropped += 1
                        return .droppedOffline
                    }
                    // APNs stores one notification per app for an offline device: the latest.
                    dev.pending.removeAll()
                } else if d.platform == .web, d.expiresAtMs == 0 {
                    // A push service drops a TTL 0 message for an offline browser (still 201).
                    dev.dropped += 1
                    return .droppedOffline
                } else if d.platform == .web, let topic = d.collapseID,
                    let i = dev.pending.firstIndex(where: { $0.delivery.collapseID == topic })
                {
                    // A newer message with the same Topic replaces the one held (RFC 8030 §5.4).
                    dev.pending.remove(at: i)
                    dev.collapsed += 1
                } else if dev.pending.count >= pendingLimit {
                    dev.pending.removeFirst()
                    dev.dropped += 1
                }
                var kept = d
                kept.tokenKey = nil
                kept.payload = Array(d.payload)[...]
                kept.tokenBytes = Array(d.tokenBytes)[...]
                dev.pending.append(SimDevice.Pending(delivery: kept, expiresAtMs: d.expiresAtMs))
                logDevice(dev, atMs: d.receivedAtMs)
                return .held
            }
            DeviceStore.addToInbox(&dev, d, inboxSize: inboxSize)
            // Copy the device out only when some SDK could report.
            let track = tracks && (dev.tracking != nil || fleetTracks || defaultTracking || dev.fleet != nil)
            return .delivered(track ? Copied(SDKView(dev)) : nil, fleet: dev.fleet, state: DisplayRules.DeviceState(dev))
        }
        // One dictionary lookup: everything happens on the record found at that index.
        func work(_ m: inout [TokenKey: SimDevice], _ i: Dictionary<TokenKey, SimDevice>.Index, fleetTracks: Bool) -> Outcome {
            onRecord(&m.values[i], fleetTracks: fleetTracks)
        }
        let perShard = max(1, configuration.maxDevices / shards.count)

        var outcome = sh.map.withLock { m -> Outcome in
            guard let i = m.index(forKey: k) else { return .absent }
            return work(&m, i, fleetTracks: false)
        }
        var fleetSpec: FleetRef?
        if case .absent = outcome {
            var dev: SimDevice
            var memberIndex = 0
            let known = sh.verified.withLock { v -> Verified? in
                guard let found = v, found.key == k, found.ref.spec.platform == d.platform else { return nil }
                v = nil
                return found
            }
            if let (f, i) = known.map({ ($0.ref, $0.index) }) ?? member(d.tokenBytes, platform: d.platform) {
                dev = materialize(f, index: i, token: d.token)
                fleetSpec = f
                memberIndex = i
            } else if d.platform == .ios, let owner = live.owner(of: k) {
                // A Live Activity's token, or a push-to-start token: the push is the activity's.
                deliverLive(d, owner: owner)
                return DeviceOutcome(display: Display(.shown, .liveActivity))
            } else if d.platform == .ios, d.provider == .fcm, let device = fcmTokens.withLock({ $0[k] }) {
                return deliverToAppDevice(d, device: device)
            } else {
                dev = SimDevice(
                    token: d.token, platform: d.platform, app: d.app, environment: d.environment,
                    createdAtMs: d.receivedAtMs, seed: k.a ^ k.b)
            }
            if dev.app == nil { dev.app = d.app }
            let fleetTracks = fleetSpec?.tracks ?? false
            var unstored = false
            if let f = fleetSpec,
                let compact = deliverToMember(&dev, f, index: memberIndex, d, onRecord: { onRecord(&$0, fleetTracks: fleetTracks) })
            {
                // A member as its fleet made it: counted in its fleet's four bytes, no record.
                outcome = compact
            } else {
                if let f = fleetSpec { absorbCounts(&dev, f, index: memberIndex) }
                outcome = sh.map.withLock { m -> Outcome in
                    if let i = m.index(forKey: k) { return work(&m, i, fleetTracks: fleetTracks) }
                    guard m.count < perShard, memory.take(StateMemory.Cost.deviceRecord) else {
                        unstored = true
                        return .absent
                    }
                    m[k] = dev
                    return work(&m, m.index(forKey: k)!, fleetTracks: fleetTracks)
                }
            }
            if unstored {
                // The record limit: delivered and tracked on a record nobody keeps.
                counters.unstored.add(1, ordering: .relaxed)
                outcome = onRecord(&dev, fleetTracks: fleetTracks)
            }
            // A token never seen became a device (a fleet member's record is not a new device).
            if fleetSpec == nil, events.wants(.device) { publishChange("created", dev, atMs: d.receivedAtMs) }
        }
        switch outcome {
        case .held:
            counters.heldOffline.add(1, ordering: .relaxed)
            // What the device holds is in the state log's file before the push's answer leaves.
            changes.writeNow()
            return DeviceOutcome(display: Display(.notShown, .heldOffline))
        case .droppedOffline:
            counters.droppedOffline.add(1, ordering: .relaxed)
            return DeviceOutcome(display: Display(.notShown, .droppedOffline))
        case .delivered(let dev, let fleet, let state):
            counters.delivered.add(1, ordering: .relaxed)
            guard let dev else { return DeviceOutcome(display: DisplayRules.display(state, d, sdk: nil)) }
            if fleetSpec == nil, let n = fleet { fleetSpec = fleetRef(n) }
            return track(dev.device, d, fleet: fleetSpec, atMs: d.receivedAtMs, parsedPayload: parsedPayload, lintMemo: lintMemo)
        case .uninstalled, .absent:
            return DeviceOutcome(display: Display(.notShown, .uninstalled))
        }
    }

    /// FCM to an iOS app: the notification APNs carries, to the app's device (out of line: the
    /// copy of the delivery it makes is this path's alone).
    @inline(never)
    func deliverToAppDevice(_ d: Delivery, device: String) -> DeviceOutcome {
        var onDevice = d
        onDevice.tokenBytes = Array(device.utf8)[...]
        onDevice.tokenKey = nil
        return deliver(onDevice, parsedPayload: nil)
    }

    static func addToInbox(_ dev: inout SimDevice, _ d: Delivery, inboxSize: Int) {
        addToInbox(
            &dev, id: d.notificationID, receivedAtMs: d.receivedAtMs, collapseID: d.collapseID, channelID: d.channelID, inboxSize: inboxSize
        )
    }

    /// A notification received: into the inbox (a ring of `inboxSize`), replacing an undisplayed
    /// one with its collapse id.
    static func addToInbox(
        _ dev: inout SimDevice, id: UUIDValue, receivedAtMs: Int64, collapseID: String?, channelID: String?, inboxSize: Int
    ) {
        dev.received += 1
        if let c = collapseID, dev.inbox.contains(where: { $0.collapseID == c && !$0.displayed }) {
            // A newer notification with the same collapse id replaces one not yet displayed.
            dev.normalizeInbox()
            if let i = dev.inbox.lastIndex(where: { $0.collapseID == c && !$0.displayed }) { dev.inbox.remove(at: i) }
            dev.collapsed += 1
        }
        var entry = SimDevice.InboxEntry(
            notificationID: id, receivedAtMs: receivedAtMs, collapseID: collapseID, displayed: dev.appState == .foreground)
        if let channel = channelID {
            entry.live = SimDevice.InboxEntry.LiveFacts(activityID: nil, activityEvent: nil, channelID: channel)
        }
        if dev.inbox.count < inboxSize {
            dev.normalizeInbox()
            dev.inbox.append(entry)
        } else {
            // Full: overwrite the oldest (a ring, no shifting).
            dev.inbox[dev.inboxStart] = entry
            dev.inboxStart = (dev.inboxStart + 1) % dev.inbox.count
            dev.evicted += 1
        }
    }

    /// Brings a device online (delivering what it held, in order, dropping expired ones) or offline.
    public func setOnline(token: String, _ online: Bool, nowMs: Int64) -> SimDevice? {
        var released: [SimDevice.Pending] = []
        let dev = update(token: token) { dev in
            if online {
                if dev.appState == .offline { dev.appState = .background }
                released = dev.pending
                dev.pending.removeAll()
            } else {
                dev.appState = .offline
            }
        }
        guard var current = dev else { return nil }
        let fleetSpec = current.fleet.flatMap { fleetRef($0) }
        for p in released {
            if let e = p.expiresAtMs, e != 0, e < nowMs {
                _ = update(token: token) { $0.dropped += 1 }
                continue
            }
            let k = TokenKey(token)
            shard(k).map.withLock { m in
                if m[k] != nil {
                    DeviceStore.addToInbox(&m[k]!, p.delivery, inboxSize: configuration.inboxSize)
                    current = m[k]!
                }
            }
            counters.delivered.add(1, ordering: .relaxed)
            let outcome = track(SDKView(current), p.delivery, fleet: fleetSpec, atMs: nowMs)
            if events.wants(.delivered) { publishDelivered(p.delivery, outcome, atMs: nowMs) }
        }
        if events.wants(.device) { publishChange(online ? "online" : "offline", current, atMs: nowMs) }
        return device(token: token)
    }

    /// Whether the SDK's receive hook runs for this notification (tracking.md §8): on iOS the
    /// notification service extension (`mutable-content`, installed, a notification it may show)
    /// or the app woken by `content-available` (never once the user force-quit it); on Android
    /// `onMessageReceived`, for a data message in any state and for anything in the foreground.
    static func receiveHookRuns(_ dev: SDKView, _ d: Delivery) -> Bool {
        switch dev.platform {
        case .ios:
            return (d.mutableContent && dev.nseInstalled && dev.permission != .denied && d.alerts.contains(.alert))
                || (d.contentAvailable && dev.appState != .killed)
        case .android: return dev.appState == .foreground || (d.hasData && !d.alerts.contains(.notification))
        // A browser wakes the service worker for every push it could decrypt (its `push` event).
        case .web: return !d.alerts.contains(.undecryptable)
        }
    }

    /// The SDK's side of a delivery: its lint of the payload, whether it is displayed, and the
    /// tracking calls it makes (receive when its hook runs, open when the simulated user taps a
    /// displayed notification). An app without an SDK configuration is only displayed or not.
    func track(
        _ dev: SDKView, _ d: Delivery, fleet: FleetRef?, atMs: Int64, parsedPayload: JSONTokenBuffer? = nil, lintMemo: SDKLintMemo? = nil
    ) -> DeviceOutcome {
        // The device's tracking, else its fleet's, else the server's, each passed where it is
        // stored (a `??` chain copies the configuration: a retain per field).
        if let t = dev.tracking {
            return track(dev, d, config: t, fleet: fleet, atMs: atMs, parsedPayload: parsedPayload, lintMemo: lintMemo)
        } else if let f = fleet, f.tracks {
            return track(dev, d, config: f.spec.tracking!, fleet: fleet, atMs: atMs, parsedPayload: parsedPayload, lintMemo: lintMemo)
        } else if hasDefaultTracking {
            return track(
                dev, d, config: configuration.defaultTracking!, fleet: fleet, atMs: atMs, parsedPayload: parsedPayload, lintMemo: lintMemo)
        }
        return DeviceOutcome(display: DisplayRules.display(DisplayRules.DeviceState(dev), d, sdk: nil))
    }

    private func track(
        _ dev: SDKView, _ d: Delivery, config: borrowing TrackingConfig, fleet: FleetRef?, atMs: Int64,
        parsedPayload: JSONTokenBuffer?, lintMemo: SDKLintMemo?
    ) -> DeviceOutcome {
        let (input, findings) = SDKLintMemo.lint(
            lintMemo, d, preset: config.preset, ios: dev.platform == .ios, profile: dev.profile ?? fleet?.spec.profile,
            parsedPayload: parsedPayload)
        let payload = input.payload
        let outcome = DeviceOutcome(display: DisplayRules.display(DisplayRules.DeviceState(dev), d, sdk: input), lint: findings)
        guard let dispatcher, !dev.privacyOptOut else { return outcome }
        let behavior = dev.behavior ?? fleet?.spec.behavior ?? configuration.defaultBehavior
        var rng = FastRandom(seed: dev.seed ^ d.notificationID.low ^ 0x5851_F42D_4C95_7F2D)
        let receiveDelay = behavior.receiveDelayMs.draw(&rng)
        let opens = rng.nextDouble() < behavior.openRate
        let openDelay = behavior.openDelayMs.draw(&rng)
        // The name the sender got: the apns-id, or FCM's projects/{p}/messages/{id}.
        let id = d.notificationID.description
        let name =
            d.messageName
            ?? (d.provider == .fcm
                ? "projects/\(d.environment ?? "")/messages/"
                    + PushNotification.fcmMessageID(d.notificationID, receivedAtMs: d.receivedAtMs)
                : id)
        // The campaign the calls are journaled with (read once, for the first call made).
        var campaign: String??
        func report(_ event: TrackingEvent, at: Int64) {
            if campaign == nil {
                campaign = .some(CampaignID.first(request: payload, provider: d.provider, extra: configuration.campaignKeys))
            }
            var ctx = TrackingContext(
                event: event, platform: dev.platform.rawValue, token: dev.token, app: dev.app ?? "",
                notificationID: id, messageName: name,
                receivedAtMs: d.receivedAtMs, atMs: at, payload: payload)
            ctx.campaign = campaign ?? nil
            if dev.platform == .web { ctx.webService = d.environment }
            switch TrackingPresets.job(config, ctx) {
            case .job(let j):
                dispatcher.submit(j)
                counters.trackingScheduled.add(1, ordering: .relaxed)
                if event == .open {
                    // The device record exists (it was just delivered to); no copy comes back.
                    let k = TokenKey(dev.token)
                    let recorded = shard(k).map.withLock { m -> Bool in
                        guard let i = m.index(forKey: k) else { return false }
                        m.values[i].opened += 1
                        return true
                    }
                    if !recorded, let f = fleet, let i = dev.fleetIndex { f.members.open(i) }
                    appOpened(dev, fleet: fleet, atMs: at)
                }
            case .skip:
                counters.trackingSkipped.add(1, ordering: .relaxed)
            }
        }
        if DeviceStore.receiveHookRuns(dev, d) { report(.receive, at: atMs + receiveDelay) }
        if opens && outcome.display.tappable { report(.open, at: atMs + receiveDelay + openDelay) }
        return outcome
    }
}

extension DeviceStore: MetricsSource {
    /// Devices held as records, fleets and their members.
    public func writeMetrics(_ m: inout MetricsText) {
        let fleets = allFleets
        m.single(
            "pushemu_devices", "gauge", "Simulated devices held as records (registered, auto-created, deviated fleet members).", recordCount
        )
        m.single("pushemu_fleets", "gauge", "Fleets created.", fleets.count)
        m.single("pushemu_fleet_devices", "gauge", "Devices in all fleets.", fleets.reduce(0) { $0 + $1.count })
        m.single(
            "pushemu_fleet_counted_members", "gauge", "Fleet members pushed and held as counts (four bytes each), not records.",
            countedMembers)
        m.single("pushemu_fleet_counted_member_bytes", "gauge", "Bytes of the fleets' member counts.", countedMemberBytes)
    }
}
