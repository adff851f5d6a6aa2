import Transport

/// The emulator's own endpoints (`/healthz`, and `/emulator/v1/...` as later layers add them).
/// Errors follow one shape: `{"error":{"code":N,"message":"..."}}`.
enum AdminAPI {
    static func register(_ r: inout Router) {
        r.add([.get, .head], "/healthz", maxBodySize: 0) { ex in
            ex.respond(.json(200, "{\"status\":\"ok\"}"))
        }
    }

    static func error(_ code: Int, _ message: String) -> Response {
        .json(code, "{\"error\":{\"code\":\(code),\"message\":\(jsonString(message))}}")
    }

    /// A JSON string literal for `s`.
    static func jsonString(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}
