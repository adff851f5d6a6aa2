import Glibc

/// A request handler. It runs on the event loop that owns the connection and answers through
/// `exchange.respond(_:)`, now or later (from any thread). Throwing resets the stream
/// (RST_STREAM INTERNAL_ERROR over HTTP/2; a 500 and close over HTTP/1.1).
public typealias Handler = @Sendable (Exchange) throws -> Void

/// Values captured by `{name}` segments and a trailing `*`, in pattern order, as ranges of the
/// path. Up to four, held inline: matching a route allocates nothing.
public struct RouteParameters: Sendable {
    static let maxCount = 4
    private var bounds: (Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32) = (0, 0, 0, 0, 0, 0, 0, 0)
    public private(set) var count = 0

    init() {}

    mutating func append(_ r: Range<Int>) {
        precondition(count < RouteParameters.maxCount, "at most four parameters per route")
        withUnsafeMutableBytes(of: &bounds) { b in
            b.storeBytes(of: Int32(r.lowerBound), toByteOffset: count * 8, as: Int32.self)
            b.storeBytes(of: Int32(r.upperBound), toByteOffset: count * 8 + 4, as: Int32.self)
        }
        count += 1
    }

    mutating func removeAll() { count = 0 }

    /// The same parameters, each bound moved by `delta` (the path found at another offset).
    func shifted(by delta: Int) -> RouteParameters {
        var p = RouteParameters()
        for i in 0..<count {
            let r = range(i)
            p.append((r.lowerBound + delta)..<(r.upperBound + delta))
        }
        return p
    }

    func range(_ i: Int) -> Range<Int> {
        precondition(i < count)
        return withUnsafeBytes(of: bounds) { b in
            Int(b.load(fromByteOffset: i * 8, as: Int32.self))..<Int(b.load(fromByteOffset: i * 8 + 4, as: Int32.self))
        }
    }

    /// The i-th captured value as a slice of `path`.
    public func value(_ i: Int, in path: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        path[range(i)]
    }
}

/// Maps method + path to a handler. Built before the server starts and immutable afterwards.
///
/// Patterns are `/`-separated: a literal segment matches itself, `{name}` matches one non-empty
/// segment, and a final `*` matches the rest of the path (possibly empty, possibly with `/`).
public struct Router: Sendable {
    public struct Route: Sendable {
        enum Segment: Sendable {
            case literal([UInt8])
            case parameter
            case rest
        }

        public let methods: [HTTPMethod]?
        public let pattern: String
        /// Largest body accepted; enforced while reading (Content-Length up front, then per chunk).
        public let maxBodySize: Int
        /// What a too-large body gets, built from the request's head (nil: the router's).
        public let bodyTooLarge: (@Sendable (Request) -> Response)?
        /// What a request gets while the server sheds load (nil: the router's).
        public let unavailable: (@Sendable (Request) -> Response)?
        public fileprivate(set) var handler: Handler
        let segments: [Segment]
    }

    public enum Match {
        case route(Int, RouteParameters)
        case methodNotAllowed([HTTPMethod])
        case notFound
    }

    public private(set) var routes: [Route] = []
    /// Each route's parameter names, by route index (what `Exchange.parameter(_:)` looks up).
    public private(set) var parameterNames: [[String]] = []
    /// The routes a path can match, by its first segment: for each first segment a route names
    /// literally, the indices (in order) of those routes and of every route whose first segment
    /// is a parameter or `*`; `otherRoutes` alone serves any other first segment. A request is
    /// tried against a handful of routes, not all of them.
    private var byFirstSegment: [(segment: [UInt8], routes: [Int])] = []
    private var otherRoutes: [Int] = []
    /// Routes for one host only, tried when nothing else matches.
    private var hostRoutes: [(host: [UInt8], routes: [Int])] = []
    /// Answer for paths no route matches.
    public var notFound: @Sendable (Request) -> Response = { _ in .text(404, "not found\n") }
    /// Answer for a matched path with a method no route accepts.
    public var methodNotAllowed: @Sendable (Request, [HTTPMethod]) -> Response = { _, allowed in
        var r = Response.text(405, "method not allowed\n")
        r.headers.add(name: "allow", value: allowed.map(\.name).joined(separator: ", "))
        return r
    }

    /// Answer for a body past its route's limit, for routes that give none.
    public var bodyTooLarge: @Sendable (Request) -> Response = Router.defaultBodyTooLarge
    /// Answer while the server sheds load (its buffer budget spent, or a client admitted past
    /// the connection limit), for routes that give none.
    public var unavailable: @Sendable (Request) -> Response = { _ in .text(503, "service unavailable\n") }

    public init() {}

    /// The too-large answer for route `i` (-1: no route).
    func bodyTooLarge(route i: Int, _ request: Request) -> Response {
        (i >= 0 ? routes[i].bodyTooLarge ?? bodyTooLarge : bodyTooLarge)(request)
    }

    /// The shedding answer for route `i` (-1: no route).
    func unavailable(route i: Int, _ request: Request) -> Response {
        (i >= 0 ? routes[i].unavailable ?? unavailable : unavailable)(request)
    }

    /// Adds a route. `methods: nil` accepts every method (the handler decides). With `host`,
    /// the route is only for requests to that host (`:authority` or `Host`, port aside), and is
    /// tried only when no other route matches the path: a service whose paths are bare tokens
    /// under its own host name (Apple's Web Push, `https://web.push.apple.com/{token}`).
    public mutating func add(
        _ methods: [HTTPMethod]?, _ pattern: String, maxBodySize: Int = 64 * 1024,
        bodyTooLarge: (@Sendable (Request) -> Response)? = nil,
        unavailable: (@Sendable (Request) -> Response)? = nil,
        host: String? = nil,
        handler: @escaping Handler
    ) {
        var segments: [Route.Segment] = []
        var names: [String] = []
        let parts = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        precondition(
            parts.filter { $0 == "*" || ($0.hasPrefix("{") && $0.hasSuffix("}")) }.count <= RouteParameters.maxCount,
            "at most four parameters in \(pattern)")
        for (i, p) in parts.enumerated() {
            if p == "*" {
                precondition(i == parts.count - 1, "'*' must be the last segment of \(pattern)")
                segments.append(.rest)
                names.append("*")
            } else if p.hasPrefix("{") && p.hasSuffix("}") {
                let name = String(p.dropFirst().dropLast())
                precondition(!name.isEmpty && !names.contains(name), "parameter names in \(pattern) must be unique and non-empty")
                segments.append(.parameter)
                names.append(name)
            } else {
                segments.append(.literal(Array(p.utf8)))
            }
        }
        let index = routes.count
        routes.append(
            Route(
                methods: methods, pattern: pattern, maxBodySize: maxBodySize,
                bodyTooLarge: bodyTooLarge, unavailable: unavailable, handler: handler, segments: segments))
        parameterNames.append(names)
        if let host {
            let name = Array(host.lowercased().utf8)
            if let k = hostRoutes.firstIndex(where: { $0.host == name }) {
                hostRoutes[k].routes.append(index)
            } else {
                hostRoutes.append((name, [index]))
            }
            return
        }
        if case .literal(let first) = segments.first {
            if let k = byFirstSegment.firstIndex(where: { $0.segment == first }) {
                byFirstSegment[k].routes.append(index)
            } else {
                byFirstSegment.append((first, otherRoutes + [index]))
            }
        } else {
            otherRoutes.append(index)
            for k in byFirstSegment.indices { byFirstSegment[k].routes.append(index) }
        }
    }

    /// The indices of the routes whose first segment can match `path`'s, in order.
    @inline(__always)
    func candidates(_ path: ArraySlice<UInt8>) -> [Int] {
        guard path.first == UInt8(ascii: "/") else { return otherRoutes }
        let start = path.startIndex + 1
        let end = Router.slash(in: path, from: start)
        let n = end - start
        return path.withUnsafeBytes { p in
            for entry in byFirstSegment where entry.segment.count == n {
                let same = entry.segment.withUnsafeBytes { s in n == 0 || sameBytes(p.baseAddress! + 1, s.baseAddress!, n) }
                if same { return entry.routes }
            }
            return otherRoutes
        }
    }

    static let defaultBodyTooLarge: @Sendable (Request) -> Response = { _ in .text(413, "request body too large\n") }

    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, maxBodySize: Int = 64 * 1024,
        bodyTooLarge: (@Sendable (Request) -> Response)? = nil,
        unavailable: (@Sendable (Request) -> Response)? = nil,
        handler: @escaping Handler
    ) {
        add([method], pattern, maxBodySize: maxBodySize, bodyTooLarge: bodyTooLarge, unavailable: unavailable, handler: handler)
    }

    /// Wraps the handlers of the routes added from `index` on, except those whose pattern is in
    /// `except` (a rate limit over one group of routes, say).
    public mutating func wrapHandlers(from index: Int, except: Set<String> = [], _ wrap: (@escaping Handler) -> Handler) {
        for i in index..<routes.count where !except.contains(routes[i].pattern) {
            routes[i].handler = wrap(routes[i].handler)
        }
    }

    /// `match`, through a connection's memory of the last path it routed (see `RouteMemo`).
    func match(method: HTTPMethod, path: ArraySlice<UInt8>, authority: @autoclosure () -> ArraySlice<UInt8>?, memo: inout RouteMemo)
        -> Match
    {
        if let known = memo.recall(method: method, path: path) { return known }
        let found = match(method: method, path: path, among: candidates(path))
        if case .route(let i, let parameters) = found {
            memo.note(method: method, path: path, route: i, parameters: parameters)
            return found
        }
        return byHost(method: method, path: path, found: found, authority: authority())
    }

    /// Finds the route for `method` and `path` (a path without query, as in `Request.path`).
    /// Routes are tried in the order they were added; the first that matches wins.
    /// `authority` is read only when no route matches the path and some route is for one host.
    public func match(method: HTTPMethod, path: ArraySlice<UInt8>, authority: @autoclosure () -> ArraySlice<UInt8>? = nil) -> Match {
        byHost(method: method, path: path, found: match(method: method, path: path, among: candidates(path)), authority: authority())
    }

    /// What the path alone `found`, or for a path no route takes, a route of the request's host.
    private func byHost(
        method: HTTPMethod, path: ArraySlice<UInt8>, found: Match, authority: @autoclosure () -> ArraySlice<UInt8>?
    ) -> Match {
        guard case .notFound = found, !hostRoutes.isEmpty, let authority = authority() else { return found }
        let host = Array(BrowserOrigin.hostName(String(decoding: authority, as: UTF8.self)).utf8)
        guard let entry = hostRoutes.first(where: { $0.host == host }) else { return found }
        return match(method: method, path: path, among: entry.routes)
    }

    private func match(method: HTTPMethod, path: ArraySlice<UInt8>, among routeIndices: [Int]) -> Match {
        var allowed: [HTTPMethod] = []
        var params = RouteParameters()
        for i in routeIndices {
            params.removeAll()
            guard Router.matches(routes[i].segments, path, &params) else { continue }
            if let methods = routes[i].methods, !methods.contains(method) {
                allowed.append(contentsOf: methods)
                continue
            }
            return .route(i, params)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    /// The index of the first `/` in `path` at or after `from`, else `path.endIndex` (memchr:
    /// a byte at a time through the slice's checked subscript was most of a match's cost).
    @inline(__always)
    static func slash(in path: ArraySlice<UInt8>, from: Int) -> Int {
        guard from < path.endIndex else { return path.endIndex }
        return path.withUnsafeBytes { p in
            let offset = from - path.startIndex
            guard let hit = memchr(p.baseAddress! + offset, 0x2F, p.count - offset) else { return path.endIndex }
            return path.startIndex + p.baseAddress!.distance(to: UnsafeRawPointer(hit))
        }
    }

    static func matches(
        _ segments: [Route.Segment], _ path: ArraySlice<UInt8>,
        _ params: inout RouteParameters
    ) -> Bool {
        let slash = UInt8(ascii: "/")
        guard path.first == slash else { return false }
        var pos = path.startIndex + 1
        for (i, seg) in segments.enumerated() {
            if case .rest = seg {
                params.append(pos..<path.endIndex)
                return true
            }
            if pos > path.endIndex { return false }
            let end = Router.slash(in: path, from: pos)
            switch seg {
            case .literal(let lit):
                if end - pos != lit.count { return false }
                let same = path[pos..<end].withUnsafeBytes { a in
                    lit.withUnsafeBytes { b in a.count == 0 || sameBytes(a.baseAddress!, b.baseAddress!, a.count) }
                }
                if !same { return false }
            case .parameter:
                if end == pos { return false }
                params.append(pos..<end)
            case .rest:
                return true
            }
            let last = i == segments.count - 1
            if last { return end == path.endIndex }
            if end == path.endIndex { return false }
            pos = end + 1
        }
        return segments.isEmpty && path.count == 1
    }
}
