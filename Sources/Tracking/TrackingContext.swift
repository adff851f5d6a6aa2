import PushCore

/// What an SDK inside the app knows when it reports an event.
package struct TrackingContext: Sendable {
    package var event: TrackingEvent
    /// "ios" or "android".
    package var platform: String
    package var token: String
    package var app: String
    /// The emulator's notification id.
    package var notificationID: String
    /// The `apns-id`, or the FCM message `name`.
    package var messageName: String
    package var receivedAtMs: Int64
    /// When the event happens (receive or open time).
    package var atMs: Int64
    /// The APNs payload, or the FCM `message` object.
    package var payload: PayloadReader
    package var userID: String?
    package var locale = "en-US"
    package var model: String

    package init(
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
        self.model = platform == "ios" ? "iPhone15,2" : "Pixel 8"
    }

    /// A stable hardware id for the device (the SDKs' hwid / device_id): a UUID from the token.
    package var hwid: String {
        let k = TokenKey(token)
        return UUIDValue(high: k.a, low: k.b).description
    }

    /// A key the app sees in its notification: APNs top-level keys; FCM `data` (the android
    /// override first, as the device receives it).
    package func appValue(_ key: String) -> String? {
        if platform == "ios" { return payload.value(key) }
        return payload.value("android.data." + key) ?? payload.value("data." + key)
    }
}
