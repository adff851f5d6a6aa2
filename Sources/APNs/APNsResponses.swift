import PushCore
import Transport

/// APNs wire format (RESP): success is `:status 200` + `apns-id` and no body (one HEADERS frame
/// with END_STREAM); errors add `content-type: application/json` and `{"reason":"..."}`, with
/// `timestamp` (ms) on 410. Sandbox responses carry `apns-unique-id`.
extension APNsProvider {
    public func response(_ d: APNsDecision, request: Request, state: APNsConnectionState, nowMs: Int64 = 0) -> Response {
        // The commonest answer (sandbox success with a generated id) reuses one of the
        // connection's header blocks and writes the two ids into it in place.
        if d.reason == nil, let id = d.generatedID, d.environment == .sandbox {
            let slot = state.sandboxSlot(nowMs: nowMs)
            var h = state.sandboxSuccessHeaders[slot]
            state.sandboxSuccessHeaders[slot] = HTTPFields()
            if h.count != 2 {
                h = HTTPFields()
                id.withBytes { h.add(name: "apns-id", value: $0) }
                id.withBytes { h.add(name: "apns-unique-id", value: $0) }
            }
            h.withMutableValue(at: 0) { id.write(into: $0) }
            let unique = UUIDValue.random(&state.rng)
            h.withMutableValue(at: 1) { unique.write(into: $0) }
            state.sandboxSuccessHeaders[slot] = h
            return Response(status: 200, headers: h)
        }
        // Otherwise the connection's general header buffer is reused: once the transport has sent
        // a response it holds the only reference again, so clearing keeps its capacity.
        var h = state.responseHeaders
        state.responseHeaders = HTTPFields()
        h.removeAll()
        defer { state.responseHeaders = h }
        if let id = d.generatedID {
            id.withBytes { h.add(name: "apns-id", value: $0) }
        } else if let id = request.headers.first("apns-id") {
            id.withUnsafeBytes { h.add(name: "apns-id", value: $0) }
        }
        if d.environment == .sandbox {
            UUIDValue.random(&state.rng).withBytes { h.add(name: "apns-unique-id", value: $0) }
        }
        guard let reason = d.reason else { return Response(status: 200, headers: h) }
        h.add(name: "content-type", value: "application/json")
        var body = "{\"reason\":\"" + configuration.reasonString(reason) + "\""
        if let ts = d.timestampMs { body += ",\"timestamp\":\(ts)" }
        body += "}"
        return Response(status: reason.status, headers: h, body: Array(body.utf8))
    }

    /// An error response built from the request alone (for answers given before the provider
    /// runs: an oversized body, a path outside `/3/device`).
    static func errorResponse(_ reason: APNsReason, request: Request, configuration: APNsConfiguration) -> Response {
        var h = HTTPFields()
        if let id = request.headers.first("apns-id"), UUIDValue.parseCanonicalLowercase(id) != nil {
            id.withUnsafeBytes { h.add(name: "apns-id", value: $0) }
        } else {
            var rng = FastRandom()
            UUIDValue.random(&rng).withBytes { h.add(name: "apns-id", value: $0) }
        }
        h.add(name: "content-type", value: "application/json")
        return Response(status: reason.status, headers: h, body: Array("{\"reason\":\"\(configuration.reasonString(reason))\"}".utf8))
    }
}
