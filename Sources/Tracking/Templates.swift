import COpenSSL
import PushCore
import Runtime

/// `{placeholder|transform|...}` templates for webhooks. Sources: `payload.PATH` (or `$.PATH`),
/// `device.token|previousToken|platform|app|hwid|userId|locale|model`, `message.id|name`, `event`,
/// `time.epochSeconds|epochMs|iso|moengage`, `received.epochMs|iso`, `uuid`, `options.NAME`.
/// Transforms: `dec2hex`, `urlencode`, `base64`, `sha256`, `lower`, `upper`, `json` (a quoted
/// JSON string). `{{` is a literal brace. A placeholder whose value is absent renders empty.
public enum Templates {
    public static func render(_ template: String, _ ctx: TrackingContext, options: [String: String]) -> String {
        var out = ""
        var chars = Array(template.unicodeScalars)[...]
        while let c = chars.popFirst() {
            if c == "{" {
                if chars.first == "{" {
                    chars = chars.dropFirst()
                    out.unicodeScalars.append("{")
                    continue
                }
                guard let end = chars.firstIndex(of: "}") else {
                    out.unicodeScalars.append(c)
                    continue
                }
                var expr = ""
                expr.unicodeScalars.append(contentsOf: chars[chars.startIndex..<end])
                chars = chars[(end + 1)...]
                out += evaluate(expr, ctx, options: options) ?? ""
            } else if c == "}" && chars.first == "}" {
                chars = chars.dropFirst()
                out.unicodeScalars.append("}")
            } else {
                out.unicodeScalars.append(c)
            }
        }
        return out
    }

    public static func evaluate(_ expr: String, _ ctx: TrackingContext, options: [String: String]) -> String? {
        let parts = expr.split(separator: "|").map { $0.trimmingSpaces }
        guard let source = parts.first else { return nil }
        guard var value = lookup(source, ctx, options: options) else { return nil }
        for t in parts.dropFirst() { value = transform(t, value) ?? value }
        return value
    }

    static func lookup(_ s: String, _ ctx: TrackingContext, options: [String: String]) -> String? {
        if s.hasPrefix("payload.") { return ctx.payload.value(String(s.dropFirst(8))) }
        if s.hasPrefix("$.") { return ctx.payload.value(String(s.dropFirst(2))) }
        if s.hasPrefix("options.") { return options[String(s.dropFirst(8))] }
        switch s {
        case "device.token": return ctx.token
        case "device.previousToken": return ctx.previousToken
        case "device.platform": return ctx.platform
        case "device.app": return ctx.app
        case "device.hwid": return ctx.hwid
        case "device.userId": return ctx.userID
        case "device.locale": return ctx.locale
        case "device.model": return ctx.model
        case "device.os": return ctx.platform == "ios" ? "iOS" : "Android"
        case "message.id": return ctx.notificationID
        case "message.name": return ctx.messageName
        case "event": return ctx.event.rawValue
        case "time.epochSeconds": return String(ctx.atMs / 1000)
        case "time.epochMs": return String(ctx.atMs)
        case "time.iso": return iso8601(ctx.atMs)
        case "time.moengage": return moengageTime(ctx.atMs)
        case "received.epochMs": return String(ctx.receivedAtMs)
        case "received.iso": return iso8601(ctx.receivedAtMs)
        case "uuid":
            var r = FastRandom()
            return UUIDValue.random(&r).description
        default: return nil
        }
    }

    static func transform(_ name: String, _ v: String) -> String? {
        switch name {
        case "dec2hex": return AdobeIDs.hex(v)
        case "urlencode": return urlencode(v)
        case "base64": return base64(Array(v.utf8))
        case "sha256": return sha256Hex(Array(v.utf8))
        case "lower": return v.lowercased()
        case "upper": return v.uppercased()
        case "json": return JSONWriter.quote(v)
        default: return nil
        }
    }

    public static func urlencode(_ s: String) -> String { PercentEncoding.encode(s) }

    public static func base64(_ b: [UInt8]) -> String {
        let t = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < b.count {
            let n = min(3, b.count - i)
            let v = (UInt32(b[i]) << 16) | (n > 1 ? UInt32(b[i + 1]) << 8 : 0) | (n > 2 ? UInt32(b[i + 2]) : 0)
            out.append(t[Int(v >> 18 & 63)])
            out.append(t[Int(v >> 12 & 63)])
            out.append(n > 1 ? t[Int(v >> 6 & 63)] : UInt8(ascii: "="))
            out.append(n > 2 ? t[Int(v & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func sha256Hex(_ b: [UInt8]) -> String {
        var md = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        _ = EVP_Digest(b, b.count, &md, &len, EVP_sha256(), nil)
        let hex = Array("0123456789abcdef".utf8)
        return String(decoding: md.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }, as: UTF8.self)
    }

    /// `2026-11-29T12:00:00.123Z`
    public static func iso8601(_ ms: Int64) -> String {
        let (y, mo, d, h, mi, s) = civil(ms / 1000)
        func p(_ n: Int, _ w: Int = 2) -> String {
            let t = String(n)
            return String(repeating: "0", count: max(0, w - t.count)) + t
        }
        return "\(p(y, 4))-\(p(mo))-\(p(d))T\(p(h)):\(p(mi)):\(p(s)).\(p(Int(ms % 1000), 3))Z"
    }

    /// MoEngage's local time `d:m:yyyy:h:m:s` (UTC here).
    public static func moengageTime(_ ms: Int64) -> String {
        let (y, mo, d, h, mi, s) = civil(ms / 1000)
        return "\(d):\(mo):\(y):\(h):\(mi):\(s)"
    }

    static func civil(_ seconds: Int64) -> (Int, Int, Int, Int, Int, Int) {
        let c = Clock.civil(seconds)
        return (c.year, c.month, c.day, c.hour, c.minute, c.second)
    }
}

extension Substring {
    var trimmingSpaces: String {
        var s = self
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

/// Adobe Campaign's `_mId` conversion (aepsdk-campaignclassic): a v8 UUID is kept; a v7 decimal
/// becomes lowercase hex without padding; a negative 32-bit value its 32-bit two's complement.
public enum AdobeIDs {
    public static func hex(_ mId: String) -> String? {
        if isUUID(mId) { return mId }
        guard let n = Int64(mId) else { return nil }
        if n >= 0 { return lowerHex(UInt64(n)) }
        if n >= Int64(Int32.min) { return lowerHex(UInt64(UInt32(bitPattern: Int32(n)))) }
        return lowerHex(UInt64(bitPattern: n))
    }

    /// `String(v, radix: 16)` without its generic formatting (once per tracked notification).
    static func lowerHex(_ v: UInt64) -> String {
        let digits = max(1, (67 - v.leadingZeroBitCount) / 4)
        return String(unsafeUninitializedCapacity: digits) { out in
            var v = v
            for k in stride(from: digits - 1, through: 0, by: -1) {
                out[k] = UInt8(ascii: "0") + UInt8(v & 15) + (v & 15 >= 10 ? 39 : 0)
                v >>= 4
            }
            return digits
        }
    }

    /// Whether `s` is a UUID in its 8-4-4-4-12 hex form (either case).
    public static func isUUID(_ s: String) -> Bool {
        guard s.utf8.count == 36 else { return false }
        let b = Array(s.utf8)
        for (i, c) in b.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
                continue
            }
            guard (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46) else { return false }
        }
        return true
    }
}
