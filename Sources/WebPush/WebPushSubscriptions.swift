import PushCore
import Runtime
import State
import Transport

/// A browser's push subscription as the push service and the browser hold it: the service and
/// endpoint, the site and its `applicationServerKey`, the browser's key pair and auth secret.
public struct WebPushSubscription: Sendable {
    /// The endpoint's token (its last path segment; WNS's `token` parameter).
    public var token: String
    public var service: WebPushService
    /// `chrome`, `firefox`, `safari` or `edge`.
    public var browser: String
    /// The site that subscribed (`https://shop.example`).
    public var app: String
    /// The site's VAPID public key (65 bytes), nil for a Firefox subscription made without one.
    public var applicationServerKey: [UInt8]?
    /// The browser's P-256 key pair: private scalar (32 bytes) and public point (`p256dh`, 65 bytes).
    public var privateKey: [UInt8] { keyPair.privateKey ?? [] }
    public var publicKey: [UInt8] { keyPair.publicKey }
    /// The 16-byte auth secret.
    public var auth: [UInt8]
    /// The endpoint URL the sender posts to.
    public var endpoint: String
    public var createdAtMs: Int64
    /// When the browser unsubscribed (later pushes: the service's "gone").
    public var goneAtMs: Int64?

    /// `PushSubscription.toJSON()`: `{"endpoint","expirationTime":null,"keys":{"p256dh","auth"}}`.
    public var json: String {
        "{\"endpoint\":\(JSONWriter.quote(endpoint)),\"expirationTime\":null,\"keys\":{\"p256dh\":\"\(Base64URL.encode(publicKey))\",\"auth\":\"\(Base64URL.encode(auth))\"}}"
    }

    /// The key pair made once (its public point is derived from the scalar: a multiplication).
    let keyPair: P256Key

    /// What the browser decrypts with.
    public var keys: SubscriptionKeys { SubscriptionKeys(key: keyPair, auth: auth) }
}

/// Why a subscription could not be made, in words the admin API passes on.
public struct WebPushSubscriptionError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The subscriptions the push services have issued, by token. In the state log as store
/// `webpush.subscriptions`: a `subscription` record per subscribe and unsubscribe.
public final class WebPushSubscriptions: PersistentStore {
    public let stateName = "webpush.subscriptions"
    public let changes = ChangeLink(store: "webpush.subscriptions")
    private let map = FutexLock<[String: WebPushSubscription]>([:])
    /// Subscriptions kept at most.
    let capacity: Int

    public init(capacity: Int = 1_000_000) { self.capacity = capacity }

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
        try map.withLock { (m: inout [String: WebPushSubscription]) throws(WebPushSubscriptionError) in
            guard m[token] != nil || m.count < capacity else {
                throw WebPushSubscriptionError(description: "at most \(capacity) web push subscriptions are kept")
            }
            m[token] = s
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
    public func subscription(token: String) -> WebPushSubscription? { map.withLock { $0[token] } }

    /// The browser unsubscribed: later pushes are answered as gone. False if unknown.
    @discardableResult
    public func unsubscribe(token: String, atMs: Int64) -> Bool {
        map.withLock { m in
            guard var s = m[token] else { return false }
            if s.goneAtMs == nil { s.goneAtMs = atMs }
            m[token] = s
            if changes.isLogging { changes.emit(kind: 1, atMs: atMs, WebPushSubscriptions.record(s)) }
            return true
        }
    }

    public var count: Int { map.withLock { $0.count } }

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
        map.withLock { $0[token] = s }
    }

    public func snapshot(_ emit: (ChangeRecord) -> Void) {
        for s in map.withLock({ Array($0.values) }).sorted(by: { $0.token < $1.token }) {
            emit(ChangeRecord(store: stateName, kind: 1, body: WebPushSubscriptions.record(s)))
        }
    }

    public func reset(_ scope: ResetScope) { map.withLock { $0.removeAll() } }

    public func addStats(to stats: inout StatsDocument) { stats.add("devices", "webSubscriptions", count) }
}

/// The subscriptions as the device layer sees them (`Fleet.DeviceLifecycle`): uninstalling a
/// web device unsubscribes it.
extension WebPushSubscriptions: GatewayDeviceRecords {
    public var platform: DevicePlatform { .web }

    public func recognizes(token: String) -> Bool { subscription(token: token) != nil }

    public func registeredDevice(token: String) -> RegisteredDevice? {
        guard let s = subscription(token: token) else { return nil }
        return RegisteredDevice(
            platform: .web, token: token, app: s.app, environment: s.service.rawValue, createdAtMs: s.createdAtMs,
            uninstalledAtMs: s.goneAtMs, pushes: 0, topics: nil)
    }

    /// A browser gets a new subscription only by subscribing again (the admin API's `POST /devices`).
    public func register(token: String, app: String?, environment: String?, nowMs: Int64) {}

    public func uninstall(token: String, atMs: Int64) -> Bool { unsubscribe(token: token, atMs: atMs) }
}
