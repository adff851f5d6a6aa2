import Faults
import Fleet
import Journal
import PushCore
import Runtime
import Transport

extension PushPipeline {
    /// Stages 6 to 10 for a push delivered after its answer (`PushGateway.deferredPush`). Without
    /// answers that wait for their records, the answer goes at once and the worker then resolves,
    /// delivers, logs and journals the push. Under `strict` or `sync` the answer waits, as every
    /// answer does, for the record, which the worker writes once it has resolved the push (the
    /// journal keeps what the device read, the browser's plaintext).
    func finishDeferred(
        _ push: DeferredPush, _ exchange: Exchange, _ request: Request, _ subject: PushSubject, _ outcome: PushOutcome,
        response: consuming Response, fired: FiredFault?, actions: Gateway.ConnectionActions, timing: Timing, id: UUIDValue
    ) {
        if services.events.wants(.accepted) || (fired != nil && services.events.wants(.fault)) {
            publishAnswer(subject, outcome, fired: fired, id: id, device: nil, nowMs: timing.nowMs)
        }
        let record = DeferredRecord(
            connection: exchange.connection.id, environment: subject.scope, token: Array(subject.token),
            topic: subject.topic.map(Array.init), headers: request.headers, atMs: timing.nowMs, started: timing.started, id: id)
        let effect = fired?.effect
        let pipeline = self
        guard let journal = services.journal, journal.answersWait else {
            let decidedNs = Clock.monotonicNanoseconds()
            PendingAnswer(
                exchange: exchange, response: response, fired: fired, status: outcome.status, reason: outcome.reason,
                started: timing.started, after: nil
            ).give(stored: true, services, provider: provider, goAwayDebugData: Gateway.goAwayDebugData(reason:), decidedNs: decidedNs)
            Gateway.perform(actions, on: exchange.connection)
            services.deferred.submit(lane: push.lane) {
                let (resolved, device) = pipeline.deliver(push, record, effect)
                pipeline.services.journal?.appendRequest(
                    atMs: record.atMs, provider: pipeline.provider, connection: record.connection,
                    environment: record.environment, token: record.token[...], topic: record.topic?[...],
                    status: resolved.outcome.status, reason: resolved.outcome.reason,
                    latencyUs: Int64(truncatingIfNeeded: (decidedNs &- record.started) / 1000), headers: record.headers,
                    payload: resolved.outcome.payload, warnings: resolved.outcome.warnings, device: device,
                    notificationID: record.id, loop: nil, notify: .none)
            }
            return
        }
        let answer = pending(exchange, response, fired, outcome, timing, actions)
        let loop = exchange.eventLoop
        services.deferred.submit(lane: push.lane) {
            let (resolved, device) = pipeline.deliver(push, record, effect)
            let services = pipeline.services
            let provider = pipeline.provider
            journal.appendRequest(
                atMs: record.atMs, provider: provider, connection: record.connection, environment: record.environment,
                token: record.token[...], topic: record.topic?[...], status: resolved.outcome.status,
                reason: resolved.outcome.reason,
                latencyUs: Int64(truncatingIfNeeded: (Clock.monotonicNanoseconds() &- record.started) / 1000),
                headers: record.headers, payload: resolved.outcome.payload, warnings: resolved.outcome.warnings, device: device,
                notificationID: record.id, loop: nil,
                notify: .handedOver { stored in
                    loop.execute {
                        answer.complete(stored: stored, services, provider: provider, goAwayDebugData: Gateway.goAwayDebugData(reason:))
                    }
                })
        }
    }

    /// On the deferred-delivery worker: resolves the push, then delivers and logs it as a loop
    /// does (stage 4) and applies a fault's device effects (stage 5).
    func deliver(_ push: DeferredPush, _ record: DeferredRecord, _ effect: FaultEffect?) -> (ResolvedPush, DeviceOutcome) {
        let resolved = push.resolve()
        let delivery = resolved.delivery
        let devices = services.devices
        let outcome = devices.deliver(delivery, parsedPayload: nil, lintMemo: nil)
        services.log.append(
            shard: services.log.shardCount - 1, id: delivery.notificationID, provider: delivery.provider,
            receivedAtMs: delivery.receivedAtMs, environment: delivery.environment ?? "", token: delivery.tokenBytes,
            topic: resolved.topic?[...], headers: record.headers, payload: delivery.payload,
            payloadIsJSON: resolved.flags.payloadIsJSON, warnings: resolved.warnings, outcome: outcome)
        if devices.events.wants(.delivered) { devices.publishDelivered(delivery, outcome, atMs: Clock.nowMs()) }
        if resolved.flags.appliesDeviceEffects, let effect, effect.changesDevice {
            services.lifecycle.apply(rotate: effect.rotate, to: delivery.tokenBytes, nowMs: Clock.nowMs())
        }
        if resolved.revokesSubscription {
            services.lifecycle.uninstall(String(decoding: delivery.tokenBytes, as: UTF8.self), nowMs: Clock.nowMs())
        }
        return (resolved, outcome)
    }
}

/// What a deferred push's journal record needs from its request, copied out of it (the worker
/// writes the record after the request is gone).
struct DeferredRecord: Sendable {
    let connection: UInt64
    let environment: String
    let token: [UInt8]
    let topic: [UInt8]?
    let headers: HTTPFields
    /// When the request arrived (the loop's ms clock) and the monotonic start its latency counts from.
    let atMs: Int64
    let started: UInt64
    let id: UUIDValue
}
