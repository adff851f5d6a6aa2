import Fleet
import Observation
import PushCore
import Transport

/// The admin API's `scope=` (`PushScope`, read the same by fault rules): from a request's query,
/// and which pushes, notifications and devices it holds.
typealias Scope = PushScope

extension PushScope {
    /// The request's `scope`, nil when it has none; a 400's words when it is not one of the forms.
    static func of(_ request: Request) throws(NotificationQuery.QueryError) -> Scope? {
        guard let raw = request.queryParameter("scope"), !raw.isEmpty else { return nil }
        return try parse(query: percentDecode(raw))
    }

    /// `text` as a scope, its problem in the admin API's 400.
    static func parse(query text: String) throws(NotificationQuery.QueryError) -> Scope {
        do {
            return try parse(text)
        } catch {
            throw .init(description: error.description)
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
