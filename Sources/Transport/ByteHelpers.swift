/// Small helpers for working with bytes without going through `String`.

@inlinable
func asciiLower(_ b: UInt8) -> UInt8 {
    (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
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

/// A growable output buffer with a consumed prefix, so partial writes do not shift bytes.
struct OutputBuffer {
    private(set) var bytes: [UInt8] = []
    private(set) var start = 0

    init() {}

    var isEmpty: Bool { start == bytes.count }
    var count: Int { bytes.count - start }

    mutating func append(_ raw: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: raw.typedBytes)
    }
    mutating func append(_ other: [UInt8]) {
        bytes.append(contentsOf: other)
    }
    mutating func append(_ s: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }
    mutating func append(_ s: String) {
        bytes.append(contentsOf: s.utf8)
    }
    mutating func appendDecimal(_ value: Int) {
        withDecimalDigits(value) { bytes.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Calls `body` with the unconsumed bytes; it returns how many it consumed.
    mutating func withUnconsumed(_ body: (UnsafeRawBufferPointer) -> Int) {
        let s = start
        let used = bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[s...])) }
        consume(used)
    }

    mutating func consume(_ n: Int) {
        start += n
        if start >= bytes.count {
            start = 0
            if bytes.capacity > 256 * 1024 {
                bytes = []
                bytes.reserveCapacity(16 * 1024)
            } else {
                bytes.removeAll(keepingCapacity: true)
            }
        }
    }

    mutating func removeAll() {
        start = 0
        bytes.removeAll(keepingCapacity: false)
    }
}
