import Glibc
import PushCore
import Transport

/// The journal's storage form: records grouped into segments (one SQLite row per segment, many
/// records each), each record in a compact binary encoding where a repeated value (the same
/// payload, headers, topic, reason, campaign as the record before) costs one byte. A campaign's
/// requests are mostly identical but for the token, so a record shrinks from ~500 bytes to ~130,
/// and the write cost, which is dominated by bytes through SQLite's WAL, shrinks with it.
///
/// Segment: `"PJ" 0x01`, varint base time, then records. Record: tag (1 request, 2 tracking),
/// zigzag varint of the time since the record before, then the fields in a fixed order.
/// Repeatable fields: varint 0 = same as before, 1 = absent, n >= 2 = n - 2 bytes follow.
/// Literal fields: varint length then bytes.
struct SegmentEncoder {
    private(set) var bytes: [UInt8] = []
    private(set) var requests = 0
    private(set) var tracking = 0
    private(set) var firstMs: Int64 = 0
    private(set) var lastMs: Int64 = 0
    /// Where each repeatable field's last value sits in `bytes` (-1: absent / none yet).
    private var previous = [(start: Int, count: Int)](repeating: (-1, 0), count: Slot.count)
    private var scratch: [UInt8] = []
    /// The campaign of the last request's payload (a repeated payload has the same campaign).
    private var lastCampaign: String?
    private var lastProvider: PushProvider?

    enum Slot: Int, CaseIterable {
        case environment, topic, reason, headers, payload, warnings, campaign
        case preset, event, method, outcome, error
        static let count = allCases.count
    }

    var isEmpty: Bool { requests + tracking == 0 }
    var count: Int { requests + tracking }

    init(baseMs: Int64) {
        bytes.reserveCapacity(64 * 1024)
        bytes += [UInt8(ascii: "P"), UInt8(ascii: "J"), 1]
        firstMs = baseMs
        lastMs = baseMs
        varint(UInt64(bitPattern: baseMs))
    }

    mutating func append(_ r: RequestRecord, maxPayload: Int, campaignOf: (PushProvider, ArraySlice<UInt8>) -> String?) {
        header(tag: 1, atMs: r.atMs)
        bytes.append(r.provider == .apns ? 0 : 1)
        varint(r.connection)
        varint(UInt64(max(0, r.status)))
        varint(UInt64(max(0, r.latencyUs)))
        varint(UInt64(r.payload.count))
        repeatable(.environment, string: r.environment)
        if let t = r.topic { t.withUnsafeBytes { _ = repeatable(.topic, $0) } } else { repeatable(.topic, nil) }
        repeatable(.reason, string: r.reason.isEmpty ? nil : r.reason)
        scratch.removeAll(keepingCapacity: true)
        SegmentEncoder.keptHeaders(r.headers, into: &scratch)
        scratch.withUnsafeBytes { _ = repeatable(.headers, $0) }
        let payload = r.payload.prefix(maxPayload)
        let samePayload = payload.withUnsafeBytes { repeatable(.payload, $0) }
        if r.warnings.isEmpty { repeatable(.warnings, nil) } else { repeatable(.warnings, string: r.warnings.joined(separator: "\n")) }
        if !samePayload || lastProvider != r.provider { lastCampaign = campaignOf(r.provider, r.payload) }
        lastProvider = r.provider
        repeatable(.campaign, string: lastCampaign)
        literal(r.token)
        if let id = r.notificationID {
            bytes.append(16)
            withUnsafeBytes(of: id.high.bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: id.low.bigEndian) { bytes.append(contentsOf: $0) }
        } else {
            bytes.append(0)
        }
        requests += 1
    }

    mutating func append(_ t: TrackingRecord) {
        header(tag: 2, atMs: t.atMs)
        varint(UInt64(max(0, t.status)))
        varint(UInt64(max(0, t.attempt)))
        varint(UInt64(max(0, (t.latencyMs * 1000).rounded())))
        varint(UInt64(max(1, t.events)))
        repeatable(.preset, string: t.preset)
        repeatable(.event, string: t.event)
        repeatable(.method, string: t.method)
        repeatable(.outcome, string: t.outcome)
        repeatable(.error, string: t.error)
        var s = t.token; s.withUTF8 { literal(UnsafeRawBufferPointer($0)) }
        s = t.notificationID; s.withUTF8 { literal(UnsafeRawBufferPointer($0)) }
        s = t.url; s.withUTF8 { literal(UnsafeRawBufferPointer($0)) }
        tracking += 1
    }

    /// The headers a reader of the journal needs (`apns-*`, `x-*`, `content-type`; never
    /// `authorization`), as `name NUL value NUL` pairs.
    static func keptHeaders(_ h: HTTPFields, into out: inout [UInt8]) {
        h.forEach { n, v in
            guard n.count > 2 else { return }
            let c0 = n[0], c1 = n[1]
            let keep = (c0 == UInt8(ascii: "x") && c1 == UInt8(ascii: "-"))
                || (c0 == UInt8(ascii: "a") && n.count > 5 && memcmp(n.baseAddress!, "apns-", 5) == 0)
                || (c0 == UInt8(ascii: "c") && n.count == 12 && memcmp(n.baseAddress!, "content-type", 12) == 0)
            guard keep else { return }
            out.append(contentsOf: n)
            out.append(0)
            out.append(contentsOf: v)
            out.append(0)
        }
    }

    private mutating func header(tag: UInt8, atMs: Int64) {
        bytes.append(tag)
        let delta = atMs &- lastMs
        varint(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
        lastMs = atMs
    }

    private mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    private mutating func literal(_ b: ArraySlice<UInt8>) {
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    private mutating func literal(_ b: UnsafeRawBufferPointer?) {
        guard let b else { varint(0); return }
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    private mutating func repeatable(_ slot: Slot, string: String?) {
        guard var s = string else { repeatable(slot, nil); return }
        s.withUTF8 { _ = repeatable(slot, UnsafeRawBufferPointer($0)) }
    }

    /// Writes `value`, or one byte when it equals the field's previous value. True when it did.
    @discardableResult
    private mutating func repeatable(_ slot: Slot, _ value: UnsafeRawBufferPointer?) -> Bool {
        let p = previous[slot.rawValue]
        guard let value else {
            previous[slot.rawValue] = (-1, 0)
            varint(1)
            return p.start < 0
        }
        if p.start >= 0 && p.count == value.count {
            let same = value.isEmpty || bytes.withUnsafeBytes { memcmp($0.baseAddress! + p.start, value.baseAddress!, value.count) == 0 }
            if same { varint(0); return true }
        }
        varint(UInt64(value.count + 2))
        previous[slot.rawValue] = (bytes.count, value.count)
        bytes.append(contentsOf: value)
        return false
    }
}

/// One provider request as read back from the journal.
public struct StoredRequest: Sendable {
    public var atMs: Int64
    public var provider: PushProvider
    public var connection: UInt64
    public var environment: String
    public var token: String
    public var topic: String?
    public var campaign: String?
    public var status: Int
    /// APNs reason or FCM errorCode; empty when accepted.
    public var reason: String
    public var latencyUs: Int64
    public var headers: [(name: String, value: String)]
    /// The payload as kept (at most `Journal.maxPayload` bytes) and its size as received.
    public var payload: [UInt8]
    public var payloadSize: Int
    public var warnings: [String]
    public var notificationID: String?
}

public enum JournalEntry: Sendable {
    case request(StoredRequest)
    case tracking(TrackingRecord)
}

/// Reads a segment's records in order (the inverse of `SegmentEncoder`).
struct SegmentDecoder {
    private let bytes: [UInt8]
    private var i = 0
    private var lastMs: Int64 = 0
    private var previous = [(start: Int, count: Int)](repeating: (-1, 0), count: SegmentEncoder.Slot.count)
    private(set) var malformed = false

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        guard bytes.count >= 4, bytes[0] == UInt8(ascii: "P"), bytes[1] == UInt8(ascii: "J"), bytes[2] == 1 else {
            i = bytes.count
            malformed = !bytes.isEmpty
            return
        }
        i = 3
        lastMs = Int64(bitPattern: varint())
    }

    mutating func next() -> JournalEntry? {
        guard i < bytes.count, !malformed else { return nil }
        let tag = bytes[i]
        i += 1
        let z = varint()
        lastMs &+= Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
        switch tag {
        case 1:
            guard i < bytes.count else { malformed = true; return nil }
            let provider: PushProvider = bytes[i] == 0 ? .apns : .fcm
            i += 1
            let connection = varint()
            let status = Int(varint())
            let latency = Int64(varint())
            let size = Int(varint())
            let environment = string(.environment) ?? ""
            let topic = string(.topic)
            let reason = string(.reason) ?? ""
            let headerBytes = field(.headers) ?? []
            let payload = field(.payload) ?? []
            let warnings = string(.warnings).map { $0.split(separator: "\n").map(String.init) } ?? []
            let campaign = string(.campaign)
            let token = String(decoding: literal(), as: UTF8.self)
            let idBytes = literal()
            guard !malformed else { return nil }
            var id: String?
            if idBytes.count == 16 {
                var high: UInt64 = 0, low: UInt64 = 0
                for k in 0..<8 { high = high << 8 | UInt64(idBytes[k]); low = low << 8 | UInt64(idBytes[8 + k]) }
                id = UUIDValue(high: high, low: low).description
            }
            return .request(StoredRequest(atMs: lastMs, provider: provider, connection: connection, environment: environment,
                                          token: token, topic: topic, campaign: campaign, status: status, reason: reason,
                                          latencyUs: latency, headers: SegmentDecoder.headers(headerBytes), payload: payload,
                                          payloadSize: size, warnings: warnings,
                                          notificationID: id))
        case 2:
            let status = Int(varint())
            let attempt = Int(varint())
            let latency = Double(varint()) / 1000
            let events = Int(varint())
            let preset = string(.preset) ?? ""
            let event = string(.event) ?? ""
            let method = string(.method) ?? ""
            let outcome = string(.outcome) ?? ""
            let error = string(.error)
            let token = String(decoding: literal(), as: UTF8.self)
            let id = String(decoding: literal(), as: UTF8.self)
            let url = String(decoding: literal(), as: UTF8.self)
            guard !malformed else { return nil }
            return .tracking(TrackingRecord(atMs: lastMs, preset: preset, event: event, token: token, notificationID: id,
                                            method: method, url: url, status: status, outcome: outcome, attempt: attempt,
                                            latencyMs: latency, error: error, events: events))
        default:
            malformed = true
            return nil
        }
    }

    static func headers(_ b: [UInt8]) -> [(name: String, value: String)] {
        let parts = b.split(separator: 0, omittingEmptySubsequences: false)
        var out: [(name: String, value: String)] = []
        var k = 0
        while k + 1 < parts.count {
            out.append((String(decoding: parts[k], as: UTF8.self), String(decoding: parts[k + 1], as: UTF8.self)))
            k += 2
        }
        return out
    }

    private mutating func varint() -> UInt64 {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count, shift < 64 {
            let b = bytes[i]
            i += 1
            v |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return v }
            shift += 7
        }
        malformed = true
        return 0
    }

    private mutating func literal() -> [UInt8] {
        let n = Int(varint())
        guard n >= 0, n <= bytes.count - i else { malformed = true; return [] }
        defer { i += n }
        return Array(bytes[i..<i + n])
    }

    private mutating func field(_ slot: SegmentEncoder.Slot) -> [UInt8]? {
        let n = Int(varint())
        switch n {
        case 0:
            let p = previous[slot.rawValue]
            return p.start < 0 ? nil : Array(bytes[p.start..<p.start + p.count])
        case 1:
            previous[slot.rawValue] = (-1, 0)
            return nil
        default:
            let len = n - 2
            guard len <= bytes.count - i else { malformed = true; return nil }
            previous[slot.rawValue] = (i, len)
            defer { i += len }
            return Array(bytes[i..<i + len])
        }
    }

    private mutating func string(_ slot: SegmentEncoder.Slot) -> String? {
        field(slot).map { String(decoding: $0, as: UTF8.self) }
    }
}

