import Transport

/// The durability middleware of every route that changes state (the admin API, FCM's Instance
/// ID API, APNs's channel management; never a push route): an answer that made changes leaves
/// once their records are as durable as `--durability` asks, and while the log cannot be
/// written a request that would change state is refused before it changes anything.
///
/// Per request it costs two atomic loads; a request that changed nothing is not held.
public final class StateGate: ResponseGate, RouterMiddleware {
    public let log: StateLog
    /// The answer when a change cannot be kept: the route's 503 in its own format, with why.
    public typealias Refusal = @Sendable (Exchange, String) -> Response

    private let refusal: Refusal
    /// Why changes are refused besides the log (a cluster node that lost its Redis), or nil.
    private let blocked: (@Sendable () -> String?)?

    public init(log: StateLog, blocked: (@Sendable () -> String?)? = nil, refusal: @escaping Refusal) {
        self.log = log
        self.blocked = blocked
        self.refusal = refusal
    }

    /// `handler` behind the gate.
    public func wrap(_ handler: @escaping Handler) -> Handler {
        { [self] ex in try handle(ex, next: handler) }
    }

    /// As a route group's middleware: refuses a change while the log cannot be written, else
    /// notes where the log stands and holds the answer (see `hold`).
    public func handle(_ ex: Exchange, next: Handler) throws {
        if log.isFailing, StateGate.changes(ex.request.method) {
            return ex.respond(refusal(ex, refusalText))
        }
        if let blocked, StateGate.changes(ex.request.method), let why = blocked() {
            return ex.respond(refusal(ex, why + ": the change is not made (it would not reach the other nodes); retry once it is back"))
        }
        ex.gateMark = log.lastAppended
        ex.gate = self
        try next(ex)
    }

    /// The methods that may change state.
    static func changes(_ method: HTTPMethod) -> Bool {
        method == .post || method == .put || method == .patch || method == .delete
    }

    private var refusalText: String {
        let why = log.statistics.lastError.map { " (\($0))" } ?? ""
        return "the state log in \(log.directory) cannot be written\(why): the change is not made; retry once the disk has room"
    }

    public func hold(_ response: Response, of exchange: Exchange) -> Bool {
        let through = log.lastAppended
        guard through > exchange.gateMark else { return false }
        let refusal = self.refusal
        log.whenDurable(through) { [self] stored in
            exchange.release(
                stored
                    ? response
                    : refusal(
                        exchange,
                        "the change could not be written to the state log in \(log.directory)\(log.statistics.lastError.map { " (\($0))" } ?? ""): it is not acknowledged; retry once the disk has room"
                    ))
        }
        return true
    }
}
