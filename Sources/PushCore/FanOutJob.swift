import Transport

/// A push that reaches many devices (an FCM topic or condition send, an APNs Live Activity
/// broadcast). The gateway answers at once, as the real services do; the pipeline's fan-out
/// worker then resolves the recipients and delivers to each, in bounded batches, off the event
/// loops (`PushGateway.fanOut`).
///
/// Everything a job holds is its own (the payload and headers copied out of the request), so it
/// outlives the request; `recipients` and `delivery` run on the worker's thread.
public struct FanOutJob: Sendable {
    public var provider: PushProvider
    /// The notification id of the push; each recipient's id is derived from it.
    public var notificationID: UUIDValue
    /// The topic, condition or channel recorded with each delivery.
    public var topic: [UInt8]?
    /// The request's headers (the notification log keeps them with each delivery).
    public var headers: HTTPFields
    public var warnings: [String]
    public var payloadIsJSON: Bool
    /// Calls its argument with each recipient's token (false stops), resolved on the worker
    /// (reading the registries there, not on a loop) and streamed: a fleet's ten million
    /// subscribers are never a list.
    public var recipients: @Sendable (_ each: (String) -> Bool) -> Void
    /// The delivery for the recipient `token`, the `index`-th of the job.
    public var delivery: @Sendable (_ token: String, _ index: Int) -> Delivery
    /// The APNs team whose credentials sent it (a broadcast's), kept with each delivery so that a
    /// `team:` scope sees them; nil for FCM.
    public var team: TeamID?

    public init(
        provider: PushProvider, notificationID: UUIDValue, topic: [UInt8]?, headers: HTTPFields, warnings: [String],
        payloadIsJSON: Bool, recipients: @escaping @Sendable (_ each: (String) -> Bool) -> Void,
        delivery: @escaping @Sendable (_ token: String, _ index: Int) -> Delivery, team: TeamID? = nil
    ) {
        self.team = team
        self.provider = provider
        self.notificationID = notificationID
        self.topic = topic
        self.headers = headers
        self.warnings = warnings
        self.payloadIsJSON = payloadIsJSON
        self.recipients = recipients
        self.delivery = delivery
    }

    /// The `index`-th recipient's notification id: the push's, offset (one id per device).
    @inlinable
    public static func recipientID(_ id: UUIDValue, _ index: Int) -> UUIDValue {
        UUIDValue(high: id.high, low: id.low &+ UInt64(truncatingIfNeeded: index))
    }
}
