import Glibc
import Journal
import PushCore
import Tracking
import Transport

/// The journal's endpoints: `GET /emulator/v1/report`, and the inspection endpoints' reach into
/// the journal for notifications and tracking attempts the in-memory logs no longer hold.
/// Journal reads run on a thread of their own (a report over millions of records never stalls a
/// loop); the answer is sent from there.
struct JournalAdminAPI: Sendable {
    let journal: Journal

    func register(_ r: inout Router) {
        let journal = self.journal
        r.add(.get, "/emulator/v1/report") { ex in
            let q = ex.request
            let format = q.queryParameter("format").flatMap { $0.isEmpty ? nil : $0 } ?? "json"
            guard let f = CampaignReport.Format(rawValue: format) else {
                return ex.respond(AdminAPI.error(400, "format must be json, text or html"))
            }
            var since: Int64 = 0
            if let v = q.queryParameter("since").flatMap({ $0.isEmpty ? nil : percentDecode($0) }) {
                guard let ms = TimeArgument.parse(v, nowMs: Clock.nowMs()) else {
                    return ex.respond(AdminAPI.error(400, "since takes milliseconds since the epoch, an ISO 8601 UTC time, or an age such as 30m, 12h, 7d"))
                }
                since = ms
            }
            let campaign = q.queryParameter("campaign").flatMap { $0.isEmpty ? nil : percentDecode($0) }
            let sinceMs = since
            JournalAdminAPI.offLoop {
                let text = journal.report(sinceMs: sinceMs, campaign: campaign).render(f)
                var h = HTTPFields()
                h.add(name: "content-type", value: JournalAdminAPI.contentType(f))
                ex.respond(Response(status: 200, headers: h, body: Array(text.utf8)))
            }
        }
    }

    static func contentType(_ f: CampaignReport.Format) -> String {
        switch f {
        case .json: "application/json"
        case .text: "text/plain; charset=utf-8"
        case .html: "text/html; charset=utf-8"
        }
    }

    /// Runs `body` on a new detached thread.
    static func offLoop(_ body: @escaping @Sendable () -> Void) {
        let t = Threads.spawn(body)
        pthread_detach(t)
    }

    /// Accepted notifications from the journal matching `filter` that the in-memory log no longer
    /// has (`known` ids excluded), newest first, at most `limit`.
    func notifications(_ filter: NotificationLog.Filter, campaignKeys: [String], excluding known: Set<UUIDValue>,
                       limit: Int) -> [PushNotification] {
        var out: [PushNotification] = []
        guard limit > 0 else { return out }
        journal.scan(newestFirst: true) { e in
            guard case .request(let r) = e, r.status == 200, let idText = r.notificationID,
                  let id = UUIDValue.parseCanonicalLowercase(Array(idText.utf8)), !known.contains(id) else { return true }
            if let p = filter.provider, p != r.provider { return true }
            if let t = filter.token, t != r.token { return true }
            if let t = filter.topic, t != r.topic { return true }
            var headers = HTTPFields()
            for (n, v) in r.headers { headers.add(name: n, value: v) }
            let isJSON = r.payload.withUnsafeBytes { raw -> Bool in
                var tokens: [JSONToken] = []
                return !raw.isEmpty && JSONParser.parse(raw, into: &tokens) == nil
            }
            let n = PushNotification(id: id, provider: r.provider, receivedAtMs: r.atMs, environment: r.environment,
                                     token: Array(r.token.utf8)[...], topic: r.topic.map { Array($0.utf8)[...] }, headers: headers,
                                     payload: r.payload, payloadIsJSON: isJSON, warnings: r.warnings)
            if let m = filter.matches, !m(n) { return true }
            out.append(n)
            return out.count < limit
        }
        return out
    }

    /// Tracking attempts from the journal matching `filter`, newest first, at most `limit`, older
    /// than `beforeMs` (what the in-memory log still holds is newer).
    func tracking(_ filter: TrackingLog.Filter, beforeMs: Int64, limit: Int) -> [TrackingAttempt] {
        var out: [TrackingAttempt] = []
        guard limit > 0 else { return out }
        journal.scan(newestFirst: true) { e in
            guard case .tracking(let t) = e, t.atMs < beforeMs, let event = TrackingEvent(rawValue: t.event) else { return true }
            if let tok = filter.token, tok != t.token { return true }
            if let ev = filter.event, ev != event { return true }
            if let st = filter.status, String(t.status) != st && t.outcome != st { return true }
            out.append(TrackingAttempt(event: event, preset: t.preset, token: t.token, notificationID: t.notificationID, method: t.method,
                                       url: t.url, status: t.status, latencyMs: t.latencyMs, error: t.error, attempt: t.attempt,
                                       outcome: t.outcome, atMs: t.atMs, events: t.events))
            return out.count < limit
        }
        return out
    }
}

/// `--since` values: milliseconds since the epoch, an ISO 8601 UTC time
/// (`2026-11-29T10:00:00Z`, or a date), or an age before now (`90s`, `30m`, `12h`, `7d`).
enum TimeArgument {
    static func parse(_ v: String, nowMs: Int64) -> Int64? {
        if let ms = Int64(v), ms >= 0 { return ms }
        if let age = ServeOptions.durationMs(v), v.last?.isLetter == true { return nowMs - age }
        // YYYY-MM-DD[THH:MM[:SS][Z]]
        let b = Array(v.utf8)
        func num(_ r: Range<Int>) -> Int? {
            guard r.upperBound <= b.count, r.allSatisfy({ b[$0] >= 48 && b[$0] <= 57 }) else { return nil }
            return r.reduce(0) { $0 * 10 + Int(b[$1] - 48) }
        }
        guard b.count >= 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), (1...12).contains(mo), (1...31).contains(d) else { return nil }
        var h = 0, mi = 0, s = 0
        if b.count > 10 {
            guard b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "), let hh = num(11..<13), b.count > 13, b[13] == UInt8(ascii: ":"),
                  let mm = num(14..<16), hh < 24, mm < 60 else { return nil }
            h = hh; mi = mm
            var i = 16
            if b.count > 16, b[16] == UInt8(ascii: ":") { guard let ss = num(17..<19), ss < 61 else { return nil }; s = ss; i = 19 }
            if i < b.count { guard b[i] == UInt8(ascii: "Z"), i == b.count - 1 else { return nil } }
        }
        // days from civil (the inverse of Clock.civil)
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return (Int64(days) * 86400 + Int64(h * 3600 + mi * 60 + s)) * 1000
    }
}
