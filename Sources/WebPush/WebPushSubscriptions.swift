import PushCore
import Runtime
import State
import Synchronization
import Transport

/// A browser's push subscription as the push service and the browser hold it: the service and
/// endpoint, the site and its `applicationServerKey`, the browser's key pair and auth secret.
public final class WebPushSubscription: Sendable {
    /// The endpoint's token (its last path segment; WNS's `token` parameter).
    public let token: String
    /// The token's bytes (what a push's path is compared with).
    let tokenBytes: [UInt8]
    public let service: WebPushService
    /// `chrome`, `firefox`, `safari` or `edge`.
    public let browser: String
    /// The site that subscribed (`https://shop.example`).
    public let app: String
    /// The site's VAPID public key (65 bytes), nil for a Firefox subscription made without one.
    public let applicationServerKey: [UInt8]?
    /// The browser's P-256 key pair: private scalar (32 bytes) and public point (`p256dh`, 65 bytes).
    public var privateKey: [UInt8] { keyPair.privateKey ?? [] }
    public var publicKey: [UInt8] { keyPair.publicKey }
    /// A fleet member's subscription (made from its fleet's secret, kept nowhere).
    public let fromFleet: Bool
    /// The 16-byte auth secret.
    public let auth: [UInt8]
    /// The endpoint URL the sender posts to.
    public let endpoint: String
    public let createdAtMs: Int64
    /// When the browser unsubscribed (later pushes: the service's "gone").
    public let goneAtMs: Int64?

    convenience init(
        token: String, service: WebPushService, browser: String, app: String, applicationServerKey: [UInt8]?, auth: [UInt8],
        endpoint: String, createdAtMs: Int64, goneAtMs: Int64?, keyPair: P256Key
    ) {
        self.init(
            token: token, service: service, browser: browser, app: app, applicationServerKey: applicationServerKey, auth: auth,
            endpoint: endpoint, createdAtMs: createdAtMs, goneAtMs: goneAtMs, key: KeySource(keyPair), fromFleet: false)
    }

    private init(
        token: String, service: WebPushService, browser: String, app: String, applicationServerKey: [UInt8]?, auth: [UInt8],
        endpoint: String, createdAtMs: Int64, goneAtMs: Int64?, key: KeySource, fromFleet: Bool
    ) {
        self.token = token
        self.tokenBytes = Array(token.utf8)
        self.service = service
        self.browser = browser
        self.app = app
        self.applicationServerKey = applicationServerKey
        self.auth = auth
        self.endpoint = endpoint
        self.createdAtMs = createdAtMs
        self.goneAtMs = goneAtMs
        self.key = key
        self.fromFleet = fromFleet
    }

    /// A fleet member's subscription, made from what the device layer derives for it.
    convenience init?(token: String, member m: WebFleetMember, localBase: String? = nil) {
        guard let service = WebPushService(rawValue: m.service) else { return nil }
        self.init(
            token: token, service: service, browser: service.browser, app: m.app, applicationServerKey: m.applicationServerKey,
            auth: m.auth, endpoint: service.endpoint(token: token, versionTwo: true, localBase: localBase),
            createdAtMs: m.createdAtMs, goneAtMs: m.goneAtMs, key: KeySource(seed: m.keySeed), fromFleet: true)
    }

    /// The same subscription, unsubscribed at `atMs` (kept: the service answers "gone").
    func unsubscribed(atMs: Int64) -> WebPushSubscription {
        WebPushSubscription(
            token: token, service: service, browser: browser, app: app, applicationServerKey: applicationServerKey, auth: auth,
            endpoint: endpoint, createdAtMs: createdAtMs, goneAtMs: goneAtMs ?? atMs, key: key, fromFleet: fromFleet)
    }

    /// `PushSubscription.toJSON()`: `{"endpoint","expirationTime":null,"keys":{"p256dh","auth"}}`.
    public var json: String {
        "{\"endpoint\":\(JSONWriter.quote(endpoint)),\"expirationTime\":null,\"keys\":{\"p256dh\":\"\(Base64URL.encode(publicKey))\",\"auth\":\"\(Base64URL.encode(auth))\"}}"
    }

    /// The key pair, made once: at once for a subscription made through the admin API, on first
    /// use for a fleet member's (its public point is a scalar multiplication, which a push's
    /// answer does not need: only the browser decrypting it does).
    var keyPair: P256Key { key.pair }
    private let key: KeySource

    /// A key pair, or the 32 bytes it is made from.
    final class KeySource: Sendable {
        private let seed: [UInt8]
        private let made: FutexLock<P256Key?>

        init(_ pair: P256Key) {
            seed = []
            made = FutexLock(pair)
        }

        init(seed: [UInt8]) {
            self.seed = seed
            made = FutexLock(nil)
        }

        var pair: P256Key {
            if let k = made.withLock({ $0 }) { return k }
            let k = KeySource.derive(seed)
            return made.withLock { m in
                if let existing = m { return existing }
                m = k
                return k
            }
        }

        /// A P-256 key pair from 32 bytes: them as the scalar, or (in the 2^-32 case that they are
        /// not below the curve's order) their HMAC-SHA256, again until one is.
        static func derive(_ seed: [UInt8]) -> P256Key {
            var scalar = seed
            while true {
                if let k = P256Key(privateKey: scalar) { return k }
                scalar = ContentEncryption.hmac(scalar, Array("pushemu web fleet key".utf8))
            }
        }
    }

    /// What the browser decrypts with.
    public var keys: SubscriptionKeys { SubscriptionKeys(key: keyPair, auth: auth) }
}

/// Why a subscription could not be made, in words the admin API passes on.
public struct WebPushSubscriptionError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The subscriptions the push services have issued, by token, in 64 shards by the token's hash
/// (a push looks one up by its bytes, under its shard's lock only). In the state log as store
/// `webpush.subscriptions`: a `subscription` record per subscribe and unsubscribe.
public final class WebPushSubscriptions: PersistentStore {
    public let stateName = "webpush.subscriptions"
    public let changes = ChangeLink(store: "webpush.subscriptions")
    typealias Shard = [TokenKey: WebPushSubscription]
    private let shards: [FutexLock<Shard>]
    private let total = Atomic<Int>(0)
    /// Subscriptions kept at most.
    let capacity: Int
    /// Where a token no browser subscribed with is looked up: the fleets of web subscriptions.
    let directory: (any WebFleetDirectory)?

    public init(capacity: Int = 1_000_000, directory: (any WebFleetDirectory)? = nil) {
        self.capacity = capacity
        self.directory = directory
        shards = (0..<64).map { _ in FutexLock<Shard>([:]) }
    }

    private func shard(_ k: TokenKey) -> FutexLock<Shard> { shards[Int(k.b & 63)] }

    /// Subscribes a browser: the service its `browser` uses, a token of that service's shape
    /// (or `token`), the browser's keys (`privateKey`/`auth`, else fresh ones), the endpoint
    /// under the service's host or `localBase`.
    public func subscribe(
        browser: String, app: String, applicationServerKey: [UInt8]?, privateKey: [UInt8]?, auth: [UInt8]?, token: String? = nil,
        localBase: String? = nil, nowMs: Int64
    ) throws(WebPushSubscriptionError) -> WebPushSubscription {
        guard let service = WebPushService.of(browser: browser) else {
            throw WebPushSubscriptionError(description: "browser must be chrome, firefox, safari or edge")
        }
        if let k = applicationServerKey, P256Key(publicKey: k) == nil {
            throw WebPushSubscriptionError(
                description: "applicationServerKey is not a P-256 public key (65 bytes, uncompressed, base64url)")
        }
        if applicationServerKey == nil && service != .mozilla {
            throw WebPushSubscriptionError(
                description: "\(browser) subscribes only with an applicationServerKey (the site's VAPID public key, base64url)")
        }
        let key: P256Key?
        if let privateKey {
            key = P256Key(privateKey: privateKey)
            guard key != nil else {
                throw WebPushSubscriptionError(description: "keys.privateKey is not a P-256 private key (32 bytes, base64url)")
            }
        } else {
            key = P256Key.generate()
        }
        guard let key, key.privateKey != nil else { throw WebPushSubscriptionError(description: "could not make a key pair") }
        if let auth, auth.count != 16 { throw WebPushSubscriptionError(description: "keys.auth must be 16 bytes (base64url)") }
        let token = token ?? WebPushSubscriptions.newToken(service, versionTwo: applicationServerKey != nil)
        guard (16...512).contains(token.utf8.count), token.utf8.allSatisfy(WebPushSubscriptions.isTokenByte) else {
            throw WebPushSubscriptionError(description: "token must be 16 to 512 base64url characters (':' allowed)")
        }
        let s = WebPushSubscription(
            token: token, service: service, browser: browser, app: app, applicationServerKey: applicationServerKey,
            auth: auth ?? ContentEncryption.random(16),
            endpoint: service.endpoint(token: token, versionTwo: applicationServerKey != nil, localBase: localBase),
            createdAtMs: nowMs, goneAtMs: nil, keyPair: key)
        let k = TokenKey(token)
        try shard(k).withLock { (m: inout Shard) throws(WebPushSubscriptionError) in
            if m[k] == nil {
                guard total.load(ordering: .relaxed) < capacity else {
                    throw WebPushSubscriptionError(description: "at most \(capacity) web push subscriptions are kept")
                }
                total.add(1, ordering: .relaxed)
            }
            m[k] = s
            if changes.isLogging { changes.emit(kind: 1, atMs: nowMs, WebPushSubscriptions.record(s)) }
        }
        return s
    }

    static func isTokenByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F || c == 0x3A
    }

    /// A token of the service's shape: FCM's registration token, autopush's Fernet-like blob,
    /// Apple's and WNS's opaque strings.
    static func newToken(_ service: WebPushService, versionTwo: Bool) -> String {
        switch service {
        case .fcm:
            return String(Base64URL.encode(ContentEncryption.random(17)).prefix(22)) + ":APA91b"
                + String(Base64URL.encode(ContentEncryption.random(101)).prefix(134))
        case .mozilla: return "gAAAAAB" + Base64URL.encode(ContentEncryption.random(versionTwo ? 144 : 112))
        case .apple: return "Q" + Base64URL.encode(ContentEncryption.random(96))
        case .wns: return "BQYAAAB" + Base64URL.encode(ContentEncryption.random(96))
        }
    }

    /// The subscription with this token.
    public func subscription(token: String) -> WebPushSubscription? {
        var t = token
        return t.withUTF8 { subscription(token: ArraySlice(UnsafeBufferPointer(rebasing: $0[...]))) }
    }

    /// The subscription with the token `bytes` (a request's path segment): no allocation for one
    /// subscribed through the admin API; a fleet member's is made from its fleet.
    public func subscription(token bytes: ArraySlice<UInt8>) -> WebPushSubscription? {
        let k = TokenKey(bytes)
        // The key folds case; tokens do not.
        if let s = shard(k).withLock({ $0[k] }), Bytes.equal(bytes, s.tokenBytes) { return s }
        guard let member = directory?.webFleetMember(token: bytes) else { return nil }
        return WebPushSubscription(token: String(decoding: bytes, as: UTF8.self), member: member)
    }

    /// A fleet member's subscription with its endpoint under `localBase` (or its service's host).
    public func fleetSubscription(token: String, localBase: String?) -> WebPushSubscription? {
        guard let member = directory?.webFleetMember(token: Array(token.utf8)[...]) else { return nil }
        return WebPushSubscription(token: token, member: member, localBase: localBase)
    }

    /// The browser unsubscribed: later pushes are answered as gone. False if unknown.
    @discardableResult
    public func unsubscribe(token: String, atMs: Int64) -> Bool {
        let k = TokenKey(token)
        return shard(k).withLock { m in
            guard let s = m[k], s.token == token else { return false }
            let gone = s.unsubscribed(atMs: atMs)
            m[k] = gone
            if changes.isLogging { changes.emit(kind: 1, atMs: atMs, WebPushSubscriptions.record(gone)) }
            return true
        }
    }

    public var count: Int { total.load(ordering: .relaxed) }

    /// Every subscription (for listings and snapshots).
    var all: [WebPushSubscription] { shards.flatMap { $0.withLock { Array($0.values) } } }

    // MARK: state

    public var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: 1, name: "subscription",
                fields: [
                    FieldSchema(1, "token", .string), FieldSchema(2, "browser", .string), FieldSchema(3, "app", .string),
                    FieldSchema(4, "applicationServerKey", .bytes), FieldSchema(5, "privateKey", .bytes),
                    FieldSchema(6, "auth", .bytes), FieldSchema(7, "endpoint", .string), FieldSchema(8, "createdAt", .int),
                    FieldSchema(9, "goneAt", .int),
                ])
        ]
    }

    static func record(_ s: WebPushSubscription) -> [UInt8] {
        var w = StateWriter()
        w.string(1, s.token)
        w.string(2, s.browser)
        w.string(3, s.app)
        if let k = s.applicationServerKey { w.bytes(4, k) }
        w.bytes(5, s.privateKey)
        w.bytes(6, s.auth)
        w.string(7, s.endpoint)
        w.int(8, s.createdAtMs)
        w.int(9, s.goneAtMs)
        return w.bytes
    }

    public func apply(_ record: RecordView) throws {
        guard record.kind == 1, record.version == 1 else {
            throw StateFormatError("webpush.subscriptions has no record kind \(record.kind) version \(record.version)")
        }
        var r = StateReader(record.body)
        var token = ""
        var browser = ""
        var app = ""
        var endpoint = ""
        var serverKey: [UInt8]?
        var priv: [UInt8] = []
        var auth: [UInt8] = []
        var created: Int64 = 0
        var gone: Int64?
        while let f = try r.next() {
            switch f {
            case 1: token = try r.string()
            case 2: browser = try r.string()
            case 3: app = try r.string()
            case 4: serverKey = try r.bytes()
            case 5: priv = try r.bytes()
            case 6: auth = try r.bytes()
            case 7: endpoint = try r.string()
            case 8: created = try r.int()
            case 9: gone = try r.int()
            default: try r.skip()
            }
        }
        guard !token.isEmpty, let service = WebPushService.of(browser: browser), let key = P256Key(privateKey: priv), auth.count == 16
        else {
            throw StateFormatError("a webpush.subscriptions record is incomplete (token \(token))")
        }
        let s = WebPushSubscription(
            token: token, service: service, browser: browser, app: app, applicationServerKey: serverKey, auth: auth, endpoint: endpoint,
            createdAtMs: created, goneAtMs: gone, keyPair: key)
        let k = TokenKey(token)
        shard(k).withLock { m in
            if m.updateValue(s, forKey: k) == nil { total.add(1, ordering: .relaxed) }
        }
    }

    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        for s in all.sorted(by: { $0.token < $1.token }) {
            emit(ChangeRecord(store: stateName, kind: 1, body: WebPushSubscriptions.record(s)))
        }
    }

    public func reset(_ scope: ResetScope) {
        for sh in shards {
            sh.withLock { m in
                total.subtract(m.count, ordering: .relaxed)
                m.removeAll()
            }
        }
    }

    public func addStats(to stats: inout StatsDocument) { stats.add("devices", "webSubscriptions", count) }
}

/// The subscriptions as the device layer sees them (`Fleet.DeviceLifecycle`): uninstalling a
/// web device unsubscribes it.
extension WebPushSubscriptions: GatewayDeviceRecords {
    public var platform: DevicePlatform { .web }

    /// A subscription made through the admin API (a fleet member's is the device layer's own).
    public func recognizes(token: String) -> Bool { subscription(token: token).map { !$0.fromFleet } ?? false }

    public func registeredDevice(token: String) -> RegisteredDevice? {
        guard let s = subscription(token: token), !s.fromFleet else { return nil }
        return RegisteredDevice(
            platform: .web, token: token, app: s.app, environment: s.service.rawValue, createdAtMs: s.createdAtMs,
            uninstalledAtMs: s.goneAtMs, pushes: 0, topics: nil)
    }

    /// A browser gets a new subscription only by subscribing again (the admin API's `POST /devices`).
    public func register(token: String, app: String?, environment: String?, nowMs: Int64) {}

    public func uninstall(token: String, atMs: Int64) -> Bool { unsubscribe(token: token, atMs: atMs) }
}
