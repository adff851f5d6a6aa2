import Cluster
import Observation
import PushCore
import Transport

/// `GET /emulator/v1/events`: Server-Sent Events (`text/event-stream`) of what happens, as it
/// happens: `accepted` and `rejected` pushes, `delivered` (a fan-out's or an offline inbox's
/// later deliveries), `tracking` attempts, `fault` rules firing, `device` changes. Each event
/// has an `id:` (increasing), its kind as `event:`, and one line of JSON as `data:`. A reader
/// too slow for the rate loses events and is told how many, as `event: dropped` with
/// `{"dropped":N}` (see `EventBus`); a comment line every 15 s keeps a quiet stream open.
///
/// Filters, all of which must hold: `types=accepted,rejected,...`, `provider=`, `token=`, and
/// `q=` with the terms `type:`, `provider:`, `token:`, `topic:`, `environment:`, `app:`,
/// `status:`, `reason:` (for tracking the outcome, for a fault its rule id, for a device the
/// change). Terms the list takes that need the stored record (`campaign:`, words, `has:`,
/// `display:`, `lint:`, times) are refused with a 400 naming them.
///
/// On a cluster node the stream carries every node's events, each naming its node (`"node"`):
/// the node's own, and the other nodes' through `PeerEventRelay` (the node's connections to its
/// peers' streams, asked for their own events with the same filters).
struct EventsAdminAPI: AdminResource {
    let bus: EventBus
    var cluster: ClusterLink? = nil
    /// A token's device's labels (for `scope=label:`).
    var labels: @Sendable (String) -> [String] = { _ in [] }

    func register(_ routes: inout RouterGroup) {
        let bus = self.bus
        let cluster = self.cluster
        let labels = self.labels
        routes.add(.get, "/events", maxBodySize: 0) { ex in
            let selector: EventSelector
            do { selector = try EventFilter.parse(ex.request, labels: labels) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            var head = Response(status: 200)
            head.headers.add(name: "content-type", value: "text/event-stream; charset=utf-8")
            head.headers.add(name: "cache-control", value: "no-store")
            head.headers.add(name: "x-accel-buffering", value: "no")
            guard bus.subscriberCount < EventBus.maxSubscribers else {
                var busy = AdminAPI.error(503, "the event stream has \(EventBus.maxSubscribers) subscribers already; retry later")
                busy.headers.add(name: "retry-after", value: "5")
                return ex.respond(busy)
            }
            let relay = cluster.flatMap { ex.request.headers.first(ClusterReads.localHeader) == nil ? $0 : nil }
            let inbox = relay.map { _ in EventInbox() }
            let target = String(decoding: ex.request.target, as: UTF8.self)
            guard let stream = ex.respondStreaming(head) else { return }
            guard bus.subscribe(stream, selector: selector, relayed: inbox) else { return stream.finish() }
            if let relay, let inbox {
                PeerEventRelay.start(link: relay, target: target) { frame in frame.isEmpty ? !inbox.isClosed : inbox.put(frame) }
            }
        }
    }
}

/// The stream's filter as its parameters give it: an `EventSelector` (see `EventsAdminAPI`).
enum EventFilter {
    static let terms = ["type", "provider", "token", "topic", "environment", "app", "status", "reason"]

    static func parse(
        _ request: Request, labels: @escaping @Sendable (String) -> [String] = { _ in [] }
    ) throws(NotificationQuery.QueryError) -> EventSelector {
        var f = EventSelector()
        switch try Scope.of(request) {
        case .team(let t)?:
            f.provider = .apns
            f.team = t
        case .project(let p)?:
            f.provider = .fcm
            f.environments = [p]
        case .label(let l)?:
            f.device = { token in labels(String(decoding: token, as: UTF8.self)).contains(l) }
        case nil: break
        }
        var listed = false
        func parameter(_ name: String) -> String? {
            request.queryParameter(name).flatMap { $0.isEmpty ? nil : percentDecode($0) }
        }
        if let t = parameter("types") {
            for k in t.split(separator: ",") { try add("type", String(k), to: &f, listed: &listed) }
        }
        if let p = parameter("provider") { try add("provider", p, to: &f, listed: &listed) }
        if let t = parameter("token") { try add("token", t, to: &f, listed: &listed) }
        if let q = parameter("q") {
            for term in try NotificationQuery.terms(q) {
                guard let colon = term.text.firstIndex(of: ":"), !term.quoted else {
                    throw .init(description: "the event stream matches no words (\(term.text)); terms: \(EventFilter.names)")
                }
                try add(String(term.text[..<colon]), String(term.text[term.text.index(after: colon)...]), to: &f, listed: &listed)
            }
        }
        return f
    }

    static var names: String { terms.map { $0 + ":" }.joined(separator: " ") }

    static func add(_ name: String, _ value: String, to f: inout EventSelector, listed: inout Bool) throws(NotificationQuery.QueryError) {
        guard !value.isEmpty else { throw .init(description: "\(name): needs a value") }
        switch name {
        case "type":
            guard let k = EmulatorEvent.Kind(rawValue: value) else {
                throw .init(description: "type must be one of \(EmulatorEvent.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            f.take(k, first: !listed)
            listed = true
        case "provider":
            guard let p = PushProvider.named(value) else { throw .init(description: "provider must be \(PushProvider.namesForMessages)") }
            f.provider = p
        case "token": f.token = value
        case "topic": f.topic = value
        case "environment": f.environments.append(value)
        case "app": f.apps.append(value)
        case "status":
            guard let s = Int(value), (100...599).contains(s) else { throw .init(description: "status: takes an HTTP status") }
            f.status = s
        case "reason": f.reasons.append(value)
        case "campaign", "after", "before", "has", "display", "lint":
            throw .init(description: "\(name): is a search over stored notifications; the event stream takes \(EventFilter.names)")
        default:
            throw .init(description: "unknown event filter term \(name): (terms: \(EventFilter.names))")
        }
    }
}
