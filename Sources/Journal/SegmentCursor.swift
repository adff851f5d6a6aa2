import PushCore
import Runtime

/// One record as it lies in a segment's bytes: numbers read, every byte field a range into the
/// segment (nothing copied). The repeatable fields' values are the cursor's (`value(_:)`), valid
/// until the next record; `changed` tells which of them this record wrote rather than repeated.
struct RecordView {
    var isRequest = false
    var atMs: Int64 = 0
    /// Request: `PushProvider.storedByte`.
    var provider: UInt8 = 0
    var connection: UInt64 = 0
    var status = 0
    /// Request: microseconds; tracking: milliseconds × 1000.
    var latency: UInt64 = 0
    /// Request: the payload's size as received.
    var size = 0
    /// Tracking: the attempt and the events its request carried.
    var attempt = 0
    var events = 0
    /// The token as stored: `tokenPacked` means lowercase hex stored as its bytes.
    var token: Range<Int> = 0..<0
    var tokenPacked = false
    /// Request: the notification id's 16 bytes (empty when rejected); tracking: its text.
    var id: Range<Int> = 0..<0
    /// Tracking: the URL.
    var url: Range<Int> = 0..<0
    /// Bit `slot.rawValue`: this record wrote the field (a new value, or absent after a value).
    var changed: UInt16 = 0

    func wrote(_ slot: SegmentEncoder.Slot) -> Bool { changed & 1 << slot.rawValue != 0 }
}

/// Walks a segment's records without building them: the decoder's single pass over the format
/// (see `SegmentEncoder`), used by `SegmentDecoder` to build entries, by the index to summarise a
/// segment, and by searches to test records before building the few that match.
struct SegmentCursor {
    private var i = 0
    private var end = 0
    private var lastMs: Int64 = 0
    /// Each repeatable field's current value (-1: absent), kept inline: no array to check for
    /// uniqueness at each write.
    private var previous = InlineArray<14, (start: Int, count: Int)>(repeating: (-1, 0))
    private(set) var malformed = false
    /// Format 1 stored tokens as plain literals; 2 packs hex tokens; 3 adds the device outcome.
    private(set) var version: UInt8 = 0
    /// Where the next record starts.
    var position: Int { i }

    init(_ b: UnsafeRawBufferPointer) {
        end = b.count
        guard b.count >= 4, b[0] == UInt8(ascii: "P"), b[1] == UInt8(ascii: "J"), (1...SegmentEncoder.version).contains(b[2]) else {
            i = end
            malformed = !b.isEmpty
            return
        }
        version = b[2]
        i = 3
        lastMs = Int64(bitPattern: varint(b))
    }

    /// The current value of a repeatable field (nil: absent).
    func value(_ slot: SegmentEncoder.Slot) -> Range<Int>? {
        let p = previous[slot.rawValue]
        return p.start < 0 ? nil : p.start..<p.start + p.count
    }

    /// The next record, written into `v` (a loop over many records reuses one view); false at
    /// the end, or once the bytes are malformed. `b` is the segment the cursor was made with.
    mutating func next(_ b: UnsafeRawBufferPointer, into v: inout RecordView) -> Bool {
        guard i < end, !malformed else { return false }
        let tag = b[i]
        i += 1
        let z = varint(b)
        lastMs &+= Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
        v.atMs = lastMs
        v.changed = 0
        switch tag {
        case 1:
            guard i < end else {
                malformed = true
                return false
            }
            v.isRequest = true
            v.provider = b[i]
            i += 1
            v.connection = varint(b)
            v.status = Int(truncatingIfNeeded: varint(b))
            v.latency = varint(b)
            v.size = Int(truncatingIfNeeded: varint(b))
            field(.environment, b, &v)
            field(.topic, b, &v)
            field(.reason, b, &v)
            field(.headers, b, &v)
            field(.payload, b, &v)
            field(.warnings, b, &v)
            field(.campaign, b, &v)
            if version >= 3 { field(.device, b, &v) } else { previous[SegmentEncoder.Slot.device.rawValue] = (-1, 0) }
            if version >= 5 { field(.team, b, &v) } else { previous[SegmentEncoder.Slot.team.rawValue] = (-1, 0) }
            token(b, &v)
            v.id = literal(b)
        case 2:
            v.isRequest = false
            v.status = Int(truncatingIfNeeded: varint(b))
            v.attempt = Int(truncatingIfNeeded: varint(b))
            v.latency = varint(b)
            v.events = Int(truncatingIfNeeded: varint(b))
            field(.preset, b, &v)
            field(.event, b, &v)
            field(.method, b, &v)
            field(.outcome, b, &v)
            field(.error, b, &v)
            if version >= 4 { field(.campaign, b, &v) }
            token(b, &v)
            v.id = literal(b)
            v.url = literal(b)
        default:
            malformed = true
            return false
        }
        return !malformed
    }

    // MARK: building entries

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// The record as the journal's readers take it.
    func entry(_ v: RecordView, _ b: UnsafeRawBufferPointer) -> JournalEntry {
        func text(_ r: Range<Int>) -> String { String(decoding: UnsafeRawBufferPointer(rebasing: b[r]), as: UTF8.self) }
        func string(_ slot: SegmentEncoder.Slot) -> String? { value(slot).map(text) }
        let token = SegmentCursor.tokenText(v, b)
        guard v.isRequest else {
            return .tracking(
                TrackingRecord(
                    atMs: v.atMs, preset: string(.preset) ?? "", event: string(.event) ?? "", token: token,
                    notificationID: text(v.id), method: string(.method) ?? "", url: text(v.url), status: v.status,
                    outcome: string(.outcome) ?? "", attempt: v.attempt, latencyMs: Double(v.latency) / 1000,
                    error: string(.error), events: v.events, campaign: version >= 4 ? string(.campaign) : nil))
        }
        var r = StoredRequest(
            atMs: v.atMs, provider: PushProvider.stored(v.provider), connection: v.connection,
            environment: string(.environment) ?? "", token: token, topic: string(.topic), campaign: string(.campaign),
            status: v.status, reason: string(.reason) ?? "", latencyUs: Int64(truncatingIfNeeded: v.latency),
            headers: value(.headers).map { SegmentCursor.headers(UnsafeRawBufferPointer(rebasing: b[$0])) } ?? [],
            payload: value(.payload).map { Array(b[$0]) } ?? [], payloadSize: v.size,
            warnings: string(.warnings).map { $0.split(separator: "\n").map(String.init) } ?? [],
            notificationID: SegmentCursor.id(v, b)?.description)
        r.team = version >= 5 ? string(.team) : nil
        if let device = value(.device), device.count >= 2 {
            r.display = Display(stored: (b[device.lowerBound], b[device.lowerBound + 1]))
            r.lint = UnsafeRawBufferPointer(rebasing: b[device.lowerBound + 2..<device.upperBound])
                .split(separator: UInt8(ascii: "\n"))
                .compactMap { LintFinding(storedLine: String(decoding: $0, as: UTF8.self)[...]) }
        }
        return .request(r)
    }

    /// A request's notification id (nil when it has none).
    static func id(_ v: RecordView, _ b: UnsafeRawBufferPointer) -> UUIDValue? {
        guard v.isRequest, v.id.count == 16 else { return nil }
        return UUIDValue(
            high: UInt64(bigEndian: b.loadUnaligned(fromByteOffset: v.id.lowerBound, as: UInt64.self)),
            low: UInt64(bigEndian: b.loadUnaligned(fromByteOffset: v.id.lowerBound + 8, as: UInt64.self)))
    }

    /// The token as it was sent.
    static func tokenText(_ v: RecordView, _ b: UnsafeRawBufferPointer) -> String {
        guard v.tokenPacked else { return String(decoding: UnsafeRawBufferPointer(rebasing: b[v.token]), as: UTF8.self) }
        let digits = SegmentCursor.hexDigits
        return String(unsafeUninitializedCapacity: v.token.count * 2) { out in
            for (k, byte) in b[v.token].enumerated() {
                out[2 * k] = digits[Int(byte >> 4)]
                out[2 * k + 1] = digits[Int(byte & 15)]
            }
            return v.token.count * 2
        }
    }

    /// The kept headers' `name NUL value NUL` pairs.
    static func headers(_ b: UnsafeRawBufferPointer) -> [(name: String, value: String)] {
        let parts = b.split(separator: 0, omittingEmptySubsequences: false)
        var out: [(name: String, value: String)] = []
        var k = 0
        while k + 1 < parts.count {
            out.append((String(decoding: parts[k], as: UTF8.self), String(decoding: parts[k + 1], as: UTF8.self)))
            k += 2
        }
        return out
    }

    // MARK: fields

    @inline(__always)
    private mutating func varint(_ b: UnsafeRawBufferPointer) -> UInt64 {
        guard let v = Varint.read(b, at: &i, end: end) else {
            malformed = true
            return 0
        }
        return v
    }

    /// A length-prefixed run of bytes.
    @inline(__always)
    private mutating func literal(_ b: UnsafeRawBufferPointer) -> Range<Int> {
        let n = varint(b)
        guard n <= UInt64(end - i) else {
            malformed = true
            return i..<i
        }
        defer { i += Int(n) }
        return i..<i + Int(n)
    }

    @inline(__always)
    private mutating func token(_ b: UnsafeRawBufferPointer, _ v: inout RecordView) {
        guard version >= 2 else {
            v.token = literal(b)
            return
        }
        let n = varint(b)
        v.tokenPacked = n & 1 == 1
        let count = v.tokenPacked ? n >> 2 : n >> 1
        guard count <= UInt64(end - i) else {
            malformed = true
            return
        }
        v.token = i..<i + Int(count)
        i += Int(count)
    }

    /// A repeatable field: 0 the previous value, 1 absent, n >= 2 a new value of n - 2 bytes.
    @inline(__always)
    private mutating func field(_ slot: SegmentEncoder.Slot, _ b: UnsafeRawBufferPointer, _ v: inout RecordView) {
        let n = varint(b)
        switch n {
        case 0: return
        case 1:
            if previous[slot.rawValue].start >= 0 { v.changed |= 1 << slot.rawValue }
            previous[slot.rawValue] = (-1, 0)
        default:
            guard n - 2 <= UInt64(end - i) else {
                malformed = true
                return
            }
            let length = Int(n - 2)
            previous[slot.rawValue] = (i, length)
            v.changed |= 1 << slot.rawValue
            i += length
        }
    }
}
