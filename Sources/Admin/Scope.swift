import Fleet
import Observation
import PushCore
import Transport

/// `scope=`: one team's, project's or label's part of a shared emulator (parallel CI jobs, each
/// with its own key or project, see and reset only their own). `team:TEAMID` is the APNs team
/// whose credentials sent a push (a provider token's issuer, a certificate's OU);
/// `project:PROJECTID` an FCM project; `label:NAME` the pushes to devices (and fleets' members)
/// with that label.
enum Scope: Sendable, Equatable {
    case team(String)
    case project(String)
    case label(String)

    static let forms = "team:TEAMID, project:PROJECTID or label:NAME"

    /// The request's `scope`, nil when it has none; a 400's words when it is not one of the forms.
    static func of(_ request: Request) throws(NotificationQuery.QueryError) -> Scope? {
        guard let raw = request.queryParameter("scope"), !raw.isEmpty else { return nil }
        return try parse(percentDecode(raw))
    }

    static func parse(_ text: String) throws(NotificationQuery.QueryError) -> Scope {
        guard let colon = text.firstIndex(of: ":") else {
            throw .init(description: "scope must be \(forms), not \(text)")
        }
        let value = String(text[text.index(after: colon)...])
        guard !value.isEmpty, value.utf8.count <= 256 else {
            throw .init(description: "scope \(text[..<colon]): needs a value of at most 256 bytes")
        }
        switch text[..<colon] {
        case "team": return .team(value)
        case "project": return .project(value)
        case "label": return .label(value)
        default: throw .init(description: "scope must be \(forms), not \(text)")
        }
    }

    var text: String {
        switch self {
        case .team(let v): "team:" + v
        case .project(let v): "project:" + v
        case .label(let v): "label:" + v
        }
    }

    /// Whether a push (its provider, environment or project, sending team and token) is in the
    /// scope; `labels` gives a token's device's labels (asked for `label:` only).
    func holds(provider: PushProvider, environment: String, team: String?, token: String, labels: (String) -> [String]) -> Bool {
        switch self {
        case .team(let t): return team == t
        case .project(let p): return provider == .fcm && environment == p
        case .label(let l): return labels(token).contains(l)
        }
    }

    func holds(_ n: PushNotification, labels: (String) -> [String]) -> Bool {
        holds(
            provider: n.provider, environment: n.environment, team: n.team, token: String(decoding: n.token, as: UTF8.self),
            labels: labels)
    }
}

extension Scope {
    /// Tokens at most gathered for a scope's devices.
    static let maxTokens = 100_000

    /// The scope's devices' tokens: with a label, the devices carrying it; for a team or a
    /// project, the devices its notifications held in memory went to (a device belongs to no
    /// team: a team's devices are those it pushed to).
    func tokens(log: NotificationLog, devices: DeviceStore) -> Set<String> {
        switch self {
        case .label(let l):
            return Set(devices.page(after: nil, limit: Scope.maxTokens, label: l).devices.map(\.token))
        case .team, .project:
            var f = NotificationLog.Filter()
            f.limit = Scope.maxTokens
            let scope = self
            f.matches = { scope.holds($0, labels: { _ in [] }) }
            return Set(log.query(f).map { String(decoding: $0.token, as: UTF8.self) })
        }
    }
}
