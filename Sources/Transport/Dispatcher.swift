/// Routing and limits shared by the HTTP/1.1 and HTTP/2 codecs: once a request's head is in,
/// pick its route and refuse what must be refused before the body is read; once it is whole,
/// run the handler.
struct Dispatcher: Sendable {
    let router: Router
    let limits: ServerLimits

    /// Called when the request head is complete. Returns false when the exchange was answered
    /// already (no route, too-large headers or body), so the codec stops buffering its body.
    func headersComplete(_ ex: Exchange) -> Bool {
        if ex.headersTooLarge {
            ex.respond(.text(431, "request header fields too large\n"))
            return false
        }
        switch router.match(method: ex.request.method, path: ex.request.path) {
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
                ex.respond(router.routes[i].bodyTooLarge(ex.request))
                return false
            }
            return true
        }
    }

    /// The answer for a body that went past the exchange's limit while being read.
    func bodyTooLarge(_ ex: Exchange) -> Response {
        (ex.routeIndex >= 0 ? router.routes[ex.routeIndex].bodyTooLarge : Router.defaultBodyTooLarge)(ex.request)
    }

    /// Called when the whole request is in: runs the handler (or the router's 404/405).
    func dispatch(_ ex: Exchange) {
        guard ex.state == .reading else { return }
        ex.state = .dispatched
        guard ex.routeIndex >= 0 else {
            switch router.match(method: ex.request.method, path: ex.request.path) {
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
