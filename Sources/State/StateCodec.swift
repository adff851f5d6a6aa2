import PushCore

/// The binary form of change records and snapshots: numbered fields, each a key (`field << 3 |
/// wire`) then its value, as protocol buffers lay them out. Wire 0 is a varint (unsigned, or
/// zigzag for signed numbers, or 0/1), wire 1 eight little-endian bytes (a double), wire 2 a
/// length then that many bytes (a string, bytes, or a nested message). A reader skips fields
/// it does not know, so a record kind can gain fields without a new version; a field's meaning
/// never changes under its number.
///
/// Every record kind is described once by a `RecordSchema` (its fields' numbers, names and
/// types): the stores write and read the binary form with `StateWriter` and `StateReader`, and
/// the schema turns the same bytes into the export's JSON and back.
public struct StateWriter: Sendable {
    /// The record body written so far.
    public private(set) var bytes: [UInt8]

    /// An empty body with room for `capacity` bytes.
    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    @inline(__always) mutating func key(_ field: Int, _ wire: UInt64) { varint(UInt64(field) << 3 | wire) }

    /// An unsigned number.
    public mutating func uint(_ field: Int, _ v: UInt64) {
        key(field, 0)
        varint(v)
    }

    /// A signed number (zigzag: small magnitudes stay short).
    public mutating func int(_ field: Int, _ v: Int64) {
        key(field, 0)
        varint(UInt64(bitPattern: (v << 1) ^ (v >> 63)))
    }

    /// Writes `v` as a zigzag varint under `field`.
    public mutating func int(_ field: Int, _ v: Int) { int(field, Int64(v)) }

    /// Writes `v` as a varint 0 or 1 under `field`.
    public mutating func bool(_ field: Int, _ v: Bool) {
        key(field, 0)
        bytes.append(v ? 1 : 0)
    }

    /// Writes `v` as eight little-endian bytes under `field`.
    public mutating func double(_ field: Int, _ v: Double) {
        key(field, 1)
        var bits = v.bitPattern
        for _ in 0..<8 {
            bytes.append(UInt8(truncatingIfNeeded: bits))
            bits >>= 8
        }
    }

    /// Writes `s`'s UTF-8 bytes, length first, under `field`.
    public mutating func string(_ field: Int, _ s: String) {
        var s = s
        s.withUTF8 { bytes(field, $0) }
    }

    /// Writes `b`, length first, under `field`.
    public mutating func bytes(_ field: Int, _ b: UnsafeBufferPointer<UInt8>) {
        key(field, 2)
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    /// Writes the bytes of `b`, length first, under `field`.
    public mutating func bytes<C: Collection>(_ field: Int, _ b: C) where C.Element == UInt8 {
        key(field, 2)
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    /// Unsigned numbers packed into one length-delimited field, varint after varint (as protocol
    /// buffers pack repeated scalars; a schema names it `.bytes`).
    public mutating func packed(_ field: Int, _ values: some Sequence<UInt64>) {
        var inner = StateWriter(capacity: 2 * values.underestimatedCount)
        for v in values { inner.varint(v) }
        bytes(field, inner.bytes)
    }

    /// A nested message, written in place: its length is patched in afterwards (always five
    /// bytes, a varint padded with continuation bits, which every reader accepts).
    public mutating func message(_ field: Int, _ body: (inout StateWriter) -> Void) {
        key(field, 2)
        let at = bytes.count
        bytes.append(contentsOf: [0x80, 0x80, 0x80, 0x80, 0x00])
        let start = bytes.count
        body(&self)
        var n = UInt32(bytes.count - start)
        for i in 0..<5 {
            bytes[at + i] = UInt8(truncatingIfNeeded: n & 0x7F) | (i < 4 ? 0x80 : 0)
            n >>= 7
        }
    }

    /// A UUID as 16 bytes (big-endian halves).
    public mutating func uuid(_ field: Int, _ id: UUIDValue) {
        key(field, 2)
        bytes.append(16)
        for word in [id.high, id.low] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
    }

    /// Optional helpers: nothing is written for nil (absent and present are told apart).
    public mutating func string(_ field: Int, _ s: String?) { if let s { string(field, s) } }
    /// Writes `v` as a zigzag varint when it is not nil.
    public mutating func int(_ field: Int, _ v: Int64?) { if let v { int(field, v) } }
}

/// Why a record or snapshot could not be read.
public struct StateFormatError: Error, CustomStringConvertible, Sendable {
    /// What is wrong with the bytes, in words.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// Reads fields written by `StateWriter` from bytes the caller keeps alive.
///
/// ```swift
/// try body.withUnsafeBytes { raw in
///     var r = StateReader(raw)
///     while let field = try r.next() {
///         switch field {
///         case 1: token = try r.string()
///         case 2: createdAtMs = try r.int()
///         default: try r.skip()
///         }
///     }
/// }
/// ```
public struct StateReader {
    let base: UnsafeRawBufferPointer
    var at: Int
    let end: Int
    /// The wire type of the field `next` returned.
    public internal(set) var wire: Int = 0

    /// A reader over `raw`, at its first field.
    public init(_ raw: UnsafeRawBufferPointer) {
        base = raw
        at = 0
        end = raw.count
    }

    init(_ raw: UnsafeRawBufferPointer, from: Int, to: Int) {
        base = raw
        at = from
        end = to
    }

    var isAtEnd: Bool { at >= end }

    @inline(__always) mutating func varint() throws -> UInt64 {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard at < end else { throw StateFormatError("a number runs past the end of its record") }
            let b = base[at]
            at += 1
            guard shift < 64 else { throw StateFormatError("a number is longer than 64 bits") }
            v |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return v }
            shift += 7
        }
    }

    /// The next field's number, or nil at the end.
    public mutating func next() throws -> Int? {
        guard at < end else { return nil }
        let k = try varint()
        wire = Int(k & 7)
        guard wire == 0 || wire == 1 || wire == 2 else { throw StateFormatError("unknown wire type \(wire)") }
        let field = Int(truncatingIfNeeded: k >> 3)
        guard field > 0 else { throw StateFormatError("field number 0") }
        return field
    }

    /// The current field's value as an unsigned varint.
    public mutating func uint() throws -> UInt64 {
        guard wire == 0 else { throw StateFormatError("a number was expected") }
        return try varint()
    }

    /// The current field's value as a zigzag-encoded signed varint.
    public mutating func int() throws -> Int64 {
        let z = try uint()
        return Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
    }

    /// A signed number that must fit `Int` and `range`.
    public mutating func int(in range: ClosedRange<Int>) throws -> Int {
        let v = try int()
        guard v >= Int64(range.lowerBound), v <= Int64(range.upperBound) else {
            throw StateFormatError("\(v) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return Int(v)
    }

    /// The current field's value as a boolean (a varint, nonzero: true).
    public mutating func bool() throws -> Bool { try uint() != 0 }

    /// The current field's value as a double (wire 1).
    public mutating func double() throws -> Double {
        guard wire == 1 else { throw StateFormatError("a double was expected") }
        guard end - at >= 8 else { throw StateFormatError("a double runs past the end of its record") }
        var bits: UInt64 = 0
        for i in 0..<8 { bits |= UInt64(base[at + i]) << (8 * UInt64(i)) }
        at += 8
        return Double(bitPattern: bits)
    }

    /// The bounds of a length-delimited value, consumed.
    mutating func span() throws -> Range<Int> {
        guard wire == 2 else { throw StateFormatError("a string, bytes or message was expected") }
        let n = try varint()
        guard n <= UInt64(end - at) else { throw StateFormatError("a value of \(n) bytes runs past the end of its record") }
        let r = at..<(at + Int(n))
        at += Int(n)
        return r
    }

    /// The current field's value as a UTF-8 string (wire 2); invalid UTF-8 is refused.
    public mutating func string() throws -> String {
        let r = try span()
        return String(decoding: UnsafeRawBufferPointer(rebasing: base[r]), as: UTF8.self)
    }

    /// The current field's value as bytes (wire 2).
    /// The numbers of a field written by `packed`.
    public mutating func packed() throws -> [UInt64] {
        let r = try span()
        var inner = StateReader(base, from: r.lowerBound, to: r.upperBound)
        var out: [UInt64] = []
        while !inner.isAtEnd { out.append(try inner.varint()) }
        return out
    }

    public mutating func bytes() throws -> [UInt8] {
        let r = try span()
        return Array(base[r])
    }

    /// The raw bytes of a length-delimited value, valid while the caller's buffer is.
    mutating func rawBytes() throws -> UnsafeRawBufferPointer {
        let r = try span()
        return UnsafeRawBufferPointer(rebasing: base[r])
    }

    /// A UUID written by `StateWriter.uuid`.
    public mutating func uuid() throws -> UUIDValue {
        let r = try span()
        guard r.count == 16 else { throw StateFormatError("a UUID must be 16 bytes") }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for i in 0..<8 {
            high = high << 8 | UInt64(base[r.lowerBound + i])
            low = low << 8 | UInt64(base[r.lowerBound + 8 + i])
        }
        return UUIDValue(high: high, low: low)
    }

    /// A reader over a nested message.
    public mutating func message() throws -> StateReader {
        let r = try span()
        return StateReader(base, from: r.lowerBound, to: r.upperBound)
    }

    /// Passes over the current field's value.
    public mutating func skip() throws {
        switch wire {
        case 0: _ = try varint()
        case 1:
            guard end - at >= 8 else { throw StateFormatError("a double runs past the end of its record") }
            at += 8
        default: _ = try span()
        }
    }
}
