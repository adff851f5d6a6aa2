import PushCore
import Transport

/// A third gateway that exists only in this test target: `POST /toy/v1/push/{token}` with a
/// JSON object body. Its token must be 8 to 64 letters or digits; a 200 answer carries the
/// notification's id. Everything else (fault rules, the journal, metrics, the notification log,
/// delivery) comes from the pipeline: nothing outside this file knows the toy exists, which is
/// the proof that a gateway is a plug-in.
struct ToyGateway: PushGateway {
    static let identity = PushProvider(index: 3, name: "toy")
    let provider = ToyGateway.identity

    final class ConnectionState {
        var random = FastRandom(seed: 42)
        var pushes = 0
    }

    struct Decision: PushDecision {
        var error: String?
        var status = 200
        var token: ArraySlice<UInt8> = []
        var accepted: Bool { error == nil }
    }

    struct ConnectionActions: Sendable {}

    static let prefix = Array("/toy/v1/push/".utf8)

    func routes() -> [GatewayRoute] {
        [GatewayRoute([.post], "/toy/v1/push/{token}", maxBodySize: 4096, handling: .push)]
    }

    func makeConnectionState() -> ConnectionState { ConnectionState() }

    func decide(_ request: Request, on exchange: Exchange, state: ConnectionState, nowMs: Int64, into decision: inout Decision) {
        let token = exchange.parameter(0)
        decision.token = token
        let isAlphanumeric = token.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }
        if !(8...64).contains(token.count) || !isAlphanumeric {
            decision.error = "BadToken"
            decision.status = 400
        } else if request.body.first != UInt8(ascii: "{") {
            decision.error = "BadBody"
            decision.status = 400
        }
    }

    func subject(of decision: Decision, request: Request) -> PushSubject {
        PushSubject(token: decision.token, topic: nil, scope: "toyland")
    }

    func rateLimited(_ decision: inout Decision) {
        decision.error = "TooMany"
        decision.status = 429
    }

    func notificationID(for decision: Decision, request: Request, state: ConnectionState) -> UUIDValue {
        state.pushes += 1
        return UUIDValue.random(&state.random)
    }

    func forEachAcceptedPush(
        _ decision: Decision, request: Request, id: UUIDValue, state: ConnectionState, nowMs: Int64,
        _ body: AcceptedPushSink
    ) {
        let delivery = Delivery(
            provider: provider, platform: .android, tokenBytes: decision.token, appBytes: nil,
            environment: "toyland", notificationID: id, messageName: nil, receivedAtMs: nowMs,
            payload: request.body[...])
        body(delivery, nil, [], nil, AcceptedPushFlags(payloadIsJSON: true, appliesDeviceEffects: true))
    }

    func response(for decision: Decision, request: Request, id: UUIDValue, state: ConnectionState, nowMs: Int64) -> Response {
        if let error = decision.error { return .json(decision.status, "{\"error\":\"\(error)\"}") }
        return .json(200, "{\"id\":\"\(id)\"}")
    }

    func outcome(of decision: Decision, request: Request) -> PushOutcome {
        PushOutcome(status: decision.status, reason: decision.error ?? "", payload: request.body[...], warnings: [])
    }

    func injectedAnswer(_ answer: InjectedAnswer, request: Request) -> (response: Response, reason: String) {
        let reason = answer.reason ?? answer.errorCode ?? "Injected"
        return (.json(answer.status ?? 503, "{\"error\":\"\(reason)\"}"), reason)
    }

    func connectionActions(after decision: Decision) -> ConnectionActions { ConnectionActions() }
    func connectionActionsAfterInjectedAnswer() -> ConnectionActions { ConnectionActions() }
    static func perform(_ actions: ConnectionActions, on connection: ConnectionContext) {}
    static func goAwayDebugData(reason: String) -> [UInt8] { Array(reason.utf8) }
}
