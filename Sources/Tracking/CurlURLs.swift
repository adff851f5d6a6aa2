import CCurl
import Glibc
import PushCore

/// Hands libcurl each transfer's URL already parsed, when that changes nothing.
///
/// Given only `CURLOPT_URL`, libcurl parses the URL and then rebuilds it as text at every
/// transfer (`curl_url_set` and `curl_url_get`: 12k of the 77k instructions a tracking request
/// cost its lane, measured with callgrind). Given a `CURLOPT_CURLU` handle as well, it copies the
/// handle's parts instead. Each easy handle keeps one CURLU: its scheme and authority are parsed
/// by libcurl itself (with the flags libcurl uses for `CURLOPT_URL`) when they change; the path
/// and query are set as they are. That is only done when libcurl's own parse would leave them
/// untouched: printable ASCII with no `%`, `#`, `\` or dot segment, a path that starts with `/`,
/// a query that is not empty. Any other URL is given as text alone, exactly as before.
struct CurlURLs {
    private struct Entry {
        let handle: OpaquePointer
        var authority: [UInt8]
        /// The path last set (a preset's path rarely changes between its requests).
        var path: [UInt8] = []
    }
    private var byEasy: [Int: Entry] = [:]

    /// Sets the transfer's URL on `easy` (text, and the parsed handle where it is safe).
    mutating func apply(_ url: String, to easy: UnsafeMutableRawPointer) {
        url.withCString { _ = pushemu_curl_setopt_ptr(easy, CURLOPT_URL, $0) }
        var u = url
        let handle: OpaquePointer? = u.withUTF8 { bytes in
            guard let split = CurlURLs.split(bytes) else { return nil }
            let key = Int(bitPattern: easy)
            if byEasy[key] == nil {
                guard let h = curl_url() else { return nil }
                byEasy[key] = Entry(handle: h, authority: [])
            }
            return CurlURLs.update(&byEasy[key]!, bytes, split)
        }
        pushemu_curl_setopt_ptr(easy, CURLOPT_CURLU, UnsafeRawPointer(handle))
    }

    /// Brings `entry`'s handle to the URL in `bytes`; nil when libcurl refused a part.
    private static func update(
        _ entry: inout Entry, _ bytes: UnsafeBufferPointer<UInt8>,
        _ split: (pathStart: Int, queryStart: Int?)
    ) -> OpaquePointer? {
        let authority = UnsafeBufferPointer(rebasing: bytes[..<split.pathStart])
        if !Bytes.equal(entry.authority[...], authority) {
            // "scheme://authority/", parsed the way libcurl parses CURLOPT_URL.
            entry.authority = []
            entry.path = []
            guard
                withCString(
                    authority, suffix: UInt8(ascii: "/"),
                    {
                        curl_url_set(entry.handle, CURLUPART_URL, $0, UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK
                    })
            else { return nil }
            entry.authority = Array(authority)
        }
        let path = UnsafeBufferPointer(rebasing: bytes[split.pathStart..<(split.queryStart.map { $0 - 1 } ?? bytes.count)])
        if !Bytes.equal(entry.path[...], path) {
            entry.path = []
            guard withCString(path, suffix: nil, { curl_url_set(entry.handle, CURLUPART_PATH, $0, 0) == CURLUE_OK }) else { return nil }
            entry.path = Array(path)
        }
        if let q = split.queryStart {
            guard
                withCString(
                    UnsafeBufferPointer(rebasing: bytes[q...]), suffix: nil,
                    {
                        curl_url_set(entry.handle, CURLUPART_QUERY, $0, 0) == CURLUE_OK
                    })
            else { return nil }
        } else {
            curl_url_set(entry.handle, CURLUPART_QUERY, nil, 0)
        }
        return entry.handle
    }

    /// Frees the parsed handles (with the easy handles they served).
    mutating func removeAll() {
        for (_, e) in byEasy { curl_url_cleanup(e.handle) }
        byEasy.removeAll()
    }

    /// Where the path starts (after "scheme://authority") and the query (after its "?"), or nil
    /// when libcurl's parse could change the path or query (see the type's comment).
    static func split(_ b: UnsafeBufferPointer<UInt8>) -> (pathStart: Int, queryStart: Int?)? {
        let n = b.count
        var i = 0
        while i < n && b[i] != UInt8(ascii: ":") { i += 1 }
        guard i > 0, i + 2 < n, b[i + 1] == UInt8(ascii: "/"), b[i + 2] == UInt8(ascii: "/") else { return nil }
        i += 3
        let authorityStart = i
        while i < n && b[i] != UInt8(ascii: "/") && b[i] != UInt8(ascii: "?") && b[i] != UInt8(ascii: "#") { i += 1 }
        guard i > authorityStart, i < n, b[i] == UInt8(ascii: "/") else { return nil }
        let pathStart = i
        var query: Int? = nil
        var previous: UInt8 = 0
        while i < n {
            let c = b[i]
            guard c > 0x20, c < 0x7F, c != UInt8(ascii: "%"), c != UInt8(ascii: "#"), c != UInt8(ascii: "\\") else { return nil }
            if query == nil {
                if c == UInt8(ascii: "?") {
                    query = i + 1
                } else if c == UInt8(ascii: ".") && previous == UInt8(ascii: "/") {
                    return nil // a dot segment (libcurl would remove it)
                }
            }
            previous = c
            i += 1
        }
        if let q = query, q >= n { return nil } // "?" with nothing after it
        return (pathStart, query)
    }

    private static func withCString<R>(_ bytes: UnsafeBufferPointer<UInt8>, suffix: UInt8?, _ body: (UnsafePointer<CChar>) -> R) -> R {
        let n = bytes.count + (suffix == nil ? 0 : 1)
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: n + 1) { buf in
            let raw = UnsafeMutableRawPointer(buf.baseAddress!)
            if let base = bytes.baseAddress { raw.copyMemory(from: base, byteCount: bytes.count) }
            if let s = suffix { buf[bytes.count] = CChar(bitPattern: s) }
            buf[n] = 0
            return body(buf.baseAddress!)
        }
    }
}
