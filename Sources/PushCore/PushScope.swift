/// `scope=`: one team's, project's or label's part of a shared emulator (parallel CI jobs, each
/// with its own key or project, see and reset only their own). `team:TEAMID` is the APNs team
/// whose credentials sent a push (a provider token's issuer, a certificate's OU);
/// `project:PROJECTID` an FCM project; `label:NAME` the pushes to devices (and fleets' members)
/// with that label. Read the same by the admin API and by fault rules.
public enum PushScope: Sendable, Equatable {
    case team(String)
    case project(String)
    case label(String)

    /// The forms, for messages.
    public static let forms = "team:TEAMID, project:PROJECTID or label:NAME"
    /// The longest value taken, in bytes.
    public static let maxValueBytes = 256

    /// Why a text is no scope, in words for a 400.
    public struct Invalid: Error, Sendable {
        /// What is wrong, after the word "scope" (`must be …`, `team: needs a value …`).
        public let problem: String
        /// The problem as a sentence of its own.
        public var description: String { "scope " + problem }
    }

    /// `text` as a scope (`kind:value`).
    public static func parse(_ text: String) throws(Invalid) -> PushScope {
        guard let colon = text.firstIndex(of: ":") else {
            throw Invalid(problem: "must be \(forms), not \(text)")
        }
        let value = String(text[text.index(after: colon)...])
        let scope: PushScope
        switch text[..<colon] {
        case "team": scope = .team(value)
        case "project": scope = .project(value)
        case "label": scope = .label(value)
        default: throw Invalid(problem: "must be \(forms), not \(text)")
        }
        guard !value.isEmpty, value.utf8.count <= maxValueBytes else {
            throw Invalid(problem: "\(text[..<colon]): needs a value of at most \(maxValueBytes) bytes")
        }
        return scope
    }

    /// `kind:value`, as given.
    public var text: String {
        switch self {
        case .team(let v): "team:" + v
        case .project(let v): "project:" + v
        case .label(let v): "label:" + v
        }
    }
}
