/// Whether every byte of a device token is one its gateway allows, eight bytes at a time.
///
/// A table lookup a byte cost about five instructions a byte; these read a word, and test each
/// of its bytes against the allowed ranges at once (no carries cross bytes: a byte with its
/// high bit set is refused first, and every sum below stays within its byte). The tail, under
/// eight bytes, is read as one word of its own, padded with an allowed byte.
public enum TokenCharacters {
    @inline(__always) static func spread(_ b: UInt8) -> UInt64 { UInt64(b) &* 0x0101_0101_0101_0101 }
    static let highs: UInt64 = 0x8080_8080_8080_8080
    static let lows: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// The high bit of each byte of `w` (all below 0x80) that lies in `lo...hi`.
    @inline(__always)
    static func within(_ w: UInt64, _ lo: UInt8, _ hi: UInt8) -> UInt64 {
        (w &+ spread(0x80 &- lo)) & ~(w &+ spread(0x7F &- hi)) & highs
    }

    /// The high bit of each byte of `w` (all below 0x80) that equals `b`.
    @inline(__always)
    static func equal(_ w: UInt64, _ b: UInt8) -> UInt64 {
        let t = w ^ spread(b)
        return ~(((t & lows) &+ lows) | t) & highs
    }

    /// `[0-9a-fA-F]`: an APNs device token.
    @inline(__always)
    static func hexWord(_ w: UInt64) -> Bool {
        guard w & highs == 0 else { return false }
        // Letters with 0x20 set: only A-F and a-f land in a-f.
        return within(w, 0x30, 0x39) | within(w | spread(0x20), 0x61, 0x66) == highs
    }

    /// `[A-Za-z0-9_:-]`: an FCM registration token (base64url and `:`).
    @inline(__always)
    static func registrationWord(_ w: UInt64) -> Bool {
        guard w & highs == 0 else { return false }
        let letters = within(w | spread(0x20), 0x61, 0x7A)
        let digitsAndColon = within(w, 0x30, 0x3A)
        return letters | digitsAndColon | equal(w, 0x2D) | equal(w, 0x5F) == highs
    }

    @inline(__always)
    static func all(_ bytes: UnsafeRawBufferPointer, pad: UInt8, _ word: (UInt64) -> Bool) -> Bool {
        let n = bytes.count
        guard n > 0 else { return true }
        let p = bytes.baseAddress!
        var i = 0
        while i + 8 <= n {
            if !word(p.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return false }
            i += 8
        }
        guard i < n else { return true }
        var tail = spread(pad)
        withUnsafeMutableBytes(of: &tail) { t in
            for k in 0..<(n - i) { t[k] = p.load(fromByteOffset: i + k, as: UInt8.self) }
        }
        return word(tail)
    }

    /// Every byte is a hex digit (either case).
    public static func allHex(_ bytes: UnsafeRawBufferPointer) -> Bool { all(bytes, pad: 0x30, hexWord) }

    /// Every byte is base64url or `:`.
    public static func allRegistrationToken(_ bytes: UnsafeRawBufferPointer) -> Bool { all(bytes, pad: 0x30, registrationWord) }
}
