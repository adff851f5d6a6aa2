/// Where the cluster's Redis is: `redis://[:PASSWORD@]HOST[:PORT][/DB]` (Redis's own URI form;
/// port 6379 and database 0 by default). Sentinel and Redis Cluster addresses are not URLs of
/// this kind: point pushemu at the primary (docs/cluster.md).
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    public var password: String?

    public init?(_ text: String) {
        guard text.hasPrefix("redis://") else { return nil }
        var rest = Substring(text.dropFirst("redis://".count))
        if let at = rest.lastIndex(of: "@") {
            var auth = rest[rest.startIndex..<at]
            if auth.hasPrefix(":") {
                auth = auth.dropFirst()
            } else if let colon = auth.firstIndex(of: ":") {
                auth = auth[auth.index(after: colon)...]
            }
            password = auth.isEmpty ? nil : String(auth)
            rest = rest[rest.index(after: at)...]
        }
        var db = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            if !path.isEmpty {
                guard let n = Int(path), (0...15).contains(n) else { return nil }
                db = n
            }
            rest = rest[rest.startIndex..<slash]
        }
        var port = 6379
        var host = rest
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { return nil }
                port = p
            } else if !after.isEmpty {
                return nil
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            host = host[host.startIndex..<colon]
        }
        guard !host.isEmpty, host.utf8.count <= 253 else { return nil }
        self.host = String(host)
        self.port = port
        self.database = db
    }

    /// The URL as given, without its password.
    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "redis://\(h):\(port)" + (database == 0 ? "" : "/\(database)")
    }
}
