import CSystem
import Glibc
import PushCore
import Transport

/// The journal's storage form: records grouped into segments (one SQLite row per segment, many
/// records each), each record in a compact binary encoding where a repeated value (the same
/// payload, headers, topic, reason, campaign as the record before) costs one byte, and a hex
/// device token is stored as its bytes. A campaign's requests are mostly identical but for the
/// token, so a record shrinks from ~500 bytes to ~70, and the write cost, which is dominated by
/// bytes through SQLite's WAL, shrinks with it.
///
/// Segment: `"PJ"`, the format version (3; versions 1 and 2 are still read), varint base time, then
/// records. Record: tag (1 request, 2 tracking), zigzag varint of the time since the record
/// before, then the fields in a fixed order.
/// Repeatable fields: varint 0 = same as before, 1 = absent, n >= 2 = n - 2 bytes follow.
/// Literal fields: varint length then bytes. Tokens (version 2): varint `length << 1 | hex`; with
/// `hex` set, `length` lowercase hex characters follow as `length / 2` bytes. Version 3 adds the
/// device outcome to a request, after its campaign: a repeatable field of the display's two
/// bytes, then the lint findings' stored lines, newline-separated (absent: not delivered).
/// Version 4 adds the campaign to a tracking record, after its error (the same repeatable field
/// as a request's campaign, so a campaign's requests and their tracking repeat it for a byte).
/// Version 5 adds the APNs team that sent a request, after its device outcome (repeatable: a
/// connection's requests repeat it for a byte).
///
/// Encoding runs on the event loop for every request, so it writes through a pointer into storage
/// allocated without zeroing (one `Array.append(contentsOf:)` per field cost ~50 instructions a
/// call; measured with callgrind, the encoder fell from 3.8k to about 3k per APNs request).
struct SegmentEncoder {
    static let version: UInt8 = 5
    /// Storage; only the first `byteCount` bytes are the segment.
    private var storage: [UInt8] = []
    private(set) var byteCount = 0
    private(set) var requests = 0
    private(set) var tracking = 0
    /// The oldest and newest record times (records may be appended out of time order).
    private(set) var oldestMs: Int64 = 0
    private(set) var newestMs: Int64 = 0
    /// The last record's time: each record stores its time as the difference from it.
    private var lastMs: Int64 = 0
    /// Where each repeatable field's last value sits in `storage` (-1: absent / none yet).
    private var previous = [(start: Int, count: Int)](repeating: (-1, 0), count: Slot.count)
    /// The campaign of the last request's payload (a repeated payload has the same campaign).
    private var lastCampaign: String?
    /// Where the last payload held its request's token (-1: it did not), and the token's length.
    private var lastTokenAt = -1
    private var lastTokenCount = 0
    private var lastProvider: PushProvider?

    /// (`SegmentCursor` keeps one value per slot inline: a new slot grows its `InlineArray`.)
    enum Slot: Int, CaseIterable {
        case environment, topic, reason, headers, payload, warnings, campaign, device
        case preset, event, method, outcome, error
        case team
        static let count = allCases.count
    }

    var isEmpty: Bool { requests + tracking == 0 }
    var count: Int { requests + tracking }

    /// The segment's bytes (a copy).
    var bytes: [UInt8] { Array(storage[0..<byteCount]) }

    /// The segment's bytes, in place.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<byteCount])) }
    }

    init(baseMs: Int64) {
        storage = SegmentEncoder.uninitialized(64 * 1024, keeping: [])
        put(UInt8(ascii: "P"))
        put(UInt8(ascii: "J"))
        put(SegmentEncoder.version)
        oldestMs = baseMs
        newestMs = baseMs
        lastMs = baseMs
        varint(UInt64(bitPattern: baseMs))
    }

    /// How far the segment was at some point: enough to cut it back to there (`truncate`).
    struct Mark {
        var byteCount = 0
        var requests = 0
        var tracking = 0
        var oldestMs: Int64 = 0
        var newestMs: Int64 = 0
        var records: Int { requests + tracking }
    }

    var mark: Mark { Mark(byteCount: byteCount, requests: requests, tracking: tracking, oldestMs: oldestMs, newestMs: newestMs) }

    /// Cuts the segment back to `mark` (taken from it earlier). Records after it are gone, and
    /// the encoder must not be appended to again (its repeat slots may point past the cut).
    mutating func truncate(to mark: Mark) {
        byteCount = min(byteCount, mark.byteCount)
        requests = mark.requests
        tracking = mark.tracking
        oldestMs = mark.oldestMs
        newestMs = mark.newestMs
    }

    /// A segment read back whole (the write-ahead files' recovery), to be stored as it is.
    init(stored bytes: [UInt8], _ mark: Mark) {
        storage = bytes
        byteCount = min(bytes.count, mark.byteCount)
        requests = mark.requests
        tracking = mark.tracking
        oldestMs = mark.oldestMs
        newestMs = mark.newestMs
    }

    mutating func append(_ r: RequestRecord, maxPayload: Int, campaignOf: (PushProvider, ArraySlice<UInt8>) -> String?) {
        appendRequest(
            atMs: r.atMs, provider: r.provider, connection: r.connection, environment: r.environment, token: r.token,
            topic: r.topic, status: r.status, reason: r.reason, latencyUs: r.latencyUs, headers: r.headers,
            payload: r.payload, warnings: r.warnings, device: r.device, team: r.team, notificationID: r.notificationID,
            maxPayload: maxPayload, campaignOf: { provider, payload, _, _ in campaignOf(provider, payload) })
    }

    /// A request record from its fields, read where they are (no record built and destroyed).
    mutating func appendRequest(
        atMs: Int64, provider: PushProvider, connection: UInt64, environment: String,
        token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, status: Int, reason: String, latencyUs: Int64,
        headers: HTTPFields, payload: ArraySlice<UInt8>, payloadTokens: JSONTokenBuffer? = nil, warnings: [String],
        device: DeviceOutcome?, team: TeamID? = nil, notificationID: UUIDValue?, maxPayload: Int,
        campaignOf: (PushProvider, ArraySlice<UInt8>, ParsedJSON?, String?) -> String?
    ) {
        header(tag: 1, atMs: atMs)
        put(provider.storedByte)
        varint(connection)
        varint(UInt64(max(0, status)))
        varint(UInt64(max(0, latencyUs)))
        varint(UInt64(payload.count))
        repeatable(.environment, string: environment)
        if let t = topic { t.withUnsafeBytes { _ = repeatable(.topic, $0) } } else { repeatable(.topic, nil) }
        repeatable(.reason, string: reason.isEmpty ? nil : reason)
        keptHeaders(headers)
        let kept = payload.prefix(maxPayload)
        let before = previous[Slot.payload.rawValue]
        let samePayload = kept.withUnsafeBytes { repeatable(.payload, $0) }
        if warnings.isEmpty { repeatable(.warnings, nil) } else { repeatable(.warnings, string: warnings.joined(separator: "\n")) }
        if !samePayload {
            // A campaign's message to many devices differs only in its token (FCM's `token`):
            // the same message around it has the same campaign.
            // Where the last payload held its token first (one memcmp), else searched for.
            // Only an FCM message names its token: APNs's is in the path and a Web Push body
            // is encrypted, so searching theirs (a personalised payload each time) found nothing.
            var at = -1
            if provider == .fcm && kept.count == payload.count {
                at = SegmentEncoder.holds(token, at: lastTokenAt, in: kept) ? lastTokenAt : SegmentEncoder.offset(of: token, in: kept)
            }
            let sameMessage = lastProvider == provider && sameExceptToken(kept, at: at, tokenCount: token.count, before: before)
            lastTokenAt = at
            lastTokenCount = token.count
            if !sameMessage {
                lastCampaign = campaignOf(provider, payload, payloadTokens.map { ParsedJSON(bytes: payload, tokens: $0) }, lastCampaign)
            }
        } else if lastProvider != provider {
            lastCampaign = campaignOf(provider, payload, payloadTokens.map { ParsedJSON(bytes: payload, tokens: $0) }, lastCampaign)
        }
        lastProvider = provider
        repeatable(.campaign, string: lastCampaign)
        deviceOutcome(device)
        if let team { team.withBytes { _ = repeatable(.team, $0) } } else { repeatable(.team, nil) }
        token.withUnsafeBytes { self.token($0) }
        if let id = notificationID {
            room(17)
            storage.withUnsafeMutableBytes { b in
                b[byteCount] = 16
                b.storeBytes(of: id.high.bigEndian, toByteOffset: byteCount + 1, as: UInt64.self)
                b.storeBytes(of: id.low.bigEndian, toByteOffset: byteCount + 9, as: UInt64.self)
            }
            byteCount += 17
        } else {
            put(0)
        }
        requests += 1
    }

    mutating func append(_ t: TrackingRecord) {
        appendTracking(
            atMs: t.atMs, preset: t.preset, event: t.event, token: t.token, notificationID: t.notificationID,
            method: t.method, url: t.url, status: t.status, outcome: t.outcome, attempt: t.attempt,
            latencyMs: t.latencyMs, error: t.error, events: t.events, campaign: t.campaign)
    }

    /// A tracking record from its fields, read where they are (no record built and destroyed).
    mutating func appendTracking(
        atMs: Int64, preset: String, event: String, token: String, notificationID: String,
        method: String, url: String, status: Int, outcome: String, attempt: Int,
        latencyMs: Double, error: String?, events: Int, campaign: String?
    ) {
        header(tag: 2, atMs: atMs)
        varint(UInt64(max(0, status)))
        varint(UInt64(max(0, attempt)))
        varint(UInt64(max(0, (latencyMs * 1000).rounded())))
        varint(UInt64(max(1, events)))
        repeatable(.preset, string: preset)
        repeatable(.event, string: event)
        repeatable(.method, string: method)
        repeatable(.outcome, string: outcome)
        repeatable(.error, string: error)
        repeatable(.campaign, string: campaign)
        var s = token
        s.withUTF8 { self.token(UnsafeRawBufferPointer($0)) }
        s = notificationID
        s.withUTF8 { literal(UnsafeRawBufferPointer($0)) }
        s = url
        s.withUTF8 { literal(UnsafeRawBufferPointer($0)) }
        tracking += 1
    }

    /// Whether a header is one a reader of the journal needs (`apns-*`, `x-*`, `content-type`;
    /// never `authorization`).
    @inline(__always)
    static func keeps(_ n: UnsafeRawPointer, _ count: Int) -> Bool {
        guard count > 2 else { return false }
        // Compared as little-endian words: "apns", "-"; "content-", "type".
        let c0 = n.load(as: UInt8.self)
        let c1 = n.load(fromByteOffset: 1, as: UInt8.self)
        return (c0 == UInt8(ascii: "x") && c1 == UInt8(ascii: "-"))
            || (c0 == UInt8(ascii: "a") && count > 5 && n.loadUnaligned(as: UInt32.self) == 0x736e_7061
                && n.load(fromByteOffset: 4, as: UInt8.self) == UInt8(ascii: "-"))
            || (c0 == UInt8(ascii: "c") && count == 12 && n.loadUnaligned(as: UInt64.self) == 0x2d74_6e65_746e_6f63
                && n.loadUnaligned(fromByteOffset: 8, as: UInt32.self) == 0x6570_7974)
    }

    /// The kept headers as a repeatable field of `name NUL value NUL` pairs, written straight
    /// from the field list's storage in one pass: the length goes first as a two-byte varint
    /// (a padded one when it is under 128, which decodes the same), filled in after.
    private mutating func keptHeaders(_ h: HTTPFields) {
        let bound = h.byteCount + 2 * h.count
        guard bound + 2 < 1 << 14 else { return keptHeadersSlowly(h) }
        room(2 + bound)
        let mark = byteCount
        let start = mark + 2
        let length = h.withRawParts { s, e in
            storage.withUnsafeMutableBytes { out -> Int in
                var at = start
                let fields = e.count / 16
                for i in 0..<fields {
                    let ns = Int(e.load(fromByteOffset: i * 16, as: Int32.self))
                    let nl = Int(e.load(fromByteOffset: i * 16 + 4, as: Int32.self))
                    guard SegmentEncoder.keeps(s.baseAddress! + ns, nl) else { continue }
                    let vs = Int(e.load(fromByteOffset: i * 16 + 8, as: Int32.self))
                    let vl = Int(e.load(fromByteOffset: i * 16 + 12, as: Int32.self))
                    copyBytes(out.baseAddress! + at, s.baseAddress! + ns, nl)
                    out[at + nl] = 0
                    if vl > 0 { copyBytes(out.baseAddress! + at + nl + 1, s.baseAddress! + vs, vl) }
                    out[at + nl + 1 + vl] = 0
                    at += nl + vl + 2
                }
                let v = at - start + 2
                out[mark] = UInt8(truncatingIfNeeded: v) | 0x80
                out[mark + 1] = UInt8(truncatingIfNeeded: v >> 7)
                return at - start
            }
        }
        let p = previous[Slot.headers.rawValue]
        if p.start >= 0, p.count == length,
            length == 0 || storage.withUnsafeBytes({ sameBytes($0.baseAddress! + p.start, $0.baseAddress! + start, length) })
        {
            byteCount = mark
            put(0)
        } else {
            byteCount = start + length
            previous[Slot.headers.rawValue] = (start, length)
        }
    }

    /// The same for a field list too large for a two-byte length (only with a raised
    /// `--max-header-list-size`).
    private mutating func keptHeadersSlowly(_ h: HTTPFields) {
        var kept: [UInt8] = []
        h.forEachField { n, v in
            guard SegmentEncoder.keeps(n.baseAddress!, n.count) else { return }
            kept.append(contentsOf: n)
            kept.append(0)
            kept.append(contentsOf: v)
            kept.append(0)
        }
        kept.withUnsafeBytes { _ = repeatable(.headers, $0) }
    }

    /// The device outcome's field: two bytes when the payload is clean (the common case: no String).
    private mutating func deviceOutcome(_ o: DeviceOutcome?) {
        guard let o else {
            repeatable(.device, nil)
            return
        }
        var display = o.display.storedBytes
        if o.lint.isEmpty {
            withUnsafeBytes(of: &display) { _ = repeatable(.device, $0) }
            return
        }
        var bytes = [display.0, display.1]
        bytes.append(contentsOf: o.lint.map(\.storedLine).joined(separator: "\n").utf8)
        bytes.withUnsafeBytes { _ = repeatable(.device, $0) }
    }

    private mutating func header(tag: UInt8, atMs: Int64) {
        put(tag)
        let delta = atMs &- lastMs
        varint(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
        lastMs = atMs
        oldestMs = min(oldestMs, atMs)
        newestMs = max(newestMs, atMs)
    }

    /// Makes room for `n` more bytes.
    @inline(__always)
    private mutating func room(_ n: Int) {
        if byteCount + n > storage.count { grow(byteCount + n) }
    }

    @inline(never)
    private mutating func grow(_ needed: Int) {
        storage = SegmentEncoder.uninitialized(max(needed, storage.count * 2, 256), keeping: storage[0..<byteCount])
    }

    /// Storage of `count` bytes whose first ones are `kept`; the rest are never read before they
    /// are written (only the first `byteCount` bytes are the segment), so they are not zeroed: a
    /// zero fill of each new segment's 64 KiB was a loop of 64k steps in debug builds.
    private static func uninitialized(_ count: Int, keeping kept: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            kept.withUnsafeBufferPointer { k in
                if let src = k.baseAddress, k.count > 0 { buffer.baseAddress!.update(from: src, count: k.count) }
            }
            initialized = count
        }
    }

    @inline(__always)
    private mutating func put(_ b: UInt8) {
        room(1)
        storage[byteCount] = b
        byteCount += 1
    }

    private mutating func varint(_ v: UInt64) {
        room(10)
        storage.withUnsafeMutableBytes { b in
            var v = v
            var at = byteCount
            while v >= 0x80 {
                b[at] = UInt8(truncatingIfNeeded: v) | 0x80
                v >>= 7
                at += 1
            }
            b[at] = UInt8(v)
            byteCount = at + 1
        }
    }

    private mutating func copy(_ src: UnsafeRawBufferPointer) {
        guard src.count > 0 else { return }
        room(src.count)
        storage.withUnsafeMutableBytes { copyBytes($0.baseAddress! + byteCount, src.baseAddress!, src.count) }
        byteCount += src.count
    }

    private mutating func literal(_ b: UnsafeRawBufferPointer) {
        varint(UInt64(b.count))
        copy(b)
    }

    /// A token: lowercase hex of even length as its bytes, anything else as it is.
    private mutating func token(_ t: UnsafeRawBufferPointer) {
        let n = t.count
        if n >= 2, n & 1 == 0 {
            room(10 + n / 2)
            let mark = byteCount
            varint(UInt64(n) << 1 | 1)
            let packed = SegmentEncoder.hexValues.withUnsafeBufferPointer { table in
                storage.withUnsafeMutableBytes { out -> Bool in
                    let o = out.baseAddress!.assumingMemoryBound(to: UInt8.self) + byteCount
                    let src = t.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    let tab = table.baseAddress!
                    var bad: UInt8 = 0
                    var k = 0
                    // Eight digits at a time (a device token is 64): each byte's value from
                    // its low nibble (+9 for a letter), checked by encoding it back.
                    while 2 * k + 8 <= n {
                        let w = UnsafeRawPointer(src + 2 * k).loadUnaligned(as: UInt64.self)
                        let lows: UInt64 = 0x0101_0101_0101_0101
                        let nib = (w & 0x0F0F_0F0F_0F0F_0F0F) &+ ((w >> 6) & lows) &* 9
                        let above9 = ((nib &+ 0x7676_7676_7676_7676) >> 7) & lows
                        let back = nib &+ 0x3030_3030_3030_3030 &+ above9 &* 0x27
                        if back != w || nib & 0xF0F0_F0F0_F0F0_F0F0 != 0 {
                            bad = 0xFF
                            break
                        }
                        var x = ((nib << 4) | (nib >> 8)) & 0x00FF_00FF_00FF_00FF
                        x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF
                        x = (x | (x >> 16)) & 0xFFFF_FFFF
                        UnsafeMutableRawPointer(o + k).storeBytes(of: UInt32(truncatingIfNeeded: x), as: UInt32.self)
                        k += 4
                    }
                    // The rest a pair at a time, unless a digit already failed (an FCM token
                    // fails on its first eight: nothing more to read).
                    while bad == 0, k < n / 2 {
                        let hi = tab[Int(src[2 * k])]
                        let lo = tab[Int(src[2 * k + 1])]
                        bad |= (hi | lo) & 0xF0
                        o[k] = hi << 4 | lo
                        k += 1
                    }
                    return bad == 0
                }
            }
            if packed {
                byteCount += n / 2
                return
            }
            byteCount = mark
        }
        varint(UInt64(n) << 1)
        copy(t)
    }

    /// Lowercase hex digit values; 0xFF for every other byte (uppercase is kept as text, so
    /// the token reads back exactly as sent).
    static let hexValues: [UInt8] = (0..<256).map { c in
        switch UInt8(c) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt8(c) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt8(c) - UInt8(ascii: "a") + 10
        default: return 0xFF
        }
    }

    private mutating func repeatable(_ slot: Slot, string: String?) {
        guard var s = string else {
            repeatable(slot, nil)
            return
        }
        s.withUTF8 { _ = repeatable(slot, UnsafeRawBufferPointer($0)) }
    }

    /// Where `token` (at least 32 bytes: a registration token, not a word) first occurs in
    /// `payload`, or -1.
    static func offset(of token: ArraySlice<UInt8>, in payload: ArraySlice<UInt8>) -> Int {
        guard token.count >= 32, payload.count >= token.count else { return -1 }
        return payload.withUnsafeBytes { p in
            token.withUnsafeBytes { t in
                guard let hit = csys_memmem(p.baseAddress, p.count, t.baseAddress, t.count) else { return -1 }
                return p.baseAddress!.distance(to: UnsafeRawPointer(hit))
            }
        }
    }

    /// Whether `payload` holds `token` (at least 32 bytes) at `at`.
    static func holds(_ token: ArraySlice<UInt8>, at: Int, in payload: ArraySlice<UInt8>) -> Bool {
        guard token.count >= 32, at >= 0, at <= payload.count - token.count else { return false }
        return payload.withUnsafeBytes { p in token.withUnsafeBytes { t in memcmp(p.baseAddress! + at, t.baseAddress!, t.count) == 0 } }
    }

    /// Whether `payload` (holding its token at `at`) is the previous payload (at `before`) with
    /// only the token changed: the same bytes before it and after it.
    private func sameExceptToken(_ payload: ArraySlice<UInt8>, at: Int, tokenCount: Int, before: (start: Int, count: Int)) -> Bool {
        guard at >= 0, lastTokenAt == at, before.start >= 0, payload.count - tokenCount == before.count - lastTokenCount else {
            return false
        }
        let tail = payload.count - at - tokenCount
        return storage.withUnsafeBytes { s in
            payload.withUnsafeBytes { p in
                memcmp(s.baseAddress! + before.start, p.baseAddress!, at) == 0
                    && memcmp(s.baseAddress! + before.start + at + lastTokenCount, p.baseAddress! + at + tokenCount, tail) == 0
            }
        }
    }

    /// Writes `value`, or one byte when it equals the field's previous value. True when it did.
    @discardableResult
    private mutating func repeatable(_ slot: Slot, _ value: UnsafeRawBufferPointer?) -> Bool {
        let p = previous[slot.rawValue]
        guard let value else {
            previous[slot.rawValue] = (-1, 0)
            put(1)
            return p.start < 0
        }
        if p.start >= 0 && p.count == value.count {
            let same = value.isEmpty || storage.withUnsafeBytes { memcmp($0.baseAddress! + p.start, value.baseAddress!, value.count) == 0 }
            if same {
                put(0)
                return true
            }
        }
        varint(UInt64(value.count + 2))
        previous[slot.rawValue] = (byteCount, value.count)
        copy(value)
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
    /// The APNs team whose credentials sent it (format 5; nil for FCM, Web Push and older records).
    public var team: String? = nil
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
    /// What the device made of it (format 3; nil for older records and undelivered requests).
    public var display: Display? = nil
    public var lint: [LintFinding] = []
}

public enum JournalEntry: Sendable {
    case request(StoredRequest)
    case tracking(TrackingRecord)
}

/// Reads a segment's records in order (the inverse of `SegmentEncoder`), each as a
/// `JournalEntry` built from `SegmentCursor`'s view of it.
struct SegmentDecoder {
    private let bytes: [UInt8]
    private var cursor: SegmentCursor
    var malformed: Bool { cursor.malformed }

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        cursor = bytes.withUnsafeBytes { SegmentCursor($0) }
    }

    mutating func next() -> JournalEntry? {
        bytes.withUnsafeBytes { b in
            var v = RecordView()
            guard cursor.next(b, into: &v) else { return nil }
            return cursor.entry(v, b)
        }
    }
}
