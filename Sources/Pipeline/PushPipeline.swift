import Faults
import Fleet
import Journal
import Observation
import PushCore
import Runtime
import Transport

/// The one request path every push gateway runs through. A gateway (`PushGateway`: APNs, FCM,
/// or a test's toy) decides; the pipeline does the rest, in this order, once per request, on the
/// event loop that owns the request's connection:
///
/// ```
///  1. decide          G.decide(request, on: exchange, state, now, into: &decision)       the provider's rules
///  2. fault verdict   faults.fire(context)                                   override header, then rules
///       a rule that answers:  G.injectedAnswer -> journal commit -> shaping -> metrics   (stop)
///  3. rate limit      tokenRate.allow(token) or G.rateLimited(&decision)     (--apns-token-rate)
///  4. accepted only:  for each G.forEachAcceptedPush:
///       Fleet delivery (display and SDK lint decided; tracking runs on its lanes, never awaited)
///       ->  notification log (append, with the device's outcome)
///     a many-device push (G.fansOut): room reserved on the fan-out worker (else G.rateLimited),
///       then G.fanOut's job is queued there: resolved and delivered after the answer, off the loop
///     a deferred push (G.defersDelivery: Web Push, which the browser decrypts): room reserved on
///       the deferred-delivery worker (else G.rateLimited); answered at once (or once its record
///       is committed, strict), then G.deferredPush resolved, delivered, logged and journaled there
///  5. device effects  a fault's uninstall / rotate through Fleet's DeviceLifecycle
///  6. response        G.response(decision), G.outcome(decision)
///     (while the event stream has subscribers: the answer's `accepted`/`rejected` and `fault` events)
///  7. journal commit  on disk the answer waits for its record: written ahead at the loop's flush barrier
///                     (--durability strict) or its fsynced commit (sync); else it goes at once
///  8. shaping         faults.send: latency profile, delay, stall, RST_STREAM, close, GOAWAY
///  9. metrics         status, reason and time per provider (the loop's own shard)
/// 10. connection      G.perform(connectionActions) once the answer is out
/// ```
///
/// Data flows one way: request, decision, faults, delivery, tracking, record, response. The
/// pipeline is generic over its gateway, so each gateway's path is specialised (no existential
/// dispatch per request); an answer that waits for its commit is parked as a value on its loop.
public struct PushPipeline<Gateway: PushGateway>: Sendable {
    public let gateway: Gateway
    let services: PipelineServices
    /// The per-token push limit (`--apns-token-rate`), when this gateway has one.
    let tokenRate: TokenRateLimiter?
    /// Each event loop's answers waiting for their strict commit (empty when answers never wait).
    let parked: [ParkedAnswers]
    /// Each event loop's memory of the last payload its devices' SDK read and linted (one per
    /// notification-log shard: the loops', and the fan-out worker's, which passes none).
    let lintMemos: [SDKLintMemo]

    public init(gateway: Gateway, services: PipelineServices, tokenRate: TokenRateLimiter? = nil) {
        precondition(PushProvider.capacity <= ConnectionContext.slotCount, "one connection slot per provider")
        self.gateway = gateway
        self.services = services
        self.tokenRate = tokenRate
        if let journal = services.journal, journal.answersWait {
            parked = (0..<journal.loopShards).map { _ in
                ParkedAnswers(services: services, provider: gateway.provider, goAwayDebugData: { Gateway.goAwayDebugData(reason: $0) })
            }
        } else {
            parked = []
        }
        lintMemos = (0..<services.log.shardCount).map { _ in SDKLintMemo() }
    }

    var provider: PushProvider { gateway.provider }

    /// The connection's state for this gateway, made on its first push.
    @inline(__always)
    func connectionState(_ connection: ConnectionContext) -> Gateway.ConnectionState {
        let slot = gateway.provider.index
        if let state = connection[slot: slot] { return unsafeDowncast(state, to: Gateway.ConnectionState.self) }
        let state = gateway.makeConnectionState()
        connection[slot: slot] = state
        return state
    }

    /// One push request, through every stage (see the type's comment).
    public func handle(_ exchange: Exchange, route: RouteKind = .send) {
        let started = Clock.monotonicNanoseconds()
        let state = connectionState(exchange.connection)
        let nowMs = exchange.eventLoop.nowMs
        let request = exchange.request
        let services = self.services
        let faults = services.faults

        // 1. decide
        var deciding = Gateway.Decision()
        gateway.decide(request, on: exchange, state: state, nowMs: nowMs, into: &deciding)
        let subject = gateway.subject(of: deciding, request: request)

        // 2. fault verdict: a rule may replace the provider's answer.
        let fired = faults.fire(
            FaultContext(
                provider: provider, token: subject.token, topic: subject.topic,
                project: subject.scope, path: request.path, route: route, headers: request.headers,
                device: { services.lifecycle.faultView($0) }, team: subject.team),
            headers: request.headers, loop: exchange.eventLoop.index, nowMs: nowMs)
        if let fired, fired.effect.answers {
            answerInjected(fired, exchange, request, deciding, subject, nowMs: nowMs, started: started)
            return
        }

        // 3. rate limit
        if deciding.accepted, let limiter = tokenRate, !subject.token.isEmpty, !limiter.allow(subject.token, nowMs: nowMs) {
            gateway.rateLimited(&deciding)
        }
        // A many-device push needs room on the fan-out worker, else it is too many requests (which
        // makes it not accepted: an accepted one that fans out holds a reservation).
        if deciding.accepted && gateway.fansOut(deciding) && !services.fanOut.reserve() { gateway.rateLimited(&deciding) }
        // So does a push delivered after the answer, on the deferred-delivery worker.
        let defers = deciding.accepted && gateway.defersDelivery(deciding)
        if defers && !services.deferred.reserve() { gateway.rateLimited(&deciding) }
        // From here the decision only is read (moved, not copied).
        let decision = consume deciding

        // 4. notification log and delivery; 5. device effects
        var acceptedID: UUIDValue?
        var deviceOutcome: DeviceOutcome?
        var deferred: DeferredPush?
        if decision.accepted && defers {
            let id = gateway.notificationID(for: decision, request: request, state: state)
            acceptedID = id
            deferred = gateway.deferredPush(decision, request: request, id: id, nowMs: nowMs)
            if deferred == nil { services.deferred.release() }
        } else if decision.accepted {
            let id = gateway.notificationID(for: decision, request: request, state: state)
            acceptedID = id
            let shard = exchange.eventLoop.index
            let lintMemo = shard < lintMemos.count - 1 ? lintMemos[shard] : nil
            gateway.forEachAcceptedPush(decision, request: request, id: id, state: state, nowMs: nowMs) {
                delivery, topic, warnings, parsedPayload, flags in
                let outcome = services.devices.deliver(delivery, parsedPayload: parsedPayload, lintMemo: lintMemo)
                services.log.append(
                    shard: shard, id: delivery.notificationID, provider: delivery.provider, receivedAtMs: delivery.receivedAtMs,
                    environment: delivery.environment ?? "", token: delivery.tokenBytes, topic: topic, headers: request.headers,
                    payload: delivery.payload, payloadIsJSON: flags.payloadIsJSON, warnings: warnings, outcome: outcome,
                    team: subject.team)
                if flags.appliesDeviceEffects { deviceOutcome = outcome }
                if flags.appliesDeviceEffects, let effect = fired?.effect, effect.changesDevice {
                    services.lifecycle.apply(rotate: effect.rotate, to: delivery.tokenBytes, nowMs: Clock.nowMs())
                }
            }
            if gateway.fansOut(decision) {
                if let job = gateway.fanOut(decision, request: request, id: id, nowMs: nowMs) {
                    services.fanOut.submit(job)
                } else {
                    services.fanOut.release()
                }
            }
        }

        // 6. response
        let response = gateway.response(
            for: decision, request: request, id: acceptedID ?? UUIDValue(high: 0, low: 0),
            state: state, nowMs: nowMs)
        var outcome = gateway.outcome(of: decision, request: request)
        if let deferred {
            finishDeferred(
                deferred, exchange, request, subject, outcome, response: response, fired: fired,
                actions: gateway.connectionActions(after: decision), timing: Timing(nowMs: nowMs, started: started), id: acceptedID!)
            return
        }
        // The body's tokens, for the journal's campaign id (read in `finish`, before the
        // connection's next request parses into them).
        outcome.parsedBody = gateway.parsedBody(of: decision, state: state)
        // 7. journal commit, then 8. shaping, 9. metrics, 10. connection actions.
        finish(
            exchange, request, subject, outcome, response: response, fired: fired,
            actions: gateway.connectionActions(after: decision), timing: Timing(nowMs: nowMs, started: started), id: acceptedID,
            device: deviceOutcome)
    }

    /// Stage 2's other branch: a fault rule answers in the gateway's format; the answer is
    /// journaled, shaped and counted like any other.
    func answerInjected(
        _ fired: FiredFault, _ exchange: Exchange, _ request: Request, _ decision: Gateway.Decision,
        _ subject: PushSubject, nowMs: Int64, started: UInt64
    ) {
        let (response, reason) = gateway.injectedAnswer(fired.effect.injectedAnswer, request: request)
        var outcome = gateway.outcome(of: decision, request: request)
        outcome.status = response.status
        outcome.reason = reason
        finish(
            exchange, request, subject, outcome, response: response, fired: fired,
            actions: gateway.connectionActionsAfterInjectedAnswer(), timing: Timing(nowMs: nowMs, started: started), id: nil)
    }

    /// When a request arrived: the loop's clock (ms) and the monotonic start (ns) its latency counts from.
    struct Timing {
        let nowMs: Int64
        let started: UInt64
    }

    /// How one answer leaves the pipeline: the one choice `finish` makes, each case handled in
    /// one place below it.
    enum Departure {
        /// Nothing waits for its record (no journal, `.relaxed`, or in memory): it goes now, its
        /// latency ending at `decidedNs`, and the connection's actions run at once.
        case now(decidedNs: UInt64)
        /// It waits for its record on its own loop, in that loop's `ParkedAnswers` (no closure).
        case parked(ParkedAnswers)
        /// It waits for its record as a closure, run on the loop the journal's shard answers on
        /// (a loop beyond the journal's shards).
        case handedOver
    }

    /// Which way an answer on `loop` leaves.
    @inline(__always)
    func departure(on loop: EventLoop) -> Departure {
        guard let journal = services.journal, journal.answersWait else {
            return .now(decidedNs: Clock.monotonicNanoseconds())
        }
        return journal.parksOwnAnswers(loop) ? .parked(parked[loop.index]) : .handedOver
    }

    /// Stages 7 to 10 for one answer: the journal commit (`departure` says whether the answer
    /// waits for its record, and where), then shaping and metrics (`PendingAnswer.give`) and the
    /// connection's actions.
    @inline(__always)
    func finish(
        _ exchange: Exchange, _ request: Request, _ subject: PushSubject, _ outcome: PushOutcome, response: consuming Response,
        fired: FiredFault?, actions: Gateway.ConnectionActions, timing: Timing, id: UUIDValue?, device: DeviceOutcome? = nil
    ) {
        if services.events.wants(PushProvider.accepts(outcome.status) ? .accepted : .rejected)
            || (fired != nil && services.events.wants(.fault))
        {
            publishAnswer(subject, outcome, fired: fired, id: id, device: device, nowMs: timing.nowMs)
        }
        switch departure(on: exchange.eventLoop) {
        case .now(let decidedNs):
            // Its record's latency and its metrics' end at one clock reading.
            if let journal = services.journal {
                commit(journal, exchange, request, subject, outcome, timing, decidedNs: decidedNs, id: id, device: device, .none)
            }
            PendingAnswer(
                exchange: exchange, response: response, fired: fired, status: outcome.status, reason: outcome.reason,
                started: timing.started, after: nil
            ).give(stored: true, services, provider: provider, goAwayDebugData: Gateway.goAwayDebugData(reason:), decidedNs: decidedNs)
            Gateway.perform(actions, on: exchange.connection)
        case .parked(let waiter):
            waiter.park(pending(exchange, response, fired, outcome, timing, actions))
            commit(
                services.journal!, exchange, request, subject, outcome, timing, decidedNs: Clock.monotonicNanoseconds(), id: id,
                device: device, .parked(waiter))
        case .handedOver:
            let answer = pending(exchange, response, fired, outcome, timing, actions)
            let services = self.services
            let provider = self.provider
            commit(
                services.journal!, exchange, request, subject, outcome, timing, decidedNs: Clock.monotonicNanoseconds(), id: id,
                device: device,
                .handedOver { answer.complete(stored: $0, services, provider: provider, goAwayDebugData: Gateway.goAwayDebugData(reason:)) }
            )
        }
    }

    /// Appends the request's record to the journal (stage 7), the record's fields passed as they
    /// lie (see `Journal.appendRequest`); `notice` says how a waiting answer hears it is stored.
    @inline(__always)
    func commit(
        _ journal: Journal, _ exchange: Exchange, _ request: Request, _ subject: PushSubject, _ outcome: PushOutcome,
        _ timing: Timing, decidedNs: UInt64, id: UUIDValue?, device: DeviceOutcome?, _ notice: StoredNotice
    ) {
        journal.appendRequest(
            atMs: timing.nowMs, provider: provider, connection: exchange.connection.id, environment: subject.scope,
            token: subject.token, topic: subject.topic, status: outcome.status, reason: outcome.reason,
            latencyUs: Int64(truncatingIfNeeded: (decidedNs &- timing.started) / 1000), headers: request.headers,
            payload: outcome.payload, payloadTokens: outcome.parsedBody,
            warnings: outcome.warnings, device: device, team: subject.team, notificationID: id, loop: exchange.eventLoop,
            notify: notice)
    }

    /// An answer that waits for its record, with the gateway's connection actions (when they do
    /// anything) for after it.
    @inline(__always)
    func pending(
        _ exchange: Exchange, _ response: consuming Response, _ fired: FiredFault?, _ outcome: PushOutcome, _ timing: Timing,
        _ actions: Gateway.ConnectionActions
    ) -> PendingAnswer {
        var after: (@Sendable (ConnectionContext) -> Void)?
        if Gateway.acts(actions) { after = { Gateway.perform(actions, on: $0) } }
        return PendingAnswer(
            exchange: exchange, response: response, fired: fired, status: outcome.status, reason: outcome.reason,
            started: timing.started, after: after)
    }
}

/// What every pipeline shares: the notification log, the device layer, the fault engine, the
/// journal (nil when off) and the metrics. Built once by the composition root.
public final class PipelineServices: Sendable {
    public let log: NotificationLog
    public let devices: DeviceStore
    public let lifecycle: DeviceLifecycle
    public let faults: FaultEngine
    public let journal: Journal?
    public let metrics: Metrics
    /// Topic, condition and broadcast deliveries, off the event loops.
    public let fanOut: FanOutWorker
    /// Pushes delivered after their answer (Web Push: the browser decrypts), off the event loops.
    public let deferred: DeferredDeliveryWorker
    /// The event stream's subscribers (the device layer's bus).
    public let events: EventBus

    /// `fanOut`: the worker for many-device pushes (by default one that appends to the log's
    /// last shard and runs each job on the caller until it is started).
    public init(
        log: NotificationLog, lifecycle: DeviceLifecycle, faults: FaultEngine, journal: Journal?, metrics: Metrics,
        fanOut: FanOutWorker? = nil, deferred: DeferredDeliveryWorker? = nil
    ) {
        self.events = lifecycle.store.events
        self.log = log
        self.devices = lifecycle.store
        self.lifecycle = lifecycle
        self.faults = faults
        self.journal = journal
        self.metrics = metrics
        self.fanOut = fanOut ?? FanOutWorker(log: log, devices: lifecycle.store, logShard: log.shardCount - 1)
        self.deferred = deferred ?? DeferredDeliveryWorker(lanes: 1)
    }
}
