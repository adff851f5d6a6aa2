import CSystem
import Glibc

/// A fast, non-cryptographic generator (wyrand) for ids on the hot path. Each owner (a
/// connection, a loop) keeps its own, so nothing is shared between threads.
public struct FastRandom: Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// Seeded from the kernel's generator.
    public init() {
        state = csys_random_u64()
    }

    @inline(__always)
    public mutating func next() -> UInt64 {
        state &+= 0xA076_1D64_78BD_642F
        let m = state.multipliedFullWidth(by: state ^ 0xE703_7ED1_A0B4_28DB)
        return m.high ^ m.low
    }

    /// Uniform in 0..<n.
    public mutating func next(below n: UInt64) -> UInt64 { n == 0 ? 0 : next() % n }

    /// Uniform in [0, 1).
    public mutating func nextDouble() -> Double { Double(next() >> 11) * (1.0 / 9007199254740992.0) }
}

/// A UUID held inline (no allocation), formatted as lowercase canonical text.
public struct UUIDValue: Hashable, Sendable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A random version-4 UUID.
    public static func random(_ rng: inout FastRandom) -> UUIDValue {
        let h = (rng.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let l = (rng.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return UUIDValue(high: h, low: l)
    }

    /// Parses the canonical lowercase form (8-4-4-4-12); nil for anything else, uppercase included.
    public static func parseCanonicalLowercase<C: Collection>(_ bytes: C) -> UUIDValue? where C.Element == UInt8 {
        guard bytes.count == 36 else { return nil }
        var h: UInt64 = 0, l: UInt64 = 0
        var n = 0
        for (i, c) in bytes.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return nil }
                continue
            }
            let v: UInt64
            switch c {
            case 0x30...0x39: v = UInt64(c - 0x30)
            case 0x61...0x66: v = UInt64(c - 0x61 + 10)
            default: return nil
            }
            if n < 16 { h = h << 4 | v } else { l = l << 4 | v }
            n += 1
        }
        return UUIDValue(high: h, low: l)
    }

    /// Writes the 36 canonical bytes.
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var buf: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &buf) { raw in
            let digits: StaticString = "0123456789abcdef"
            let d = digits.utf8Start
            var j = 0
            for i in 0..<32 {
                if i == 8 || i == 12 || i == 16 || i == 20 { raw[j] = UInt8(ascii: "-"); j += 1 }
                let word = i < 16 ? high : low
                let shift = UInt64((15 - (i % 16)) * 4)
                raw[j] = d[Int((word >> shift) & 0xF)]
                j += 1
            }
            return body(UnsafeRawBufferPointer(rebasing: raw[0..<36]))
        }
    }

    public var description: String { withBytes { String(decoding: $0, as: UTF8.self) } }
}

/// A 128-bit hash of bytes (two independent 64-bit FNV-1a variants), used as a compact key for
/// tokens so registries never allocate per lookup. Collisions are practically impossible.
public struct TokenKey: Hashable, Sendable {
    public let a: UInt64
    public let b: UInt64

    public init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        var x: UInt64 = 0xCBF2_9CE4_8422_2325
        var y: UInt64 = 0x84222325CBF29CE4
        for c in bytes {
            x = (x ^ UInt64(c)) &* 0x0000_0100_0000_01B3
            y = (y ^ UInt64(asciiLowerHex(c))) &* 0x9E37_79B9_7F4A_7C15
            y ^= y >> 29
        }
        a = x
        b = y
    }

    /// The shard for `n` shards.
    @inline(__always)
    public func shard(_ n: Int) -> Int { Int(truncatingIfNeeded: (a ^ b) % UInt64(n)) }
}

@inline(__always)
func asciiLowerHex(_ c: UInt8) -> UInt8 { (c >= 0x41 && c <= 0x46) ? c | 0x20 : c }

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
}
