import PushCore
import Transport

/// One provider request as the journal keeps it (accepted or rejected).
public struct RequestRecord: Sendable {
    public var atMs: Int64
    public var provider: PushProvider
    public var connection: UInt64
    /// APNs environment or FCM project.
    public var environment: String
    public var token: ArraySlice<UInt8>
    public var topic: ArraySlice<UInt8>?
    public var status: Int
    /// APNs reason or FCM errorCode; empty when accepted.
    public var reason: String
    public var latencyUs: Int64
    /// The headers (the journal keeps the ones that matter) and the payload (bounded).
    public var headers: HTTPFields
    public var payload: ArraySlice<UInt8>
    public var warnings: [String]
    /// The notification's id (APNs apns-id; FCM: the UUID its message name derives from), nil when rejected.
    public var notificationID: UUIDValue?
    /// What the device made of it (a token send that was delivered; nil otherwise).
    public var device: DeviceOutcome?

    public init(
        atMs: Int64, provider: PushProvider, connection: UInt64, environment: String, token: ArraySlice<UInt8>,
        topic: ArraySlice<UInt8>?, status: Int, reason: String, latencyUs: Int64, headers: HTTPFields, payload: ArraySlice<UInt8>,
        warnings: [String], notificationID: UUIDValue?, device: DeviceOutcome? = nil
    ) {
        self.device = device
        self.atMs = atMs
        self.provider = provider
        self.connection = connection
        self.environment = environment
        self.token = token
        self.topic = topic
        self.status = status
        self.reason = reason
        self.latencyUs = latencyUs
        self.headers = headers
        self.payload = payload
        self.warnings = warnings
        self.notificationID = notificationID
    }
}

/// One tracking attempt.
public struct TrackingRecord: Sendable {
    public var atMs: Int64
    public var preset: String
    public var event: String
    public var token: String
    public var notificationID: String
    public var method: String
    public var url: String
    public var status: Int
    public var outcome: String
    public var attempt: Int
    public var latencyMs: Double
    public var error: String?
    /// Events the request carried (a batched preset's request carries several).
    public var events: Int

    public init(
        atMs: Int64, preset: String, event: String, token: String, notificationID: String, method: String, url: String,
        status: Int, outcome: String, attempt: Int, latencyMs: Double, error: String?, events: Int = 1
    ) {
        self.events = events
        self.atMs = atMs
        self.preset = preset
        self.event = event
        self.token = token
        self.notificationID = notificationID
        self.method = method
        self.url = url
        self.status = status
        self.outcome = outcome
        self.attempt = attempt
        self.latencyMs = latencyMs
        self.error = error
    }
}
