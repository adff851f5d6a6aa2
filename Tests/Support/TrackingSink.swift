import Foundation
import Synchronization
import Transport

/// A tracking server for tests: records every request it gets and answers 200, or the status
/// its failure plan says (e.g. 500 for the first two requests).
public final class TrackingSink: @unchecked Sendable {
    public struct Received: Sendable {
        public let method: String
        public let target: String
        public let headers: [String: String]
        public let body: String
    }

    final class State: Sendable {
        let m = Mutex<(requests: [Received], count: Int, failuresLeft: Int, failStatus: Int, keep: Bool)>(([], 0, 0, 500, true))
    }

    let server: HTTPServer
    let box = State()

    let tls: Bool
    public var port: Int { (tls ? server.httpsAddress : server.httpAddress)!.port }
    /// `https://localhost:PORT` for a TLS sink (its certificate is Certs/server.pem, signed by
    /// Certs/ca.pem), else `http://127.0.0.1:PORT`.
    public var url: String { tls ? "https://localhost:\(port)" : "http://127.0.0.1:\(port)" }

    /// `keepRequests: false` only counts (for large campaigns). `tls`: https only (HTTP/2 or
    /// HTTP/1.1 by ALPN).
    public init(failFirst: Int = 0, failStatus: Int = 500, keepRequests: Bool = true, tls: Bool = false) throws {
        self.tls = tls
        var c = ServerConfiguration()
        c.httpPort = tls ? nil : 0
        c.httpsPort = tls ? 0 : nil
        if tls {
            let certs = ServerProcess.repositoryRoot + "/Certs"
            c.tls = TLSConfiguration(
                certificateChainPEM: Array(try Data(contentsOf: URL(fileURLWithPath: certs + "/server.pem"))),
                privateKeyPEM: Array(try Data(contentsOf: URL(fileURLWithPath: certs + "/server-key.pem"))))
        }
        c.threads = 1
        var r = Router()
        let box = self.box
        r.add(nil, "/*", maxBodySize: 1 << 20) { ex in
            let status = box.m.withLock { s -> Int in
                s.count += 1
                if s.keep {
                    var h: [String: String] = [:]
                    for (n, v) in ex.request.headers.pairs where !n.hasPrefix(":") { h[n] = v }
                    s.requests.append(
                        Received(
                            method: ex.request.method.name, target: ex.request.target.utf8String, headers: h,
                            body: String(decoding: ex.request.body, as: UTF8.self)))
                }
                if s.failuresLeft > 0 {
                    s.failuresLeft -= 1
                    return s.failStatus
                }
                return 200
            }
            ex.respond(Response(status: status))
        }
        server = try HTTPServer(configuration: c, router: r)
        box.m.withLock {
            $0.failuresLeft = failFirst
            $0.failStatus = failStatus
            $0.keep = keepRequests
        }
        try server.start()
    }

    public var requests: [Received] { box.m.withLock { $0.requests } }
    public var count: Int { box.m.withLock { $0.count } }

    /// Waits until at least `n` requests arrived (or `timeout` seconds passed); returns the count.
    @discardableResult
    public func wait(for n: Int, timeout: Double = 10) -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        while count < n && Date() < deadline { usleep(5_000) }
        return count
    }

    public func stop() { server.shutdown(drainTimeout: 0.2) }
}
