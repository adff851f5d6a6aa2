import Glibc
import Runtime

/// A blocking HTTP/1.1 GET to another node's admin API (`Connection: close`), with a time limit
/// for the whole exchange and a bound on the answer's size. For the slow-work thread that merges
/// the cluster's reads; never an event loop.
public enum PeerHTTP {
    /// The largest answer read (a page of 10,000 notifications fits).
    public static let maxAnswer = 64 << 20

    /// `GET base + target` (or another bodiless `method`); nil when the node cannot be reached
    /// or answers nothing in time.
    public static func get(
        _ base: String, _ target: String, method: String = "GET", headers: [(String, String)] = [], timeoutMs: Int = 3_000
    ) -> (status: Int, body: [UInt8])? {
        guard base.hasPrefix("http://"), let url = RedisURL("redis://" + base.dropFirst("http://".count).split(separator: "/").first!)
        else { return nil }
        var request = "\(method) \(target) HTTP/1.1\r\nHost: \(base.dropFirst("http://".count).split(separator: "/").first!)\r\n"
        if method != "GET" { request += "Content-Length: 0\r\n" }
        for (n, v) in headers { request += "\(n): \(v)\r\n" }
        request += "Accept: application/json\r\nConnection: close\r\n\r\n"
        let c = RedisConnection(url, timeoutMs: timeoutMs)
        guard let raw = try? c.exchange(Array(request.utf8), limit: maxAnswer, timeoutMs: timeoutMs) else { return nil }
        return parse(raw)
    }

    /// The status and body of a whole HTTP/1.1 answer (Content-Length, chunked, or to the close).
    static func parse(_ raw: [UInt8]) -> (status: Int, body: [UInt8])? {
        guard let end = find(raw, [13, 10, 13, 10], from: 0) else { return nil }
        let head = String(decoding: raw[0..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."),
            let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        var body = Array(raw[(end + 4)...])
        let lower = lines.dropFirst().map { $0.lowercased() }
        if let cl = lower.first(where: { $0.hasPrefix("content-length:") }), let n = Int(cl.dropFirst(15).trimmingSpaces) {
            guard body.count >= n else { return nil }
            body = Array(body.prefix(n))
        } else if lower.contains(where: { $0.hasPrefix("transfer-encoding:") && $0.contains("chunked") }) {
            var out: [UInt8] = []
            var i = 0
            while let lineEnd = find(body, [13, 10], from: i) {
                guard let size = Int(String(decoding: body[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16) else {
                    return nil
                }
                if size == 0 { break }
                let start = lineEnd + 2
                guard start + size <= body.count else { return nil }
                out += body[start..<(start + size)]
                i = start + size + 2
            }
            body = out
        }
        return (status, body)
    }

    static func find(_ hay: [UInt8], _ needle: [UInt8], from: Int) -> Int? {
        guard hay.count >= needle.count else { return nil }
        var i = from
        while i + needle.count <= hay.count {
            if hay[i] == needle[0] && hay[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}
