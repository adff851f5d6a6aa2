import APNs
import FCM
import Faults
import Fleet
import PushCore
import Transport

/// Applies fault rules and traffic shaping to provider answers: replaces the answer, delays or
/// stalls it (on the loop's timers, never blocking), resets the stream, closes the connection,
/// sends GOAWAY, or changes the device's state. Providers decide first; faults come after
/// (request -> provider -> faults -> devices -> response).
struct FaultHandling: Sendable {
    let engine: FaultEngine
    let store: DeviceStore
    /// Uninstall (false) or rotate (true) a device's token.
    let stateChange: @Sendable (String, Bool) -> Void
    /// The device's fleet and labels, for rules that match on them (one closure, made once).
    let lookup: @Sendable (ArraySlice<UInt8>) -> (fleet: String?, labels: [String])

    init(engine: FaultEngine, store: DeviceStore, stateChange: @escaping @Sendable (String, Bool) -> Void) {
        self.engine = engine
        self.store = store
        self.stateChange = stateChange
        lookup = { token in
            guard let d = store.device(token: String(decoding: token, as: UTF8.self)) else { return (nil, []) }
            return (store.fleetID(d), d.labels)
        }
    }

    /// The effect for this request: the override header first, then the first rule that fires.
    func effect(_ c: @autoclosure () -> FaultContext, headers: HTTPFields, loop: Int, nowMs: Int64) -> FiredFault? {
        if engine.allowOverrideHeader, let e = engine.override(headers) { return FiredFault(e) }
        // No rules in force: nothing is built (one atomic load per request).
        guard engine.active(loop: loop), let r = engine.evaluate(c(), loop: loop, nowMs: nowMs) else { return nil }
        return r.firedEffect
    }


    /// Sends `response` the way `effect` and the provider's latency profile say; returns the
    /// delay added, in seconds.
    @discardableResult
    func send(_ response: Response, _ ex: Exchange, effect fired: FiredFault?, provider: PushProvider, goAwayJSON: Bool) -> Double {
        FaultHandling.send(response, ex, effect: fired, provider: provider, goAwayJSON: goAwayJSON, engine: engine)
    }

    /// `send` for a deferred answer, which keeps only the engine (not the whole `FaultHandling`).
    static func send(_ response: Response, _ ex: Exchange, effect fired: FiredFault?, provider: PushProvider, goAwayJSON: Bool,
                     engine: FaultEngine) -> Double {
        if fired == nil && engine.shaping.latency.isEmpty { ex.respond(response); return 0 }   // the common case
        let effect = fired?.effect
        var delayMs = 0.0
        var rng = FastRandom(seed: UInt64(bitPattern: Clock.nowMs()) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(ex.eventLoop.index))
        if let d = engine.shaping.latency[provider] { delayMs += d.draw(&rng) }
        if let d = effect?.delay { delayMs += d.draw(&rng) }
        if let s = effect?.stallMs { delayMs += Double(s) }
        let act: @Sendable () -> Void = {
            guard let e = effect else { return ex.respond(response) }
            if e.rst { return ex.reset() }
            if e.close { return ex.connection.close() }
            ex.respond(response)
            if let reason = e.goaway {
                let debug = reason.isEmpty || !goAwayJSON ? Array(reason.utf8) : Array("{\"reason\":\"\(reason)\"}".utf8)
                ex.connection.goAway(lastStreamID: nil, errorCode: 0, debugData: debug)
            }
        }
        if delayMs >= 0.5 {
            ex.eventLoop.schedule(afterNanoseconds: UInt64(delayMs * 1_000_000)) { act() }
        } else {
            act()
        }
        return delayMs / 1000
    }

    /// Device state changes a rule asked for (after the push was accepted).
    func applyState(_ fired: FiredFault?, token: ArraySlice<UInt8>) {
        guard let e = fired?.effect, e.uninstall || e.rotate else { return }
        stateChange(String(decoding: token, as: UTF8.self), e.rotate)
    }

    // MARK: answers in each provider's format

    static func apnsResponse(_ e: FaultEffect, request: Request, configuration: APNsConfiguration) -> Response {
        let reason = e.reason.flatMap(APNsReason.init(rawValue:)) ?? e.status.map(defaultAPNsReason) ?? .internalServerError
        var r = APNsProvider.errorResponse(reason, request: request, configuration: configuration)
        if let s = e.status { r.status = s }
        if let custom = e.reason, APNsReason(rawValue: custom) == nil {
            r.body = Array("{\"reason\":\(JSONWriter.quote(custom))}".utf8)
        }
        if r.status == 410 {
            r.body = Array("{\"reason\":\"\(e.reason ?? "Unregistered")\",\"timestamp\":\(Clock.nowMs())}".utf8)
        }
        if let ra = e.retryAfter { r.headers.add(name: "retry-after", value: String(ra)) }
        return r
    }

    static func defaultAPNsReason(_ status: Int) -> APNsReason {
        switch status {
        case 400: .badDeviceToken
        case 403: .forbidden
        case 404: .badPath
        case 405: .methodNotAllowed
        case 410: .unregistered
        case 413: .payloadTooLarge
        case 429: .tooManyRequests
        case 503: .serviceUnavailable
        default: .internalServerError
        }
    }

    static func fcmResponse(_ e: FaultEffect) -> Response {
        if e.status == 502 && e.errorCode == nil {
            // Google's front end fails with an HTML page, not JSON.
            var h = HTTPFields()
            h.add(name: "content-type", value: "text/html; charset=UTF-8")
            let html = "<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  <title>Error 502 (Server Error)!!1</title>\n  <p><b>502.</b> <ins>That’s an error.</ins>\n  <p>The server encountered a temporary error and could not complete your request.<p>Please try again in 30 seconds.  <ins>That’s all we know.</ins>\n"
            return Response(status: 502, headers: h, body: Array(html.utf8))
        }
        var err: FCMError
        if let code = e.errorCode.flatMap(FCMErrorCode.init(rawValue:)) {
            err = .fcm(code)
        } else {
            let s = e.status ?? 500
            let code: FCMErrorCode = switch s {
            case 400: .invalidArgument
            case 401: .thirdPartyAuthError
            case 403: .senderIDMismatch
            case 404: .unregistered
            case 429: .quotaExceeded
            case 503: .unavailable
            default: .internalError
            }
            err = .fcm(code)
            err.httpStatus = s
        }
        if let s = e.status { err.httpStatus = s }
        var r = err.response
        if let ra = e.retryAfter { r.headers.add(name: "retry-after", value: String(ra)) }
        return r
    }
}
