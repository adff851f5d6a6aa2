import Transport

/// The admin API's and the dashboard's answer to a browser request from another site
/// (`BrowserOrigin`): a 403 in the admin API's format.
enum BrowserGuard {
    static func refusal(_ r: Request) -> Response? {
        BrowserOrigin.refusal(r).map { AdminAPI.error(403, $0) }
    }
}
