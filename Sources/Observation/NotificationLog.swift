import Glibc
import PushCore
import Runtime
import Synchronization
import Transport

/// The most recent accepted notifications, kept where tests can read them.
///
/// Each event loop appends to its own shard, whose lock is otherwise taken only by readers (the
/// admin API), so the request path never contends with another loop. A shard is a byte arena
/// holding variable-size records back to back in a ring: an append is one copy of the
/// notification's bytes, with no allocation and no reference kept to the request's buffers;
/// the oldest records are evicted (and counted) when space or the record limit runs out.
public final class NotificationLog: Sendable {
    public struct Filter: Sendable {
        public var provider: PushProvider?
        public var token: String?
        public var topic: String?
        /// One notification only.
        public var id: UUIDValue?
        /// Any further condition (the admin API's campaign filter).
        public var matches: (@Sendable (PushNotification) -> Bool)?
        /// The search's conditions as an index can test them (the journal's): a hint of what
        /// `matches` requires, never a condition of its own.
        public var indexTerms: [IndexTerm] = []
        public var limit: Int = 100
        public init() {}
    }

    /// Whether `n` passes `filter` (its provider, token, topic, id and condition), as the log's
    /// reads check a record: for filters kept outside the log.
    public static func admits(_ filter: Filter, _ n: PushNotification) -> Bool {
        if let p = filter.provider, n.provider != p { return false }
        if let t = filter.token, !n.token.elementsEqual(t.utf8) { return false }
        if let t = filter.topic, !(n.topic?.elementsEqual(t.utf8) ?? false) { return false }
        if let id = filter.id, n.id != id { return false }
        return filter.matches?(n) ?? true
    }

    /// A page bound: a receive time and an id (pages are in that order).
    public struct PageKey: Sendable, Comparable {
        public var atMs: Int64
        public var id: UUIDValue
        public init(atMs: Int64, id: UUIDValue) {
            self.atMs = atMs
            self.id = id
        }
        public init(_ n: PushNotification) { self.init(atMs: n.receivedAtMs, id: n.id) }
        public static func < (a: PageKey, b: PageKey) -> Bool { (a.atMs, a.id.high, a.id.low) < (b.atMs, b.id.high, b.id.low) }
    }

    private final class Shard: Sendable {
        let arena: FutexLock<Arena>
        init(bytes: Int, records: Int) { arena = FutexLock(Arena(capacity: bytes, maxRecords: records)) }
        deinit {
            arena.withLock {
                $0.buffer.deallocate()
                $0.lengths.deallocate()
            }
        }
    }

    private let shards: [Shard]

    /// About `capacity` notifications in all (1 KiB of arena each: more when they are small).
    public init(shards: Int, capacity: Int) {
        let n = max(1, shards)
        let perShard = max(1, capacity / n)
        self.shards = (0..<n).map { _ in Shard(bytes: max(256 * 1024, perShard * 1024), records: perShard) }
    }

    public var shardCount: Int { shards.count }

    /// Set when older notifications are kept elsewhere (a journal from an earlier run): the
    /// log holds only what arrived after it.
    private let historyBeforeMs = Atomic<Int64>(Int64.min)

    /// Says that notifications received before `ms` may exist that the log never held.
    public func markHistory(before ms: Int64) { historyBeforeMs.store(ms, ordering: .relaxed) }

    /// Whether a notification may exist that the log does not hold (evicted, or from before
    /// `markHistory`).
    public var mayMissOlder: Bool { historyBeforeMs.load(ordering: .relaxed) != Int64.min || evicted > 0 }

    /// The time after which the log holds every notification it was given (nil: it holds all
    /// of them): the newest oldest-retained time among the shards that evicted, or the history
    /// mark. A loop's shard appends in its loop's time order, so once it evicted it holds all of
    /// its own later than its oldest record; the last shard (the fan-out worker's, whose jobs
    /// carry the times of several loops) is given a second of slack.
    public var completeAfterMs: Int64? {
        var horizon = historyBeforeMs.load(ordering: .relaxed)
        var any = horizon != Int64.min
        for (i, s) in shards.enumerated() {
            s.arena.withLock { a in
                guard a.evicted > 0 else { return }
                any = true
                let oldest = a.oldestAtMs ?? Int64.max
                horizon = max(horizon, i == shards.count - 1 && oldest < Int64.max - 1000 ? oldest + 1000 : oldest)
            }
        }
        return any ? horizon : nil
    }

    /// Records an accepted notification on the caller's shard (its event loop index).
    public func append(
        shard: Int, id: UUIDValue, provider: PushProvider, receivedAtMs: Int64, environment: String,
        token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, headers: HTTPFields, payload: ArraySlice<UInt8>,
        payloadIsJSON: Bool, warnings: [String], outcome: DeviceOutcome? = nil, team: TeamID? = nil
    ) {
        shards[shard % shards.count].arena.withLock { a in
            func put(_ envBytes: UnsafeBufferPointer<UInt8>) {
                a.append(
                    id: id, provider: provider, receivedAtMs: receivedAtMs, environment: UnsafeRawBufferPointer(envBytes),
                    token: token, topic: topic, headers: headers, payload: payload, payloadIsJSON: payloadIsJSON,
                    warnings: warnings, outcome: outcome, team: team)
            }
            // A native string's bytes in place; a copy (`withUTF8` on a var) only for a bridged one.
            if environment.utf8.withContiguousStorageIfAvailable(put) == nil {
                var env = environment
                env.withUTF8(put)
            }
        }
    }

    /// Matching notifications, oldest first, at most `filter.limit` (the newest ones).
    ///
    /// Each shard's records are ranked by their fixed header alone (no decoding), and only its
    /// newest matches, at most `limit`, are decoded: the answer's `limit` newest are each among
    /// their own shard's. A dashboard's `?limit=50` over a 100,000-record log decoded every record
    /// under the lock its loop appends with (about 70-100 ms); it now reads their headers.
    public func query(_ filter: Filter) -> [PushNotification] {
        let limit = max(0, filter.limit)
        var out: [(Int, PushNotification)] = []
        for (i, s) in shards.enumerated() {
            s.arena.withLock { a in
                let ranked = a.candidates(filter).sorted { ($0.atMs, $0.sequence) < ($1.atMs, $1.sequence) }
                a.decodeMatching(ranked.reversed(), filter, limit: limit) { out.append((i, $0)) }
            }
        }
        out.sort { ($0.1.receivedAtMs, $0.1.sequence, $0.0) < ($1.1.receivedAtMs, $1.1.sequence, $1.0) }
        return out.suffix(limit).map(\.1)
    }

    /// Matching notifications strictly after `after` and before `before`, in (receive time, id)
    /// order: the first `filter.limit` of them (`newest` false), or the last (`newest` true),
    /// ascending either way.
    /// Like `query`, each shard decodes only the records it can contribute (ranked by header).
    public func page(_ filter: Filter, after: PageKey?, before: PageKey?, newest: Bool) -> [PushNotification] {
        let limit = max(0, filter.limit)
        var out: [PushNotification] = []
        for s in shards {
            s.arena.withLock { a in
                var ranked = a.candidates(filter).filter { c in
                    let key = PageKey(atMs: c.atMs, id: c.id)
                    if let after, !(after < key) { return false }
                    if let before, !(key < before) { return false }
                    return true
                }
                ranked.sort { PageKey(atMs: $0.atMs, id: $0.id) < PageKey(atMs: $1.atMs, id: $1.id) }
                if newest { ranked.reverse() }
                a.decodeMatching(ranked, filter, limit: limit) { out.append($0) }
            }
        }
        out.sort { PageKey($0) < PageKey($1) }
        return newest ? Array(out.suffix(limit)) : Array(out.prefix(limit))
    }

    /// Forgets the notifications `filter` matches (all of them: its limit does not apply), and
    /// says how many. Their space comes back as they age out.
    @discardableResult
    public func remove(_ filter: Filter) -> Int {
        shards.reduce(0) { acc, s in acc + s.arena.withLock { $0.remove(filter) } }
    }

    public var count: Int { shards.reduce(0) { acc, s in acc + s.arena.withLock { $0.count - $0.removed } } }
    public var evicted: UInt64 { shards.reduce(0) { acc, s in acc + s.arena.withLock { $0.evicted } } }

    public func removeAll() {
        for s in shards { s.arena.withLock { $0.reset() } }
    }
}

/// A ring of records in one byte buffer. Record layout (native byte order):
/// u32 length, u64 sequence, i64 receivedAt, u64 idHigh, u64 idLow, u8 provider, u8 flags,
/// u16 envLen, u16 tokenLen, u16 topicLen, u32 headersLen, u32 payloadLen, u32 warningsLen,
/// u8 display outcome, u8 display reason (0: none), u32 lintLen, then the bytes of each (headers,
/// warnings and lint findings as u16-length-prefixed strings).
struct Arena: @unchecked Sendable { // guarded by its shard's Mutex
    static let fixed = 4 + 8 + 8 + 8 + 8 + 1 + 1 + 2 + 2 + 2 + 4 + 4 + 4 + 1 + 1 + 4
    let capacity: Int
    let maxRecords: Int
    var buffer: UnsafeMutableRawPointer
    /// Record lengths in arrival order (a ring of `maxRecords`), the top bit set for a removed
    /// record (the only place removal is kept), so evicting never reads the cold memory of the
    /// oldest record (reading a flag there was a cache miss a push once the ring was full: 3.7%
    /// of an APNs push's loop time).
    var lengths: UnsafeMutablePointer<UInt32>
    static let removedBit: UInt32 = 1 << 31
    var first = 0
    var head = 0, tail = 0, wrapEnd = 0
    var wrapped = false
    var count = 0
    /// Records among `count` that were removed (skipped by every read).
    var removed = 0
    var sequence: UInt64 = 0
    var evicted: UInt64 = 0
    /// Where the fixed header's fields are (see the layout above).
    static let sequenceOffset = 4, atOffset = 12, idOffset = 20, providerOffset = 36, flagsOffset = 37, envLenOffset = 38
    static let headersLenOffset = 44

    init(capacity: Int, maxRecords: Int) {
        self.capacity = capacity
        self.maxRecords = max(1, maxRecords)
        buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        lengths = UnsafeMutablePointer<UInt32>.allocate(capacity: self.maxRecords)
    }

    mutating func reset() {
        head = 0
        tail = 0
        wrapEnd = 0
        wrapped = false
        count = 0
        removed = 0
        first = 0
    }

    /// The receive time of the oldest record held (after its length and sequence).
    var oldestAtMs: Int64? { count > 0 ? buffer.loadUnaligned(fromByteOffset: head + Arena.atOffset, as: Int64.self) : nil }

    private mutating func evictOldest() {
        let length = lengths[first]
        if length & Arena.removedBit != 0 { removed -= 1 }
        head += Int(length & ~Arena.removedBit)
        first = first + 1 == maxRecords ? 0 : first + 1
        count -= 1
        evicted &+= 1
        if wrapped && head >= wrapEnd {
            head = 0
            wrapped = false
        }
        if count == 0 { reset() }
    }

    /// Makes room for `n` contiguous bytes and returns where they go (nil: larger than the arena).
    private mutating func reserve(_ n: Int) -> Int? {
        guard n <= capacity else { return nil }
        while count >= maxRecords { evictOldest() }
        while true {
            if !wrapped {
                if tail + n <= capacity { return tail }
                if count == 0 {
                    reset()
                    continue
                }
                wrapEnd = tail
                wrapped = true
                tail = 0
            }
            // Wrapped: free space is [tail, head).
            if tail + n <= head { return tail }
            evictOldest()
            if !wrapped && count == 0 { return 0 }
        }
    }

    mutating func append(
        id: UUIDValue, provider: PushProvider, receivedAtMs: Int64, environment: UnsafeRawBufferPointer,
        token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, headers: HTTPFields, payload: ArraySlice<UInt8>,
        payloadIsJSON: Bool, warnings: [String], outcome: DeviceOutcome?, team: TeamID?
    ) {
        // Headers worth keeping (not pseudo-headers, not credentials), as u16-prefixed pairs,
        // written in one pass over the fields: room is made for all of them (their bytes and
        // four a field), and the record's total and headers' length are filled in after.
        let headersBound = headers.byteCount + 4 * headers.count
        var warningsLen = 0
        for w in warnings { warningsLen += 2 + min(w.utf8.count, 65535) }
        let lint = outcome?.lint.map(\.storedLine) ?? []
        var lintLen = 0
        for l in lint { lintLen += 2 + min(l.utf8.count, 65535) }
        // The environment, token and topic lengths are u16s: longer ones (a topic is a header
        // a sender chooses) are kept cut to 65,535 bytes.
        let envLen = min(environment.count, 65535)
        let tokenLen = min(token.count, 65535)
        let topicLen = min(topic?.count ?? 0, 65535)
        // The APNs team last, its length what the record's total leaves.
        let teamLen = team?.withBytes { $0.count } ?? 0
        let bound =
            Arena.fixed + envLen + tokenLen + topicLen + headersBound + payload.count + warningsLen + lintLen + teamLen
        guard bound < Int(Arena.removedBit), let at = reserve(bound) else { return }
        sequence &+= 1
        let start = buffer + at
        var p = start
        func put<T>(_ v: T) {
            p.storeBytes(of: v, as: T.self)
            p += MemoryLayout<T>.size
        }
        func bytes(_ raw: UnsafeRawBufferPointer) {
            if raw.count > 0 { copyBytes(p, raw.baseAddress!, raw.count) }
            p += raw.count
        }
        put(UInt32(bound)) // the total, filled in below
        put(sequence)
        put(receivedAtMs)
        put(id.high)
        put(id.low)
        put(provider.storedByte)
        put(UInt8((payloadIsJSON ? 1 : 0) | (topic == nil ? 0 : 2)))
        put(UInt16(envLen))
        put(UInt16(tokenLen))
        put(UInt16(topicLen))
        put(UInt32(0)) // the headers' length, filled in below
        put(UInt32(payload.count))
        put(UInt32(warningsLen))
        let display = outcome?.display.storedBytes ?? (0, 0)
        put(display.0)
        put(display.1)
        put(UInt32(lintLen))
        bytes(UnsafeRawBufferPointer(rebasing: environment[0..<envLen]))
        token.withUnsafeBytes { bytes(UnsafeRawBufferPointer(rebasing: $0[0..<tokenLen])) }
        topic?.withUnsafeBytes { bytes(UnsafeRawBufferPointer(rebasing: $0[0..<topicLen])) }
        let headersStart = p
        headers.withRawParts { storage, entries in
            for i in 0..<(entries.count / 16) {
                let e = NotificationLog.entry(entries, i)
                let name = UnsafeRawBufferPointer(rebasing: storage[e.0..<(e.0 + e.1)])
                guard NotificationLog.keeps(name) else { continue }
                // A length is a u16: a longer name or value (HPACK allows 65,536 bytes, and an
                // HTTP/1.1 line under a raised limit more) is kept cut to 65,535 bytes.
                let nameCount = min(e.1, 65535)
                let valueCount = min(e.3, 65535)
                put(UInt16(nameCount))
                put(UInt16(valueCount))
                bytes(UnsafeRawBufferPointer(rebasing: name[0..<nameCount]))
                bytes(UnsafeRawBufferPointer(rebasing: storage[e.2..<(e.2 + valueCount)]))
            }
        }
        let headersLen = p - headersStart
        (start + Arena.headersLenOffset).storeBytes(of: UInt32(headersLen), as: UInt32.self)
        payload.withUnsafeBytes { bytes($0) }
        func strings(_ list: [String]) {
            for var w in list {
                w.withUTF8 { u in
                    let n = min(u.count, 65535)
                    put(UInt16(n))
                    bytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(u)[0..<n]))
                }
            }
        }
        strings(warnings)
        strings(lint)
        team?.withBytes { bytes($0) }
        let total = p - start
        start.storeBytes(of: UInt32(total), as: UInt32.self)
        tail = at + total
        lengths[(first + count) % maxRecords] = UInt32(total)
        count += 1
    }

    /// Each record held, oldest first: its index in `lengths` and its offset in `buffer`.
    private func forEachRecord(_ body: (_ slot: Int, _ offset: Int) -> Void) {
        var off = head
        var inFirst = wrapped
        for k in 0..<count {
            if inFirst && off >= wrapEnd {
                off = 0
                inFirst = false
            }
            let slot = (first + k) % maxRecords
            body(slot, off)
            off += Int(lengths[slot] & ~Arena.removedBit)
        }
    }

    /// Marks the records `f` matches removed.
    mutating func remove(_ f: NotificationLog.Filter) -> Int {
        var n = 0
        let lengths = self.lengths
        forEachRecord { slot, off in
            guard admitted(slot: slot, at: off, f) != nil, f.matches?(decode(at: off)) ?? true else { return }
            lengths[slot] |= Arena.removedBit
            n += 1
        }
        removed += n
        return n
    }

    /// A record the filter's stored conditions admit, known by its fixed header only.
    struct Candidate {
        let atMs: Int64
        let sequence: UInt64
        let id: UUIDValue
        let offset: Int
    }

    /// The records `f`'s provider, id, token and topic admit (not removed ones), from their
    /// headers, without decoding them; `f.matches` is not tested (it needs the record).
    func candidates(_ f: NotificationLog.Filter) -> [Candidate] {
        var out: [Candidate] = []
        forEachRecord { slot, off in if let c = admitted(slot: slot, at: off, f) { out.append(c) } }
        return out
    }

    /// Decodes `ranked` in order (offsets from `candidates`, under the same lock) and hands
    /// `body` those `f.matches` takes, until `limit` were.
    func decodeMatching<C: Sequence<Candidate>>(
        _ ranked: C, _ f: NotificationLog.Filter, limit: Int, _ body: (PushNotification) -> Void
    ) {
        var taken = 0
        for c in ranked {
            guard taken < limit else { return }
            let n = decode(at: c.offset)
            guard f.matches?(n) ?? true else { continue }
            body(n)
            taken += 1
        }
    }

    /// The record in `slot`, at `start`, as a candidate, when it is not removed and `f`'s stored
    /// conditions (provider, id, token, topic) admit it: the one place a read tests them.
    private func admitted(slot: Int, at start: Int, _ f: NotificationLog.Filter) -> Candidate? {
        if lengths[slot] & Arena.removedBit != 0 { return nil }
        let p = UnsafeRawPointer(buffer + start)
        let id = UUIDValue(
            high: p.loadUnaligned(fromByteOffset: Arena.idOffset, as: UInt64.self),
            low: p.loadUnaligned(fromByteOffset: Arena.idOffset + 8, as: UInt64.self))
        if let want = f.provider, want != PushProvider.stored(p.load(fromByteOffset: Arena.providerOffset, as: UInt8.self)) {
            return nil
        }
        if let want = f.id, want != id { return nil }
        if f.token != nil || f.topic != nil {
            let envLen = Int(p.loadUnaligned(fromByteOffset: Arena.envLenOffset, as: UInt16.self))
            let tokenLen = Int(p.loadUnaligned(fromByteOffset: Arena.envLenOffset + 2, as: UInt16.self))
            let topicLen = Int(p.loadUnaligned(fromByteOffset: Arena.envLenOffset + 4, as: UInt16.self))
            let token = UnsafeRawBufferPointer(start: p + Arena.fixed + envLen, count: tokenLen)
            if let t = f.token, !token.elementsEqual(t.utf8) { return nil }
            let hasTopic = p.load(fromByteOffset: Arena.flagsOffset, as: UInt8.self) & 2 != 0
            let topic = UnsafeRawBufferPointer(start: p + Arena.fixed + envLen + tokenLen, count: topicLen)
            if let t = f.topic, !hasTopic || !topic.elementsEqual(t.utf8) { return nil }
        }
        return Candidate(
            atMs: p.loadUnaligned(fromByteOffset: Arena.atOffset, as: Int64.self),
            sequence: p.loadUnaligned(fromByteOffset: Arena.sequenceOffset, as: UInt64.self), id: id, offset: start)
    }

    /// The whole record at `start` (one `admitted` has let through).
    private func decode(at start: Int) -> PushNotification {
        var p = UnsafeRawPointer(buffer + start)
        func get<T>(_: T.Type) -> T {
            let v = p.loadUnaligned(as: T.self)
            p += MemoryLayout<T>.size
            return v
        }
        func take(_ n: Int) -> UnsafeRawBufferPointer {
            let r = UnsafeRawBufferPointer(start: p, count: n)
            p += n
            return r
        }
        let total = Int(get(UInt32.self) & ~Arena.removedBit)
        let end = UnsafeRawPointer(buffer + start) + total
        let seq = get(UInt64.self)
        let at = get(Int64.self)
        let hi = get(UInt64.self)
        let lo = get(UInt64.self)
        let provider = PushProvider.stored(get(UInt8.self))
        let flags = get(UInt8.self)
        let envLen = Int(get(UInt16.self))
        let tokenLen = Int(get(UInt16.self))
        let topicLen = Int(get(UInt16.self))
        let headersLen = Int(get(UInt32.self))
        let payloadLen = Int(get(UInt32.self))
        let warningsLen = Int(get(UInt32.self))
        let display = Display(stored: (get(UInt8.self), get(UInt8.self)))
        let lintLen = Int(get(UInt32.self))
        let env = take(envLen)
        let token = take(tokenLen)
        let topic = take(topicLen)
        var headers = HTTPFields()
        let hEnd = p + headersLen
        while p < hEnd {
            let nl = Int(get(UInt16.self))
            let vl = Int(get(UInt16.self))
            let name = take(nl)
            let value = take(vl)
            headers.add(name: name, value: value)
        }
        let payload = Array(take(payloadLen))
        func strings(_ length: Int) -> [String] {
            var out: [String] = []
            let end = p + length
            while p < end {
                let n = Int(get(UInt16.self))
                out.append(String(decoding: take(n), as: UTF8.self))
            }
            return out
        }
        let warnings = strings(warningsLen)
        let lint = strings(lintLen).compactMap { LintFinding(storedLine: $0[...]) }
        let team = p < end ? String(decoding: take(end - p), as: UTF8.self) : nil
        var n = PushNotification(
            id: UUIDValue(high: hi, low: lo), provider: provider, receivedAtMs: at,
            environment: String(decoding: env, as: UTF8.self), token: ArraySlice(token),
            topic: flags & 2 == 0 ? nil : ArraySlice(topic), headers: headers, payload: payload,
            payloadIsJSON: flags & 1 != 0, warnings: warnings)
        n.sequence = seq
        n.display = display
        n.lint = lint
        n.team = team
        return n
    }
}

extension NotificationLog {
    /// Field `i` of a raw entry table: (name start, name length, value start, value length).
    @inline(__always)
    static func entry(_ entries: UnsafeRawBufferPointer, _ i: Int) -> (Int, Int, Int, Int) {
        (
            Int(entries.loadUnaligned(fromByteOffset: i * 16, as: Int32.self)),
            Int(entries.loadUnaligned(fromByteOffset: i * 16 + 4, as: Int32.self)),
            Int(entries.loadUnaligned(fromByteOffset: i * 16 + 8, as: Int32.self)),
            Int(entries.loadUnaligned(fromByteOffset: i * 16 + 12, as: Int32.self))
        )
    }

    /// Pseudo-headers and the provider's credentials are not kept.
    @inline(__always)
    static func keeps(_ name: UnsafeRawBufferPointer) -> Bool {
        guard let first = name.first, first != UInt8(ascii: ":") else { return false }
        return !name.equals("authorization")
    }
}

extension NotificationLog: MetricsSource {
    /// What the inspection API can still read from memory, and what it has let go.
    public func writeMetrics(_ m: inout MetricsText) {
        m.single("pushemu_notifications_kept", "gauge", "Accepted notifications kept for the admin API.", count)
        m.single("pushemu_notifications_evicted_total", "counter", "Accepted notifications evicted from the in-memory log.", evicted)
    }
}
