import Faults
import PushCore
import Transport

extension PushPipeline {
    /// Adds the gateway's routes: its push routes run the pipeline; a faultable route lets a
    /// rule on its path answer in the gateway's shape (shaped like any answer); a direct route is
    /// the gateway's alone.
    public func register(_ router: inout Router) {
        for route in gateway.routes() {
            let handler: Handler
            switch route.handling {
            case .push:
                handler = { exchange in handle(exchange) }
            case .direct(let direct):
                handler = { exchange in direct(exchange) }
            case .faultable(let direct, let injected):
                let faults = services.faults
                let lifecycle = services.lifecycle
                let provider = self.provider
                handler = { exchange in
                    let request = exchange.request
                    let context = FaultContext(
                        provider: provider, token: [], topic: nil, project: nil, path: request.path,
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
            router.add(
                route.methods, route.pattern, maxBodySize: route.maxBodySize, bodyTooLarge: route.bodyTooLarge,
                unavailable: route.unavailable, handler: handler)
        }
    }
}
