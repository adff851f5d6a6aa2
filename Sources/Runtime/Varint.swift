/// LEB128 varints, as the journal's segments and index counts and the tracking spool store
/// unsigned numbers: seven bits a byte, low bits first, the high bit set on all but the last.
public enum Varint {
    /// The varint at `at` (advanced past it); nil when `end` comes first or it runs past 64 bits.
    @inlinable @inline(__always)
    public static func read(_ b: UnsafeRawBufferPointer, at: inout Int, end: Int) -> UInt64? {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while at < end, shift < 64 {
            let byte = b[at]
            at += 1
            v |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return v }
            shift += 7
        }
        return nil
    }

    /// Appends `v` to `out`.
    @inlinable @inline(__always)
    public static func append(_ v: UInt64, to out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }
}
