/// nghttp2's HPACK decoder table as the blocks `HTTP2Inbound` hands it have filled it, so that a
/// forwarded field the table holds is sent as one indexed byte.
///
/// A plain block gives nghttp2 `:authority` and `content-length` (see `HTTP2Inbound`). Sent as
/// literals, nghttp2 decodes, copies and checks both on every request. Only these two kinds are
/// ever inserted (every other representation handed to nghttp2 is static or a literal without
/// indexing), so their entries, newest first, are the whole table: entry `k` sits at index
/// 62 + k while the sizes of entries 0...k (RFC 7541 §4.1: name + value + 32) fit in the
/// table's 4,096 bytes (SETTINGS_HEADER_TABLE_SIZE, which pushemu never changes). Beyond the
/// newest `capacity` entries nothing is looked for: they age out of the table first.
///
/// nghttp2 decodes every header block it is given, a refused or ignored stream's too (it must,
/// to keep the HPACK context), so the table here and nghttp2's stay in step for as long as the
/// connection lives.
struct HPACKForwardedTable {
    enum Kind: UInt8 {
        case authority
        case contentLength

        /// The field's static-table name index (RFC 7541 Appendix A).
        var nameIndex: UInt8 { self == .authority ? 1 : 28 }
        var nameLength: Int { self == .authority ? 10 : 14 }
    }

    static let maxSize = 4096
    static let capacity = 4

    private struct Entry {
        var kind: Kind
        var value: [UInt8]
    }

    /// Newest first.
    private var entries: [Entry] = []
    /// The last `content-length` given (a literal the first time a length comes, inserted the
    /// second time in a row: a sender whose every body differs in size would only churn the table).
    private var lastLength: [UInt8] = []

    /// The index of `kind: value` in the table, or nil.
    func index(_ kind: Kind, _ value: UnsafeRawBufferPointer) -> Int? {
        // Read in place (iterating the entries copied each, a retain and a release apiece).
        entries.withUnsafeBufferPointer { list -> Int? in
            var size = 0
            for k in 0..<list.count {
                let n = list[k].value.count
                size += list[k].kind.nameLength + n + 32
                if size > HPACKForwardedTable.maxSize { return nil }
                if list[k].kind == kind, n == value.count,
                    n == 0 || list[k].value.withUnsafeBytes({ sameBytes($0.baseAddress!, value.baseAddress!, n) })
                {
                    return 62 + k
                }
            }
            return nil
        }
    }

    /// Writes `kind: value`: indexed when the table holds it, else a literal, with incremental
    /// indexing when it is worth keeping (and then noted as nghttp2's table's newest entry).
    mutating func encode(_ kind: Kind, _ value: UnsafeRawBufferPointer, into out: inout FrameWriter) {
        if let i = index(kind, value) {
            out.append(0x80 | UInt8(i))
            return
        }
        var keep = true
        if kind == .contentLength {
            keep = lastLength.count == value.count && lastLength.withUnsafeBytes { l in value.elementsEqual(l) }
            if !keep {
                lastLength.removeAll(keepingCapacity: true)
                lastLength.append(contentsOf: value)
            }
        }
        // An entry larger than the table would empty it (§4.4): sent without indexing instead.
        if keep && kind.nameLength + value.count + 32 <= HPACKForwardedTable.maxSize {
            out.append(0x40 | kind.nameIndex)
            out.appendString(value)
            entries.insert(Entry(kind: kind, value: Array(value)), at: 0)
            if entries.count > HPACKForwardedTable.capacity { entries.removeLast() }
        } else {
            // A literal without indexing, its name indexed (a 4-bit prefix: 28 is 15 + 13).
            if kind.nameIndex < 15 {
                out.append(kind.nameIndex)
            } else {
                out.append(0x0F)
                out.append(kind.nameIndex - 15)
            }
            out.appendString(value)
        }
    }
}
