import PushCore
import Transport

/// One provider request as the journal keeps it (accepted or rejected).
package struct RequestRecord: Sendable {
    package var atMs: Int64
    package var provider: PushProvider
    package var connection: UInt64
    /// APNs environment or FCM project.
    package var environment: String
    package var token: ArraySlice<UInt8>
    package var topic: ArraySlice<UInt8>?
    package var status: Int
    /// APNs reason or FCM errorCode; empty when accepted.
    package var reason: String
    package var latencyUs: Int64
    /// The headers (the journal keeps the ones that matter) and the payload (bounded).
    package var headers: HTTPFields
    package var payload: ArraySlice<UInt8>
    package var warnings: [String]
    /// The notification's id (APNs apns-id; FCM: the UUID its message name derives from), nil when rejected.
    package var notificationID: UUIDValue?

    package init(
        atMs: Int64, provider: PushProvider, connection: UInt64, environment: String, token: ArraySlice<UInt8>,
        topic: ArraySlice<UInt8>?, status: Int, reason: String, latencyUs: Int64, headers: HTTPFields, payload: ArraySlice<UInt8>,
        warnings: [String], notificationID: UUIDValue?
    ) {
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
package struct TrackingRecord: Sendable {
    package var atMs: Int64
    package var preset: String
    package var event: String
    package var token: String
    package var notificationID: String
    package var method: String
    package var url: String
    package var status: Int
    package var outcome: String
    package var attempt: Int
    package var latencyMs: Double
    package var error: String?
    /// Events the request carried (a batched preset's request carries several).
    package var events: Int

    package init(
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
