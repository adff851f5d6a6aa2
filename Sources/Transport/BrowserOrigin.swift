/// What keeps a web page on another site from driving pushemu through the user's browser (the
/// admin API, the dashboard and the provider routes alike). Requests that carry no browser
/// headers (`origin`, `sec-fetch-site`) are a tool's (curl, an SDK, a CI script) and pass. A
/// browser's request is refused when:
///
/// - its `Host` is not a loopback name, an IP literal (`localhost`, `*.localhost`, `127.0.0.1`,
///   `[::1]`, any address) or one of `hosts` (the real services' names, which the proxy and
///   `--resolve` users send): a DNS-rebinding page reaches 127.0.0.1 under its own name, and is
///   stopped here for reads as well as writes;
/// - it changes state (any method but GET, HEAD, OPTIONS) and comes from another origin:
///   `sec-fetch-site` other than `same-origin` or `none`, or an `origin` whose host is not the
///   request's `Host`.
///
/// Reads from another origin need nothing more: pushemu sends no CORS headers, so the browser
/// keeps their answers from the page. The dashboard's own pages are same-origin and pass.
public enum BrowserOrigin {
    /// Why `r` is refused, or nil. Two header lookups for a request without browser headers.
    @inline(__always)
    public static func refusal(_ r: Request, hosts: Set<String> = []) -> String? {
        guard r.headers.mayBeFromBrowser else { return nil }
        let origin = r.headers.first("origin")
        let fetchSite = r.headers.first("sec-fetch-site")
        guard origin != nil || fetchSite != nil else { return nil }
        return browserRefusal(r, origin: origin?.utf8String, fetchSite: fetchSite?.utf8String, hosts: hosts)
    }

    static func browserRefusal(_ r: Request, origin: String?, fetchSite: String?, hosts: Set<String>) -> String? {
        let host = r.authority.map { $0.utf8String } ?? ""
        guard isLocalHost(host) || hosts.contains(hostName(host)) else {
            return "pushemu answers a browser only at a loopback name or an IP address (this request was for \(host))"
        }
        switch r.method {
        case .get, .head, .options: return nil
        default: break
        }
        if let site = fetchSite, site != "same-origin" && site != "none" {
            return "a \(site) request from a browser cannot change pushemu's state"
        }
        if let origin, originHost(origin) != host.lowercased() {
            return "a request from origin \(origin) cannot change pushemu's state"
        }
        return nil
    }

    /// `host[:port]` of a browser origin (`scheme://host[:port]`), lowercased; "" for `null`.
    static func originHost(_ origin: String) -> String {
        let parts = origin.lowercased().split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].hasSuffix(":"), origin.contains("://") else { return "" }
        return String(parts[1])
    }

    /// The host of an authority, lowercased, without its port.
    static func hostName(_ authority: String) -> String {
        var host = authority.lowercased()
        if !host.hasPrefix("["), let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        return host
    }

    /// A loopback name or an IP literal, with or without a port.
    static func isLocalHost(_ authority: String) -> Bool {
        var host = authority.lowercased()
        if host.hasPrefix("[") {
            guard let end = host.firstIndex(of: "]") else { return false }
            return host.index(after: host.startIndex) < end
        }
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { p in p.count <= 3 && !p.isEmpty && p.allSatisfy(\.isNumber) && Int(p)! <= 255 }
    }
}
