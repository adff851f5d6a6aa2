import PushCore
import Runtime
import State
import Tracking
import Transport

/// The device layer as a store of the state log (`devices`): fleets (their definition and seed:
/// the tokens follow from it), their bulk registration's progress (checkpointed once a second
/// while it moves, and on pause and resume), and device records.
///
/// A `device` record written for a change (an admin call, a fault's uninstall, a notification
/// held for an offline device, a Live Activity changed by a push) holds the device's settings and
/// what it holds for later; applying one keeps the device's counts and inbox. A snapshot's
/// `device` records hold those too (`received`, `inbox`, ...): what only pushes changed since the
/// last snapshot (a first push making a record, counts) is what a kill can lose.
extension DeviceStore {
    enum Kind {
        static let fleet = 1
        static let registration = 2
        static let device = 3
        static let members = 4
        static let memberTopics = 5
    }

    static let platforms = DevicePlatform.allCases.map(\.rawValue)

    public var recordSchemas: [RecordSchema] {
        let pending: [FieldSchema] = [
            FieldSchema(1, "provider", .string), FieldSchema(2, "app", .string), FieldSchema(3, "environment", .string),
            FieldSchema(4, "notificationId", .uuid), FieldSchema(5, "messageName", .string), FieldSchema(6, "receivedAt", .int),
            FieldSchema(7, "payload", .json), FieldSchema(8, "mutableContent", .bool), FieldSchema(9, "contentAvailable", .bool),
            FieldSchema(10, "hasData", .bool), FieldSchema(11, "alerts", .uint), FieldSchema(12, "collapseId", .string),
            FieldSchema(13, "expiresAt", .int), FieldSchema(14, "channelId", .string), FieldSchema(15, "heldUntil", .int),
        ]
        let activity: [FieldSchema] = [
            FieldSchema(1, "id", .string), FieldSchema(2, "attributesType", .string), FieldSchema(3, "attributes", .json),
            FieldSchema(4, "contentState", .json), FieldSchema(5, "pushToken", .string), FieldSchema(6, "channel", .string),
            FieldSchema(7, "state", .enumeration(["active", "ended"])), FieldSchema(8, "startedBy", .string),
            FieldSchema(9, "startedAt", .int), FieldSchema(10, "updatedAt", .int), FieldSchema(11, "updates", .uint),
            FieldSchema(12, "timestamp", .int), FieldSchema(13, "staleDate", .int), FieldSchema(14, "dismissalDate", .int),
            FieldSchema(15, "endedAt", .int),
        ]
        let inbox: [FieldSchema] = [
            FieldSchema(1, "notificationId", .uuid), FieldSchema(2, "receivedAt", .int), FieldSchema(3, "collapseId", .string),
            FieldSchema(4, "displayed", .bool), FieldSchema(5, "activityId", .string), FieldSchema(6, "activityEvent", .string),
            FieldSchema(7, "channelId", .string),
        ]
        return [
            RecordSchema(
                kind: Kind.fleet, name: "fleet",
                fields: [
                    FieldSchema(1, "number", .uint), FieldSchema(2, "platform", .enumeration(DeviceStore.platforms)),
                    FieldSchema(3, "app", .string), FieldSchema(4, "environment", .string), FieldSchema(5, "count", .uint),
                    FieldSchema(6, "seed", .uint), FieldSchema(7, "behavior", .json), FieldSchema(8, "tracking", .json),
                    FieldSchema(9, "registration", .json), FieldSchema(10, "registerRate", .uint), FieldSchema(11, "states", .json),
                    FieldSchema(12, "profile", .json), FieldSchema(13, "labels", .string, repeated: true),
                    FieldSchema(14, "createdAt", .int),
                    FieldSchema(
                        15, "topics", .message([FieldSchema(1, "name", .string), FieldSchema(2, "share", .double)]), repeated: true),
                    FieldSchema(16, "applicationServerKey", .bytes),
                ]),
            RecordSchema(
                kind: Kind.registration, name: "registration",
                fields: [
                    FieldSchema(1, "fleet", .uint), FieldSchema(2, "next", .uint), FieldSchema(3, "registered", .uint),
                    FieldSchema(4, "skipped", .uint), FieldSchema(5, "waitedForQueue", .uint), FieldSchema(6, "paused", .bool),
                    FieldSchema(7, "startedAt", .int), FieldSchema(8, "finishedAt", .int),
                ]),
            RecordSchema(
                kind: Kind.device, name: "device",
                fields: [
                    FieldSchema(1, "token", .string), FieldSchema(2, "platform", .enumeration(DeviceStore.platforms)),
                    FieldSchema(3, "app", .string), FieldSchema(4, "environment", .string), FieldSchema(5, "createdAt", .int),
                    FieldSchema(6, "uninstalledAt", .int), FieldSchema(7, "rotatedTo", .string),
                    FieldSchema(8, "appState", .enumeration(SimDevice.AppState.allCases.map(\.rawValue))),
                    FieldSchema(9, "permission", .enumeration(SimDevice.Permission.allCases.map(\.rawValue))),
                    FieldSchema(10, "nseInstalled", .bool), FieldSchema(11, "privacyOptOut", .bool),
                    FieldSchema(12, "labels", .string, repeated: true), FieldSchema(13, "tracking", .json),
                    FieldSchema(14, "behavior", .json), FieldSchema(15, "registration", .json),
                    FieldSchema(16, "registrationFingerprint", .string), FieldSchema(17, "hardwareId", .string),
                    FieldSchema(18, "profile", .json), FieldSchema(19, "fleet", .uint), FieldSchema(20, "fleetIndex", .uint),
                    FieldSchema(21, "seed", .uint), FieldSchema(22, "pending", .message(pending), repeated: true),
                    FieldSchema(23, "activities", .message(activity), repeated: true),
                    FieldSchema(
                        24, "pushToStartTokens", .message([FieldSchema(1, "attributesType", .string), FieldSchema(2, "token", .string)]),
                        repeated: true),
                    FieldSchema(25, "fcmToken", .string), FieldSchema(26, "fcmProject", .string),
                    // What pushes change, in snapshots (absent from a change's record: kept as it is).
                    FieldSchema(30, "counted", .bool), FieldSchema(31, "inbox", .message(inbox), repeated: true),
                    FieldSchema(32, "evicted", .uint), FieldSchema(33, "collapsed", .uint), FieldSchema(34, "dropped", .uint),
                    FieldSchema(35, "received", .uint), FieldSchema(36, "opened", .uint),
                ]),
            RecordSchema(
                kind: Kind.members, name: "members",
                fields: [FieldSchema(1, "fleet", .uint), FieldSchema(2, "first", .uint), FieldSchema(3, "counts", .bytes)]),
            RecordSchema(
                kind: Kind.memberTopics, name: "memberTopics",
                fields: [
                    FieldSchema(1, "fleet", .uint), FieldSchema(2, "topic", .string), FieldSchema(3, "subscribed", .bool),
                    FieldSchema(4, "members", .bytes),
                ]),
        ]
    }

    // MARK: writing records

    static func record(_ f: FleetSpec) -> [UInt8] {
        var w = StateWriter(capacity: 256)
        w.uint(1, UInt64(f.number))
        w.uint(2, f.platform == .ios ? 0 : f.platform == .android ? 1 : 2)
        w.string(3, f.app)
        w.string(4, f.environment)
        w.uint(5, UInt64(f.count))
        w.uint(6, f.seed)
        w.bytes(7, Array(f.behavior.json.utf8))
        if let t = f.tracking { w.bytes(8, Array(t.json.utf8)) }
        if let r = f.registration { w.bytes(9, Array(r.json.utf8)) }
        w.uint(10, UInt64(f.registerRate))
        if !f.states.isDefault { w.bytes(11, Array(f.states.json.utf8)) }
        if let p = f.profile { w.bytes(12, Array(p.json.utf8)) }
        for l in f.labels { w.string(13, l) }
        w.int(14, f.createdAtMs)
        for t in f.topics.keys.sorted() {
            w.message(15) { m in
                m.string(1, t)
                m.double(2, f.topics[t]!)
            }
        }
        if let k = f.applicationServerKey { w.bytes(16, k) }
        return w.bytes
    }

    static func record(registration r: FleetRegistration, fleet: Int) -> [UInt8] {
        var w = StateWriter()
        w.uint(1, UInt64(fleet))
        w.uint(2, UInt64(r.next.load(ordering: .relaxed)))
        w.uint(3, UInt64(r.sent.load(ordering: .relaxed)))
        w.uint(4, UInt64(r.skipped.load(ordering: .relaxed)))
        w.uint(5, UInt64(r.waits.load(ordering: .relaxed)))
        w.bool(6, r.paused.load(ordering: .relaxed))
        w.int(7, r.startedAtMs)
        let finished = r.finishedAtMs.load(ordering: .relaxed)
        if finished > 0 { w.int(8, finished) }
        return w.bytes
    }

    /// A device's record: its settings and what it holds (`counted`: with its counts and inbox).
    static func record(_ d: SimDevice, counted: Bool) -> [UInt8] {
        var w = StateWriter(capacity: 256)
        w.string(1, d.token)
        w.uint(2, d.platform == .ios ? 0 : d.platform == .android ? 1 : 2)
        w.string(3, d.app)
        w.string(4, d.environment)
        w.int(5, d.createdAtMs)
        w.int(6, d.uninstalledAtMs)
        w.string(7, d.rotatedTo)
        if d.appState != .background { w.uint(8, UInt64(SimDevice.AppState.allCases.firstIndex(of: d.appState)!)) }
        if d.permission != .authorized { w.uint(9, UInt64(SimDevice.Permission.allCases.firstIndex(of: d.permission)!)) }
        if !d.nseInstalled { w.bool(10, false) }
        if d.privacyOptOut { w.bool(11, true) }
        for l in d.labels { w.string(12, l) }
        if let o = d.overrides?.fields {
            if let t = o.tracking { w.bytes(13, Array(t.json.utf8)) }
            if let b = o.behavior { w.bytes(14, Array(b.json.utf8)) }
            if let r = o.registration { w.bytes(15, Array(r.json.utf8)) }
            if let f = o.fingerprint { w.string(16, f) }
            if let h = o.hardwareID { w.string(17, h) }
            if let p = o.profile { w.bytes(18, Array(p.json.utf8)) }
        }
        if let f = d.fleet { w.uint(19, UInt64(f)) }
        if let i = d.fleetIndex { w.uint(20, UInt64(i)) }
        w.uint(21, d.seed)
        for p in d.pending {
            w.message(22) { m in
                let x = p.delivery
                m.string(1, x.provider.name)
                m.string(2, x.app)
                m.string(3, x.environment)
                m.uuid(4, x.notificationID)
                m.string(5, x.messageName)
                m.int(6, x.receivedAtMs)
                m.bytes(7, x.payload)
                if x.mutableContent { m.bool(8, true) }
                if x.contentAvailable { m.bool(9, true) }
                if x.hasData { m.bool(10, true) }
                if x.alerts.rawValue != 0 { m.uint(11, UInt64(x.alerts.rawValue)) }
                m.string(12, x.collapseID)
                m.int(13, x.expiresAtMs)
                m.string(14, x.channelID)
                m.int(15, p.expiresAtMs)
            }
        }
        if d.platform == .ios {
            for a in d.activities {
                w.message(23) { m in
                    m.string(1, a.id)
                    m.string(2, a.attributesType)
                    m.bytes(3, Array(a.attributes.utf8))
                    m.bytes(4, Array(a.contentState.utf8))
                    m.string(5, a.pushToken)
                    m.string(6, a.channel)
                    if a.state == .ended { m.uint(7, 1) }
                    m.string(8, a.startedBy)
                    m.int(9, a.startedAtMs)
                    m.int(10, a.updatedAtMs)
                    if a.updates > 0 { m.uint(11, a.updates) }
                    m.int(12, a.lastTimestamp)
                    m.int(13, a.staleDate)
                    m.int(14, a.dismissalDate)
                    m.int(15, a.endedAtMs)
                }
            }
            for t in d.pushToStartTokens {
                w.message(24) { m in
                    m.string(1, t.attributesType)
                    m.string(2, t.token)
                }
            }
            w.string(25, d.fcmToken)
            w.string(26, d.fcmProject)
        }
        if counted {
            w.bool(30, true)
            for e in d.inboxEntries {
                w.message(31) { m in
                    m.uuid(1, e.notificationID)
                    m.int(2, e.receivedAtMs)
                    m.string(3, e.collapseID)
                    if e.displayed { m.bool(4, true) }
                    m.string(5, e.activityID)
                    m.string(6, e.activityEvent)
                    m.string(7, e.channelID)
                }
            }
            if d.evicted > 0 { w.uint(32, d.evicted) }
            if d.collapsed > 0 { w.uint(33, d.collapsed) }
            if d.dropped > 0 { w.uint(34, d.dropped) }
            if d.received > 0 { w.uint(35, d.received) }
            if d.opened > 0 { w.uint(36, d.opened) }
        }
        return w.bytes
    }

    /// Logs a device's change (called inside the shard lock that ordered it).
    func logDevice(_ d: SimDevice, atMs: Int64) {
        guard changes.isLogging else { return }
        changes.emit(kind: Kind.device, atMs: atMs, DeviceStore.record(d, counted: false))
    }

    // MARK: applying records

    public func apply(_ record: RecordView) throws {
        guard record.version == 1 else { throw StateFormatError("devices record version \(record.version) is newer than this pushemu") }
        switch record.kind {
        case Kind.fleet: try applyFleet(record.body)
        case Kind.registration: try applyRegistration(record.body)
        case Kind.device: try applyDevice(record.body)
        case Kind.members: try applyMembers(record.body)
        case Kind.memberTopics: try applyMemberTopics(record.body)
        default: throw StateFormatError("devices has no record kind \(record.kind)")
        }
    }

    /// Parses a JSON object's members into `set` (the admin API's own setters).
    /// The saved object `json` read with `body` (its unknown fields refused).
    static func object(_ json: [UInt8], _ what: String, _ body: (inout JSONObjectReader) throws -> Void) throws {
        do {
            try JSONObjectReader.read(json) { try body(&$0) }
        } catch {
            throw StateFormatError("\(what): \(error)")
        }
    }

    static func behavior(_ json: [UInt8]) throws -> Behavior {
        try json.withUnsafeBytes { raw in
            var t: [JSONToken] = []
            guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else {
                throw StateFormatError("behavior is not a JSON object")
            }
            do { return try Behavior.parse(JSONView(bytes: raw, tokens: t), 0) } catch { throw StateFormatError("behavior: \(error)") }
        }
    }

    static func tracking(_ json: [UInt8]) throws -> TrackingConfig {
        do { return try TrackingConfig.parse(json) } catch { throw StateFormatError("tracking: \(error)") }
    }

    static func registration(_ json: [UInt8]) throws -> RegistrationConfig {
        do { return try RegistrationConfig.parse(json) } catch { throw StateFormatError("registration: \(error)") }
    }

    static func profile(_ json: [UInt8]) throws -> AppProfile {
        var p = AppProfile()
        try object(json, "profile") { try p.read(&$0) }
        return p
    }

    private func applyFleet(_ body: UnsafeRawBufferPointer) throws {
        var number = 0
        var count = 0
        var registerRate = 10_000
        var platform = DevicePlatform.ios
        var app = ""
        var labels: [String] = []
        var environment: String?
        var seed: UInt64 = 0
        var created: Int64 = 0
        var behavior = configuration.defaultBehavior
        var tracking: TrackingConfig?
        var registration: RegistrationConfig?
        var profile: AppProfile?
        var states = FleetDeviceStates()
        var topics: [String: Double] = [:]
        var applicationServerKey: [UInt8]?
        try withExtendedLifetime(body) { raw in
            var r = StateReader(raw)
            while let f = try r.next() {
                switch f {
                case 1: number = try r.int(in: 1...DeviceStore.maxFleets, unsigned: true)
                case 2:
                    let n = try r.uint()
                    platform = n == 0 ? .ios : n == 1 ? .android : .web
                case 3: app = try r.string()
                case 4: environment = try r.string()
                case 5: count = try r.int(in: 1...(1 << 40), unsigned: true)
                case 6: seed = try r.uint()
                case 7: behavior = try DeviceStore.behavior(try r.bytes())
                case 8: tracking = try DeviceStore.tracking(try r.bytes())
                case 9: registration = try DeviceStore.registration(try r.bytes())
                case 10: registerRate = try r.int(in: 1...1_000_000, unsigned: true)
                case 11:
                    var s = FleetDeviceStates()
                    try DeviceStore.object(try r.bytes(), "states") { try s.read(&$0) }
                    states = s
                case 12: profile = try DeviceStore.profile(try r.bytes())
                case 13: labels.append(try r.string())
                case 14: created = try r.int()
                case 15:
                    var m = try r.message()
                    var name = ""
                    var share = 0.0
                    while let g = try m.next() {
                        switch g {
                        case 1: name = try m.string()
                        case 2: share = try m.double()
                        default: try m.skip()
                        }
                    }
                    guard !name.isEmpty, share >= 0, share <= 1 else {
                        throw StateFormatError("a fleet topic needs a name and a share from 0 to 1")
                    }
                    topics[name] = share
                case 16: applicationServerKey = try r.bytes()
                default: try r.skip()
                }
            }
        }
        guard number >= 1, count >= 1, !app.isEmpty else { throw StateFormatError("a fleet needs a number, an app and a count") }
        let (tag, secret) = FleetSpec.identity(seed: seed, platform: platform, app: app, count: count)
        var spec = FleetSpec(
            number: number, platform: platform, app: app, environment: environment, count: count, secret: secret, tag: tag, seed: seed,
            behavior: behavior, tracking: tracking, labels: labels, createdAtMs: created)
        spec.registerRate = registerRate
        spec.states = states
        spec.profile = profile.flatMap { $0.isEmpty ? nil : $0 }
        spec.topics = topics
        spec.applicationServerKey = applicationServerKey
        if let registration, dispatcher != nil {
            spec.registration = registration
            spec.registrationProgress = FleetRegistration(config: registration, rate: registerRate, total: count, nowMs: created)
        }
        // The same fleet applied again keeps what its members were through.
        let same = fleetRef(number).flatMap { $0.spec.tag == spec.tag && $0.spec.count == spec.count ? $0 : nil }
        let ref = makeRef(spec, members: same?.members, topics: same.flatMap { $0.spec.topics == spec.topics ? $0.topics : nil })
        let replaced = try putFleet(ref)
        if let progress = spec.registrationProgress, !replaced { registrar.add(spec, progress) }
    }

    private func applyRegistration(_ body: UnsafeRawBufferPointer) throws {
        var fleet = 0
        var next = 0
        var sent = 0
        var skipped = 0
        var waits = 0
        var paused = false
        var finished: Int64 = 0
        try withExtendedLifetime(body) { raw in
            var r = StateReader(raw)
            while let f = try r.next() {
                switch f {
                case 1: fleet = try r.int(in: 1...DeviceStore.maxFleets, unsigned: true)
                case 2: next = try r.int(in: 0...(1 << 40), unsigned: true)
                case 3: sent = try r.int(in: 0...(1 << 40), unsigned: true)
                case 4: skipped = try r.int(in: 0...(1 << 40), unsigned: true)
                case 5: waits = try r.int(in: 0...Int.max, unsigned: true)
                case 6: paused = try r.bool()
                case 8: finished = try r.int()
                default: try r.skip()
                }
            }
        }
        guard let progress = fleetRef(fleet)?.spec.registrationProgress else { return }
        progress.next.store(min(next, progress.total), ordering: .releasing)
        progress.sent.store(sent, ordering: .relaxed)
        progress.skipped.store(skipped, ordering: .relaxed)
        progress.waits.store(waits, ordering: .relaxed)
        progress.paused.store(paused, ordering: .relaxed)
        progress.finishedAtMs.store(finished, ordering: .relaxed)
        progress.checkpointed.withLock { $0 = progress.mark }
    }

    /// Adds or replaces fleet `ref.spec.number` (replaced: true). Numbers are dense: a record for
    /// a number past the next is refused.
    private func putFleet(_ ref: FleetRef) throws -> Bool {
        try fleets.withLock { f -> Bool in
            let n = ref.spec.number
            if n <= f.list.count {
                let old = f.list[n - 1]
                f.byTag[old.spec.tag]?.removeAll { $0 === old }
                f.list[n - 1] = ref
                f.byTag[ref.spec.tag, default: []].append(ref)
                return true
            }
            guard n == f.list.count + 1 else {
                throw StateFormatError("fleet-\(n) comes before fleet-\(f.list.count + 1): fleets are numbered from 1 in order")
            }
            f.list.append(ref)
            f.byTag[ref.spec.tag, default: []].append(ref)
            return false
        }
    }

    private func applyDevice(_ body: UnsafeRawBufferPointer) throws {
        var (decoded, counted) = try DeviceStore.decodeDevice(body)
        let k = TokenKey(decoded.token)
        // A counted fleet member that became a record (its change logged without counts).
        if !counted, let n = decoded.fleet, let i = decoded.fleetIndex, let f = fleetRef(n), i < f.spec.count,
            shard(k).map.withLock({ $0[k] == nil })
        {
            absorbCounts(&decoded, f, index: i)
        }
        let old = shard(k).map.withLock { m -> SimDevice? in
            let old = m[k]
            var d = decoded
            if !counted, let old { d.takeDeliveries(of: old) }
            m[k] = d
            return old
        }
        if old == nil { memory.force(StateMemory.Cost.deviceRecord) }
        reindex(old: old, new: decoded)
    }

    /// The Live Activity and FCM-token indexes for a device whose record went from `old` to `new`.
    func reindex(old: SimDevice?, new: SimDevice) {
        if let old {
            for a in old.activities {
                live.remove(token: a.pushToken)
                if let c = a.channel { live.unsubscribe(a.pushToken, from: channelKey(c, old)) }
            }
            for t in old.pushToStartTokens { live.remove(token: t.token) }
            if let f = old.fcmToken { _ = fcmTokens.withLock { $0.removeValue(forKey: TokenKey(f)) } }
        }
        for a in new.activities {
            live.add(token: a.pushToken, owner: LiveTokenOwner(device: new.token, activityID: a.id))
            if a.state == .active, let c = a.channel { live.subscribe(a.pushToken, to: channelKey(c, new)) }
        }
        for t in new.pushToStartTokens { live.add(token: t.token, owner: LiveTokenOwner(device: new.token, activityID: nil)) }
        if let f = new.fcmToken { fcmTokens.withLock { $0[TokenKey(f)] = new.token } }
    }

    /// A device record may wait, unapplied, under its token's key, unless another index names it
    /// (its Live Activities, push-to-start tokens or FCM token: found by those, not its token).
    public func deferredKey(_ record: RecordView) -> TokenKey? {
        guard record.kind == Kind.device, record.version == 1 else { return nil }
        var r = StateReader(record.body)
        var key: TokenKey?
        while let f = try? r.next() {
            switch f {
            case 23, 24, 25: return nil
            case 1:
                guard let k = r.key() else { return nil }
                key = k
            default: guard (try? r.skip()) != nil else { return nil }
            }
        }
        return key
    }

    static func decodeDevice(_ raw: UnsafeRawBufferPointer) throws -> (SimDevice, counted: Bool) {
        var r = StateReader(raw)
        var d = SimDevice(token: "", platform: .ios, app: nil, environment: nil, createdAtMs: 0, seed: 0)
        var counted = false
        var inbox: [SimDevice.InboxEntry] = []
        var overrides: (TrackingConfig?, Behavior?, RegistrationConfig?, String?, String?, AppProfile?) = (nil, nil, nil, nil, nil, nil)
        var activities: [LiveActivity] = []
        var starts: [PushToStartToken] = []
        var pending: [SimDevice.Pending] = []
        var fcmToken: String?
        var fcmProject: String?
        while let f = try r.next() {
            switch f {
            case 1: d.token = try r.string()
            case 2: d.platform = DevicePlatform.allCases[try r.int(in: 0...(DevicePlatform.allCases.count - 1), unsigned: true)]
            case 3: d.app = try r.string()
            case 4: d.environment = try r.string()
            case 5: d.createdAtMs = try r.int()
            case 6: d.uninstalledAtMs = try r.int()
            case 7: d.rotatedTo = try r.string()
            case 8: d.appState = SimDevice.AppState.allCases[try r.int(in: 0...(SimDevice.AppState.allCases.count - 1), unsigned: true)]
            case 9:
                d.permission = SimDevice.Permission.allCases[try r.int(in: 0...(SimDevice.Permission.allCases.count - 1), unsigned: true)]
            case 10: d.nseInstalled = try r.bool()
            case 11: d.privacyOptOut = try r.bool()
            case 12: d.labels.append(try r.string())
            case 13: overrides.0 = try tracking(try r.bytes())
            case 14: overrides.1 = try behavior(try r.bytes())
            case 15: overrides.2 = try registration(try r.bytes())
            case 16: overrides.3 = try r.string()
            case 17: overrides.4 = try r.string()
            case 18: overrides.5 = try profile(try r.bytes())
            case 19: d.fleet = try r.int(in: 1...DeviceStore.maxFleets, unsigned: true)
            case 20: d.fleetIndex = try r.int(in: 0...(1 << 40), unsigned: true)
            case 21: d.seed = try r.uint()
            case 22: pending.append(try decodePending(try r.message()))
            case 23: activities.append(try decodeActivity(try r.message()))
            case 24:
                var m = try r.message()
                var t = PushToStartToken(attributesType: "", token: "")
                while let g = try m.next() {
                    switch g {
                    case 1: t.attributesType = try m.string()
                    case 2: t.token = try m.string()
                    default: try m.skip()
                    }
                }
                starts.append(t)
            case 25: fcmToken = try r.string()
            case 26: fcmProject = try r.string()
            case 30: counted = try r.bool()
            case 31: inbox.append(try decodeInboxEntry(try r.message()))
            case 32: d.evicted = try r.uint()
            case 33: d.collapsed = try r.uint()
            case 34: d.dropped = try r.uint()
            case 35: d.received = try r.uint()
            case 36: d.opened = try r.uint()
            default: try r.skip()
            }
        }
        guard !d.token.isEmpty else { throw StateFormatError("a device record needs a token") }
        // Most devices have none: each setter rebuilds the record's box.
        if let t = overrides.0 { d.tracking = t }
        if let b = overrides.1 { d.behavior = b }
        if let r = overrides.2 { d.registration = r }
        if let f = overrides.3 { d.registrationFingerprint = f }
        if let h = overrides.4 { d.hardwareID = h }
        if let p = overrides.5 { d.profile = p }
        if !inbox.isEmpty { d.inbox = inbox }
        if !pending.isEmpty {
            d.pending = pending.map {
                var p = $0
                p.delivery.tokenBytes = Array(d.token.utf8)[...]
                p.delivery.platform = d.platform
                return p
            }
        }
        if d.platform == .ios {
            if !activities.isEmpty { d.activities = activities }
            if !starts.isEmpty { d.pushToStartTokens = starts }
            if fcmToken != nil { d.fcmToken = fcmToken }
            if fcmProject != nil { d.fcmProject = fcmProject }
        }
        return (d, counted)
    }

    static func decodePending(_ reader: StateReader) throws -> SimDevice.Pending {
        var m = reader
        var provider = PushProvider.apns
        var app: String?
        var environment: String?
        var messageName: String?
        var collapse: String?
        var channel: String?
        var id = UUIDValue(high: 0, low: 0)
        var received: Int64 = 0
        var payload: [UInt8] = []
        var flags = (false, false, false)
        var alerts: UInt64 = 0
        var expires: Int64?
        var held: Int64?
        while let g = try m.next() {
            switch g {
            case 1:
                let name = try m.string()
                guard let p = PushProvider.named(name) else { throw StateFormatError("no provider named \(name)") }
                provider = p
            case 2: app = try m.string()
            case 3: environment = try m.string()
            case 4: id = try m.uuid()
            case 5: messageName = try m.string()
            case 6: received = try m.int()
            case 7: payload = try m.bytes()
            case 8: flags.0 = try m.bool()
            case 9: flags.1 = try m.bool()
            case 10: flags.2 = try m.bool()
            case 11: alerts = try m.uint()
            case 12: collapse = try m.string()
            case 13: expires = try m.int()
            case 14: channel = try m.string()
            case 15: held = try m.int()
            default: try m.skip()
            }
        }
        var d = Delivery(
            provider: provider, platform: .ios, tokenBytes: [], appBytes: app.map { Array($0.utf8)[...] }, environment: environment,
            notificationID: id, messageName: messageName, receivedAtMs: received, payload: payload[...])
        d.mutableContent = flags.0
        d.contentAvailable = flags.1
        d.hasData = flags.2
        d.alerts = AlertFacts(rawValue: UInt8(truncatingIfNeeded: alerts))
        d.collapseID = collapse
        d.expiresAtMs = expires
        d.channelID = channel
        return SimDevice.Pending(delivery: d, expiresAtMs: held)
    }

    static func decodeActivity(_ reader: StateReader) throws -> LiveActivity {
        var m = reader
        var a = LiveActivity(
            id: "", attributesType: "", attributes: "{}", contentState: "{}", pushToken: "", channel: nil, startedBy: "app",
            startedAtMs: 0, updatedAtMs: 0)
        while let g = try m.next() {
            switch g {
            case 1: a.id = try m.string()
            case 2: a.attributesType = try m.string()
            case 3: a.attributes = try m.string()
            case 4: a.contentState = try m.string()
            case 5: a.pushToken = try m.string()
            case 6: a.channel = try m.string()
            case 7: a.state = try m.uint() == 1 ? .ended : .active
            case 8: a.startedBy = try m.string()
            case 9: a.startedAtMs = try m.int()
            case 10: a.updatedAtMs = try m.int()
            case 11: a.updates = try m.uint()
            case 12: a.lastTimestamp = try m.int()
            case 13: a.staleDate = try m.int()
            case 14: a.dismissalDate = try m.int()
            case 15: a.endedAtMs = try m.int()
            default: try m.skip()
            }
        }
        guard !a.id.isEmpty, !a.pushToken.isEmpty else { throw StateFormatError("an activity needs an id and a pushToken") }
        return a
    }

    static func decodeInboxEntry(_ reader: StateReader) throws -> SimDevice.InboxEntry {
        var m = reader
        var e = SimDevice.InboxEntry(notificationID: UUIDValue(high: 0, low: 0), receivedAtMs: 0, collapseID: nil, displayed: false)
        var live: (String?, String?, String?) = (nil, nil, nil)
        while let g = try m.next() {
            switch g {
            case 1: e.notificationID = try m.uuid()
            case 2: e.receivedAtMs = try m.int()
            case 3: e.collapseID = try m.string()
            case 4: e.displayed = try m.bool()
            case 5: live.0 = try m.string()
            case 6: live.1 = try m.string()
            case 7: live.2 = try m.string()
            default: try m.skip()
            }
        }
        if live.0 != nil || live.1 != nil || live.2 != nil {
            e.live = SimDevice.InboxEntry.LiveFacts(activityID: live.0, activityEvent: live.1, channelID: live.2)
        }
        return e
    }

    // MARK: snapshots, checkpoints, reset

    /// Fleets in number order (each with its registration's progress: fleets are numbered in
    /// order, and a registration names its fleet).
    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        for f in allFleets {
            emit(ChangeRecord(store: stateName, kind: Kind.fleet, body: DeviceStore.record(f)))
            if let p = f.registrationProgress {
                emit(ChangeRecord(store: stateName, kind: Kind.registration, body: DeviceStore.record(registration: p, fleet: f.number)))
            }
        }
    }

    /// Device records (each its own token's), shard by shard in the order of their token's key.
    public func snapshotIndependent(_ emit: (ChangeRecord) -> Void) {
        for s in shards {
            let records = s.map.withLock { m -> [(TokenKey, [UInt8])] in m.map { ($0.key, DeviceStore.record($0.value, counted: true)) } }
            for (_, body) in records.sorted(by: { ($0.0.a, $0.0.b) < ($1.0.a, $1.0.b) }) {
                emit(ChangeRecord(store: stateName, kind: Kind.device, body: body))
            }
        }
        snapshotMembers(emit)
        snapshotMemberTopics(emit)
    }

    /// Registration progress that moved since the last checkpoint.
    public func checkpoint() {
        guard changes.isLogging else { return }
        for f in allFleets {
            guard let p = f.registrationProgress else { continue }
            let mark = p.mark
            let moved = p.checkpointed.withLock { c -> Bool in
                guard c != mark else { return false }
                c = mark
                return true
            }
            if moved { changes.emit(kind: Kind.registration, atMs: Clock.nowMs(), DeviceStore.record(registration: p, fleet: f.number)) }
        }
    }

    /// A fleet's registration paused or resumed: logged now.
    func logRegistration(_ progress: FleetRegistration) {
        guard changes.isLogging, let f = allFleets.first(where: { $0.registrationProgress === progress }) else { return }
        progress.checkpointed.withLock { $0 = progress.mark }
        changes.emit(kind: Kind.registration, atMs: Clock.nowMs(), DeviceStore.record(registration: progress, fleet: f.number))
    }

    public func reset(_ scope: ResetScope) { removeAll() }

    /// Each shard's table sized once for its share of `records` (a start's snapshot), instead
    /// of doubling as they come (each doubling allocated and zeroed a new table).
    public func reserve(records: Int) {
        let each = records / shards.count + records / (shards.count * 8) + 16
        for s in shards { s.map.withLock { $0.reserveCapacity($0.count + each) } }
    }

    public func addStats(to stats: inout StatsDocument) {
        let c = self.stats
        let fleets = allFleets
        stats.add("devices", "records", recordCount)
        stats.add("devices", "fleets", fleets.count)
        stats.add("devices", "fleetDevices", fleets.reduce(0) { $0 + $1.count })
        stats.add("devices", "countedMembers", countedMembers)
        stats.add("devices", "countedMemberBytes", countedMemberBytes)
        stats.add("deliveries", "delivered", c.delivered)
        stats.add("deliveries", "heldOffline", c.heldOffline)
        stats.add("deliveries", "droppedOffline", c.droppedOffline)
        stats.add("deliveries", "unstored", c.unstored)
    }
}
