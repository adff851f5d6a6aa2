/// `--since` values: milliseconds since the epoch, an ISO 8601 UTC time
/// (`2026-11-29T10:00:00Z`, or a date), or an age before now (`90s`, `30m`, `12h`, `7d`).
public enum TimeArgument {
    public static func parse(_ v: String, nowMs: Int64) -> Int64? {
        if let ms = Int64(v), ms >= 0 { return ms }
        if let age = durationMs(v), v.last?.isLetter == true { return nowMs - age }
        // YYYY-MM-DD[THH:MM[:SS][Z]]
        let b = Array(v.utf8)
        func num(_ r: Range<Int>) -> Int? {
            guard r.upperBound <= b.count, r.allSatisfy({ b[$0] >= 48 && b[$0] <= 57 }) else { return nil }
            return r.reduce(0) { $0 * 10 + Int(b[$1] - 48) }
        }
        guard b.count >= 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
            let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), (1...12).contains(mo), (1...31).contains(d)
        else { return nil }
        var h = 0
        var mi = 0
        var s = 0
        if b.count > 10 {
            guard b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "), let hh = num(11..<13), b.count > 13, b[13] == UInt8(ascii: ":"),
                let mm = num(14..<16), hh < 24, mm < 60
            else { return nil }
            h = hh
            mi = mm
            var i = 16
            if b.count > 16, b[16] == UInt8(ascii: ":") {
                guard let ss = num(17..<19), ss < 61 else { return nil }
                s = ss
                i = 19
            }
            if i < b.count { guard b[i] == UInt8(ascii: "Z"), i == b.count - 1 else { return nil } }
        }
        // days from civil (the inverse of Clock.civil)
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return (Int64(days) * 86400 + Int64(h * 3600 + mi * 60 + s)) * 1000
    }

    /// An age or duration: `90s`, `30m`, `12h`, `7d`, or whole seconds; nil when malformed or
    /// beyond what milliseconds in an Int64 hold.
    public static func durationMs(_ v: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
        if let u = v.last, let scale = units[u], let n = Int64(v.dropLast()), n >= 0, n < Int64.max / scale { return n * scale }
        if let n = Int64(v), n >= 0, n < Int64.max / 1000 { return n * 1000 }
        return nil
    }
}
