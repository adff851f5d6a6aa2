import Glibc

/// The HPACK encoder of a session's answers (RFC 7541), with the dynamic table the peer's
/// decoder holds, for the header blocks `HTTP2HeaderTail` writes into nghttp2's HEADERS frames.
///
/// The table is this encoder's alone: nghttp2's deflater is given no field to index (an answer
/// it encodes has every field never-indexed), so the only entries the peer ever inserts are
/// the ones written here. What nghttp2 still writes into a block is the table size updates it
/// owes the peer after a SETTINGS_HEADER_TABLE_SIZE (§4.2, at the block's start); `apply`
/// reads them, so the table here shrinks exactly as the peer's does.
///
/// What is indexed: values under 32 bytes, which repeat (`content-type`, `vary`, a 410's
/// `:status`), but not `content-length`; a long value (an id) is a literal without indexing,
/// its name indexed once the name is in the table (the first long value of each name is
/// inserted for that).
struct HPACKResponseEncoder {
    /// An entry's name and value lie back to back in `bytes` at `start`.
    private struct Entry {
        var start: Int
        var nameCount: Int
        var valueCount: Int
        var size: Int { nameCount + valueCount + 32 }
    }

    /// Oldest first: entry `i` is dynamic index 62 + (count - 1 - i).
    private var entries: [Entry] = []
    /// The entries' bytes, oldest first, after `dead` bytes of evicted ones.
    private var bytes: [UInt8] = []
    private var dead = 0
    private var size = 0
    private(set) var maxSize = 4096
    /// The table's size (RFC 7541 §4.1), as the peer's decoder counts it.
    var tableSize: Int { size }

    static let longValue = 32
    /// The most entries the table is given: past them it stays as it is, and new values go as
    /// literals (a size update from the peer may empty it and start again).
    static let maxEntries = 32

    /// Reads the table size updates at the start of a block nghttp2 wrote; returns false if the
    /// block holds anything else.
    @inline(__always)
    mutating func apply(_ block: UnsafeRawBufferPointer) -> Bool {
        block.isEmpty ? true : applyUpdates(block)
    }

    @inline(never)
    private mutating func applyUpdates(_ block: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i < block.count {
            guard block[i] & 0xE0 == 0x20 else { return false }
            var value = Int(block[i] & 0x1F)
            i += 1
            if value == 0x1F {
                var shift = 0
                while true {
                    guard i < block.count, shift <= 28 else { return false }
                    let b = block[i]
                    i += 1
                    value += Int(b & 0x7F) << shift
                    shift += 7
                    if b & 0x80 == 0 { break }
                }
            }
            maxSize = value
            evict(to: maxSize)
        }
        return true
    }

    private mutating func evict(to limit: Int) {
        var drop = 0
        while size > limit && drop < entries.count {
            size -= entries[drop].size
            dead += entries[drop].nameCount + entries[drop].valueCount
            drop += 1
        }
        guard drop > 0 else { return }
        entries.removeFirst(drop)
        if entries.isEmpty {
            bytes.removeAll(keepingCapacity: true)
            dead = 0
        } else if dead >= 4096 {
            // The evicted bytes go once they are a table's worth.
            bytes.removeFirst(dead)
            for i in entries.indices { entries[i].start -= dead }
            dead = 0
        }
    }

    private mutating func insert(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let entrySize = name.count + value.count + 32
        guard entrySize <= maxSize else {
            // An entry larger than the table empties it (§4.4).
            evict(to: 0)
            return
        }
        evict(to: maxSize - entrySize)
        entries.append(Entry(start: bytes.count, nameCount: name.count, valueCount: value.count))
        bytes.append(contentsOf: name)
        bytes.append(contentsOf: value)
        size += entrySize
    }

    /// The dynamic index of `name: value` (looked for only when `full`), and of the newest
    /// entry named `name` (0: none).
    private func find(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, full: Bool) -> (full: Int, name: Int) {
        let n = entries.count
        guard n > 0 else { return (0, 0) }
        return bytes.withUnsafeBytes { b in
            entries.withUnsafeBufferPointer { all in
                var nameIndex = 0
                var i = n - 1
                while i >= 0 {
                    let e = all[i]
                    if e.nameCount == name.count
                        && sameBytes(UnsafeRawBufferPointer(start: b.baseAddress! + e.start, count: e.nameCount), name)
                    {
                        if !full { return (0, 62 + n - 1 - i) }
                        if e.valueCount == value.count
                            && sameBytes(UnsafeRawBufferPointer(start: b.baseAddress! + e.start + e.nameCount, count: e.valueCount), value)
                        {
                            return (62 + n - 1 - i, 0)
                        }
                        if nameIndex == 0 { nameIndex = 62 + n - 1 - i }
                    }
                    i -= 1
                }
                return (0, nameIndex)
            }
        }
    }

    /// The most bytes `encode` writes for a list of `fieldBytes` name and value bytes in
    /// `fieldCount` fields.
    static func bound(fieldBytes: Int, fieldCount: Int) -> Int { fieldBytes + 12 * fieldCount + 8 }

    /// Encodes `:status` and the fields a list holds (see `HTTP2HeaderTail`) at `p`, which
    /// has room for `bound(...)`; returns the bytes written.
    mutating func encode(status: Int, fields list: UnsafeRawBufferPointer, into p: UnsafeMutablePointer<UInt8>) -> Int {
        var at = 0
        if let index = HPACKResponseEncoder.staticStatus(status) {
            p[at] = 0x80 | index
            at += 1
        } else {
            var digits: (UInt8, UInt8, UInt8) = (
                UInt8(truncatingIfNeeded: 0x30 + status / 100), UInt8(truncatingIfNeeded: 0x30 + status / 10 % 10),
                UInt8(truncatingIfNeeded: 0x30 + status % 10)
            )
            withUnsafeBytes(of: &digits) { value in
                let name = UnsafeRawBufferPointer(start: HPACKResponseEncoder.statusName.utf8Start, count: 7)
                field(name, value, staticName: 8, index: true, p, &at)
            }
        }
        var i = 0
        while i + 4 <= list.count {
            let nameCount = Int(list[i]) << 8 | Int(list[i + 1])
            let valueCount = Int(list[i + 2]) << 8 | Int(list[i + 3])
            let name = UnsafeRawBufferPointer(rebasing: list[(i + 4)..<(i + 4 + nameCount)])
            let value = UnsafeRawBufferPointer(rebasing: list[(i + 4 + nameCount)..<(i + 4 + nameCount + valueCount)])
            i += 4 + nameCount + valueCount
            if nameCount == 14 && name[0] == UInt8(ascii: "c") && name.equals("content-length") {
                // Never indexed: answers that differ in size would fill the table, which is
                // searched from end to end for every field.
                HPACKResponseEncoder.integer(28, prefix: 4, first: 0x00, p, &at)
                HPACKResponseEncoder.string(value, p, &at)
                continue
            }
            field(name, value, staticName: -1, index: valueCount < HPACKResponseEncoder.longValue, p, &at)
        }
        return at
    }

    @inline(__always)
    private mutating func field(
        _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, staticName: Int, index: Bool,
        _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int
    ) {
        // A long value (an id) is not looked for: it is never indexed.
        let found = find(name, value, full: value.count < HPACKResponseEncoder.longValue)
        if found.full > 0 {
            HPACKResponseEncoder.integer(found.full, prefix: 7, first: 0x80, p, &at)
            return
        }
        // The name by the dynamic table's index when it holds the name, else by the static
        // table's when that has it (`staticName` -1: not looked up yet).
        let nameIndex =
            found.name > 0 ? found.name : staticName >= 0 ? staticName : HPACKResponseEncoder.staticNameIndex(name)
        // A long value's name goes in the table once, so the next refers to it. The table holds
        // at most `maxEntries` (it is searched from end to end for every field).
        let insert =
            entries.count < HPACKResponseEncoder.maxEntries
            && (index || (nameIndex == 0 && name.count + value.count + 32 <= maxSize / 2))
        if insert {
            HPACKResponseEncoder.integer(nameIndex, prefix: 6, first: 0x40, p, &at)
        } else {
            HPACKResponseEncoder.integer(nameIndex, prefix: 4, first: 0x00, p, &at)
        }
        if nameIndex == 0 { HPACKResponseEncoder.string(name, p, &at) }
        HPACKResponseEncoder.string(value, p, &at)
        if insert { self.insert(name, value) }
    }

    @inline(__always)
    static func integer(_ x: Int, prefix: Int, first: UInt8, _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int) {
        let limit = (1 << prefix) - 1
        if x < limit {
            p[at] = first | UInt8(truncatingIfNeeded: x)
            at += 1
            return
        }
        p[at] = first | UInt8(truncatingIfNeeded: limit)
        at += 1
        var rest = x - limit
        while rest >= 128 {
            p[at] = UInt8(truncatingIfNeeded: rest) | 0x80
            at += 1
            rest >>= 7
        }
        p[at] = UInt8(truncatingIfNeeded: rest)
        at += 1
    }

    /// A plain (not Huffman-coded) string literal.
    @inline(__always)
    static func string(_ s: UnsafeRawBufferPointer, _ p: UnsafeMutablePointer<UInt8>, _ at: inout Int) {
        integer(s.count, prefix: 7, first: 0x00, p, &at)
        if s.count > 0 { memcpy(p + at, s.baseAddress!, s.count) }
        at += s.count
    }

    static let statusName: StaticString = ":status"

    /// RFC 7541 Appendix A's `:status` entries.
    @inline(__always)
    static func staticStatus(_ status: Int) -> UInt8? {
        switch status {
        case 200: 8
        case 204: 9
        case 206: 10
        case 304: 11
        case 400: 12
        case 404: 13
        case 500: 14
        default: nil
        }
    }

    /// The static table's index of the response header names answers use (0: none).
    static func staticNameIndex(_ name: UnsafeRawBufferPointer) -> Int {
        switch name.count {
        case 3 where name.equals("age"): 21
        case 4 where name.equals("vary"): 59
        case 4 where name.equals("date"): 33
        case 4 where name.equals("etag"): 34
        case 4 where name.equals("link"): 45
        case 5 where name.equals("allow"): 22
        case 6 where name.equals("server"): 54
        case 7 where name.equals("expires"): 36
        case 8 where name.equals("location"): 46
        case 10 where name.equals("set-cookie"): 55
        case 11 where name.equals("retry-after"): 53
        case 12 where name.equals("content-type"): 31
        case 13 where name.equals("cache-control"): 24
        case 13 where name.equals("last-modified"): 44
        case 14 where name.equals("content-length"): 28
        case 16 where name.equals("content-encoding"): 26
        case 16 where name.equals("www-authenticate"): 61
        case 27 where name.equals("access-control-allow-origin"): 20
        default: 0
        }
    }
}
