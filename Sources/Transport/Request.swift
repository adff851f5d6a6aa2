import Glibc

/// A request as the handler sees it: method, all header fields, and the body.
///
/// `headers` holds every field in arrival order with lowercase names, including the HTTP/2
/// pseudo-headers (`:path`, `:authority`, ...). HTTP/1.1 requests get a synthesized `:path`
/// (and `:authority` for absolute-form targets) so handlers read both protocols the same way.
public struct Request: Sendable {
    public internal(set) var version: HTTPVersion
    public internal(set) var method: HTTPMethod
    public internal(set) var headers: HTTPFields
    public internal(set) var body: [UInt8]
    /// Index of `:path` in `headers` when the codec recorded it (-1: search).
    var pathIndex: Int32 = -1

    public init(version: HTTPVersion, method: HTTPMethod, headers: HTTPFields, body: [UInt8] = []) {
        self.version = version
        self.method = method
        self.headers = headers
        self.body = body
    }

    /// The request target including any query string (`:path`).
    public var target: ArraySlice<UInt8> {
        if pathIndex >= 0 { return headers.value(at: Int(pathIndex)) }
        return headers.first(":path") ?? []
    }

    /// The path without the query string.
    public var path: ArraySlice<UInt8> {
        let t = target
        let q = t.withUnsafeBytes { raw -> Int? in
            guard let base = raw.baseAddress, let hit = memchr(base, 0x3F, raw.count) else { return nil }
            return base.distance(to: UnsafeRawPointer(hit))
        }
        if let q { return t[t.startIndex..<(t.startIndex + q)] }
        return t
    }

    /// The query string without the leading `?`, or nil.
    public var query: ArraySlice<UInt8>? {
        let t = target
        guard let q = t.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        return t[(q + 1)...]
    }

    /// `:authority`, else the `host` header (aioapns sends only `host`).
    public var authority: ArraySlice<UInt8>? {
        headers.first(":authority") ?? headers.first("host")
    }

    /// Query parameter value (percent-decoding not applied), for admin endpoints.
    public func queryParameter(_ name: String) -> String? {
        guard let q = query else { return nil }
        for part in q.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let kv = part.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            if kv[0].utf8String == name { return kv.count > 1 ? kv[1].utf8String : "" }
        }
        return nil
    }
}
