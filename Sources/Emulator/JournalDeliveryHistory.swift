import Fleet
import Journal
import PushCore

/// The journal as the device layer's `DeliveryHistory`: the notifications accepted for a
/// token, found through the journal's index (its token term), newest first, with each one's
/// collapse id read from what was sent (`apns-collapse-id`; FCM's `android.collapse_key`, or
/// the `apns-collapse-id` of its `apns.headers`, in the message or the request body around it).
final class JournalDeliveryHistory: DeliveryHistory {
    let journal: Journal

    init(_ journal: Journal) { self.journal = journal }

    func delivered(token: String, limit: Int) -> [DeliveredNotification] {
        guard limit > 0 else { return [] }
        var out: [DeliveredNotification] = []
        let search = JournalSearch(records: .notifications, terms: [.token(token)], newestFirst: true)
        journal.search(
            search, more: { _ in out.count < limit },
            each: { entry in
                guard case .request(let r) = entry, r.token == token, let id = r.notificationID.flatMap(JournalDeliveryHistory.uuid) else {
                    return true
                }
                out.append(
                    DeliveredNotification(notificationID: id, receivedAtMs: r.atMs, collapseID: JournalDeliveryHistory.collapseID(r)))
                return out.count < limit
            })
        return out.reversed()
    }

    static func uuid(_ s: String) -> UUIDValue? {
        UUIDValue.parseCanonicalLowercase(Array(s.lowercased().utf8))
    }

    static func collapseID(_ r: StoredRequest) -> String? {
        if r.provider == .apns { return r.headers.first { $0.name == "apns-collapse-id" }?.value }
        guard r.provider == .fcm else { return nil }
        return r.payload.withUnsafeBytes { raw -> String? in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, !tokens.isEmpty else { return nil }
            let v = JSONView(bytes: raw, tokens: tokens)
            // The whole request body (`{"message":{...}}`) or, as the journal keeps an accepted send, the message.
            let m = v.member(0, "message") ?? 0
            if let a = v.member(m, "android"), let c = v.member(a, "collapse_key"), v.tokens[c].kind == .string { return v.string(c) }
            if let a = v.member(m, "apns"), let h = v.member(a, "headers"), let c = v.member(h, "apns-collapse-id"),
                v.tokens[c].kind == .string
            {
                return v.string(c)
            }
            return nil
        }
    }
}
