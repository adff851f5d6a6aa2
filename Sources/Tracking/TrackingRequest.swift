/// One HTTP request a simulated SDK makes to a campaign platform's tracking server.
package struct TrackingRequest: Sendable, Equatable {
    package var method: String
    package var url: String
    package var headers: [(String, String)]
    package var body: [UInt8]

    package init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    package static func == (a: TrackingRequest, b: TrackingRequest) -> Bool {
        a.method == b.method && a.url == b.url && a.body == b.body
            && a.headers.map { "\($0.0): \($0.1)" } == b.headers.map { "\($0.0): \($0.1)" }
    }
}

/// The events an SDK reports.
package enum TrackingEvent: String, Sendable, CaseIterable {
    case receive
    case open
}
