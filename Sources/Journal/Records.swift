import PushCore
import Transport

/// One provider request as the journal keeps it (accepted or rejected).
public struct RequestRecord: Sendable {
    /// When the request arrived (ms since the epoch).
    public var atMs: Int64
    /// APNs or FCM.
    public var provider: PushProvider
    /// The connection it came on (an id unique within the process).
    public var connection: UInt64
    /// APNs environment or FCM project.
    public var environment: String
    /// The device token, FCM topic or condition it was sent to.
    public var token: ArraySlice<UInt8>
    /// The APNs topic (`apns-topic`), when it had one.
    public var topic: ArraySlice<UInt8>?
    /// The HTTP status it was answered with.
    public var status: Int
    /// APNs reason or FCM errorCode; empty when accepted.
    public var reason: String
    /// How long pushemu took to answer it (µs).
    public var latencyUs: Int64
    /// The headers (the journal keeps the ones that matter) and the payload (bounded).
    public var headers: HTTPFields
    /// The payload (bounded by `Journal.maxPayload`).
    public var payload: ArraySlice<UInt8>
    /// The provider's warnings about it (APNs payload lint, FCM field notes).
    public var warnings: [String]
    /// The notification's id (APNs apns-id; FCM: the UUID its message name derives from), nil when rejected.
    public var notificationID: UUIDValue?
    /// What the device made of it (a token send that was delivered; nil otherwise).
    public var device: DeviceOutcome?
    /// The APNs team whose credentials sent it (a provider token's issuer, a certificate's
    /// organisational unit); nil for FCM and Web Push.
    public var team: TeamID? = nil

    /// A record with every field given.
    public init(
        atMs: Int64, provider: PushProvider, connection: UInt64, environment: String, token: ArraySlice<UInt8>,
        topic: ArraySlice<UInt8>?, status: Int, reason: String, latencyUs: Int64, headers: HTTPFields, payload: ArraySlice<UInt8>,
        warnings: [String], notificationID: UUIDValue?, device: DeviceOutcome? = nil, team: TeamID? = nil
    ) {
        self.device = device
        self.team = team
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
    /// When the attempt ended (ms since the epoch).
    public var atMs: Int64
    /// The tracking preset that made the call.
    public var preset: String
    /// The event the call reported (receive, open, click, registration).
    public var event: String
    /// The device token.
    public var token: String
    /// The notification it reported on.
    public var notificationID: String
    /// The HTTP method of the call.
    public var method: String
    /// The URL called.
    public var url: String
    /// The HTTP status it got (0: no answer).
    public var status: Int
    /// "succeeded", "retrying" or "failed".
    public var outcome: String
    /// 1 for the first try.
    public var attempt: Int
    /// How long the call took (ms).
    public var latencyMs: Double
    /// The transport error (nil when an answer arrived).
    public var error: String?
    /// Events the request carried (a batched preset's request carries several).
    public var events: Int
    /// The campaign id of the notification reported on (nil: none, a registration, or a record
    /// of a format before 4, which did not keep it).
    public var campaign: String?

    /// A record with every field given.
    public init(
        atMs: Int64, preset: String, event: String, token: String, notificationID: String, method: String, url: String,
        status: Int, outcome: String, attempt: Int, latencyMs: Double, error: String?, events: Int = 1, campaign: String? = nil
    ) {
        self.events = events
        self.campaign = campaign
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
