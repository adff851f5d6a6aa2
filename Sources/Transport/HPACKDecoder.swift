import CNghttp2
import Glibc

/// A header block the peer's encoder got wrong (RFC 7541): the connection ends with
/// COMPRESSION_ERROR.
struct HPACKError: Error {
    let reason: StaticString
}

/// What a field is to HTTP/2's request rules (RFC 9113 8.2 and 8.3) as nghttp2 applies them:
/// the four request pseudo-headers, other pseudo-headers, the fields nghttp2 gives meaning to
/// (`host`, `content-length`, `te`, `priority`), the connection-specific fields it refuses,
/// and every other name, valid (RFC 9110 token, lowercase) or not.
enum FieldRole: UInt8 {
    case method, scheme, path, authority, otherPseudo
    case forwarded
    case forbidden
    case regular
    case invalidName

    /// The role of a field name, with nghttp2's own name check for the rest.
    static func of(_ name: UnsafeRawBufferPointer) -> FieldRole {
        guard let first = name.first else { return .invalidName }
        if first == UInt8(ascii: ":") {
            switch name.count {
            case 5 where name.equals(":path"): return .path
            case 7 where name.equals(":method"): return .method
            case 7 where name.equals(":scheme"): return .scheme
            case 10 where name.equals(":authority"): return .authority
            default: return .otherPseudo
            }
        }
        switch name.count {
        case 2 where name.equals("te"), 4 where name.equals("host"), 8 where name.equals("priority"),
            14 where name.equals("content-length"):
            return .forwarded
        case 7 where name.equals("upgrade"), 10 where name.equals("connection"), 10 where name.equals("keep-alive"),
            16 where name.equals("proxy-connection"), 17 where name.equals("transfer-encoding"):
            return .forbidden
        default:
            return nghttp2_check_header_name(name.baseAddress!.assumingMemoryBound(to: UInt8.self), name.count) != 0
                ? .regular : .invalidName
        }
    }
}

/// Whether a value passes the check nghttp2 applies to a field of its role: `:path` must be
/// origin-form (starts with `/`, `nghttp2_check_path`), a regular field's value RFC 9113's
/// (`nghttp2_check_header_value_rfc9113`: no NUL, CR, LF, no white space at either end).
/// Other roles are never kept from nghttp2, so their values are not checked here.
@inline(__always)
func fieldValueIsPlain(_ value: UnsafeRawBufferPointer, role: FieldRole) -> Bool {
    switch role {
    case .path:
        guard value.first == UInt8(ascii: "/") else { return false }
        return nghttp2_check_path(value.baseAddress!.assumingMemoryBound(to: UInt8.self), value.count) != 0
    case .regular:
        guard let base = value.baseAddress else { return true }
        return nghttp2_check_header_value_rfc9113(base.assumingMemoryBound(to: UInt8.self), value.count) != 0
    default:
        return false
    }
}

/// Receives a decoded header block one field at a time, in block order. The buffers are valid
/// only during the call. `valueIsPlain` tells whether the value passes `fieldValueIsPlain` for
/// `role` (worked out once per dynamic-table entry or repeated literal, not per request).
protocol HPACKFieldSink {
    mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: FieldRole, valueIsPlain: Bool)
}

/// RFC 7541 decoding of one connection's request header blocks, its dynamic table included.
///
/// Contract: `decode` takes one whole header block (HEADERS plus its CONTINUATIONs, padding and
/// priority removed) and hands each field to the sink, or throws `HPACKError` for a block that
/// RFC 7541 makes a COMPRESSION_ERROR (an index out of range, an integer or string past the
/// block, a bad Huffman string, a table size update above `maxTableSize` or after a field). The
/// dynamic table is updated as the block says either way, so blocks decode in arrival order.
///
/// Bounded: the dynamic table holds at most `maxTableSize` bytes as RFC 7541 counts them (8 KiB
/// of storage); decoded strings use two scratch buffers at most twice the longest string; and
/// literals the peer repeats without indexing (h2 clients send `authorization` never-indexed,
/// nghttp2 sends `:path` unindexed) are kept decoded in four slots of at most 256 encoded bytes,
/// so a repeat costs a comparison instead of a Huffman decode and a validity check.
final class HPACKDecoder {
    /// SETTINGS_HEADER_TABLE_SIZE as advertised (the protocol's default; pushemu never changes it).
    let maxTableSize: Int
    private var table: HPACKDynamicTable
    private var cache = HPACKLiteralCache()
    private var nameScratch = HPACKScratch()
    private var valueScratch = HPACKScratch()
    /// The name of a literal with incremental indexing whose name is a dynamic entry: copied out,
    /// since inserting the new entry may move the table's bytes.
    private var insertName = HPACKScratch()

    init(maxTableSize: Int = 4096) {
        self.maxTableSize = maxTableSize
        table = HPACKDynamicTable(maxSize: maxTableSize)
    }

    deinit {
        table.free()
        cache.free()
        nameScratch.free()
        valueScratch.free()
        insertName.free()
    }

    /// The dynamic table's size as RFC 7541 counts it (tests).
    var tableSize: Int { table.size }

    func decode<Sink: HPACKFieldSink>(_ block: UnsafeRawBufferPointer, into sink: inout Sink) throws(HPACKError) {
        guard let base = block.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        var reader = HPACKReader(base: base, end: block.count)
        var fieldSeen = false
        while reader.position < reader.end {
            let first = reader.peek()
            if first & 0x80 != 0 {
                // Indexed field.
                let index = try reader.integer(prefixBits: 7)
                try emitIndexed(index, into: &sink)
                fieldSeen = true
            } else if first & 0xC0 == 0x40 {
                try literal(&reader, prefixBits: 6, indexing: true, into: &sink)
                fieldSeen = true
            } else if first & 0xE0 == 0x20 {
                // Dynamic table size update: only before the block's first field.
                guard !fieldSeen else { throw HPACKError(reason: "table size update after a field") }
                let size = try reader.integer(prefixBits: 5)
                guard size <= maxTableSize else { throw HPACKError(reason: "table size update above the setting") }
                table.resize(size)
            } else {
                // Literal without indexing (0000) or never indexed (0001).
                try literal(&reader, prefixBits: 4, indexing: false, into: &sink)
                fieldSeen = true
            }
        }
    }

    @inline(__always)
    private func emitIndexed<Sink: HPACKFieldSink>(_ index: Int, into sink: inout Sink) throws(HPACKError) {
        if index >= 1 && index <= hpackStaticTable.count {
            let entry = HPACKStatic.entries[index - 1]
            sink.field(name: entry.name, value: entry.value, role: entry.role, valueIsPlain: entry.valueIsPlain)
            return
        }
        guard index > hpackStaticTable.count, let slot = table.slot(dynamicIndex: index - hpackStaticTable.count) else {
            throw HPACKError(reason: "index out of range")
        }
        let entry = table.entry(slot)
        sink.field(name: table.name(entry), value: table.value(entry), role: entry.role, valueIsPlain: entry.valueIsPlain)
    }

    private func literal<Sink: HPACKFieldSink>(
        _ reader: inout HPACKReader, prefixBits: Int, indexing: Bool, into sink: inout Sink
    ) throws(HPACKError) {
        let nameIndex = try reader.integer(prefixBits: prefixBits)
        var name: UnsafeRawBufferPointer
        var role: FieldRole
        if nameIndex == 0 {
            name = try string(&reader, into: &nameScratch)
            role = FieldRole.of(name)
        } else if nameIndex <= hpackStaticTable.count {
            let entry = HPACKStatic.entries[nameIndex - 1]
            name = entry.name
            role = entry.role
        } else if let slot = table.slot(dynamicIndex: nameIndex - hpackStaticTable.count) {
            let entry = table.entry(slot)
            role = entry.role
            name = table.name(entry)
            if indexing { name = insertName.hold(name) }
        } else {
            throw HPACKError(reason: "name index out of range")
        }
        if indexing {
            let value = try string(&reader, into: &valueScratch)
            let plain = fieldValueIsPlain(value, role: role)
            sink.field(name: name, value: value, role: role, valueIsPlain: plain)
            table.insert(name: name, value: value, role: role, valueIsPlain: plain)
            return
        }
        // Not indexed: a repeat of a recent literal is looked up by its encoded bytes.
        let start = reader.position
        let (huffman, length) = try reader.stringHeader()
        let encoded = UnsafeRawBufferPointer(start: reader.base + reader.position, count: length)
        reader.position += length
        if length >= HPACKLiteralCache.minEncoded && length <= HPACKLiteralCache.maxEncoded {
            let key = UnsafeRawBufferPointer(start: reader.base + start, count: reader.position - start)
            let slot: Int
            if let hit = cache.find(key) {
                slot = hit
            } else {
                slot = cache.store(key: key, decoded: try decode(encoded, huffman: huffman, into: &valueScratch))
            }
            let plain = cache.plain(slot, role: role)
            sink.field(name: name, value: cache.decoded(slot), role: role, valueIsPlain: plain)
            return
        }
        let value = try decode(encoded, huffman: huffman, into: &valueScratch)
        sink.field(name: name, value: value, role: role, valueIsPlain: fieldValueIsPlain(value, role: role))
    }

    private func string(_ reader: inout HPACKReader, into scratch: inout HPACKScratch) throws(HPACKError) -> UnsafeRawBufferPointer {
        let (huffman, length) = try reader.stringHeader()
        let encoded = UnsafeRawBufferPointer(start: reader.base + reader.position, count: length)
        reader.position += length
        return try decode(encoded, huffman: huffman, into: &scratch)
    }

    /// A string's bytes: `encoded` itself, or its Huffman decoding in `scratch`.
    private func decode(
        _ encoded: UnsafeRawBufferPointer, huffman: Bool, into scratch: inout HPACKScratch
    ) throws(HPACKError) -> UnsafeRawBufferPointer {
        guard huffman else { return encoded }
        let out = scratch.reserve(encoded.count * 2 + 2)
        guard let n = HPACKHuffman.decode(encoded, into: out) else { throw HPACKError(reason: "bad Huffman string") }
        return UnsafeRawBufferPointer(start: out, count: n)
    }
}

/// Reads RFC 7541's integers (5.1) and string headers (5.2) from a block.
struct HPACKReader {
    let base: UnsafePointer<UInt8>
    let end: Int
    var position = 0

    init(base: UnsafePointer<UInt8>, end: Int) {
        self.base = base
        self.end = end
    }

    @inline(__always) func peek() -> UInt8 { base[position] }

    /// An integer with an N-bit prefix. Values past 2^28 are refused (no header block needs
    /// them; nghttp2 refuses what does not fit 32 bits), so nothing here can overflow.
    @inline(__always)
    mutating func integer(prefixBits: Int) throws(HPACKError) -> Int {
        guard position < end else { throw HPACKError(reason: "truncated integer") }
        let mask = (1 << prefixBits) - 1
        var value = Int(base[position]) & mask
        position += 1
        guard value == mask else { return value }
        var shift = 0
        while true {
            guard position < end else { throw HPACKError(reason: "truncated integer") }
            let byte = Int(base[position])
            position += 1
            value += (byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
            guard shift <= 21 else { throw HPACKError(reason: "integer too large") }
        }
        guard value < 1 << 28 else { throw HPACKError(reason: "integer too large") }
        return value
    }

    /// A string's Huffman flag and length; the bytes must be in the block.
    @inline(__always)
    mutating func stringHeader() throws(HPACKError) -> (huffman: Bool, length: Int) {
        guard position < end else { throw HPACKError(reason: "truncated string") }
        let huffman = base[position] & 0x80 != 0
        let length = try integer(prefixBits: 7)
        guard length <= end - position else { throw HPACKError(reason: "string past the block") }
        return (huffman, length)
    }
}

/// The static table with each entry's role and value check worked out once.
enum HPACKStatic {
    /// Points at static strings: immutable, so shared freely.
    struct Entry: @unchecked Sendable {
        let name: UnsafeRawBufferPointer
        let value: UnsafeRawBufferPointer
        let role: FieldRole
        let valueIsPlain: Bool
    }

    static let entries: [Entry] = hpackStaticTable.map { pair in
        let name = UnsafeRawBufferPointer(start: pair.name.utf8Start, count: pair.name.utf8CodeUnitCount)
        let value = UnsafeRawBufferPointer(start: pair.value.utf8Start, count: pair.value.utf8CodeUnitCount)
        let role = FieldRole.of(name)
        return Entry(name: name, value: value, role: role, valueIsPlain: fieldValueIsPlain(value, role: role))
    }
}

/// A growable scratch buffer for decoded strings.
struct HPACKScratch {
    private var bytes: UnsafeMutablePointer<UInt8>?
    private var capacity = 0

    mutating func reserve(_ n: Int) -> UnsafeMutablePointer<UInt8> {
        if n > capacity || bytes == nil {
            bytes?.deallocate()
            capacity = max(n, 256)
            bytes = .allocate(capacity: capacity)
        }
        return bytes!
    }

    /// A copy of `source` in this buffer.
    mutating func hold(_ source: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let out = reserve(source.count)
        if let from = source.baseAddress { memcpy(out, from, source.count) }
        return UnsafeRawBufferPointer(start: out, count: source.count)
    }

    mutating func free() {
        bytes?.deallocate()
        bytes = nil
        capacity = 0
    }
}
