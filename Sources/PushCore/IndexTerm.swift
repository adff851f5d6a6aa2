/// One condition of a notification search, in the form a journal's index can test without
/// reading records (`NotificationLog.Filter.indexTerms`). Every term must hold; an index that
/// cannot tell answers "maybe", so a term only ever narrows what is read, never what matches:
/// the records read are still checked by the filter itself.
public enum IndexTerm: Sendable, Hashable {
    case provider(PushProvider)
    case token(String)
    case id(UUIDValue)
    case topic(String)
    case environment(String)
    /// The app an `apns-topic` names.
    case app(String)
    /// Any campaign id the payload carries.
    case campaign(String)
    /// A display outcome's name (`shown`, `quiet`, `not-shown`).
    case display(String)
    case lint(String)
    case hasWarnings
    case hasLint
    /// Lowercased text found in the alert's title, subtitle or body.
    case text(String)
    /// Received at or after this time (milliseconds since the epoch).
    case atOrAfter(Int64)
    /// Received at or before this time.
    case atOrBefore(Int64)
    /// Nothing can match (a status other than 200, a rejection reason: notifications were accepted).
    case nothing
}

/// A payload's searchable facts that only a payload reader knows: every campaign id it carries
/// and its alert text, lowercased (what a journal's index keeps of it).
public struct PayloadTerms: Sendable {
    public var campaigns: [String]
    public var alertText: String
    public init(campaigns: [String], alertText: String) {
        self.campaigns = campaigns
        self.alertText = alertText
    }
}

public typealias PayloadTermsReader = @Sendable (PushProvider, UnsafeRawBufferPointer) -> PayloadTerms
