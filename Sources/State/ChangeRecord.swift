import CSystem

/// One change to one store, as the state log keeps it and as a cluster node would ship it: the
/// store's registry name, the kind of change (a number the store's schema names), its version,
/// and the change itself in the store's binary form. Records are idempotent (applying one twice
/// leaves the store as applying it once) and name everything they need (tokens, ids, seeds,
/// times), so a record made here applies the same way at start, on import or on another node.
public struct ChangeRecord: Sendable {
    /// Position in the log (assigned when appended; 0 in snapshots and exports).
    public var seq: UInt64
    /// When the change was made (wall clock, ms).
    public var atMs: Int64
    public var store: String
    public var kind: Int
    public var version: Int
    public var body: [UInt8]
    /// The node that made it ("" on a single node).
    public var origin: String

    public init(store: String, kind: Int, version: Int = 1, body: [UInt8], atMs: Int64 = 0, seq: UInt64 = 0, origin: String = "") {
        self.seq = seq
        self.atMs = atMs
        self.store = store
        self.kind = kind
        self.version = version
        self.body = body
        self.origin = origin
    }

    /// The envelope's fields (`StateWriter` numbering).
    enum Field {
        static let seq = 1, atMs = 2, store = 3, kind = 4, version = 5, body = 6, origin = 7
    }

    /// The record as a cluster node ships it (the envelope, with its origin).
    public var wire: [UInt8] { encoded() }

    /// A record a cluster node shipped.
    public init(wire bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try ChangeRecord.decode($0) }
    }

    /// The envelope in binary, without framing.
    func encoded() -> [UInt8] {
        var w = StateWriter(capacity: body.count + store.utf8.count + 24)
        if seq != 0 { w.uint(Field.seq, seq) }
        if atMs != 0 { w.int(Field.atMs, atMs) }
        w.string(Field.store, store)
        w.uint(Field.kind, UInt64(kind))
        if version != 1 { w.uint(Field.version, UInt64(version)) }
        w.bytes(Field.body, body)
        if !origin.isEmpty { w.string(Field.origin, origin) }
        return w.bytes
    }

    static func decode(_ raw: UnsafeRawBufferPointer) throws -> ChangeRecord {
        var r = StateReader(raw)
        var record = ChangeRecord(store: "", kind: 0, body: [])
        while let f = try r.next() {
            switch f {
            case Field.seq: record.seq = try r.uint()
            case Field.atMs: record.atMs = try r.int()
            case Field.store: record.store = try r.string()
            case Field.kind: record.kind = try r.int(in: 0...255, unsigned: true)
            case Field.version: record.version = try r.int(in: 1...255, unsigned: true)
            case Field.body: record.body = try r.bytes()
            case Field.origin: record.origin = try r.string()
            default: try r.skip()
            }
        }
        guard !record.store.isEmpty else { throw StateFormatError("a record names no store") }
        return record
    }
}

extension StateReader {
    /// An unsigned number that must be in `range`.
    public mutating func int(in range: ClosedRange<Int>, unsigned: Bool) throws -> Int {
        let v = try uint()
        guard v >= UInt64(range.lowerBound), v <= UInt64(range.upperBound) else {
            throw StateFormatError("\(v) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return Int(v)
    }
}

/// A record as a store applies it: its body borrowed from the buffer it was read from (a
/// snapshot's or log file's bytes, valid for the call only), so a start copies no body.
public struct RecordView {
    public let kind: Int
    public let version: Int
    public let atMs: Int64
    public let body: UnsafeRawBufferPointer

    public init(kind: Int, version: Int, atMs: Int64, body: UnsafeRawBufferPointer) {
        self.kind = kind
        self.version = version
        self.atMs = atMs
        self.body = body
    }

    /// `body` for `work` (the same shape as `Array.withUnsafeBytes`).
    public func withBody<R>(_ work: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try work(body) }
}

/// Records framed for a file: `[length: u32 LE][CRC-32C of the payload: u32 LE][payload]`, so a
/// record cut short by a crash, or damaged, is found and not applied.
enum StateFrame {
    static let headerSize = 8
    /// No record is larger (a `batchAdd` of 1,000 tokens is about 170 KB).
    static let maxPayload = 64 << 20

    static func append(_ payload: [UInt8], to out: inout [UInt8]) {
        let n = UInt32(payload.count)
        let crc = payload.withUnsafeBytes { csys_crc32c(0, $0.baseAddress, $0.count) }
        for v in [n, crc] {
            out.append(UInt8(truncatingIfNeeded: v))
            out.append(UInt8(truncatingIfNeeded: v >> 8))
            out.append(UInt8(truncatingIfNeeded: v >> 16))
            out.append(UInt8(truncatingIfNeeded: v >> 24))
        }
        out.append(contentsOf: payload)
    }

    enum Read {
        /// A whole frame: its payload's bounds.
        case frame(Range<Int>)
        /// Nothing more.
        case end
        /// Cut short: fewer bytes than the frame says (a crash while it was written).
        case truncated
        /// A frame whose length or checksum is wrong.
        case damaged
    }

    static func u32(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
        UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }

    /// The frame at `at` in `b`.
    static func read(_ b: UnsafeRawBufferPointer, at: Int) -> Read {
        let left = b.count - at
        if left == 0 { return .end }
        if left < headerSize { return .truncated }
        let n = Int(u32(b, at))
        guard n <= maxPayload else { return .damaged }
        if left - headerSize < n { return .truncated }
        let crc = csys_crc32c(0, b.baseAddress! + at + headerSize, n)
        guard crc == u32(b, at + 4) else { return .damaged }
        return .frame((at + headerSize)..<(at + headerSize + n))
    }

    /// Whole, valid frames from `at` on, found by trying every position (after damage, to count
    /// what is lost).
    static func countRecoverable(_ b: UnsafeRawBufferPointer, from at: Int) -> Int {
        var count = 0
        var i = at
        while i + headerSize <= b.count {
            if case .frame(let r) = read(b, at: i) {
                count += 1
                i = r.upperBound
            } else {
                i += 1
            }
        }
        return count
    }
}
