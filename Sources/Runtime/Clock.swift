import Glibc

/// Milliseconds and seconds since the epoch.
public enum Clock {
    public static func nowMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    public static func nowSeconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

    /// The UTC calendar date and time of `seconds` since the epoch (civil-from-days).
    public static func civil(_ seconds: Int64) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        let days = Int((seconds - (seconds % 86400 + 86400) % 86400) / 86400)
        let rem = Int((seconds % 86400 + 86400) % 86400)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d, rem / 3600, rem % 3600 / 60, rem % 60)
    }

    /// `2026-11-29T23:10:05Z` (UTC, whole seconds) for milliseconds since the epoch.
    public static func iso8601(_ ms: Int64) -> String {
        let c = civil(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : String(v) }
        return "\(c.year)-\(two(c.month))-\(two(c.day))T\(two(c.hour)):\(two(c.minute)):\(two(c.second))Z"
    }

    /// Monotonic nanoseconds (for durations).
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
