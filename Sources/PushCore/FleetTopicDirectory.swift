/// Fleet members' FCM topic subscriptions, which the device layer keeps without a record per
/// member (a fleet's shares drawn from its seed, the Instance ID API's changes as member sets).
/// The FCM registry keeps every other token's; it asks here first for a token it has no record of.
public protocol FleetTopicDirectory: AnyObject, Sendable {
    /// Subscribes (or unsubscribes) the fleet members among `tokens` to `topic`: one result per
    /// token, nil where the token is no fleet member. One state-log record per fleet touched.
    func setMemberTopic(_ tokens: [String], topic: String, project: String?, subscribed: Bool, nowMs: Int64) -> [MemberTopicChange?]
    /// A fleet member's project and topics, sorted (nil: not a fleet member).
    func memberTopics(token: String) -> (project: String?, topics: [String], uninstalled: Bool)?
    /// Calls `body` with the token of each installed fleet member in `project` (or in no
    /// project) subscribed to any of `topics` for which `matches` (given a topic, whether the
    /// member is subscribed to it) holds, fleet by fleet in index order; `body` false stops.
    func forEachSubscriber(topics: Set<String>, project: String, matches: ((String) -> Bool) -> Bool, _ body: (String) -> Bool)
}

/// What a subscription change did to a fleet member.
public enum MemberTopicChange: Sendable, Equatable {
    case ok
    /// The member's app is uninstalled.
    case notFound
    /// The member's fleet belongs to another project.
    case senderMismatch
}
