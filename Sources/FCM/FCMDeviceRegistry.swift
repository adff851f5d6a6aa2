import PushCore
import Runtime
import State
import Synchronization
import Transport

/// What FCM knows about registration tokens: the project each belongs to, whether its app was
/// uninstalled, and its topic subscriptions (with a topic index for fan-out). A well-formed token
/// seen for the first time becomes a device bound to the sender's project. Devices are sharded
/// by token hash, each shard locked for a dictionary operation only; the topic index has its own
/// lock, taken by subscription changes and topic sends. (The simulated-device layer grows out of this.)
///
/// In the state log as store `fcm.tokens`: a `token` record for each explicit registration and
/// uninstall, one `subscribed` / `unsubscribed` record per subscription call however many tokens
/// it names (a `batchAdd` of 1,000 is one record); what sends bind on first sight, and push
/// counts, are kept by snapshots.
public final class FCMDeviceRegistry: PersistentStore {
    /// Topics one token may be subscribed to at most, as Instance ID allows.
    public static let maxTopicsPerDevice = 2000

    /// One FCM registration token and what was done with it.
    public struct Device: Sendable {
        /// The registration token.
        public var token: String
        /// The project the token was issued for; nil until a project sends to it or subscribes it.
        public var project: String?
        /// The app (package name or bundle id) the token belongs to, when known.
        public var app: String?
        /// "android" or "ios" (an iOS app's token, delivered through APNs).
        public var platform: String = "android" {
            didSet { isIOS = platform == "ios" }
        }
        /// `platform == "ios"`, kept so the send path compares no strings.
        private(set) var isIOS = false
        /// When it was first seen (ms since the epoch).
        public var createdAtMs: Int64
        /// When its app was uninstalled (nil: installed); sends then get `UNREGISTERED`.
        public var uninstalledAtMs: Int64?
        /// Topic name -> day subscribed (days since 1970-01-01).
        public var topics: [String: Int32] = [:]
        /// Messages sent to it.
        public var pushes: UInt64 = 0
    }

    /// What a send to a token finds.
    public enum Verdict: Equatable, Sendable {
        case ok
        /// An iOS app's registration token: FCM delivers through APNs (`FCMAPNsMapping`).
        case okIOS
        case unregistered
        case senderMismatch
        /// `--devices strict`: a token nobody issued.
        case unknown
    }

    /// The outcome of one token's topic (un)subscription, in Instance ID's per-token form.
    public enum SubscriptionResult: String, Equatable, Sendable {
        case ok
        case notFound = "NOT_FOUND"
        case invalidArgument = "INVALID_ARGUMENT"
        case tooManyTopics = "TOO_MANY_TOPICS"
        case notSubscribed
        case senderMismatch = "SENDER_ID_MISMATCH"
        /// The registry holds as many devices as it may (`capacity`): the subscription is refused
        /// rather than kept in the topic index for a device nobody records.
        case full = "RESOURCE_EXHAUSTED"
    }

    private final class Shard: Sendable {
        let map = FutexLock<[TokenKey: Device]>([:])
    }

    private let shards: [Shard]
    /// Firebase installation id -> the registration token of its device (a token's part before
    /// the colon), sharded like the devices.
    private let installations: [InstallationShard]

    private final class InstallationShard: Sendable {
        let map = FutexLock<[TokenKey: String]>([:])
    }
    private let maxPerShard: Int
    /// topic -> tokens subscribed.
    /// (By token key: two words hashed cheaply, where a 163-byte token went through SipHash; a
    /// fan-out reads each token from its device record.)
    private let topicIndex = FutexLock<[String: Set<TokenKey>]>([:])

    /// The device layer (fleets, registered devices), asked about tokens with no record here.
    let directory: DeviceDirectory?
    /// The device layer's fleet members' subscriptions (the directory, when it keeps them): a
    /// fleet member with no record here subscribes there, at a few bits a member.
    let fleetTopics: (any FleetTopicDirectory)?
    /// Unknown tokens are refused instead of registered on first sight.
    let strict: Bool
    /// The store's name in the state log and the store registry.
    public let stateName = "fcm.tokens"
    /// Where this store's change records go.
    public let changes = ChangeLink(store: "fcm.tokens")

    /// Its share of `--max-state-memory`.
    public let memory: StateMemory.Account

    /// An empty registry.
    public init(
        shardCount: Int = 64, capacity: Int = 1_000_000, directory: DeviceDirectory? = nil, strict: Bool = false,
        memory: StateMemory = StateMemory()
    ) {
        self.memory = StateMemory.Account(memory)
        shards = (0..<shardCount).map { _ in Shard() }
        installations = (0..<shardCount).map { _ in InstallationShard() }
        maxPerShard = max(1, capacity / shardCount)
        self.directory = directory
        fleetTopics = directory as? any FleetTopicDirectory
        self.strict = strict
    }

    /// What the device layer says of a token this registry has no record of.
    func external(_ token: ArraySlice<UInt8>, key: TokenKey? = nil, project: String?) -> Verdict? {
        guard let directory,
            let status = key.map({ directory.status(token: token, key: $0, platform: .android) })
                ?? directory.status(token: token, platform: .android)
        else { return strict ? .unknown : nil }
        switch status {
        case .uninstalled: return .unregistered
        case .installed(_, let p):
            if let p, let project, p != project { return .senderMismatch }
            return .ok
        }
    }

    /// A snapshot's token records not applied yet: `shard` applies a key's before its lookup.
    let waiting = DeferredRecords(store: "fcm.tokens")
    public var deferred: DeferredRecords? { waiting }

    /// The shard of `key`, its saved record applied first if it still waits.
    @inline(__always) private func shard(_ key: TokenKey) -> Shard {
        if waiting.isPending { waiting.materialize(key) { try applyDeferred($0) } }
        return shards[key.shard(shards.count)]
    }

    /// As below, for a token already held as a String (shared with the index, not copied).
    private func indexInstallation(_ token: String) {
        var t = token
        let key: TokenKey? = t.withUTF8 { buf in
            guard let colon = buf.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return nil }
            return TokenKey(UnsafeRawBufferPointer(start: buf.baseAddress, count: colon))
        }
        guard let key else { return }
        installations[key.shard(installations.count)].map.withLock { $0[key] = token }
    }

    /// Indexes a registration token under its installation id (its part before the colon).
    private func indexInstallation(_ token: ArraySlice<UInt8>) {
        guard let colon = token.firstIndex(of: UInt8(ascii: ":")), colon > token.startIndex else { return }
        let fid = token[token.startIndex..<colon]
        let key = TokenKey(fid)
        let text = String(decoding: token, as: UTF8.self)
        installations[key.shard(installations.count)].map.withLock { $0[key] = text }
    }

    /// The registration token of the device with Firebase installation id `fid`: one this
    /// registry holds, else a device-layer device (a fleet member); nil when there is none.
    public func registrationToken(forInstallation fid: ArraySlice<UInt8>) -> String? {
        let key = TokenKey(fid)
        applyAllDeferred() // indexed by installation only once applied
        if let token = installations[key.shard(installations.count)].map.withLock({ $0[key] }) { return token }
        return directory?.registrationToken(forInstallation: fid)
    }

    /// Checks a send from `project` to `token` and registers the token on first sight.
    public func check(token: ArraySlice<UInt8>, project: String, nowMs: Int64) -> Verdict {
        check(token: token, key: TokenKey(token), project: project, nowMs: nowMs)
    }

    /// `check(token:project:nowMs:)` with the token's key already computed (the send path keeps
    /// it for the device layer, which would otherwise hash the 150-byte token again).
    public func check(token: ArraySlice<UInt8>, key: TokenKey, project: String, nowMs: Int64) -> Verdict {
        let known = shard(key).map.withLock { map -> Verdict? in
            guard let i = map.index(forKey: key) else { return nil }
            // Read in place: a copy of the record (its strings and topic table) cost ten
            // reference-count operations a send.
            return FCMDeviceRegistry.admit(&map.values[i], project: project)
        }
        if let known { return known }
        if let v = external(token, key: key, project: project) { return v }
        return shard(key).map.withLock { map -> Verdict in
            if map[key] != nil { return .ok }
            if map.count < maxPerShard, memory.take(StateMemory.Cost.fcmToken) {
                map[key] = Device(token: String(decoding: token, as: UTF8.self), project: project, createdAtMs: nowMs, pushes: 1)
                indexInstallation(token)
            }
            return .ok
        }
    }

    /// The send path's verdict on a known device, counting the push and binding the device to
    /// the first project that sends to it.
    private static func admit(_ d: inout Device, project: String) -> Verdict {
        if d.uninstalledAtMs != nil { return .unregistered }
        if let p = d.project {
            if p != project { return .senderMismatch }
        } else {
            d.project = project
        }
        d.pushes &+= 1
        return d.isIOS ? .okIOS : .ok
    }

    /// Registers a device explicitly (replacing what was known).
    public func register(token: String, project: String?, app: String?, platform: String = "android", nowMs: Int64) {
        let key = TokenKey(token)
        let old = shard(key).map.withLock { map -> Device? in
            let old = map[key]
            var device = Device(token: token, project: project, app: app, createdAtMs: nowMs)
            device.platform = platform // (didSet keeps isIOS; an initializer would not run it)
            if old == nil { memory.force(StateMemory.Cost.fcmToken) } // a device the admin API made: counted, never refused here
            map[key] = device
            if changes.isLogging { changes.emit(kind: Kind.token, atMs: nowMs, FCMDeviceRegistry.record(device)) }
            return old
        }
        indexInstallation(Array(token.utf8)[...])
        if let old, !old.topics.isEmpty {
            topicIndex.withLock { idx in for t in old.topics.keys { idx[t]?.remove(key) } }
        }
    }

    /// Subscribes `token` to `topic` (registering a well-formed unknown token). `project`, when
    /// known from the caller's credentials, binds an unbound device and must match a bound one.
    public func subscribe(token: String, topic: String, project: String?, nowMs: Int64) -> SubscriptionResult {
        subscribe(tokens: [token], topic: topic, project: project, nowMs: nowMs)[0]
    }

    /// Subscribes each of `tokens` to `topic`: one result per token, one state-log record for
    /// the call (naming the tokens it subscribed).
    public func subscribe(tokens: [String], topic: String, project: String?, nowMs: Int64) -> [SubscriptionResult] {
        let day = Int32(nowMs / 86_400_000)
        return change(tokens, topic: topic, kind: Kind.subscribed, project: project, day: day, nowMs: nowMs) {
            subscribeOne($0, topic: topic, project: project, day: day, nowMs: nowMs, checked: false)
        }
    }

    /// Unsubscribes each of `tokens` from `topic`: one result per token, one state-log record.
    public func unsubscribe(tokens: [String], topic: String, nowMs: Int64) -> [SubscriptionResult] {
        change(tokens, topic: topic, kind: Kind.unsubscribed, project: nil, day: nil, nowMs: nowMs) { unsubscribeOne($0, topic: topic) }
    }

    /// One subscription change to each token (`one`), then one record naming the tokens it changed.
    private func change(
        _ tokens: [String], topic: String, kind: Int, project: String?, day: Int32?, nowMs: Int64,
        _ one: (String) -> SubscriptionResult
    ) -> [SubscriptionResult] {
        // Fleet members this registry has no record of: their fleet keeps the change (and logs it).
        var members: [Int: SubscriptionResult] = [:]
        if let fleetTopics {
            let candidates = tokens.indices.filter { i in
                guard FCMFormats.isRegistrationToken(tokens[i].utf8) else { return false }
                let key = TokenKey(tokens[i])
                return shard(key).map.withLock { $0[key] == nil }
            }
            if !candidates.isEmpty {
                let changed = fleetTopics.setMemberTopic(
                    candidates.map { tokens[$0] }, topic: topic, project: project, subscribed: kind == Kind.subscribed, nowMs: nowMs)
                for (n, i) in candidates.enumerated() {
                    switch changed[n] {
                    case nil: continue
                    case .ok?: members[i] = .ok
                    case .notFound?: members[i] = .notFound
                    case .senderMismatch?: members[i] = .senderMismatch
                    }
                }
            }
        }
        var done: [String] = []
        let results = tokens.enumerated().map { i, token -> SubscriptionResult in
            if let r = members[i] { return r }
            let r = one(token)
            if r == .ok { done.append(token) }
            return r
        }
        if !done.isEmpty, changes.isLogging {
            changes.emit(kind: kind, atMs: nowMs) { w in
                w.string(1, topic)
                for t in done { w.string(2, t) }
                w.string(3, project)
                if let day { w.int(4, Int64(day)) }
            }
        }
        return results
    }

    /// One token's subscription. `checked`: applying a record (the device layer is not asked again).
    private func subscribeOne(_ token: String, topic: String, project: String?, day: Int32, nowMs: Int64, checked: Bool)
        -> SubscriptionResult
    {
        guard FCMFormats.isRegistrationToken(token.utf8) else { return .invalidArgument }
        let key = TokenKey(token)
        if !checked, shard(key).map.withLock({ $0[key] == nil }) {
            switch external(Array(token.utf8)[...], project: project) {
            case .unregistered?: return .notFound
            case .senderMismatch?: return .senderMismatch
            case .unknown?: return .invalidArgument
            default: break
            }
        }
        let r = shard(key).map.withLock { map -> SubscriptionResult in
            var d = map[key] ?? Device(token: token, project: project, createdAtMs: nowMs)
            if d.uninstalledAtMs != nil { return .notFound }
            if let project, let p = d.project, p != project { return .senderMismatch }
            if d.project == nil { d.project = project }
            let isNew = map[key] == nil
            if d.topics[topic] == nil {
                if d.topics.count >= FCMDeviceRegistry.maxTopicsPerDevice { return .tooManyTopics }
                let cost = StateMemory.Cost.fcmSubscription + (isNew ? StateMemory.Cost.fcmToken : 0)
                guard !isNew || map.count < maxPerShard, memory.take(cost) else { return .full }
                d.topics[topic] = day
            } else if isNew {
                guard map.count < maxPerShard, memory.take(StateMemory.Cost.fcmToken) else { return .full }
            }
            map[key] = d
            return .ok
        }
        if r == .ok {
            _ = topicIndex.withLock { $0[topic, default: []].insert(key) }
            indexInstallation(Array(token.utf8)[...])
        }
        return r
    }

    /// Unsubscribes one token from one topic.
    public func unsubscribe(token: String, topic: String) -> SubscriptionResult {
        unsubscribe(tokens: [token], topic: topic, nowMs: Clock.nowMs())[0]
    }

    private func unsubscribeOne(_ token: String, topic: String) -> SubscriptionResult {
        guard FCMFormats.isRegistrationToken(token.utf8) else { return .invalidArgument }
        let key = TokenKey(token)
        let r = shard(key).map.withLock { map -> SubscriptionResult in
            guard let d = map[key] else { return .notSubscribed }
            if d.uninstalledAtMs != nil { return .notFound }
            return map[key]?.topics.removeValue(forKey: topic) == nil ? .notSubscribed : .ok
        }
        if r == .ok {
            memory.give(StateMemory.Cost.fcmSubscription)
            topicIndex.withLock { idx in
                idx[topic]?.remove(key)
                if idx[topic]?.isEmpty == true { idx[topic] = nil }
            }
        }
        return r
    }

    /// Delivers to the installed devices subscribed to `topic` that belong to `project` (or to no
    /// project yet: they are bound to it now), counting the push. Returns their tokens, sorted.
    public func fanOut(topic: String, project: String) -> [String] {
        applyAllDeferred()
        return claim(topicIndex.withLock { $0[topic].map(Array.init) ?? [] }, project: project)
    }

    /// Every recipient of a topic send: the registry's subscribers (`fanOut(topic:)`), then the
    /// fleet members subscribed, fleet by fleet, streamed (`body` false stops).
    public func forEachRecipient(topic: String, project: String, _ body: (String) -> Bool) {
        for t in fanOut(topic: topic, project: project) where !body(t) { return }
        fleetTopics?.forEachSubscriber(topics: [topic], project: project, matches: { $0(topic) }, body)
    }

    /// As `forEachRecipient(topic:)`, for the devices a condition selects.
    public func forEachRecipient(condition: FCMCondition, project: String, _ body: (String) -> Bool) {
        for t in fanOut(condition: condition, project: project) where !body(t) { return }
        fleetTopics?.forEachSubscriber(
            topics: Set(condition.topics), project: project, matches: { subscribed in condition.matches(subscribed) }, body)
    }

    /// As `fanOut(topic:)`, for the devices a condition selects. A device is a candidate when it
    /// holds at least one subscription (a condition true of no topics at all would otherwise name
    /// every device in the world).
    public func fanOut(condition: FCMCondition, project: String) -> [String] {
        applyAllDeferred()
        let candidates: [TokenKey] = topicIndex.withLock { idx in
            if condition.matches({ _ in false }) {
                return Array(idx.values.reduce(into: Set<TokenKey>()) { $0.formUnion($1) })
            }
            return Array(condition.topics.reduce(into: Set<TokenKey>()) { acc, t in if let s = idx[t] { acc.formUnion(s) } })
        }
        return claim(candidates, project: project) { d in condition.matches { d.topics[$0] != nil } }
    }

    private func claim(_ keys: [TokenKey], project: String, where match: (Device) -> Bool = { _ in true }) -> [String] {
        var out: [String] = []
        out.reserveCapacity(keys.count)
        for key in keys {
            let token = shard(key).map.withLock { map -> String? in
                guard let i = map.index(forKey: key) else { return nil }
                let d = map.values[i]
                guard d.uninstalledAtMs == nil, d.project == nil || d.project == project, match(d) else { return nil }
                map.values[i].project = project
                map.values[i].pushes &+= 1
                return d.token
            }
            if let token { out.append(token) }
        }
        return out.sorted()
    }

    /// Marks the app uninstalled: later sends get 404 UNREGISTERED. False if unknown.
    @discardableResult
    public func uninstall(token: String, atMs: Int64) -> Bool {
        let key = TokenKey(token)
        return shard(key).map.withLock { map -> Bool in
            guard map[key] != nil else { return false }
            if map[key]!.uninstalledAtMs == nil { map[key]!.uninstalledAtMs = atMs }
            if changes.isLogging { changes.emit(kind: Kind.token, atMs: atMs, FCMDeviceRegistry.record(map[key]!)) }
            return true
        }
    }

    /// Whether `token` is an iOS app's registration token (delivered through APNs).
    func isIOS(token: String) -> Bool {
        let key = TokenKey(token)
        return shard(key).map.withLock { $0[key]?.isIOS ?? false }
    }

    /// The token's record (nil: never seen); a fleet member without one, as its fleet's
    /// subscriptions make it (subscribed on the day asked: the member sets keep no dates).
    public func device(token: String) -> Device? {
        let key = TokenKey(token)
        if let d = shard(key).map.withLock({ $0[key] }) { return d }
        guard let m = fleetTopics?.memberTopics(token: token) else { return nil }
        let nowMs = Clock.nowMs()
        var d = Device(token: token, project: m.project, createdAtMs: nowMs)
        if m.uninstalled { d.uninstalledAtMs = nowMs }
        for t in m.topics { d.topics[t] = Int32(nowMs / 86_400_000) }
        return d
    }

    /// Tokens held.
    public var count: Int {
        // A waiting record's key is in no shard (a lookup applies it first): counted apart.
        waiting.count + shards.reduce(0) { acc, s in acc + s.map.withLock { $0.count } }
    }
    /// Topics with subscribers (while a start's records still wait, those of the applied ones).
    var topicCount: Int { topicIndex.withLock { $0.count } }

    /// Forgets every token and subscription (`POST /emulator/v1/reset`).
    public func removeAll() {
        waiting.discard()
        memory.releaseAll()
        for s in shards { s.map.withLock { $0.removeAll() } }
        for s in installations { s.map.withLock { $0.removeAll() } }
        topicIndex.withLock { $0.removeAll() }
    }

    // MARK: state

    enum Kind {
        static let token = 1
        static let subscribed = 2
        static let unsubscribed = 3
    }

    /// The record kinds it writes to the state log (tokens, subscriptions, uninstalls).
    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: Kind.token, name: "token",
                fields: [
                    FieldSchema(1, "token", .string), FieldSchema(2, "project", .string), FieldSchema(3, "app", .string),
                    FieldSchema(4, "platform", .string), FieldSchema(5, "createdAt", .int), FieldSchema(6, "uninstalledAt", .int),
                    FieldSchema(7, "pushes", .uint),
                    FieldSchema(8, "topics", .message([FieldSchema(1, "name", .string), FieldSchema(2, "day", .int)]), repeated: true),
                ]),
            RecordSchema(
                kind: Kind.subscribed, name: "subscribed",
                fields: [
                    FieldSchema(1, "topic", .string), FieldSchema(2, "tokens", .string, repeated: true), FieldSchema(3, "project", .string),
                    FieldSchema(4, "day", .int),
                ]),
            RecordSchema(
                kind: Kind.unsubscribed, name: "unsubscribed",
                fields: [FieldSchema(1, "topic", .string), FieldSchema(2, "tokens", .string, repeated: true)]),
        ]
    }

    static func record(_ d: Device) -> [UInt8] {
        var w = StateWriter(capacity: 256)
        w.string(1, d.token)
        w.string(2, d.project)
        w.string(3, d.app)
        if d.platform != "android" { w.string(4, d.platform) }
        w.int(5, d.createdAtMs)
        w.int(6, d.uninstalledAtMs)
        if d.pushes > 0 { w.uint(7, d.pushes) }
        for (name, day) in d.topics.sorted(by: { $0.key < $1.key }) {
            w.message(8) { m in
                m.string(1, name)
                m.int(2, Int64(day))
            }
        }
        return w.bytes
    }

    /// A waiting token record's key: its token (field 1).
    public func deferredKey(_ record: RecordView) -> TokenKey? {
        record.kind == Kind.token && record.version == 1 ? record.key(field: 1) : nil
    }

    /// Applies one record from the state log (at start, or from an import).
    public func apply(_ record: RecordView) throws {
        guard record.version == 1 else { throw StateFormatError("fcm.tokens record version \(record.version) is newer than this pushemu") }
        switch record.kind {
        case Kind.token:
            let (d, pushes) = try FCMDeviceRegistry.decodeToken(record.body)
            let added = put(d, pushes: pushes)
            if !added.topics.isEmpty { topicIndex.withLock { idx in for t in added.topics { idx[t, default: []].insert(added.key) } } }
        case Kind.subscribed, Kind.unsubscribed:
            try record.withBody { raw in
                var r = StateReader(raw)
                var topic = ""
                var tokens: [String] = []
                var project: String?
                var day: Int64 = record.atMs / 86_400_000
                while let f = try r.next() {
                    switch f {
                    case 1: topic = try r.string()
                    case 2: tokens.append(try r.string())
                    case 3: project = try r.string()
                    case 4: day = try r.int()
                    default: try r.skip()
                    }
                }
                guard !topic.isEmpty else { throw StateFormatError("a subscription record needs a topic") }
                for t in tokens {
                    if record.kind == Kind.subscribed {
                        _ = subscribeOne(
                            t, topic: topic, project: project, day: Int32(clamping: day), nowMs: day * 86_400_000, checked: true)
                    } else {
                        _ = unsubscribeOne(t, topic: topic)
                    }
                }
            }
        default:
            throw StateFormatError("fcm.tokens has no record kind \(record.kind)")
        }
    }

    /// A start's chunk of token records: the topic index (one lock for every device) taken once
    /// for the chunk, not once a record.
    public func apply(batch: [RecordView]) throws {
        var added: [(String, TokenKey)] = []
        func flush() {
            guard !added.isEmpty else { return }
            topicIndex.withLock { idx in for (t, k) in added { idx[t, default: []].insert(k) } }
            added.removeAll(keepingCapacity: true)
        }
        for record in batch {
            guard record.kind == Kind.token, record.version == 1 else {
                flush()
                try apply(record)
                continue
            }
            let (d, pushes) = try FCMDeviceRegistry.decodeToken(record.body)
            let put = self.put(d, pushes: pushes)
            for t in put.topics { added.append((t, put.key)) }
        }
        flush()
    }

    static func decodeToken(_ raw: UnsafeRawBufferPointer) throws -> (Device, UInt64?) {
        var r = StateReader(raw)
        var d = Device(token: "", project: nil, createdAtMs: 0)
        var pushes: UInt64?
        while let f = try r.next() {
            switch f {
            case 1: d.token = try r.string()
            case 2: d.project = try r.string()
            case 3: d.app = try r.string()
            case 4: d.platform = try r.string()
            case 5: d.createdAtMs = try r.int()
            case 6: d.uninstalledAtMs = try r.int()
            case 7: pushes = try r.uint()
            case 8:
                var m = try r.message()
                var name = ""
                var day: Int32 = 0
                while let g = try m.next() {
                    switch g {
                    case 1: name = try m.string()
                    case 2: day = Int32(try m.int(in: Int(Int32.min)...Int(Int32.max)))
                    default: try m.skip()
                    }
                }
                d.topics[name] = day
            default: try r.skip()
            }
        }
        guard !d.token.isEmpty else { throw StateFormatError("an fcm.tokens record needs a token") }
        return (d, pushes)
    }

    /// Sets a device's record, keeping its push count unless given; removes from the topic index
    /// what it no longer subscribes to and returns what the index must gain (the caller adds it,
    /// once for many records when it can). One lookup.
    private func put(_ d: Device, pushes: UInt64?) -> (key: TokenKey, topics: [String]) {
        let key = TokenKey(d.token)
        let token = d.token
        let topics = Array(d.topics.keys)
        let oldTopics = shard(key).map.withLock { map -> [String]? in
            if let i = map.index(forKey: key) {
                let old = Array(map.values[i].topics.keys)
                let kept = map.values[i].pushes
                map.values[i] = d
                map.values[i].pushes = pushes ?? kept
                return old
            }
            map[key] = d
            if let pushes { map[key]?.pushes = pushes }
            return nil
        }
        if oldTopics == nil { memory.force(StateMemory.Cost.fcmToken + topics.count * StateMemory.Cost.fcmSubscription) }
        indexInstallation(token)
        if let oldTopics, oldTopics.contains(where: { !topics.contains($0) }) {
            topicIndex.withLock { idx in
                for t in oldTopics where !topics.contains(t) {
                    idx[t]?.remove(key)
                    if idx[t]?.isEmpty == true { idx[t] = nil }
                }
            }
        }
        return (key, topics)
    }

    /// Nothing in order: every record names its own token (see `snapshotIndependent`).
    public func snapshot(_ emit: (ChangeRecord) -> Void) {}

    /// Every device, sorted by token (its topics in its record).
    public func snapshotIndependent(_ emit: (ChangeRecord) -> Void) {
        var all: [Device] = []
        for s in shards { s.map.withLock { all.append(contentsOf: $0.values) } }
        all.sort { $0.token < $1.token }
        for d in all { emit(ChangeRecord(store: stateName, kind: Kind.token, body: FCMDeviceRegistry.record(d))) }
    }

    /// Forgets every token whatever the scope (tokens are state, not credentials).
    public func reset(_ scope: ResetScope) { removeAll() }

    /// Sizes the tables for `records` more tokens before a snapshot is read (one growth, not many).
    public func reserve(records: Int) {
        let each = records / shards.count + records / (shards.count * 8) + 16
        for s in shards { s.map.withLock { $0.reserveCapacity($0.count + each) } }
        for s in installations { s.map.withLock { $0.reserveCapacity($0.count + each) } }
    }

    /// Adds its counts to `/emulator/v1/stats`.
    public func addStats(to stats: inout StatsDocument) {
        stats.add("devices", "fcmTokens", count)
        stats.add("fcm", "topics", topicCount)
    }
}
