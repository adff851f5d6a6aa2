/// One request a test sends, and the answer it got: status, headers (lowercased names, in
/// order) and body.
package struct TestRequest: Sendable {
    package var method: String
    package var path: String
    package var headers: [(String, String)]
    package var body: [UInt8]

    package init(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    package init(_ method: String, _ path: String, headers: [(String, String)] = [], body: String) {
        self.init(method, path, headers: headers, body: Array(body.utf8))
    }
}

package struct TestResponse: Sendable {
    package var status: Int
    package var headers: [(String, String)]
    package var body: [UInt8]

    package init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as UTF-8 text.
    package var text: String { String(decoding: body, as: UTF8.self) }

    /// The first value of a header (name lowercased).
    package func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }
}

/// Why a test client gave up.
package struct TestClientError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
