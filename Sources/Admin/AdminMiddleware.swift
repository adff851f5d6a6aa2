import Transport

/// One admin resource (keys, devices, fleets, faults...): the routes it adds to the group it
/// is given, with paths relative to the group (`/emulator/v1`). Adding an endpoint is adding
/// a route here, or a new resource file and one line in `AdminAPI.resources`.
protocol AdminResource: Sendable {
    func register(_ routes: inout RouterGroup)
}

/// Refuses a browser request from another site (`BrowserOrigin`: a cross-site page, DNS
/// rebinding) with a 403 in the admin API's format, on every admin and dashboard route.
struct BrowserGuard: RouterMiddleware {
    func handle(_ ex: Exchange, next: Handler) throws {
        if let refusal = BrowserGuard.refusal(ex.request) { return ex.respond(refusal) }
        try next(ex)
    }

    static func refusal(_ r: Request) -> Response? {
        BrowserOrigin.refusal(r).map { AdminAPI.error(403, $0) }
    }
}

extension AdminRateLimit: RouterMiddleware {
    /// 429 past `--admin-rate` (see `AdminRateLimit`).
    func handle(_ ex: Exchange, next: Handler) throws {
        guard admit() else { return ex.respond(AdminRateLimit.tooMany(perSecond)) }
        try next(ex)
    }
}
