import Emulator
import Glibc
import Journal
import PushCore
import Runtime

/// `pushemu export` and `pushemu report`: the journal read from `--data-dir` (no server needed),
/// or, with `--server URL`, the report of a running emulator (one started `--in-memory`).
enum JournalCommands {
    static func export(_ f: [String: String]) throws -> String {
        guard (f["format"] ?? "ndjson") == "ndjson" else { throw UsageError("--format: only ndjson is supported") }
        let path = try journalPath(f)
        let since = try sinceMs(f)
        var failed = false
        try Journal.export(path: path, sinceMs: since) { line in
            if !failed { failed = !writeAll(1, Array((line + "\n").utf8)) }
        }
        if failed { throw ConfigurationError("cannot write the export") }
        return ""
    }

    static func report(_ f: [String: String]) throws -> String {
        let formatName = f["format"] ?? "text"
        guard let format = CampaignReport.Format(rawValue: formatName) else {
            throw UsageError("--format must be text, json or html")
        }
        let text: String
        if f["server"] != nil {
            var q = "?format=" + format.rawValue
            if let c = f["campaign"] { q += "&campaign=" + PercentEncoding.encode(c) }
            if let s = f["since"] { q += "&since=" + PercentEncoding.encode(s) }
            let r = try AdminClient.request("GET", try Commands.server(f) + "/emulator/v1/report" + q, body: nil)
            guard r.status == 200 else { throw ConfigurationError("the emulator answered \(r.status): \(r.body)") }
            text = r.body
        } else {
            text = try Journal.report(path: try journalPath(f), sinceMs: try sinceMs(f), campaign: f["campaign"]).render(format)
        }
        if let out = f["out"] {
            let fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw ConfigurationError("cannot write \(out): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            guard writeAll(fd, Array(text.utf8)) else { throw ConfigurationError("cannot write \(out)") }
            return ""
        }
        return text.hasSuffix("\n") ? text : text + "\n"
    }

    static func journalPath(_ f: [String: String]) throws -> String {
        let path = try CommandSettings.dataDirectory(f) + "/journal.sqlite"
        guard access(path, R_OK) == 0 else {
            throw ConfigurationError(
                "no journal at \(path) (is --data-dir right? a server started --in-memory keeps it in memory: use --server URL)")
        }
        return path
    }

    static func sinceMs(_ f: [String: String]) throws -> Int64 {
        guard let v = f["since"] else { return 0 }
        guard let ms = TimeArgument.parse(v, nowMs: Clock.nowMs()) else {
            throw ConfigurationError(
                "--since takes milliseconds since the epoch, an ISO 8601 UTC time (2026-11-29T10:00:00Z) or an age (30m, 12h, 7d)")
        }
        return ms
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var rest = bytes[...]
        while !rest.isEmpty {
            let n = rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            rest = rest.dropFirst(n)
        }
        return true
    }
}
