import Foundation

/// One admin-API call with curl against a running server: (HTTP status, body).
public func adminRequest(_ s: ServerProcess, _ method: String, _ path: String, _ body: String? = nil) throws -> (Int, String) {
    var args = ["-sS", "-X", method, "-w", "\n%{http_code}", "http://127.0.0.1:\(s.httpPort)" + path]
    if let body { args += ["-d", body] }
    let r = try runCommand("curl", args, timeout: 30)
    var lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let code = Int(lines.removeLast()) ?? 0
    return (code, lines.joined(separator: "\n"))
}
