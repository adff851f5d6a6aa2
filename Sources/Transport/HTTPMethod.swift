/// Request methods. Unknown but well-formed methods are kept as `.other`.
public enum HTTPMethod: Equatable, Hashable, Sendable {
    case get, head, post, put, delete, patch, options, connect, trace
    case other(String)

    public init<C: Collection>(bytes: C) where C.Element == UInt8 {
        switch bytes.count {
        case 3:
            if bytes.equals("GET") {
                self = .get
                return
            }
            if bytes.equals("PUT") {
                self = .put
                return
            }
        case 4:
            if bytes.equals("POST") {
                self = .post
                return
            }
            if bytes.equals("HEAD") {
                self = .head
                return
            }
        case 5:
            if bytes.equals("PATCH") {
                self = .patch
                return
            }
            if bytes.equals("TRACE") {
                self = .trace
                return
            }
        case 6:
            if bytes.equals("DELETE") {
                self = .delete
                return
            }
        case 7:
            if bytes.equals("OPTIONS") {
                self = .options
                return
            }
            if bytes.equals("CONNECT") {
                self = .connect
                return
            }
        default: break
        }
        self = .other(String(decoding: bytes, as: UTF8.self))
    }

    public var name: String {
        switch self {
        case .get: "GET"
        case .head: "HEAD"
        case .post: "POST"
        case .put: "PUT"
        case .delete: "DELETE"
        case .patch: "PATCH"
        case .options: "OPTIONS"
        case .connect: "CONNECT"
        case .trace: "TRACE"
        case .other(let s): s
        }
    }
}

public enum HTTPVersion: Sendable, Equatable {
    case http10, http11, http2
}
