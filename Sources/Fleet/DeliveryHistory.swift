import PushCore

/// A notification a token was delivered, as the journal keeps it.
public struct DeliveredNotification: Sendable {
    /// The notification's id (the `apns-id`, or the FCM message's).
    public var notificationID: UUIDValue
    /// When it was received (ms since the epoch).
    public var receivedAtMs: Int64
    /// Its collapse id (`apns-collapse-id`, FCM `collapse_key`).
    public var collapseID: String?

    /// A delivered notification.
    public init(notificationID: UUIDValue, receivedAtMs: Int64, collapseID: String?) {
        self.notificationID = notificationID
        self.receivedAtMs = receivedAtMs
        self.collapseID = collapseID
    }
}

/// Where a fleet member without a record finds its inbox: the notifications accepted for its
/// token, as the journal holds them (the composition root gives the device layer one). Its
/// counts are the device layer's (`FleetMemberCounts`); the entries are the journal's.
public protocol DeliveryHistory: AnyObject, Sendable {
    /// The newest `limit` notifications accepted for `token` (and so delivered to it), oldest first.
    func delivered(token: String, limit: Int) -> [DeliveredNotification]
}
