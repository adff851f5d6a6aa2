import PushCore
import Runtime

/// What a run of consecutive segments holds, told without reading them: a Bloom filter of every
/// searchable value (tokens, notification ids, topics, apps, environments, campaign ids, display
/// outcomes, lint codes, and trigrams of the alert text), the records' time range, and the
/// requests counted per campaign, provider and outcome. `SegmentIndex` keeps one per block of
/// about `SegmentIndex.blockRecords` records.
///
/// The filter has 2^17 bits (16 KiB) and 7 probes: with a block's 8,192 token and id keys a
/// value it does not hold tests present in about 0.1% of blocks. Repeated values (campaigns,
/// topics, trigrams) go in once each. Alert-text trigrams go in until the block holds
/// `textBudget` keys (then about 0.5%); past that, `textIndexed` is false and a text term cannot
/// rule the block out. Hashes are stored: the functions here are part of the format.
struct BlockSummary: Sendable {
    static let bloomWords = 2048
    static let bloomMask = UInt32(bloomWords * 64 - 1)
    static let probes = 7
    static let textBudget = 12_000

    var firstSegment: Int64
    var lastSegment: Int64
    var minMs = Int64.max
    var maxMs = Int64.min
    var requests = 0
    var tracking = 0
    /// Keys inserted (counted with repeats).
    var keys = 0
    var textIndexed = true
    var bloom = [UInt64](repeating: 0, count: BlockSummary.bloomWords)
    var counts: [CountKey: Tally] = [:]
    /// What the campaign report shows of the block's records, by campaign (`CampaignDigest`).
    var digests = CampaignDigests()
    /// Whether `digests` describe every record of the block.
    var digested: Bool { !digests.overflowed }
    /// The repeatable values' keys inserted so far (while the block is open, not stored): each
    /// goes in once, so `keys` counts distinct values and the text budget distinct trigrams.
    var seen: Set<UInt64> = []

    var records: Int { requests + tracking }

    /// Requests of one campaign (nil: none), provider and outcome (`rejection` empty: accepted;
    /// else the APNs reason or FCM errorCode, or "HTTP <status>", as the report keys them).
    struct CountKey: Hashable, Sendable {
        var campaign: String?
        var provider: UInt8
        var rejection: String
    }

    struct Tally: Sendable {
        var count = 0
        var firstMs = Int64.max
        var lastMs = Int64.min

        mutating func add(_ other: Tally) {
            count += other.count
            firstMs = min(firstMs, other.firstMs)
            lastMs = max(lastMs, other.lastMs)
        }
    }

    init(firstSegment: Int64) {
        self.firstSegment = firstSegment
        lastSegment = firstSegment - 1
    }

    // MARK: the filter

    @inline(__always)
    mutating func insert(_ h: UInt64) {
        keys += 1
        var at = UInt32(truncatingIfNeeded: h)
        let step = UInt32(truncatingIfNeeded: h >> 32) | 1
        bloom.withUnsafeMutableBufferPointer { words in
            for _ in 0..<BlockSummary.probes {
                let bit = at & BlockSummary.bloomMask
                words[Int(bit >> 6)] |= 1 << UInt64(bit & 63)
                at &+= step
            }
        }
    }

    /// Inserts a key a block holds many times (a campaign, a topic, a trigram) once.
    mutating func insertOnce(_ h: UInt64) {
        if seen.insert(h).inserted { insert(h) }
    }

    func mayHold(_ h: UInt64) -> Bool {
        var at = UInt32(truncatingIfNeeded: h)
        let step = UInt32(truncatingIfNeeded: h >> 32) | 1
        return bloom.withUnsafeBufferPointer { words in
            for _ in 0..<BlockSummary.probes {
                let bit = at & BlockSummary.bloomMask
                if words[Int(bit >> 6)] & 1 << UInt64(bit & 63) == 0 { return false }
                at &+= step
            }
            return true
        }
    }

    /// Whether the block may hold a record every key of `probe` matches.
    func mayMatch(_ probe: IndexProbe) -> Bool {
        for k in probe.keys where !mayHold(k) { return false }
        guard textIndexed else { return true }
        for word in probe.grams {
            for g in word where !mayHold(g) { return false }
        }
        return true
    }

    /// Inserts a lowercased alert text's n-grams of one to three bytes (each distinct one once)
    /// while the text budget lasts; past it the block's text is no longer indexed.
    mutating func insertText(_ text: String) {
        guard textIndexed else { return }
        var t = text
        t.withUTF8 { b in
            for k in 0..<b.count {
                for n in 1...3 where k + n <= b.count {
                    let g = SummaryKey.gram(UnsafeBufferPointer(rebasing: b[k..<(k + n)]))
                    guard seen.insert(g).inserted else { continue }
                    guard keys < BlockSummary.textBudget else {
                        textIndexed = false
                        return
                    }
                    insert(g)
                }
            }
        }
    }

    mutating func count(_ key: CountKey, _ tally: Tally) {
        counts[key, default: Tally()].add(tally)
    }

    // MARK: stored form of the counts

    /// `varint entries`, then each: campaign (varint 0 for none, else length + 1, bytes),
    /// provider byte, rejection (varint length, bytes), varint count, zigzag first and last time.
    var countsBytes: [UInt8] {
        var out: [UInt8] = []
        SummaryBytes.varint(UInt64(counts.count), &out)
        for (key, tally) in counts {
            SummaryBytes.campaign(key.campaign, &out)
            out.append(key.provider)
            SummaryBytes.varint(UInt64(key.rejection.utf8.count), &out)
            out.append(contentsOf: key.rejection.utf8)
            SummaryBytes.varint(UInt64(tally.count), &out)
            SummaryBytes.varint(SummaryBytes.zigzag(tally.firstMs), &out)
            SummaryBytes.varint(SummaryBytes.zigzag(tally.lastMs), &out)
        }
        return out
    }

    /// Reads `countsBytes`; false when they are malformed.
    mutating func readCounts(_ b: [UInt8]) -> Bool {
        var r = SummaryBytes.Reader(bytes: b)
        let n = r.varint()
        guard n <= UInt64(b.count) else { return false }
        for _ in 0..<n {
            guard let campaign = r.campaign(), let provider = r.byte(), let rejection = r.text(r.varint()) else { return false }
            let count = r.varint()
            let first = SummaryBytes.unzigzag(r.varint())
            let last = SummaryBytes.unzigzag(r.varint())
            guard !r.failed, count <= UInt64(Int.max) else { return false }
            counts[CountKey(campaign: campaign, provider: provider, rejection: rejection)] = Tally(
                count: Int(count), firstMs: first, lastMs: last)
        }
        return !r.failed
    }

    var bloomBytes: [UInt8] {
        bloom.withUnsafeBytes { Array($0) }
    }

    mutating func readBloom(_ b: [UInt8]) -> Bool {
        guard b.count == BlockSummary.bloomWords * 8 else { return false }
        b.withUnsafeBytes { src in bloom.withUnsafeMutableBytes { $0.copyMemory(from: src) } }
        return true
    }
}

/// The hashed keys a search asks the index for: every one of `keys`, and every trigram of each
/// text word in `grams` (where the block's text is indexed). `impossible`: nothing can match.
struct IndexProbe: Sendable {
    var keys: [UInt64] = []
    var grams: [[UInt64]] = []
    var impossible = false
    /// The records' times must lie within these (inclusive).
    var fromMs = Int64.min
    var toMs = Int64.max
    /// A record-level test before a record is built: its token, or its notification id.
    var token: (bytes: [UInt8], packed: Bool)?
    var id: UUIDValue?
    var provider: UInt8?

    init(_ terms: [IndexTerm]) {
        for term in terms {
            switch term {
            case .token(let t):
                let form = SummaryKey.storedToken(t)
                token = form
                keys.append(form.bytes.withUnsafeBytes { SummaryKey.token($0, packed: form.packed) })
            case .id(let u):
                id = u
                keys.append(SummaryKey.id(u))
            case .topic(let t): keys.append(SummaryKey.text(.topic, t))
            case .environment(let e): keys.append(SummaryKey.text(.environment, e))
            case .app(let a): keys.append(SummaryKey.text(.app, a))
            case .campaign(let c): keys.append(SummaryKey.text(.campaign, c))
            case .display(let d): keys.append(SummaryKey.text(.display, d))
            case .lint(let l): keys.append(SummaryKey.text(.lint, l))
            case .hasWarnings: keys.append(SummaryKey.flag(.hasWarnings))
            case .hasLint: keys.append(SummaryKey.flag(.hasLint))
            case .text(let w): grams.append(IndexProbe.grams(of: w))
            case .provider(let p):
                provider = p.storedByte
                keys.append(SummaryKey.provider(p.storedByte))
            case .atOrAfter(let ms): fromMs = max(fromMs, ms)
            case .atOrBefore(let ms): toMs = min(toMs, ms)
            case .nothing: impossible = true
            }
        }
    }
}

extension IndexProbe {
    /// The n-grams a text holding `word` must hold: the trigrams of each run of ASCII bytes (its
    /// bigram or byte when shorter). The filter matches by characters, so text in another but
    /// canonically equivalent form may differ in bytes around a non-ASCII character: only ASCII
    /// runs count, each without its last byte where a non-ASCII one follows (a combining mark
    /// there joins it to the character before).
    static func grams(of word: String) -> [UInt64] {
        let bytes = Array(word.utf8)
        var out: [UInt64] = []
        var start = 0
        while start < bytes.count {
            guard bytes[start] < 0x80 else {
                start += 1
                continue
            }
            var end = start
            while end < bytes.count, bytes[end] < 0x80 { end += 1 }
            let usable = end < bytes.count ? end - 1 : end
            bytes.withUnsafeBufferPointer { b in
                let n = min(3, usable - start)
                if n > 0 {
                    for k in start...(usable - n) { out.append(SummaryKey.gram(UnsafeBufferPointer(rebasing: b[k..<(k + n)]))) }
                }
            }
            start = end
        }
        return out
    }
}

/// The index's key hashes (stored in every block's filter: changing one is a format change).
enum SummaryKey {
    enum Tag: UInt64 {
        case packedToken = 1
        case plainToken
        case id
        case topic
        case environment
        case app
        case campaign
        case display
        case lint
        case hasWarnings
        case hasLint
        case gram
        /// Not in the filter: what the open block read already (`seen`).
        case payload
        case headers
        case provider
    }

    static func mix(_ x: UInt64) -> UInt64 {
        var z = x &* 0xbf58_476d_1ce4_e5b9
        z ^= z >> 31
        z = z &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 29)
    }

    static func bytes(_ tag: Tag, _ p: UnsafeRawBufferPointer) -> UInt64 {
        var h = mix(tag.rawValue &* 0x9e37_79b9_7f4a_7c15 ^ UInt64(p.count))
        var k = 0
        while k + 8 <= p.count {
            h = mix(h ^ p.loadUnaligned(fromByteOffset: k, as: UInt64.self))
            k += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while k < p.count {
            tail |= UInt64(p[k]) << shift
            shift += 8
            k += 1
        }
        return mix(h ^ tail ^ 0x5851_f42d_4c95_7f2d)
    }

    static func text(_ tag: Tag, _ s: String) -> UInt64 {
        var s = s
        return s.withUTF8 { bytes(tag, UnsafeRawBufferPointer($0)) }
    }

    static func token(_ p: UnsafeRawBufferPointer, packed: Bool) -> UInt64 { bytes(packed ? .packedToken : .plainToken, p) }

    static func id(_ u: UUIDValue) -> UInt64 { mix(mix(Tag.id.rawValue ^ u.high) ^ u.low) }

    static func flag(_ tag: Tag) -> UInt64 { mix(tag.rawValue &* 0x9e37_79b9_7f4a_7c15) }

    /// One to three bytes of alert text.
    static func gram(_ g: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var packed = UInt64(g.count) << 24
        for (k, byte) in g.enumerated() { packed |= UInt64(byte) << (8 * UInt64(k)) }
        return mix(Tag.gram.rawValue << 32 | packed)
    }

    static func provider(_ stored: UInt8) -> UInt64 { mix(Tag.provider.rawValue << 32 | UInt64(stored)) }

    /// A token as the journal stores it: lowercase hex of even length as its bytes (the
    /// encoder's rule), anything else as it is.
    static func storedToken(_ t: String) -> (bytes: [UInt8], packed: Bool) {
        let text = Array(t.utf8)
        let values = SegmentEncoder.hexValues
        guard text.count >= 2, text.count % 2 == 0, text.allSatisfy({ values[Int($0)] != 0xFF }) else { return (text, false) }
        return (stride(from: 0, to: text.count, by: 2).map { values[Int(text[$0])] << 4 | values[Int(text[$0 + 1])] }, true)
    }
}

/// Varints for the summary's stored counts.
enum SummaryBytes {
    static func varint(_ v: UInt64, _ out: inout [UInt8]) { Varint.append(v, to: &out) }

    static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }

    /// A campaign (nil: none) as a varint 0, or its length + 1 and its bytes.
    static func campaign(_ c: String?, _ out: inout [UInt8]) {
        guard let c else { return varint(0, &out) }
        varint(UInt64(c.utf8.count + 1), &out)
        out.append(contentsOf: c.utf8)
    }
    static func unzigzag(_ z: UInt64) -> Int64 { Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1))) }

    struct Reader {
        let bytes: [UInt8]
        var at = 0
        var failed = false

        mutating func varint() -> UInt64 {
            guard let v = bytes.withUnsafeBytes({ Varint.read($0, at: &at, end: $0.count) }) else {
                failed = true
                return 0
            }
            return v
        }

        mutating func byte() -> UInt8? {
            guard at < bytes.count else {
                failed = true
                return nil
            }
            at += 1
            return bytes[at - 1]
        }

        /// What `SummaryBytes.campaign` wrote: `.some(nil)` for none, nil when malformed.
        mutating func campaign() -> String?? {
            let c = varint()
            guard !failed else { return nil }
            guard c > 0 else { return .some(nil) }
            return text(c - 1).map { .some($0) }
        }

        mutating func text(_ n: UInt64) -> String? {
            guard !failed, n <= UInt64(bytes.count - at) else {
                failed = true
                return nil
            }
            defer { at += Int(n) }
            return String(decoding: bytes[at..<at + Int(n)], as: UTF8.self)
        }
    }
}
