/// A connection's last routed path, so a sender that posts to one path again and again (FCM's
/// `/v1/projects/{project}/messages:send`, every request to one project) is routed once.
///
/// Routing walks the candidate routes' segments (about 400 instructions for FCM's send path);
/// a repeat costs a compare. A path is kept only when it comes twice in a row (its length and
/// last 8 bytes as the one before), so a sender whose every path differs (APNs's, one device
/// token each) pays a compare of one word, not a copy. Only a route the path alone chose is
/// kept (not one a host's routes chose, nor a 404 or 405), with its parameters as offsets into
/// the path. Touched only by the connection's loop.
struct RouteMemo {
    private var path: [UInt8] = []
    private var method: HTTPMethod = .get
    private var kept = false
    private var route = 0
    private var parameters = RouteParameters()
    private var witness = RepeatWitness()

    /// Paths longer than this are routed every time (bounds what a connection holds).
    static let maxPath = 1024

    /// The route for `method` and `path` when they are the ones kept.
    @inline(__always)
    func recall(method: HTTPMethod, path: ArraySlice<UInt8>) -> Router.Match? {
        guard kept, method == self.method, path.count == self.path.count,
            path.withUnsafeBytes({ p in self.path.withUnsafeBytes { sameBytes(p.baseAddress!, $0.baseAddress!, p.count) } })
        else { return nil }
        return .route(route, parameters.shifted(by: path.startIndex))
    }

    /// Notes what `method` and `path` were routed to (`route` found by the path alone).
    mutating func note(method: HTTPMethod, path: ArraySlice<UInt8>, route: Int, parameters: RouteParameters) {
        let n = path.count
        guard n >= 8, n <= RouteMemo.maxPath else {
            kept = false
            return
        }
        kept = path.withUnsafeBytes { witness.repeats($0) }
        guard kept else { return }
        self.path.removeAll(keepingCapacity: true)
        self.path.append(contentsOf: path)
        self.method = method
        self.route = route
        self.parameters = parameters.shifted(by: -path.startIndex)
    }
}
