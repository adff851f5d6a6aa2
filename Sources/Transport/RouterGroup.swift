/// Something that runs around the handlers of a route group: it sees the exchange first and
/// calls `next` to go on (or answers itself and does not). Middleware of a group wraps its
/// routes and those of its nested groups; an outer group's runs first.
public protocol RouterMiddleware: Sendable {
    func handle(_ exchange: Exchange, next: Handler) throws
}

/// Routes that share a path prefix and middleware, added to a `Router` as one block (models:
/// Hummingbird's `RouterGroup`). A resource registers its routes on the group it is given,
/// with paths relative to the group's prefix:
///
///     router.group("/emulator/v1", middleware: [guard]) { api in
///         api.group("/fleets") { fleets in
///             fleets.add(.get, "/{id}") { ex in ... ex.parameter("id") ... }
///         }
///     }
///
/// Built before the server starts, like the router.
public struct RouterGroup {
    /// A route waiting to be added (its pattern relative to the group).
    struct Pending {
        var methods: [HTTPMethod]?
        var pattern: String
        var maxBodySize: Int
        var bodyTooLarge: (@Sendable (Request) -> Response)?
        var unavailable: (@Sendable (Request) -> Response)?
        var handler: Handler
    }

    /// The path prefix, without a trailing `/` ("" for the root).
    public let prefix: String
    let middleware: [any RouterMiddleware]
    private(set) var routes: [Pending] = []

    init(prefix: String, middleware: [any RouterMiddleware]) {
        precondition(prefix.isEmpty || (prefix.hasPrefix("/") && !prefix.hasSuffix("/")), "a group prefix is /name, got \(prefix)")
        self.prefix = prefix
        self.middleware = middleware
    }

    /// Adds a route at `prefix + pattern` (`pattern` "" names the prefix itself).
    public mutating func add(
        _ methods: [HTTPMethod]?, _ pattern: String, maxBodySize: Int = 64 * 1024,
        bodyTooLarge: (@Sendable (Request) -> Response)? = nil,
        unavailable: (@Sendable (Request) -> Response)? = nil,
        handler: @escaping Handler
    ) {
        precondition(pattern.isEmpty || pattern.hasPrefix("/"), "a route pattern starts with /, got \(pattern)")
        routes.append(
            Pending(
                methods: methods, pattern: prefix + pattern, maxBodySize: maxBodySize,
                bodyTooLarge: bodyTooLarge, unavailable: unavailable, handler: RouterGroup.wrap(handler, in: middleware)))
    }

    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, maxBodySize: Int = 64 * 1024,
        bodyTooLarge: (@Sendable (Request) -> Response)? = nil,
        unavailable: (@Sendable (Request) -> Response)? = nil,
        handler: @escaping Handler
    ) {
        add([method], pattern, maxBodySize: maxBodySize, bodyTooLarge: bodyTooLarge, unavailable: unavailable, handler: handler)
    }

    /// A nested group: its routes get `prefix + path` and this group's middleware around their own.
    public mutating func group(_ path: String, middleware: [any RouterMiddleware] = [], _ build: (inout RouterGroup) -> Void) {
        var inner = RouterGroup(prefix: prefix + path, middleware: middleware)
        build(&inner)
        for var route in inner.routes {
            route.handler = RouterGroup.wrap(route.handler, in: self.middleware)
            routes.append(route)
        }
    }

    /// `handler` inside `middleware`, the first of which runs first.
    static func wrap(_ handler: @escaping Handler, in middleware: [any RouterMiddleware]) -> Handler {
        var h = handler
        for m in middleware.reversed() {
            let next = h
            h = { ex in try m.handle(ex, next: next) }
        }
        return h
    }
}

extension Router {
    /// Adds a group of routes under `prefix` with `middleware` around each of them.
    public mutating func group(_ prefix: String = "", middleware: [any RouterMiddleware] = [], _ build: (inout RouterGroup) -> Void) {
        var group = RouterGroup(prefix: prefix, middleware: middleware)
        build(&group)
        for r in group.routes {
            add(
                r.methods, r.pattern.isEmpty ? "/" : r.pattern, maxBodySize: r.maxBodySize, bodyTooLarge: r.bodyTooLarge,
                unavailable: r.unavailable, handler: r.handler)
        }
    }
}
