import PushCore

/// The lexical rules FCM applies to names and values (byte-level, no allocation).
public enum FCMFormats {
    @inline(__always) static func isAlnum(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
    }
    @inline(__always) static func isBase64URL(_ c: UInt8) -> Bool {
        isAlnum(c) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
    }
    /// `[a-zA-Z0-9-_.~%]`
    @inline(__always) static func isTopicByte(_ c: UInt8) -> Bool {
        isBase64URL(c) || c == UInt8(ascii: ".") || c == UInt8(ascii: "~") || c == UInt8(ascii: "%")
    }

    /// A topic name: `^[a-zA-Z0-9-_.~%]{1,900}$`, optionally prefixed with `/topics/` (the Go
    /// SDK and older senders pass it).
    public static func topicName<C: Collection>(_ raw: C) -> C.SubSequence? where C.Element == UInt8 {
        var s = raw[...]
        let prefix: [UInt8] = Array("/topics/".utf8)
        if s.starts(with: prefix) { s = s.dropFirst(prefix.count) }
        guard !s.isEmpty, s.count <= 900, s.allSatisfy(isTopicByte) else { return nil }
        return s
    }

    /// `^[a-zA-Z0-9-_.~%]{1,50}$`
    static func isAnalyticsLabel<C: Collection>(_ s: C) -> Bool where C.Element == UInt8 {
        !s.isEmpty && s.count <= 50 && s.allSatisfy(isTopicByte)
    }

    /// `#rrggbb`
    static func isColor<C: Collection>(_ s: C) -> Bool where C.Element == UInt8 {
        guard s.count == 7, s.first == UInt8(ascii: "#") else { return false }
        return s.dropFirst().allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }
    }

    /// A well-formed registration token: what FCM issues is `<instance id>:<APA91b...>`, 140 to
    /// about 250 characters of base64url plus ':' (older GCM-era tokens lack the prefix).
    /// Accepted: 100...4096 characters from `[A-Za-z0-9_:-]`.
    public static func isRegistrationToken<C: Collection>(_ s: C) -> Bool where C.Element == UInt8 {
        guard s.count >= 100 && s.count <= 4096 else { return false }
        if let r = s.withContiguousStorageIfAvailable({ isRegistrationToken(UnsafeRawBufferPointer($0)) }) { return r }
        return Array(s).withUnsafeBytes { isRegistrationToken($0) }
    }

    public static func isRegistrationToken(_ s: UnsafeRawBufferPointer) -> Bool {
        guard s.count >= 100 && s.count <= 4096 else { return false }
        return TokenCharacters.allRegistrationToken(s)
    }

    /// A Firebase installation id: 22 base64url characters.
    static func isFID<C: Collection>(_ s: C) -> Bool where C.Element == UInt8 {
        s.count == 22 && s.allSatisfy(isBase64URL)
    }

    /// `https://host...`
    static func isHTTPSURL(_ s: String) -> Bool {
        let lower = s.lowercased()
        guard lower.hasPrefix("https://") else { return false }
        let rest = lower.dropFirst(8)
        guard let c = rest.first, c != "/", c != "?", c != "#" else { return false }
        return !s.contains(" ")
    }

    /// A proto3 JSON Duration (`"3.5s"`, `"-1s"`): whole seconds (fractions truncated), or nil.
    public static func durationSeconds<C: Collection>(_ s: C) -> Int64? where C.Element == UInt8 {
        Array(s).withUnsafeBytes { durationSeconds($0) }
    }

    /// `durationSeconds`, read in one pass over the bytes where they lie (a token's raw text):
    /// an optional `-`, 1 to 12 digits, an optional `.` and 1 to 9 digits, then `s`.
    public static func durationSeconds(_ s: UnsafeRawBufferPointer) -> Int64? {
        let count = s.count
        guard count >= 2, let p = s.baseAddress, p.load(fromByteOffset: count - 1, as: UInt8.self) == UInt8(ascii: "s") else {
            return nil
        }
        let end = count - 1
        let negative = p.load(as: UInt8.self) == UInt8(ascii: "-")
        var i = negative ? 1 : 0
        var secs: Int64 = 0
        let first = i
        while i < end {
            let d = p.load(fromByteOffset: i, as: UInt8.self) &- 0x30
            guard d < 10 else { break }
            guard i - first < 12 else { return nil }
            secs = secs &* 10 &+ Int64(d)
            i += 1
        }
        guard i > first else { return nil }
        if i < end {
            guard p.load(fromByteOffset: i, as: UInt8.self) == UInt8(ascii: ".") else { return nil }
            i += 1
            let fraction = i
            while i < end {
                guard p.load(fromByteOffset: i, as: UInt8.self) &- 0x30 < 10 else { return nil }
                i += 1
            }
            guard i > fraction, i - fraction <= 9 else { return nil }
        }
        guard secs <= 315_576_000_000 else { return nil }
        return negative ? -secs : secs
    }

    /// An RFC 3339 timestamp (`2026-11-29T12:00:00.5Z`, `...+01:00`).
    static func isTimestamp<C: Collection>(_ s: C) -> Bool where C.Element == UInt8 {
        let b = Array(s)
        func digits(_ r: Range<Int>) -> Int? {
            guard r.upperBound <= b.count else { return nil }
            var v = 0
            for i in r {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                v = v * 10 + Int(b[i] - 0x30)
            }
            return v
        }
        guard b.count >= 20, digits(0..<4) != nil, b[4] == UInt8(ascii: "-"), let mo = digits(5..<7), b[7] == UInt8(ascii: "-"),
            let d = digits(8..<10), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            let h = digits(11..<13), b[13] == UInt8(ascii: ":"), let mi = digits(14..<16), b[16] == UInt8(ascii: ":"),
            let se = digits(17..<19), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, se < 61
        else { return false }
        var i = 19
        if b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
            if i == start || i - start > 9 { return false }
        }
        guard i < b.count else { return false }
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") { return i + 1 == b.count }
        guard b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-"), i + 6 == b.count,
            let oh = digits(i + 1..<i + 3), b[i + 3] == UInt8(ascii: ":"), let om = digits(i + 4..<i + 6)
        else { return false }
        return oh < 24 && om < 60
    }

    /// A reserved `data` key: `from`, `message_type`, or starting with `google` or `gcm` (any case).
    static func isReservedDataKey(_ key: String) -> Bool {
        var k = key
        return k.withUTF8 { isReservedDataKey(UnsafeRawBufferPointer($0)) }
    }

    static func isReservedDataKey(_ k: UnsafeRawBufferPointer) -> Bool {
        func lower(_ i: Int) -> UInt8 { k[i] >= 0x41 && k[i] <= 0x5A ? k[i] | 0x20 : k[i] }
        func starts(_ p: StaticString) -> Bool {
            guard k.count >= p.utf8CodeUnitCount else { return false }
            for i in 0..<p.utf8CodeUnitCount where lower(i) != p.utf8Start[i] { return false }
            return true
        }
        return (k.count == 4 && starts("from")) || (k.count == 12 && starts("message_type")) || starts("google") || starts("gcm")
    }
}
