import Faults
import PushCore
import State
import Transport

/// A gateway ready to plug into the emulator: its pipeline's routes, its connection set-up and
/// its answer for unknown paths, with the gateway's type erased only here, at wiring time. The
/// routes it installs call the specialised `PushPipeline<G>.handle`, so the request path pays
/// nothing for the erasure.
///
/// The composition root lists one per gateway (APNs, FCM); a test adds a toy one the same way.
public struct GatewayPlugin: Sendable {
    public let provider: PushProvider
    let install: @Sendable (inout Router, PipelineServices, StateGate?) -> Void
    /// True when the connection is this gateway's (see `PushGateway.setUpConnection`).
    public let setUpConnection: @Sendable (ConnectionContext) -> Bool
    public let notFound: @Sendable (Request) -> Response?

    /// `gateway` in a pipeline, with the per-token rate limit when it has one.
    public init<Gateway: PushGateway>(_ gateway: Gateway, tokenRate: TokenRateLimiter? = nil) {
        provider = gateway.provider
        PushProvider.register(gateway.provider)
        install = { router, services, gate in
            PushPipeline(gateway: gateway, services: services, tokenRate: tokenRate).register(&router, gate: gate)
        }
        setUpConnection = { gateway.setUpConnection($0) }
        notFound = { gateway.notFound($0) }
    }

    /// Adds the gateway's routes, each running its pipeline over `services`; those that change
    /// state behind `gate`.
    public func install(into router: inout Router, services: PipelineServices, gate: StateGate? = nil) { install(&router, services, gate) }
}
