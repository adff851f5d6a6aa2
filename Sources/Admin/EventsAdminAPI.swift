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
extension AdminAPI {
    func registerEvents(_ r: inout Router) {
        let bus = store.events
        r.add(.get, "/emulator/v1/events", maxBodySize: 0) { ex in
            let filter: EventFilter
            do { filter = try EventFilter.parse(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            var head = Response(status: 200)
            head.headers.add(name: "content-type", value: "text/event-stream; charset=utf-8")
            head.headers.add(name: "cache-control", value: "no-store")
            head.headers.add(name: "x-accel-buffering", value: "no")
            guard bus.subscriberCount < EventBus.maxSubscribers else {
                var busy = AdminAPI.error(503, "the event stream has \(EventBus.maxSubscribers) subscribers already; retry later")
                busy.headers.add(name: "retry-after", value: "5")
                return ex.respond(busy)
            }
            guard let stream = ex.respondStreaming(head) else { return }
            if !bus.subscribe(stream, accepts: { filter.matches($0) }) { stream.finish() }
        }
    }
}

/// Which events a stream takes (see `registerEvents`).
struct EventFilter: Sendable {
    var kinds: Set<EmulatorEvent.Kind>?
    var provider: PushProvider?
    var token: String?
    var topic: String?
    var environments: [String] = []
    var apps: [String] = []
    var status: Int?
    var reasons: [String] = []

    static let terms = ["type", "provider", "token", "topic", "environment", "app", "status", "reason"]

    static func parse(_ request: Request) throws(NotificationQuery.QueryError) -> EventFilter {
        var f = EventFilter()
        func parameter(_ name: String) -> String? {
            request.queryParameter(name).flatMap { $0.isEmpty ? nil : percentDecode($0) }
        }
        if let t = parameter("types") {
            for k in t.split(separator: ",") { try f.add("type", String(k)) }
        }
        if let p = parameter("provider") { try f.add("provider", p) }
        if let t = parameter("token") { try f.add("token", t) }
        if let q = parameter("q") {
            for term in try NotificationQuery.terms(q) {
                guard let colon = term.text.firstIndex(of: ":"), !term.quoted else {
                    throw .init(description: "the event stream matches no words (\(term.text)); terms: \(EventFilter.names)")
                }
                try f.add(String(term.text[..<colon]), String(term.text[term.text.index(after: colon)...]))
            }
        }
        return f
    }

    static var names: String { terms.map { $0 + ":" }.joined(separator: " ") }

    mutating func add(_ name: String, _ value: String) throws(NotificationQuery.QueryError) {
        guard !value.isEmpty else { throw .init(description: "\(name): needs a value") }
        switch name {
        case "type":
            guard let k = EmulatorEvent.Kind(rawValue: value) else {
                throw .init(description: "type must be one of \(EmulatorEvent.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            kinds = (kinds ?? []).union([k])
        case "provider":
            guard let p = PushProvider.named(value) else { throw .init(description: "provider must be \(PushProvider.namesForMessages)") }
            provider = p
        case "token": token = value
        case "topic": topic = value
        case "environment": environments.append(value)
        case "app": apps.append(value)
        case "status":
            guard let s = Int(value), (100...599).contains(s) else { throw .init(description: "status: takes an HTTP status") }
            status = s
        case "reason": reasons.append(value)
        case "campaign", "after", "before", "has", "display", "lint":
            throw .init(description: "\(name): is a search over stored notifications; the event stream takes \(EventFilter.names)")
        default:
            throw .init(description: "unknown event filter term \(name): (terms: \(EventFilter.names))")
        }
    }

    func matches(_ e: EmulatorEvent) -> Bool {
        if let kinds, !kinds.contains(e.kind) { return false }
        if let provider, e.provider != provider { return false }
        if let token, e.token != token { return false }
        if let topic, e.topic != topic { return false }
        if !environments.isEmpty, !environments.contains(e.environment) { return false }
        if !apps.isEmpty, !apps.contains(APNsTopics.bundle(e.topic)) { return false }
        if let status, e.status != status { return false }
        if !reasons.isEmpty, !reasons.contains(e.reason) { return false }
        return true
    }
}
