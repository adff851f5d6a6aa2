import Glibc

/// Small helpers for working with bytes without going through `String`.

/// Copies `n` bytes from `src` to `dst` (not overlapping). Up to 16 bytes (header names, ids,
/// short values) with two overlapping word moves inline; longer copies call `memcpy`. The
/// request path copies a few dozen short runs per request, and a `memcpy` call each was about
/// 3% of the event loop's cycles (perf).
@inlinable @inline(__always)
public func copyBytes(_ dst: UnsafeMutableRawPointer, _ src: UnsafeRawPointer, _ n: Int) {
    if n >= 8 {
        if n > 16 {
            memcpy(dst, src, n)
            return
        }
        let head = src.loadUnaligned(as: UInt64.self)
        let tail = src.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
        dst.storeBytes(of: head, as: UInt64.self)
        dst.storeBytes(of: tail, toByteOffset: n - 8, as: UInt64.self)
    } else if n >= 4 {
        let head = src.loadUnaligned(as: UInt32.self)
        let tail = src.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
        dst.storeBytes(of: head, as: UInt32.self)
        dst.storeBytes(of: tail, toByteOffset: n - 4, as: UInt32.self)
    } else {
        var i = 0
        while i < n {
            dst.storeBytes(of: src.load(fromByteOffset: i, as: UInt8.self), toByteOffset: i, as: UInt8.self)
            i += 1
        }
    }
}

/// True when the `n` bytes at `a` and `b` are equal. Up to 16 bytes (header names, JSON keys,
/// topic suffixes) it compares two overlapping words per side inline instead of calling
/// `memcmp` (a call and its dispatch per comparison, about a dozen per APNs request).
@inlinable @inline(__always)
public func sameBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Bool {
    if n >= 8 {
        if n > 16 { return memcmp(a, b, n) == 0 }
        return a.loadUnaligned(as: UInt64.self) == b.loadUnaligned(as: UInt64.self)
            && a.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self) == b.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
    }
    if n >= 4 {
        return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
            && a.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self) == b.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
    }
    var i = 0
    while i < n {
        if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
        i += 1
    }
    return true
}

/// True when `a` and `b` hold the same bytes (either may be empty, its base address nil).
@inlinable @inline(__always)
public func sameBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    a.count == b.count && (a.isEmpty || sameBytes(a.baseAddress!, b.baseAddress!, a.count))
}

@inlinable
func asciiLower(_ b: UInt8) -> UInt8 {
    (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
}

/// The eight bytes of `w` with each ASCII capital letter made small (other bytes as they are).
@inlinable @inline(__always)
public func asciiLowered(_ w: UInt64) -> UInt64 {
    let seven = w & 0x7F7F_7F7F_7F7F_7F7F
    // A byte's top bit: at least "A" (0x41), then at least "[" (0x5B); never carries, as
    // 0x7F + 0x3F < 0x100.
    let fromA = seven &+ 0x3F3F_3F3F_3F3F_3F3F
    let pastZ = seven &+ 0x2525_2525_2525_2525
    let capital = fromA & ~pastZ & ~w & 0x8080_8080_8080_8080
    return w | capital >> 2
}

/// ASCII case-insensitive equality of the `n` bytes at `a` with the lowercase ones at `lower`,
/// a word at a time (a byte at a time cost 15 instructions a byte: a bearer prefix 109, an
/// APNs host up to 600).
@inlinable @inline(__always)
func equalIgnoringCase(_ a: UnsafeRawPointer, _ lower: UnsafeRawPointer, _ n: Int) -> Bool {
    if n >= 8 {
        var i = 0
        while i + 8 <= n {
            if asciiLowered(a.loadUnaligned(fromByteOffset: i, as: UInt64.self)) != lower.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            {
                return false
            }
            i += 8
        }
        // The last (overlapping) word.
        return i == n
            || asciiLowered(a.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self))
                == lower.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
    }
    if n >= 4 {
        let head = UInt64(a.loadUnaligned(as: UInt32.self)) | UInt64(a.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)) << 32
        let want = UInt64(lower.loadUnaligned(as: UInt32.self)) | UInt64(lower.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)) << 32
        return asciiLowered(head) == want
    }
    for i in 0..<n where asciiLower(a.load(fromByteOffset: i, as: UInt8.self)) != lower.load(fromByteOffset: i, as: UInt8.self) {
        return false
    }
    return true
}

extension Collection where Element == UInt8 {
    /// True when the bytes equal `literal` exactly.
    @inlinable
    public func equals(_ literal: StaticString) -> Bool {
        guard count == literal.utf8CodeUnitCount else { return false }
        return literal.withUTF8Buffer { lit in
            var i = 0
            for b in self {
                if b != lit[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// True when the bytes equal `literal` ignoring ASCII case (`literal` must be lowercase).
    @inlinable
    public func equalsIgnoringCase(_ literal: StaticString) -> Bool {
        guard count == literal.utf8CodeUnitCount else { return false }
        return literal.withUTF8Buffer { lit in
            let contiguous = withContiguousStorageIfAvailable { b in
                b.isEmpty || equalIgnoringCase(UnsafeRawPointer(b.baseAddress!), UnsafeRawPointer(lit.baseAddress!), b.count)
            }
            if let contiguous { return contiguous }
            var i = 0
            for b in self {
                if asciiLower(b) != lit[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// True when the bytes start with `literal`.
    @inlinable
    public func hasPrefix(_ literal: StaticString) -> Bool {
        guard count >= literal.utf8CodeUnitCount else { return false }
        return literal.withUTF8Buffer { lit in
            var i = 0
            for b in self {
                if i == lit.count { return true }
                if b != lit[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// True when the bytes end with `literal`.
    @inlinable
    public func hasSuffix(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard count >= n else { return false }
        return literal.withUTF8Buffer { lit in self.suffix(n).elementsEqual(lit) }
    }

    /// The bytes decoded as UTF-8 (invalid sequences repaired). For logs and admin paths, not hot paths.
    public var utf8String: String { String(decoding: self, as: UTF8.self) }
}

/// Calls `body` with the ASCII decimal digits of a non-negative `value`, formatted on the stack.
@inline(__always)
func withDecimalDigits<R>(_ value: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
    var tmp: (UInt64, UInt64, UInt64) = (0, 0, 0)
    return withUnsafeMutableBytes(of: &tmp) { buf in
        var v = max(0, value)
        var n = 0
        repeat {
            buf[23 - n] = UInt8(truncatingIfNeeded: 0x30 + v % 10)
            v /= 10
            n += 1
        } while v > 0
        return body(UnsafeRawBufferPointer(rebasing: buf[(24 - n)...]))
    }
}

extension UnsafeRawBufferPointer {
    /// The bytes as a typed buffer (so Array appends take the memcpy path).
    @inline(__always)
    var typedBytes: UnsafeBufferPointer<UInt8> { assumingMemoryBound(to: UInt8.self) }
}

extension Array where Element == UInt8 {
    /// `count` bytes whose first `prefix.count` are copied from `prefix` and the rest left
    /// uninitialized: for buffers that track how much they hold and never read past it (zero
    /// filling through `Array.append` cost about 1k instructions per HTTP/1.1 request).
    static func uninitialized(count: Int, copying prefix: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buf, n in
            if let src = prefix.baseAddress, prefix.count > 0 { _ = memcpy(buf.baseAddress!, src, prefix.count) }
            n = count
        }
    }
}

/// A growable output buffer with a consumed prefix, so partial writes do not shift bytes.
/// Bytes are copied in with memcpy: `storage` is allocated uninitialized and only
/// `start..<end` is ever read (`Array.append(contentsOf:)` cost about 115 instructions a call,
/// a dozen calls per HTTP/1.1 response).
struct OutputBuffer {
    private var storage: [UInt8] = []
    private(set) var start = 0
    private var end = 0

    init() {}

    var isEmpty: Bool { start == end }
    var count: Int { end - start }

    @inline(__always)
    private mutating func copyIn(_ src: UnsafeRawPointer?, _ n: Int) {
        guard n > 0, let src else { return }
        if end + n > storage.count { grow(n) }
        let at = end
        storage.withUnsafeMutableBytes { _ = memcpy($0.baseAddress! + at, src, n) }
        end += n
    }

    /// Room for `n` more bytes: the unconsumed bytes move to a larger (or the same) buffer's start.
    @inline(never)
    private mutating func grow(_ n: Int) {
        let live = end - start
        let size = max(4096, live + n, storage.count * 2)
        let s = start
        let e = end
        storage = storage.withUnsafeBytes { .uninitialized(count: size, copying: UnsafeRawBufferPointer(rebasing: $0[s..<e])) }
        start = 0
        end = live
    }

    mutating func append(_ raw: UnsafeRawBufferPointer) { copyIn(raw.baseAddress, raw.count) }

    /// Appends what `body` writes at the pointer it is given, at most `n` bytes; it returns how many.
    @inline(__always)
    mutating func append(atMost n: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        guard n > 0 else { return }
        if end + n > storage.count { grow(n) }
        let at = end
        let written = storage.withUnsafeMutableBufferPointer { body($0.baseAddress! + at) }
        end += written
    }
    mutating func append(_ other: [UInt8]) { other.withUnsafeBytes { copyIn($0.baseAddress, $0.count) } }
    /// Literals land here (a `String` overload would take them, through String's UTF-8 view:
    /// about 1.4k instructions per HTTP/1.1 response).
    mutating func append(_ s: StaticString) { copyIn(s.utf8Start, s.utf8CodeUnitCount) }
    mutating func appendDecimal(_ value: Int) {
        withDecimalDigits(value) { copyIn($0.baseAddress, $0.count) }
    }

    /// Calls `body` with the unconsumed bytes; it returns how many it consumed.
    mutating func withUnconsumed(_ body: (UnsafeRawBufferPointer) -> Int) {
        let s = start
        let e = end
        let used = storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[s..<e])) }
        consume(used)
    }

    mutating func consume(_ n: Int) {
        start += n
        if start >= end {
            start = 0
            end = 0
            if storage.count > 256 * 1024 { storage = [] } // a burst's buffer is not kept
        }
    }

    mutating func removeAll() {
        start = 0
        end = 0
        storage = []
    }
}

/// Whether a value comes twice in a row, by its length and last 8 bytes: what a connection's
/// memos (`RouteMemo`, `TokenKeyMemo`) keep a copy of only once it repeats, so a sender whose
/// every value is new pays one word's compare and no copy.
public struct RepeatWitness {
    private var count = -1
    private var tail: UInt64 = 0

    public init() {}

    /// Notes `bytes` (at least 8) and says whether the last one noted had its length and last word.
    @inline(__always)
    public mutating func repeats(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        let t = bytes.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
        defer {
            count = n
            tail = t
        }
        return n == count && t == tail
    }
}
