/// A response a handler gives back. Header names must be lowercase and must not be
/// connection-specific (`connection`, `transfer-encoding`...): the codecs add framing.
/// An empty body is sent as a HEADERS frame with END_STREAM and no DATA frame over HTTP/2.
public struct Response: Sendable {
    public var status: Int
    public var headers: HTTPFields
    public var body: [UInt8]

    public init(status: Int, headers: HTTPFields = HTTPFields(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The status of a `verbatim` response.
    static let verbatimStatus = -1

    /// Bytes written to an HTTP/1.x connection as they are, which then closes: for a service
    /// that answers an HTTP/1.x request with another protocol's bytes (an HTTP/2-only server's
    /// SETTINGS and GOAWAY). Over HTTP/2 it is a 500.
    public static func verbatim(_ bytes: [UInt8]) -> Response { Response(status: verbatimStatus, body: bytes) }

    /// A response with `content-type: application/json`.
    public static func json(_ status: Int, _ body: String) -> Response {
        var h = HTTPFields()
        h.add(name: "content-type", value: "application/json")
        return Response(status: status, headers: h, body: Array(body.utf8))
    }

    /// A response with `content-type: text/plain; charset=utf-8`.
    public static func text(_ status: Int, _ body: String) -> Response {
        var h = HTTPFields()
        h.add(name: "content-type", value: "text/plain; charset=utf-8")
        return Response(status: status, headers: h, body: Array(body.utf8))
    }
}

/// Reason phrases for the HTTP/1.1 status line.
func reasonPhrase(_ status: Int) -> StaticString {
    switch status {
    case 100: "Continue"
    case 101: "Switching Protocols"
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 304: "Not Modified"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 410: "Gone"
    case 411: "Length Required"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 415: "Unsupported Media Type"
    case 417: "Expectation Failed"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    case 505: "HTTP Version Not Supported"
    default: "Unknown"
    }
}
