import CSystem
import Glibc
import Transport

/// A fast, non-cryptographic generator (wyrand) for ids on the hot path. Each owner (a
/// connection, a loop) keeps its own, so nothing is shared between threads.
public struct FastRandom: Sendable {
    private var state: UInt64

    /// A generator starting from `seed`: the same seed, the same sequence.
    public init(seed: UInt64) { state = seed }

    /// Seeded from the kernel's generator.
    public init() {
        state = csys_random_u64()
    }

    /// The next 64 random bits.
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
    /// The UUID's first eight bytes, big-endian.
    public var high: UInt64
    /// The UUID's last eight bytes, big-endian.
    public var low: UInt64

    /// The UUID with these two halves.
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
    public static func parseCanonicalLowercase(_ bytes: ArraySlice<UInt8>) -> UUIDValue? {
        bytes.withUnsafeBytes { parseCanonicalLowercase($0) }
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lowercase hex (nil: anything else).
    public static func parseCanonicalLowercase(_ bytes: [UInt8]) -> UUIDValue? {
        bytes.withUnsafeBytes { parseCanonicalLowercase($0) }
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lowercase hex (nil: anything else).
    public static func parseCanonicalLowercase(_ bytes: UnsafeRawBufferPointer) -> UUIDValue? {
        guard bytes.count == 36 else { return nil }
        var h: UInt64 = 0
        var l: UInt64 = 0
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

    /// 8 lowercase hex digits of `x`, most significant first, as the bytes of a UInt64 (SWAR).
    @inline(__always)
    static func hex8(_ x: UInt32) -> UInt64 {
        var n = UInt64(x)
        n = ((n & 0xFFFF_0000) << 16 | (n & 0x0000_FFFF)) & 0x0000_FFFF_0000_FFFF
        n = (n | n << 8) & 0x00FF_00FF_00FF_00FF
        n = (n | n << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // Each byte now holds one nibble, least significant nibble in the lowest byte.
        let letters = ((n &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        let ascii = n &+ 0x3030_3030_3030_3030 &+ letters &* 0x27
        return ascii.byteSwapped // most significant digit first in memory
    }

    /// Stores the 16 lowercase hex digits of `x`, most significant first, at `p` (SWAR).
    @inline(__always)
    public static func writeHex16(_ x: UInt64, to p: UnsafeMutableRawPointer) {
        p.storeBytes(of: hex8(UInt32(truncatingIfNeeded: x >> 32)), as: UInt64.self)
        p.storeBytes(of: hex8(UInt32(truncatingIfNeeded: x)), toByteOffset: 8, as: UInt64.self)
    }

    /// Writes the 36 canonical bytes into `out` (which must hold 36).
    @inline(__always)
    public func write(into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= 36)
        let a = UUIDValue.hex8(UInt32(truncatingIfNeeded: high >> 32))
        let b = UUIDValue.hex8(UInt32(truncatingIfNeeded: high))
        let c = UUIDValue.hex8(UInt32(truncatingIfNeeded: low >> 32))
        let d = UUIDValue.hex8(UInt32(truncatingIfNeeded: low))
        let p = out.baseAddress!
        p.storeBytes(of: a, toByteOffset: 0, as: UInt64.self) // 0..<8
        p.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 8, as: UInt8.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: b), toByteOffset: 9, as: UInt32.self) // 9..<13
        p.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 13, as: UInt8.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: b >> 32), toByteOffset: 14, as: UInt32.self) // 14..<18
        p.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 18, as: UInt8.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: c), toByteOffset: 19, as: UInt32.self) // 19..<23
        p.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 23, as: UInt8.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: c >> 32), toByteOffset: 24, as: UInt32.self) // 24..<28
        p.storeBytes(of: d, toByteOffset: 28, as: UInt64.self) // 28..<36
    }

    /// Writes the 36 canonical bytes.
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var buf: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &buf) { raw in
            write(into: raw)
            return body(UnsafeRawBufferPointer(rebasing: raw[0..<36]))
        }
    }

    /// The canonical lowercase text.
    public var description: String { withBytes { String(decoding: $0, as: UTF8.self) } }

    /// Hashes both halves (for `Hasher`-based tables; `_rawHashValue` is the fast path).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(high)
        hasher.combine(low)
    }

    /// Seeded like `TokenKey`'s (`HashMix`): ids are random or a sender's own, and a report's
    /// tables hold one per notification.
    public func _rawHashValue(seed: Int) -> Int { HashMix.fold(high, low, seed: seed) }
}

/// A 128-bit hash of bytes (two independent 64-bit FNV-1a variants), used as a compact key for
/// tokens so registries never allocate per lookup. Collisions are practically impossible.
public struct TokenKey: Hashable, Sendable {
    /// The first 64-bit hash.
    public let a: UInt64
    /// The second, independent 64-bit hash.
    public let b: UInt64

    /// Hashes 8 bytes at a time; ASCII letters are folded to lowercase first (hex tokens are
    /// case-insensitive), which leaves digits, '.', '-' and '_' unchanged.
    public init(_ raw: UnsafeRawBufferPointer) {
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(raw.count)
        var y: UInt64 = 0xC2B2_AE3D_27D4_EB4F &+ UInt64(raw.count)
        var i = 0
        let n = raw.count
        while i + 8 <= n {
            let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) | 0x2020_2020_2020_2020
            x = (x ^ w) &* 0xFF51_AFD7_ED55_8CCD
            x ^= x >> 33
            y = (y &+ w) &* 0xC4CE_B9FE_1A85_EC53
            y ^= y >> 29
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < n {
            tail |= UInt64(raw[i] | 0x20) << shift
            shift += 8
            i += 1
        }
        x = (x ^ tail) &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        y = (y &+ tail) &* 0xC4CE_B9FE_1A85_EC53
        y ^= y >> 31
        a = x
        b = y
    }

    /// The key of the bytes of a token.
    public init(_ bytes: ArraySlice<UInt8>) {
        self = bytes.withUnsafeBytes { TokenKey($0) }
    }

    /// The key of the bytes of a token.
    public init(_ bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { TokenKey($0) }
    }

    /// The key of a token's UTF-8 bytes.
    public init(_ s: String) {
        var s = s
        self = s.withUTF8 { TokenKey(UnsafeRawBufferPointer($0)) }
    }

    /// The shard for `n` shards.
    @inline(__always)
    public func shard(_ n: Int) -> Int { Int(truncatingIfNeeded: (a ^ b) % UInt64(n)) }

    /// Hashes both words (for `Hasher`-based tables).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(a)
        hasher.combine(b)
    }

    /// What dictionaries and sets hash with: the key is already a hash of its bytes, so it is
    /// folded with the table's seed (`HashMix`) instead of going through SipHash, which took
    /// about 3% of a campaign push's event-loop time (every device lookup and every entry moved
    /// when a device map grows).
    public func _rawHashValue(seed: Int) -> Int { HashMix.fold(a, b, seed: seed) }
}

/// A seeded fold of two 64-bit words for `_rawHashValue(seed:)`, for keys that are random or
/// already hashed. Each step is a bijection of the running state for a fixed other input (an
/// xor, an odd multiply, an xor-shift), so two keys that differ in one word never collide, and
/// the table's seed enters first, so which keys share a bucket differs from table to table.
public enum HashMix {
    /// Folds `a` and `b` with the table's `seed` into a bucket hash.
    @inline(__always)
    public static func fold(_ a: UInt64, _ b: UInt64, seed: Int) -> Int {
        var h = (a ^ UInt64(bitPattern: Int64(seed))) &* 0x9E37_79B9_7F4A_7C15
        h ^= h >> 32
        h = (h ^ b) &* 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        return Int(truncatingIfNeeded: h)
    }
}

/// Byte comparisons that compile to memcmp (generic `elementsEqual` across modules does not).
public enum Bytes {
    /// Whether `a` and `b` hold the same bytes.
    @inline(__always)
    public static func equal(_ a: ArraySlice<UInt8>, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { sameBytes(x, $0) } }
    }

    /// Whether `a` and the bytes `b` points at are the same.
    public static func equal(_ a: ArraySlice<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in x.count == 0 || sameBytes(x.baseAddress!, b.baseAddress!, x.count) }
    }

    /// The strings joined, in one allocation and one copy each (repeated `+=` goes through
    /// String's generic append, about 300 instructions a piece).
    public static func concat(_ parts: String...) -> String {
        var n = 0
        for p in parts { n += p.utf8.count }
        return String(unsafeUninitializedCapacity: n) { out in
            var at = 0
            for var p in parts {
                p.withUTF8 { b in
                    if let src = b.baseAddress { UnsafeMutableRawPointer(out.baseAddress! + at).copyMemory(from: src, byteCount: b.count) }
                    at += b.count
                }
            }
            return at
        }
    }
}
