import Faults
import PushCore
import Runtime
import State
import Transport

extension PushPipeline {
    /// Adds the gateway's routes: its push routes run the pipeline; a faultable route lets a
    /// rule on its path answer in the gateway's shape (shaped like any answer); a direct route is
    /// the gateway's alone.
    /// `gate`: the durability gate of the routes that may change state (direct and faultable
    /// routes: Instance ID, channel management); push routes are never held by it.
    public func register(_ router: inout Router, gate: StateGate? = nil) {
        for route in gateway.routes() {
            var handler: Handler
            switch route.handling {
            case .push:
                handler = { exchange in handle(exchange, route: route.kind) }
            case .direct(let direct):
                handler = { exchange in direct(exchange) }
            case .faultable(let direct, let injected):
                let faults = services.faults
                let lifecycle = services.lifecycle
                let provider = self.provider
                handler = { exchange in
                    let request = exchange.request
                    let kind = route.kind
                    let context = FaultContext(
                        provider: provider, token: [], topic: nil, project: nil, path: request.path, route: kind,
                        headers: request.headers, device: { lifecycle.faultView($0) })
                    if let fired = faults.fire(context, headers: request.headers, loop: exchange.eventLoop.index, nowMs: Clock.nowMs()),
                        fired.effect.answers
                    {
                        faults.send(
                            injected(fired.effect.injectedAnswer, request), on: exchange, fired: fired, provider: provider,
                            goAwayDebugData: Gateway.goAwayDebugData(reason:))
                    } else {
                        direct(exchange)
                    }
                }
            }
            if let gate, !route.isPush { handler = gate.wrap(handler) }
            // A browser page on another site (DNS rebinding included) cannot send or read here.
            let served = handler
            let gateway = self.gateway
            let hosts = Set(gateway.hostNames)
            handler = { exchange in
                if exchange.request.headers.mayBeFromBrowser, let why = BrowserOrigin.refusal(exchange.request, hosts: hosts) {
                    return exchange.respond(gateway.browserRefusal(exchange.request, reason: why))
                }
                try served(exchange)
            }
            if let refuse = route.http1Answer {
                let served = handler
                handler = { exchange in
                    guard exchange.request.version != .http2 else { return try served(exchange) }
                    exchange.respond(refuse(exchange.request))
                }
            }
            router.add(
                route.methods, route.pattern, maxBodySize: route.maxBodySize, bodyTooLarge: route.bodyTooLarge,
                unavailable: route.unavailable, host: route.host, handler: handler)
        }
    }
}
