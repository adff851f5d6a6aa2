/// One HTTP request a simulated SDK makes to a campaign platform's tracking server.
public struct TrackingRequest: Sendable, Equatable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    public static func == (a: TrackingRequest, b: TrackingRequest) -> Bool {
        a.method == b.method && a.url == b.url && a.body == b.body
            && a.headers.map { "\($0.0): \($0.1)" } == b.headers.map { "\($0.0): \($0.1)" }
    }
}

/// The events an SDK reports: a notification received or opened, and the app's token
/// registered with (or unregistered from) the campaign platform, and the app opening.
public enum TrackingEvent: String, Sendable, CaseIterable {
    case receive
    case open
    case register
    case unregister
    /// The app opened from a push (Pushwoosh's `applicationOpen`), apart from the push's open.
    case appOpen

    /// The events a tracking configuration reports (registration has its own configuration).
    static let notificationEvents: Set<TrackingEvent> = [.receive, .open]
}
