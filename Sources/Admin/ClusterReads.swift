import Cluster
import Glibc
import Observation
import PushCore
import Runtime
import Transport

/// Notification reads for the whole cluster: the node that takes the request asks every node
/// (itself included, each with `x-pushemu-local: 1`, so it answers for itself) and merges their
/// answers, on the slow-work thread (not the journal-read one, which each node's own answer
/// takes): a list in its order, with one `next` for all; `latest` the
/// newest of theirs; one notification from whichever node has it. A node that does not answer
/// is named: `"partial": true, "unreachable": [NAMES]`. A `wait` is polled across the nodes (each
/// asked without one) until something matches or it runs out.
struct ClusterReads: Sendable {
    let link: ClusterLink
    let worker: BackgroundWorker
    static let localHeader: StaticString = "x-pushemu-local"
    static let localHeaderName = "x-pushemu-local"

    enum Kind: Sendable {
        /// A list: its order (`plain`: the newest `limit` oldest first; `desc`/`asc`: a page).
        case list(order: String?, limit: Int)
        case latest
        case one
    }

    /// Whether `ex` is for the whole cluster (not a node asking this one for its own).
    func takes(_ ex: Exchange) -> Bool { ex.request.headers.first(ClusterReads.localHeader) == nil }

    func answer(_ ex: Exchange, _ kind: Kind) {
        let target = String(decoding: ClusterReads.withoutWait(Array(ex.request.target)), as: UTF8.self)
        poll(ex) { [self] in
            let (status, body) = gather(target, kind)
            return (.json(status, body), status == 404 || body.contains("\"notifications\":[]"))
        }
    }

    /// Asks `round` on the slow-work lane until its answer is not empty or the request's `wait`
    /// (seconds, at most 300) has passed, every 100 ms, then sends the last answer.
    func poll(_ ex: Exchange, _ round: @escaping @Sendable () -> (Response, empty: Bool)) {
        let wait = ex.request.queryParameter("wait").flatMap { Int($0) }.map { min(max($0, 0), 300) } ?? 0
        let accepted = worker.submit {
            let deadline = Clock.nowMs() + Int64(wait) * 1000
            while true {
                let (response, empty) = round()
                if !empty || Clock.nowMs() >= deadline { return ex.respond(response) }
                usleep(100_000)
            }
        }
        if !accepted { ex.respond(AdminAPI.busy(worker, "slow work")) }
    }

    /// `body` parsed as a JSON object, as large as a node's answer may be, or nil.
    static func withObject<R>(_ body: [UInt8], _ read: (JSONView) -> R) -> R? {
        body.withUnsafeBytes { raw in
            var t: [JSONToken] = []
            var limits = JSONLimits()
            limits.maxTokens = 1 << 22
            guard JSONParser.parse(raw, into: &t, limits: limits) == nil, t.first?.kind == .object else { return nil }
            return read(JSONView(bytes: raw, tokens: t))
        }
    }

    /// The target with any `wait` parameter taken out (each node is asked once per round).
    static func withoutWait(_ target: [UInt8]) -> [UInt8] {
        let s = String(decoding: target, as: UTF8.self)
        guard let q = s.firstIndex(of: "?") else { return target }
        let kept = s[s.index(after: q)...].split(separator: "&").filter { !$0.hasPrefix("wait=") }
        return Array((String(s[..<q]) + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&"))).utf8)
    }

    /// Every node's answer to `target` (asked for its own, in the nodes' order), and the nodes
    /// that did not answer (`(redis)` when the nodes cannot be listed).
    func ask(_ target: String, method: String = "GET") -> (answers: [(node: String, status: Int, body: [UInt8])], unreachable: [String]) {
        var answers: [(node: String, status: Int, body: [UInt8])] = []
        var unreachable: [String] = []
        let nodes: [ClusterLink.NodeStatus]
        do {
            nodes = try link.nodes().nodes
        } catch {
            // Without Redis the peers are unknown: this node answers for itself.
            nodes = [
                ClusterLink.NodeStatus(
                    name: link.options.node, url: link.advertisedURL, healthy: true, lagMs: nil, ratePerSecond: nil, applied: nil,
                    degraded: nil, isSelf: true)
            ]
            unreachable.append("(redis)")
        }
        for n in nodes {
            guard n.healthy, let r = PeerHTTP.get(n.url, target, method: method, headers: [(ClusterReads.localHeaderName, "1")]) else {
                unreachable.append(n.name)
                continue
            }
            answers.append((n.name, r.status, r.body))
        }
        return (answers, unreachable)
    }

    /// `object` with `"partial": true, "unreachable": [...]` added when a node did not answer.
    static func mark(_ object: String, _ unreachable: [String]) -> String {
        guard !unreachable.isEmpty, object.hasSuffix("}") else { return object }
        return String(object.dropLast()) + ",\"partial\":true,\"unreachable\":["
            + unreachable.map(JSONWriter.quote).joined(separator: ",") + "]}"
    }

    /// One round: every node's answer, merged.
    func gather(_ target: String, _ kind: Kind) -> (Int, String) {
        let (answers, unreachable) = ask(target)
        func mark(_ object: String) -> String { ClusterReads.mark(object, unreachable) }
        switch kind {
        case .one, .latest:
            let found = answers.filter { $0.status == 200 }.compactMap { a -> (NotificationLog.PageKey, String)? in
                let text = String(decoding: a.body, as: UTF8.self)
                return ClusterReads.key(ofObject: a.body).map { ($0, text) }
            }
            guard let best = found.max(by: { $0.0 < $1.0 }) else {
                if let error = answers.first(where: { $0.status != 404 && $0.status != 200 }) {
                    return (error.status, String(decoding: error.body, as: UTF8.self))
                }
                let what = kind.isLatest ? "no notification matches" : "no notification with this id is recorded on any node"
                return (404, mark(AdminAPI.errorBody(404, what)))
            }
            return (200, mark(best.1))
        case .list(let order, let limit):
            if let error = answers.first(where: { $0.status != 200 }) { return (error.status, String(decoding: error.body, as: UTF8.self)) }
            var items: [(NotificationLog.PageKey, String)] = []
            var more = false
            for a in answers {
                let (list, next) = ClusterReads.items(a.body)
                items += list
                more = more || next
            }
            // Each node answered in the list's order; merged, the same order over all of them.
            var seen = Set<UUIDValue>()
            items = items.filter { seen.insert($0.0.id).inserted }
            items.sort { $0.0 < $1.0 }
            var page: [(NotificationLog.PageKey, String)]
            let nextKey: NotificationLog.PageKey?
            switch order {
            case "asc":
                page = Array(items.prefix(limit))
                nextKey = (more || items.count > limit) ? page.last?.0 : nil
            case "desc":
                page = Array(items.reversed().prefix(limit))
                nextKey = (more || items.count > limit) ? page.last?.0 : nil
            default:
                page = Array(items.suffix(limit))
                nextKey = (more || items.count > limit) ? page.first?.0 : nil
            }
            var out = JSONObjectWriter()
            out.add("notifications", jsonArray: page.map(\.1))
            out.add("next", json: nextKey.map { JSONWriter.quote(NotificationCursor(key: $0).text) } ?? "null")
            return (200, mark(out.text))
        }
    }

    /// A notification object's (receivedAt, id).
    static func key(ofObject body: [UInt8]) -> NotificationLog.PageKey? {
        body.withUnsafeBytes { raw in
            var t: [JSONToken] = []
            guard JSONParser.parse(raw, into: &t) == nil, t.first?.kind == .object else { return nil }
            return key(JSONView(bytes: raw, tokens: t), 0)
        }
    }

    static func key(_ v: JSONView, _ object: Int) -> NotificationLog.PageKey? {
        guard let at = v.member(object, "receivedAt"), let ms = v.number(at), let i = v.member(object, "id"),
            let id = UUIDValue.parseCanonicalLowercase(Array(v.string(i).lowercased().utf8))
        else { return nil }
        return NotificationLog.PageKey(atMs: Int64(ms), id: id)
    }

    /// A list answer's notifications (each with its key and its JSON as sent) and whether it had a `next`.
    static func items(_ body: [UInt8]) -> ([(NotificationLog.PageKey, String)], Bool) {
        withObject(body) { v in
            var out: [(NotificationLog.PageKey, String)] = []
            if let a = v.member(0, "notifications") {
                v.forEachElement(a) { e in
                    if let k = key(v, e) { out.append((k, String(decoding: v.raw(e), as: UTF8.self))) }
                }
            }
            let next = v.member(0, "next").map { v.tokens[$0].kind == .string } ?? false
            return (out, next)
        } ?? ([], false)
    }
}

extension ClusterReads.Kind {
    var isLatest: Bool {
        if case .latest = self { return true }
        return false
    }
}
