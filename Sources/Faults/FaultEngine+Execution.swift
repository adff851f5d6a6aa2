import PushCore
import Runtime
import Transport

/// Carrying out what a rule decided, next to the rules themselves: which effect fires for a
/// request, and sending an answer the way the effect and the latency profile say (delayed or
/// stalled on the loop's timers, never blocking; RST_STREAM; closing the connection; GOAWAY
/// after the answer). The pipeline calls these on the request's event loop.
extension FaultEngine {
    /// The longest delay or stall carried out, in milliseconds (one hour): a larger draw, or a
    /// distribution that overflows, is held to it instead of trapping in the conversion.
    static let maxDelayMs = 3_600_000.0

    /// The effect for this request: the override header first (`--allow-override-header`),
    /// then the first rule that fires. `context` is built only when rules are in force.
    @inline(__always)
    public func fire(_ context: @autoclosure () -> FaultContext, headers: HTTPFields, loop: Int, nowMs: Int64) -> FiredFault? {
        if allowOverrideHeader, let effect = override(headers) { return FiredFault(effect) }
        // No rules in force: nothing is built (one atomic load per request).
        guard active(loop: loop, nowMs: nowMs), let rule = evaluate(context(), loop: loop, nowMs: nowMs) else { return nil }
        return rule.firedEffect
    }

    /// Sends `response` on `exchange` as `fired` and the provider's latency profile say;
    /// returns the delay added, in seconds. `goAwayDebugData` formats a `goaway` reason in the
    /// gateway's style.
    @discardableResult
    public func send(
        _ response: Response, on exchange: Exchange, fired: FiredFault?, provider: PushProvider,
        goAwayDebugData: (String) -> [UInt8]
    ) -> Double {
        let latency = shaping.latency[provider.index]
        if fired == nil && latency == nil { // the common case
            exchange.respond(response)
            return 0
        }
        let effect = fired?.effect
        var delayMs = 0.0
        var random = FastRandom(seed: UInt64(bitPattern: Clock.nowMs()) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(exchange.eventLoop.index))
        if let distribution = latency { delayMs += distribution.draw(&random) }
        if let distribution = effect?.delay { delayMs += distribution.draw(&random) }
        if let stall = effect?.stallMs { delayMs += Double(stall) }
        // Held to an hour, infinity included; a NaN (no parsed rule makes one) is no delay.
        if delayMs.isNaN || delayMs < 0 { delayMs = 0 } else if delayMs > FaultEngine.maxDelayMs { delayMs = FaultEngine.maxDelayMs }
        let goAway = effect?.goaway.map(goAwayDebugData)
        let act: @Sendable () -> Void = {
            guard let effect else { return exchange.respond(response) }
            if effect.rst { return exchange.reset() }
            if effect.close { return exchange.connection.close() }
            exchange.respond(response)
            if let debugData = goAway {
                exchange.connection.goAway(lastStreamID: nil, errorCode: 0, debugData: debugData)
            }
        }
        if delayMs >= 0.5 {
            exchange.eventLoop.schedule(afterNanoseconds: UInt64(delayMs * 1_000_000)) { act() }
        } else {
            act()
        }
        return delayMs / 1000
    }
}

extension FaultEffect {
    /// The answer this effect injects, for the gateway to format.
    public var injectedAnswer: InjectedAnswer {
        InjectedAnswer(status: status, reason: reason, errorCode: errorCode, retryAfter: retryAfter)
    }

    /// Whether the effect changes the device (uninstalls its app or rotates its token).
    public var changesDevice: Bool { uninstall || rotate }
}
