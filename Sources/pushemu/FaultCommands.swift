import Emulator
import Glibc
import PushCore

/// `pushemu faults add|delete`: fault rules over the admin API. A rule is the JSON the API
/// takes (`docs/faults.md`), given inline, as `@FILE`, or `-` for standard input.
enum FaultCommands {
    static func add(_ rule: String, _ f: [String: String]) throws -> String {
        let text: String
        if rule == "-" {
            text = String(decoding: readStandardInput(limit: 1 << 20), as: UTF8.self)
        } else if rule.hasPrefix("@") {
            text = String(decoding: try Emulator.readFile(String(rule.dropFirst()), what: "fault rule"), as: UTF8.self)
        } else {
            text = rule
        }
        guard text.utf8.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x09 && $0 != 0x0D }) == UInt8(ascii: "{") else {
            throw UsageError(
                "faults add takes a rule as JSON (inline, @FILE or - for standard input), e.g. "
                    + #"'{"match":{"provider":"apns","first":1},"effect":{"status":503,"reason":"ServiceUnavailable"}}'"#)
        }
        return try Commands.call("POST", try Commands.server(f) + "/emulator/v1/faults", body: text)
    }

    /// One rule by id, or every rule with `all` as the id.
    static func delete(_ id: String, _ f: [String: String]) throws -> String {
        let server = try Commands.server(f)
        if id == "all" { return try Commands.call("DELETE", server + "/emulator/v1/faults") }
        return try Commands.call("DELETE", server + "/emulator/v1/faults/" + PercentEncoding.encode(id))
    }

    static func readStandardInput(limit: Int) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count < limit {
            let n = read(0, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }
}
