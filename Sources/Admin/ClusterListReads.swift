import PushCore
import Runtime
import Transport

/// Lists other than the notifications, for the whole cluster: the tracking calls
/// (`/tracking`) and a device's inbox (`/devices/{token}/inbox`). Each node holds those its own
/// pushes caused, so the answering node asks every node for its own and merges them in time
/// order (the newest `limit`, oldest first), without duplicates; a `wait` is polled across the
/// nodes; a node that does not answer is named (`partial`, `unreachable`).
extension ClusterReads {
    struct ListShape: Sendable {
        /// The answer's array member.
        let member: StaticString
        /// Each element's time (ms) member, and the members that together name it once.
        let time: StaticString
        let identity: [StaticString]
    }

    static let trackingList = ListShape(member: "tracking", time: "at", identity: ["notificationId", "event", "url", "attempt", "token"])
    static let inboxList = ListShape(member: "inbox", time: "receivedAt", identity: ["notificationId", "activityEvent"])

    func answerList(_ ex: Exchange, _ shape: ListShape, limit: Int) {
        let target = String(decoding: ClusterReads.withoutWait(Array(ex.request.target)), as: UTF8.self)
        poll(ex) { [self] in
            let (answers, unreachable) = ask(target)
            if let error = answers.first(where: { $0.status != 200 }), answers.allSatisfy({ $0.status != 200 }) {
                return (.json(error.status, String(decoding: error.body, as: UTF8.self)), false)
            }
            var items: [(Int64, String, String)] = []
            for a in answers where a.status == 200 { items += ClusterReads.elements(a.body, shape) }
            var seen = Set<String>()
            items = items.filter { seen.insert($0.1).inserted }
            items.sort { $0.0 < $1.0 }
            var out = JSONObjectWriter()
            out.add(shape.member.description, jsonArray: items.suffix(limit).map(\.2))
            return (.json(200, ClusterReads.mark(out.text, unreachable)), items.isEmpty)
        }
    }

    /// A list answer's elements: each one's time, identity and JSON as sent.
    static func elements(_ body: [UInt8], _ shape: ListShape) -> [(Int64, String, String)] {
        withObject(body) { v in
            guard let list = v.member(0, shape.member) else { return [] }
            var out: [(Int64, String, String)] = []
            v.forEachElement(list) { e in
                guard v.tokens[e].kind == .object else { return }
                let at = v.member(e, shape.time).flatMap { v.number($0) }.map { Int64($0) } ?? 0
                let identity = shape.identity.map { name in v.member(e, name).map { String(decoding: v.raw($0), as: UTF8.self) } ?? "" }
                out.append((at, identity.joined(separator: "\u{1}"), String(decoding: v.raw(e), as: UTF8.self)))
            }
            return out
        } ?? []
    }
}
