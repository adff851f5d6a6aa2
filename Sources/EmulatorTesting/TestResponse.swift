/// One request a test sends, and the answer it got: status, headers (lowercased names, in
/// order) and body.
public struct TestRequest: Sendable {
    public var method: String
    public var path: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    public init(_ method: String, _ path: String, headers: [(String, String)] = [], body: String) {
        self.init(method, path, headers: headers, body: Array(body.utf8))
    }
}

public struct TestResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The first value of a header (name lowercased).
    public func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }
}

/// Why a test client gave up.
public struct TestClientError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
