/// An accepted notification as the device layer receives it from a provider.
public struct Delivery: Sendable {
    public var provider: PushProvider
    public var platform: DevicePlatform
    /// The token as received (a slice of the request: no copy on the hot path).
    public var tokenBytes: ArraySlice<UInt8>
    /// `TokenKey(tokenBytes)` when the provider has already computed it.
    public var tokenKey: TokenKey?
    public var token: String { String(decoding: tokenBytes, as: UTF8.self) }
    /// Bundle id (APNs topic's app) or package name, when the provider knows it (decoded only
    /// when a device is created).
    public var appBytes: ArraySlice<UInt8>?
    public var app: String? { appBytes.map { String(decoding: $0, as: UTF8.self) } }
    /// APNs environment or FCM project.
    public var environment: String?
    public var notificationID: UUIDValue
    /// `apns-id`, or the FCM message name (nil: derived from the notification id when needed).
    public var messageName: String?
    public var receivedAtMs: Int64
    /// The APNs payload or the FCM message object (a slice of the request: copied only when an
    /// SDK reports).
    public var payload: ArraySlice<UInt8>
    /// APNs `mutable-content: 1`.
    public var mutableContent = false
    /// APNs `content-available: 1`.
    public var contentAvailable = false
    /// FCM: the message carries `data` (so `onMessageReceived` runs in the background too).
    public var hasData = false
    /// What the payload shows (alert, sound, badge, passive; FCM: a notification message).
    public var alerts: AlertFacts = []
    public var collapseID: String?
    /// APNs `apns-expiration` (ms; 0: deliver now or never) or FCM TTL end; nil: none.
    public var expiresAtMs: Int64?
    /// A Live Activity broadcast: the channel it came on.
    public var channelID: String?

    @inlinable
    public init(
        provider: PushProvider, platform: DevicePlatform, token: String, app: String?, environment: String?,
        notificationID: UUIDValue, messageName: String?, receivedAtMs: Int64, payload: [UInt8]
    ) {
        self.init(
            provider: provider, platform: platform, tokenBytes: Array(token.utf8)[...], appBytes: app.map { Array($0.utf8)[...] },
            environment: environment, notificationID: notificationID, messageName: messageName, receivedAtMs: receivedAtMs,
            payload: payload[...])
    }

    @inlinable
    public init(
        provider: PushProvider, platform: DevicePlatform, tokenBytes: ArraySlice<UInt8>, appBytes: ArraySlice<UInt8>?,
        environment: String?, notificationID: UUIDValue, messageName: String?, receivedAtMs: Int64, payload: ArraySlice<UInt8>,
        tokenKey: TokenKey? = nil, mutableContent: Bool = false, contentAvailable: Bool = false, hasData: Bool = false,
        alerts: AlertFacts = [], collapseID: String? = nil, expiresAtMs: Int64? = nil
    ) {
        self.provider = provider
        self.platform = platform
        self.tokenBytes = tokenBytes
        self.appBytes = appBytes
        self.environment = environment
        self.notificationID = notificationID
        self.messageName = messageName
        self.receivedAtMs = receivedAtMs
        self.payload = payload
        self.tokenKey = tokenKey
        self.mutableContent = mutableContent
        self.contentAvailable = contentAvailable
        self.hasData = hasData
        self.alerts = alerts
        self.collapseID = collapseID
        self.expiresAtMs = expiresAtMs
    }
}
