import Observation
import PushCore
import Tracking
import Transport

/// A search over the recorded notifications, as `GET /emulator/v1/notifications`,
/// `.../notifications/latest` take it: the parameters `provider`, `token`, `topic`, `campaign`,
/// and `q`, a space-separated list of terms that must all hold:
///
/// - `provider:apns|fcm`, `token:T`, `topic:T` (the APNs topic, or an FCM fan-out's topic or
///   condition), `campaign:ID` (the ids campaign platforms carry, as `campaign=`), `app:BUNDLE`
///   (the `apns-topic`'s app), `environment:sandbox|production|PROJECT`;
/// - `status:200` (every recorded notification was accepted: any other status matches none),
///   `reason:R` (accepted ones have none);
/// - `after:T`, `before:T` (milliseconds, an ISO 8601 UTC time, or an age such as `30m`);
/// - `has:warnings`, `has:lint`; `display:shown|quiet|not-shown`; `lint:CODE`;
/// - any other word (or `"a quoted phrase"`): found, ignoring case, in the alert's title,
///   subtitle or body (APNs `aps.alert`; FCM `notification`, `android.notification`).
///
/// A term it does not know is an error naming it (400), never silently ignored.
struct NotificationQuery: Sendable {
    var provider: PushProvider?
    var token: String?
    var topic: String?
    var campaigns: [String] = []
    var apps: [String] = []
    var environments: [String] = []
    var afterMs: Int64?
    var beforeMs: Int64?
    /// nil: any; false: none can match (a status other than 200, a reason).
    var satisfiable = true
    var hasWarnings = false
    var hasLint = false
    var display: Display.Outcome?
    var lintCodes: [String] = []
    var words: [String] = []
    /// `scope=` (see `Scope`), with how a token's device's labels are found.
    var scope: Scope?
    var labels: @Sendable (String) -> [String] = { _ in [] }

    struct QueryError: Error, CustomStringConvertible { let description: String }

    /// The terms as the parameters and `q` give them.
    static func parse(
        _ request: Request, nowMs: Int64, labels: @escaping @Sendable (String) -> [String] = { _ in [] }
    ) throws(QueryError) -> NotificationQuery {
        var query = NotificationQuery()
        query.labels = labels
        func parameter(_ name: String) -> String? {
            request.queryParameter(name).flatMap { $0.isEmpty ? nil : percentDecode($0) }
        }
        if let p = parameter("provider") { try query.add("provider", p, nowMs: nowMs) }
        if let t = parameter("token") { query.token = t }
        if let t = parameter("topic") { query.topic = t }
        if let c = parameter("campaign") { query.campaigns.append(c) }
        query.scope = try Scope.of(request)
        if let q = parameter("q") {
            for term in try terms(q) {
                if let colon = term.text.firstIndex(of: ":"), !term.quoted {
                    try query.add(String(term.text[..<colon]), String(term.text[term.text.index(after: colon)...]), nowMs: nowMs)
                } else {
                    query.words.append(term.text.lowercased())
                }
            }
        }
        return query
    }

    struct Term {
        var text: String
        var quoted: Bool
    }

    /// Splits `q` on spaces; `"..."` keeps a phrase (or a term's value: `topic:"a b"`) whole.
    static func terms(_ q: String) throws(QueryError) -> [Term] {
        var out: [Term] = []
        var current = ""
        var quoted = false
        var inQuotes = false
        for c in q {
            if c == "\"" {
                if inQuotes {
                    inQuotes = false
                } else {
                    inQuotes = true
                    if current.isEmpty { quoted = true }
                }
            } else if c == " " && !inQuotes {
                if !current.isEmpty { out.append(Term(text: current, quoted: quoted)) }
                current = ""
                quoted = false
            } else {
                current.append(c)
            }
        }
        guard !inQuotes else { throw QueryError(description: "q has an unclosed quote") }
        if !current.isEmpty { out.append(Term(text: current, quoted: quoted)) }
        guard out.count <= 32 else { throw QueryError(description: "q takes at most 32 terms") }
        return out
    }

    static let names = [
        "provider", "token", "topic", "campaign", "app", "environment", "status", "reason", "after", "before", "has",
        "display", "lint",
    ]

    mutating func add(_ name: String, _ value: String, nowMs: Int64) throws(QueryError) {
        guard !value.isEmpty else { throw QueryError(description: "\(name): needs a value") }
        switch name {
        case "provider":
            guard let p = PushProvider.named(value) else {
                throw QueryError(description: "provider must be \(PushProvider.namesForMessages)")
            }
            provider = p
        case "token": token = value
        case "topic": topic = value
        case "campaign": campaigns.append(value)
        case "app": apps.append(value)
        case "environment": environments.append(value)
        case "status":
            guard let s = Int(value), (100...599).contains(s) else { throw QueryError(description: "status: takes an HTTP status") }
            if s != 200 { satisfiable = false }
        case "reason": satisfiable = false
        case "after", "before":
            guard let ms = TimeArgument.parse(value, nowMs: nowMs) else {
                throw QueryError(
                    description: "\(name): takes milliseconds since the epoch, an ISO 8601 UTC time, or an age such as 30m, 12h, 7d")
            }
            if name == "after" { afterMs = ms } else { beforeMs = ms }
        case "has":
            switch value {
            case "warnings": hasWarnings = true
            case "lint": hasLint = true
            default: throw QueryError(description: "has: takes warnings or lint")
            }
        case "display":
            guard let o = Display.Outcome(name: value) else { throw QueryError(description: "display: takes shown, quiet or not-shown") }
            display = o
        case "lint": lintCodes.append(value)
        default:
            throw QueryError(
                description: "unknown search term \(name): (terms: \(NotificationQuery.names.map { $0 + ":" }.joined(separator: " ")))")
        }
    }

    /// The log's filter: provider, token and topic where the log checks them as bytes, the rest as a condition.
    func filter(campaignKeys: [String], limit: Int) -> NotificationLog.Filter {
        var f = NotificationLog.Filter()
        f.provider = provider
        f.token = token
        f.topic = topic
        f.limit = limit
        f.indexTerms = indexTerms
        if !isPlain {
            let query = self
            f.matches = { query.matches($0, campaignKeys: campaignKeys) }
        }
        return f
    }

    /// The conditions beyond provider, token and topic as the journal's index tests them.
    var indexTerms: [IndexTerm] {
        var terms: [IndexTerm] = satisfiable ? [] : [.nothing]
        terms += campaigns.map(IndexTerm.campaign) + apps.map(IndexTerm.app) + environments.map(IndexTerm.environment)
        if let a = afterMs { terms.append(.atOrAfter(a)) }
        if let b = beforeMs { terms.append(b == .min ? .nothing : .atOrBefore(b - 1)) }
        if hasWarnings { terms.append(.hasWarnings) }
        if hasLint { terms.append(.hasLint) }
        if let d = display { terms.append(.display(d.name)) }
        terms += lintCodes.map(IndexTerm.lint) + words.map(IndexTerm.text)
        return terms
    }

    /// Nothing beyond provider, token and topic.
    var isPlain: Bool {
        satisfiable && campaigns.isEmpty && apps.isEmpty && environments.isEmpty && afterMs == nil && beforeMs == nil
            && !hasWarnings && !hasLint && display == nil && lintCodes.isEmpty && words.isEmpty && scope == nil
    }

    /// The conditions beyond provider, token and topic, which the filter's reader checks first.
    func matches(_ n: PushNotification, campaignKeys: [String]) -> Bool {
        guard satisfiable else { return false }
        if let scope, !scope.holds(n, labels: labels) { return false }
        if let a = afterMs, n.receivedAtMs < a { return false }
        if let b = beforeMs, n.receivedAtMs >= b { return false }
        if hasWarnings && n.warnings.isEmpty { return false }
        if hasLint && n.lint.isEmpty { return false }
        if let d = display, n.display?.outcome != d { return false }
        for code in lintCodes where !n.lint.contains(where: { $0.code == code }) { return false }
        for e in environments where n.environment != e { return false }
        if !apps.isEmpty {
            let app = n.headers.firstString("apns-topic").map(APNsTopics.bundle)
            for a in apps where app != a { return false }
        }
        for c in campaigns where !CampaignID.matches(n, c, extra: campaignKeys) { return false }
        if !words.isEmpty {
            let text = NotificationQuery.alertText(n).lowercased()
            for w in words where !text.contains(w) { return false }
        }
        return true
    }

    /// The alert's title, subtitle and body, one per line.
    static func alertText(_ n: PushNotification) -> String {
        n.payloadIsJSON ? AlertText.of(PayloadReader(n.payload), provider: n.provider) : ""
    }
}

/// The app an `apns-topic` names (`com.example.app.voip` and the rest are the app's).
enum APNsTopics {
    static func bundle(_ topic: String) -> String { AppTopic.bundle(ofTopic: topic) }
}

/// Where a page of notifications ends: the last one's receive time and id, opaque to clients
/// (`next`). Pages are in (receive time, id) order, so a cursor stays valid while new pushes
/// arrive: they sort after every page already read (descending: before the first).
struct NotificationCursor: Sendable {
    var key: NotificationLog.PageKey

    init(key: NotificationLog.PageKey) { self.key = key }

    /// `<ms>.<uuid>` in base64url.
    var text: String { Base64URL.encode(Array("\(key.atMs).\(key.id)".utf8)) }

    init?(text: String) {
        guard text.utf8.count <= 128, let raw = Base64URL.decode(text.utf8) else { return nil }
        let parts = String(decoding: raw, as: UTF8.self).split(separator: ".", maxSplits: 1)
        guard parts.count == 2, let ms = Int64(parts[0]), ms >= 0,
            let id = UUIDValue.parseCanonicalLowercase(Array(parts[1].utf8))
        else { return nil }
        key = NotificationLog.PageKey(atMs: ms, id: id)
    }
}
