import Glibc

/// The decoder's dynamic table (RFC 7541 2.3.2, 4): newest entry first by index, each counted
/// as its name and value lengths plus 32, evicted oldest first to stay within `maxSize`.
///
/// Names and values live back to back in one buffer of twice the largest size the table may
/// have (allocated at the first insertion); evictions only move the oldest-entry mark, and when
/// an insertion reaches the buffer's end the live bytes (at most `maxSize`) move to its start.
/// Each entry keeps its field role and value check, worked out once when it is inserted.
struct HPACKDynamicTable {
    struct Entry {
        var start: Int32
        var nameLength: Int32
        var valueLength: Int32
        var role: FieldRole
        var valueIsPlain: Bool
    }

    /// The size limit now in force (a size update lowers or restores it, up to the setting).
    private(set) var maxSize: Int
    /// RFC 7541's size of the live entries.
    private(set) var size = 0
    private let limit: Int
    private var bytes: UnsafeMutablePointer<UInt8>?
    private var capacity = 0
    private var used = 0
    /// Entries oldest first; the live ones are `entries[oldest...]`.
    private var entries: [Entry] = []
    private var oldest = 0

    init(maxSize: Int) {
        self.maxSize = maxSize
        limit = maxSize
    }

    mutating func free() {
        bytes?.deallocate()
        bytes = nil
    }

    var count: Int { entries.count - oldest }

    /// The entry at RFC 7541 dynamic index `index` (1: the newest), if there is one.
    @inline(__always)
    func slot(dynamicIndex index: Int) -> Int? {
        guard index >= 1, index <= count else { return nil }
        return entries.count - index
    }

    @inline(__always) func entry(_ slot: Int) -> Entry { entries[slot] }

    @inline(__always)
    func name(_ e: Entry) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes! + Int(e.start), count: Int(e.nameLength))
    }

    @inline(__always)
    func value(_ e: Entry) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes! + Int(e.start + e.nameLength), count: Int(e.valueLength))
    }

    /// A dynamic table size update: evicts down to `newMax` (already checked against the setting).
    mutating func resize(_ newMax: Int) {
        maxSize = newMax
        evict(toFit: 0)
    }

    /// Inserts a field (RFC 7541 4.4): an entry larger than the table empties it and is not kept.
    /// `name` and `value` must not point into this table.
    mutating func insert(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: FieldRole, valueIsPlain: Bool) {
        let entrySize = name.count + value.count + 32
        guard entrySize <= maxSize else {
            entries.removeAll(keepingCapacity: true)
            oldest = 0
            size = 0
            used = 0
            return
        }
        evict(toFit: entrySize)
        let n = name.count + value.count
        if bytes == nil {
            capacity = 2 * max(limit, 64)
            bytes = .allocate(capacity: capacity)
        }
        if used + n > capacity { compact() }
        if let from = name.baseAddress { memcpy(bytes! + used, from, name.count) }
        if let from = value.baseAddress { memcpy(bytes! + used + name.count, from, value.count) }
        entries.append(
            Entry(
                start: Int32(used), nameLength: Int32(name.count), valueLength: Int32(value.count), role: role,
                valueIsPlain: valueIsPlain))
        used += n
        size += entrySize
    }

    private mutating func evict(toFit extra: Int) {
        while size + extra > maxSize, oldest < entries.count {
            let e = entries[oldest]
            size -= Int(e.nameLength + e.valueLength) + 32
            oldest += 1
        }
        if oldest == entries.count {
            entries.removeAll(keepingCapacity: true)
            oldest = 0
            used = 0
        } else if oldest >= 64 {
            entries.removeFirst(oldest)
            oldest = 0
        }
    }

    /// Moves the live entries' bytes to the buffer's start (they are at most `limit` bytes).
    private mutating func compact() {
        guard oldest < entries.count, let base = bytes else {
            used = 0
            return
        }
        let from = Int(entries[oldest].start)
        memmove(base, base + from, used - from)
        used -= from
        for i in oldest..<entries.count { entries[i].start -= Int32(from) }
    }
}

/// Recently seen literal strings that were not indexed, by their encoded bytes (the string's
/// length prefix and data, Huffman flag included): four slots, least recently used replaced.
/// A slot keeps the decoded bytes and, once asked, whether they pass each role's value check.
struct HPACKLiteralCache {
    static let minEncoded = 24
    static let maxEncoded = 256

    private struct Slot {
        var keyLength = 0
        var decodedLength = 0
        var lastUse: UInt64 = 0
        /// Per role (path, regular): 0 not yet checked, 1 plain, 2 not.
        var pathCheck: UInt8 = 0
        var regularCheck: UInt8 = 0
    }

    private static let slotCount = 4
    /// Per slot: the key (maxEncoded + 8 bytes for its prefix), then the decoded bytes (2x).
    private static let slotBytes = maxEncoded + 8 + 2 * maxEncoded + 2
    private var storage: UnsafeMutablePointer<UInt8>?
    private var slots = [Slot](repeating: Slot(), count: slotCount)
    private var clock: UInt64 = 0

    mutating func free() {
        storage?.deallocate()
        storage = nil
    }

    @inline(__always)
    private func key(_ i: Int) -> UnsafeMutablePointer<UInt8> { storage! + i * Self.slotBytes }
    @inline(__always)
    private func decodedBase(_ i: Int) -> UnsafeMutablePointer<UInt8> { storage! + i * Self.slotBytes + Self.maxEncoded + 8 }

    mutating func find(_ key: UnsafeRawBufferPointer) -> Int? {
        guard storage != nil else { return nil }
        for i in 0..<Self.slotCount where slots[i].keyLength == key.count {
            if memcmp(self.key(i), key.baseAddress!, key.count) == 0 {
                clock &+= 1
                slots[i].lastUse = clock
                return i
            }
        }
        return nil
    }

    mutating func store(key: UnsafeRawBufferPointer, decoded: UnsafeRawBufferPointer) -> Int {
        if storage == nil { storage = .allocate(capacity: Self.slotCount * Self.slotBytes) }
        var victim = 0
        for i in 1..<Self.slotCount where slots[i].lastUse < slots[victim].lastUse { victim = i }
        memcpy(self.key(victim), key.baseAddress!, key.count)
        if let from = decoded.baseAddress { memcpy(decodedBase(victim), from, decoded.count) }
        clock &+= 1
        slots[victim] = Slot(keyLength: key.count, decodedLength: decoded.count, lastUse: clock)
        return victim
    }

    @inline(__always)
    func decoded(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: decodedBase(i), count: slots[i].decodedLength)
    }

    /// Whether slot `i`'s value passes `role`'s check (remembered per slot for `:path` and regular fields).
    mutating func plain(_ i: Int, role: FieldRole) -> Bool {
        switch role {
        case .path:
            if slots[i].pathCheck == 0 { slots[i].pathCheck = fieldValueIsPlain(decoded(i), role: .path) ? 1 : 2 }
            return slots[i].pathCheck == 1
        case .regular:
            if slots[i].regularCheck == 0 { slots[i].regularCheck = fieldValueIsPlain(decoded(i), role: .regular) ? 1 : 2 }
            return slots[i].regularCheck == 1
        default:
            return false
        }
    }
}
