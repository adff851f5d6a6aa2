import PushCore

/// What an SDK inside the app knows when it reports an event.
public struct TrackingContext: Sendable {
    public var event: TrackingEvent
    /// "ios", "android" or "web".
    public var platform: String
    /// A browser's push service (`fcm`: Chrome, `mozilla`: Firefox, `apple`: Safari, `wns`:
    /// Edge): which browser a web SDK reports itself as.
    public var webService: String?
    public var token: String
    public var app: String
    /// The emulator's notification id.
    public var notificationID: String
    /// The `apns-id`, or the FCM message `name`.
    public var messageName: String
    public var receivedAtMs: Int64
    /// When the event happens (receive or open time).
    public var atMs: Int64
    /// The APNs payload, or the FCM `message` object.
    public var payload: PayloadReader
    var userID: String?
    var locale = "en-US"
    var model: String
    /// A registration after a token refresh: the token the app had before.
    public var previousToken: String?
    /// The campaign id the notification carries (`CampaignID`), kept with the call's attempts
    /// in the journal so a campaign's report counts its tracking without finding its request.
    public var campaign: String?

    public init(
        event: TrackingEvent, platform: String, token: String, app: String, notificationID: String, messageName: String,
        receivedAtMs: Int64, atMs: Int64, payload: PayloadReader, userID: String? = nil
    ) {
        self.event = event
        self.platform = platform
        self.token = token
        self.app = app
        self.notificationID = notificationID
        self.messageName = messageName
        self.receivedAtMs = receivedAtMs
        self.atMs = atMs
        self.payload = payload
        self.userID = userID
        self.model = platform == "ios" ? "iPhone15,2" : platform == "web" ? "Web" : "Pixel 8"
    }

    /// A stable hardware id for the device (the SDKs' hwid / device_id): a UUID from the token.
    public var hwid: String { hardwareIDOverride ?? TrackingContext.hardwareID(token) }
    /// The device's hardware id when it is not its token's (after a token refresh).
    var hardwareIDOverride: String?

    /// The hardware id of the device that first had `token`: a UUID from it.
    public static func hardwareID(_ token: String) -> String {
        let k = TokenKey(token)
        return UUIDValue(high: k.a, low: k.b).description
    }

    /// A key the app sees in its notification: APNs top-level keys; FCM `data` (the android
    /// override first, as the device receives it); a Web Push payload's top-level keys (or under
    /// `data`, as Pushwoosh's web SDK also takes them), as the service worker reads the JSON.
    func appValue(_ key: String) -> String? {
        if platform == "ios" { return payload.value(key) }
        if platform == "web" { return payload.value(key) ?? payload.value("data." + key) }
        return payload.value("android.data." + key) ?? payload.value("data." + key)
    }
}
