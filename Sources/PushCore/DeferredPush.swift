import Transport

/// An accepted push that its gateway finishes off the event loop, after the answer: a Web Push
/// message, which the browser decrypts before it can show anything (ECDH, about 46 µs, too slow
/// for a loop that answers in a few). The pipeline answers, then its deferred-delivery worker
/// calls `resolve` on a lane chosen by `lane` (one token's pushes keep their order) and
/// delivers, logs and journals what it returns, as a loop does for an ordinary push.
///
/// Everything it holds is its own (the body copied out of the request), so it outlives the
/// request; `resolve` runs on the worker's thread.
public struct DeferredPush: Sendable {
    /// Chooses the lane (a hash of the token): pushes to one device are resolved in order.
    public var lane: UInt64
    /// What the device receives and how the push is recorded, worked out on the worker.
    public var resolve: @Sendable () -> ResolvedPush

    public init(lane: UInt64, resolve: @escaping @Sendable () -> ResolvedPush) {
        self.lane = lane
        self.resolve = resolve
    }
}

/// What a deferred push came to: the delivery (as `forEachAcceptedPush` gives one), and the
/// outcome the journal records for the request.
public struct ResolvedPush {
    public var delivery: Delivery
    public var topic: [UInt8]?
    public var warnings: [String]
    public var flags: AcceptedPushFlags
    public var outcome: PushOutcome
    /// The device loses its subscription after this push (Safari revokes one whose pushes show
    /// nothing): the pipeline uninstalls it through the device lifecycle, as a fault's uninstall.
    public var revokesSubscription = false

    public init(delivery: Delivery, topic: [UInt8]?, warnings: [String], flags: AcceptedPushFlags, outcome: PushOutcome) {
        self.delivery = delivery
        self.topic = topic
        self.warnings = warnings
        self.flags = flags
        self.outcome = outcome
    }
}
