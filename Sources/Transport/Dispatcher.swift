/// Routing and limits shared by the HTTP/1.1 and HTTP/2 codecs: once a request's head is in,
/// pick its route and refuse what must be refused before the body is read; once it is whole,
/// run the handler.
struct Dispatcher: Sendable {
    let router: Router
    let limits: ServerLimits
    let budget: ConnectionBudget

    /// Called when the request head is complete. Returns false when the exchange was answered
    /// already (no route, too-large headers or body, load shed), so the codec stops buffering
    /// its body.
    func headersComplete(_ ex: Exchange) -> Bool {
        if ex.headersTooLarge {
            ex.respond(.text(431, "request header fields too large\n"))
            return false
        }
        let match = router.match(
            method: ex.request.method, path: ex.request.path, authority: ex.request.authority, memo: &ex.connection.routeMemo)
        if ex.connection.isShedding, let connection = ex.connection.control { _ = connection.takeSlotIfFree() }
        if budget.overBudget || ex.connection.isShedding {
            // A route that reads no body (`/healthz`) is still answered: it costs nothing to keep.
            guard case .route(let i, _) = match, router.routes[i].maxBodySize == 0 else {
                let route: Int
                if case .route(let i, _) = match { route = i } else { route = -1 }
                ex.respond(router.unavailable(route: route, ex.request))
                // GOAWAY after the answer: clients built on Python's h2 stop reading at GOAWAY.
                if ex.connection.isShedding { ex.connection.goAway(closeAfterSend: true) }
                return false
            }
        }
        switch match {
        case .notFound, .methodNotAllowed:
            ex.maxBodySize = limits.unroutedBodySize
            ex.routeIndex = -1
            return true
        case .route(let i, let params):
            ex.routeIndex = i
            if params.count > 0 { ex.parameters = params }
            let maxBody = router.routes[i].maxBodySize
            ex.maxBodySize = maxBody
            if let cl = ex.request.headers.first("content-length"), let n = HTTP1Parser.parseDecimal(cl), n > maxBody {
                ex.respond(router.bodyTooLarge(route: i, ex.request))
                return false
            }
            return true
        }
    }

    /// The answer for a body that went past the exchange's limit while being read.
    func bodyTooLarge(_ ex: Exchange) -> Response {
        router.bodyTooLarge(route: ex.routeIndex, ex.request)
    }

    /// Called when the whole request is in: runs the handler (or the router's 404/405).
    func dispatch(_ ex: Exchange) {
        guard ex.state == .reading else { return }
        ex.state = .dispatched
        guard ex.routeIndex >= 0 else {
            switch router.match(method: ex.request.method, path: ex.request.path, authority: ex.request.authority) {
            case .methodNotAllowed(let allowed): ex.respond(router.methodNotAllowed(ex.request, allowed))
            default: ex.respond(router.notFound(ex.request))
            }
            return
        }
        do {
            try router.routes[ex.routeIndex].handler(ex)
        } catch {
            ex.reset()
        }
    }
}
