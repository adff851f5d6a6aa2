import Glibc

/// An ordered list of header fields kept in one flat byte buffer.
///
/// Names are stored lowercase. Duplicates are kept in arrival order (providers need to see them).
/// Two allocations however many fields there are: the bytes and the index.
public struct HTTPFields: Sendable {
    @usableFromInline struct Entry: Sendable {
        @usableFromInline var nameStart: Int32
        @usableFromInline var nameLength: Int32
        @usableFromInline var valueStart: Int32
        @usableFromInline var valueLength: Int32
    }

    /// Names and values back to back. Only the first `used` bytes are fields: the array grows
    /// uninitialized and is written with memcpy, because appending a header's bytes through
    /// `Array.append(contentsOf:)` cost about 120 instructions a call (1.7k per APNs request,
    /// measured with callgrind).
    @usableFromInline var storage: [UInt8] = []
    @usableFromInline var used = 0
    @usableFromInline var entries: [Entry] = []

    public init() {}

    /// Lends `body` the value bytes of field `i` where they lie: no slice of the storage is
    /// formed (a slice retains it, and releases it after).
    @inlinable @inline(__always)
    public func withValue<R>(at i: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let e = entries[i]
        return storage.withUnsafeBytes { raw in
            body(UnsafeRawBufferPointer(rebasing: raw[Int(e.valueStart)..<Int(e.valueStart + e.valueLength)]))
        }
    }

    /// Lets `body` overwrite the value bytes of field `i` in place (same length).
    public mutating func withMutableValue<R>(at i: Int, _ body: (UnsafeMutableRawBufferPointer) -> R) -> R {
        let e = entries[i]
        return storage.withUnsafeMutableBytes { raw in
            body(UnsafeMutableRawBufferPointer(rebasing: raw[Int(e.valueStart)..<Int(e.valueStart + e.valueLength)]))
        }
    }

    /// Replaces the list with `entries` over `bytes` (offsets into `bytes`), keeping capacity.
    mutating func replaceAll(bytes: UnsafeRawBufferPointer, entries e: UnsafeBufferPointer<Entry>) {
        used = 0
        if bytes.count > storage.count { grow(to: bytes.count) }
        if bytes.count > 0 { storage.withUnsafeMutableBytes { copyBytes($0.baseAddress!, bytes.baseAddress!, bytes.count) } }
        used = bytes.count
        entries.removeAll(keepingCapacity: true)
        entries.append(contentsOf: e)
    }

    /// Empties the list, keeping its capacity.
    public mutating func removeAll() {
        used = 0 // the bytes stay, to be overwritten
        entries.removeAll(keepingCapacity: true)
    }

    /// Reserves room for `bytes` of names and values and `fields` entries.
    public mutating func reserveCapacity(bytes: Int, fields: Int) {
        if bytes > storage.count { grow(to: bytes) }
        entries.reserveCapacity(fields)
    }

    /// Makes `storage` at least `n` bytes long (doubling), keeping the used bytes; the rest is
    /// left uninitialized (nothing reads past `used`).
    @inline(never)
    mutating func grow(to n: Int) {
        let newCount = max(n, storage.count * 2, 256)
        let keep = used
        storage = storage.withUnsafeBytes { .uninitialized(count: newCount, copying: UnsafeRawBufferPointer(rebasing: $0[0..<keep])) }
    }

    public init(_ pairs: [(String, String)]) {
        for (n, v) in pairs { add(name: n, value: v) }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// Total bytes of names and values (what header-size limits count).
    public var byteCount: Int { used }

    public func name(at i: Int) -> ArraySlice<UInt8> {
        let e = entries[i]
        return storage[Int(e.nameStart)..<Int(e.nameStart + e.nameLength)]
    }

    @inlinable
    public func value(at i: Int) -> ArraySlice<UInt8> {
        let e = entries[i]
        return storage[Int(e.valueStart)..<Int(e.valueStart + e.valueLength)]
    }

    /// The first value of `name` (lowercase literal), or nil. Inlined into the request path
    /// (`Dispatcher.headersComplete` asks every request for `content-length`): a call here made
    /// the caller copy its `Request`, 460 instructions a request.
    @inlinable @inline(__always)
    public func first(_ name: StaticString) -> ArraySlice<UInt8>? {
        let k = firstIndex(named: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        return k < 0 ? nil : value(at: k)
    }

    /// Whether the first value of `name` (lowercase literal) is present and equal to `bytes`,
    /// compared in place (no slice of the storage: forming one retained it, through the runtime's
    /// generic copy, 60 instructions a time).
    @inlinable @inline(__always)
    public func firstValue(_ name: StaticString, equals bytes: UnsafeRawBufferPointer) -> Bool {
        let k = firstIndex(named: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        guard k >= 0 else { return false }
        return entries.withUnsafeBufferPointer { es in
            let e = es[k]
            guard Int(e.valueLength) == bytes.count else { return false }
            return bytes.isEmpty
                || storage.withUnsafeBytes { sameBytes($0.baseAddress! + Int(e.valueStart), bytes.baseAddress!, bytes.count) }
        }
    }

    /// The index of the first field named `name` (lowercase bytes), or -1: one pass over the
    /// entries comparing lengths, then bytes in place (a slice of the storage per candidate cost
    /// a retain and a release each: 254 instructions for the `content-length` every request is
    /// asked for).
    @inlinable @inline(__always)
    func firstIndex(named name: UnsafeRawBufferPointer) -> Int {
        let n = name.count
        return storage.withUnsafeBytes { s in
            entries.withUnsafeBufferPointer { es -> Int in
                for k in 0..<es.count where Int(es[k].nameLength) == n {
                    if n == 0 || sameBytes(s.baseAddress! + Int(es[k].nameStart), name.baseAddress!, n) { return k }
                }
                return -1
            }
        }
    }

    /// Whether a field may be a browser's (`origin`, `sec-fetch-*`): one pass comparing name
    /// lengths and a byte, for a check every request makes (`BrowserOrigin`).
    @inlinable
    public var mayBeFromBrowser: Bool {
        storage.withUnsafeBytes { s in
            entries.withUnsafeBufferPointer { es in
                guard let base = s.baseAddress else { return false }
                for e in es {
                    let n = e.nameLength
                    // `origin`, or `sec-` and at least six more (`sec-fetch-*`).
                    if n == 6 {
                        if base.load(fromByteOffset: Int(e.nameStart), as: UInt8.self) == UInt8(ascii: "o") { return true }
                    } else if n >= 10 {
                        let p = base + Int(e.nameStart)
                        if p.load(as: UInt8.self) == UInt8(ascii: "s") && p.load(fromByteOffset: 3, as: UInt8.self) == UInt8(ascii: "-") {
                            return true
                        }
                    }
                }
                return false
            }
        }
    }

    /// How many fields are named `name` (lowercase literal).
    @inlinable
    public func count(of name: StaticString) -> Int {
        var n = 0
        for e in entries where Int(e.nameLength) == name.utf8CodeUnitCount {
            if storage[Int(e.nameStart)..<Int(e.nameStart + e.nameLength)].equals(name) { n += 1 }
        }
        return n
    }

    /// The first value of `name` as a String (convenience for non-hot paths).
    public func firstString(_ name: String) -> String? {
        let lower = Array(name.lowercased().utf8)
        for i in 0..<entries.count where self.name(at: i).elementsEqual(lower) {
            return value(at: i).utf8String
        }
        return nil
    }

    /// Appends a field; the name is lowercased.
    public mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let ns = used
        addLowercase(name: name, value: value)
        for i in ns..<(ns + name.count) { storage[i] = asciiLower(storage[i]) }
    }

    /// Appends a field whose name is known to be lowercase already (HTTP/2, which nghttp2 checks).
    @inline(__always)
    mutating func addLowercase(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let ns = used
        let end = ns + name.count + value.count
        if end > storage.count { grow(to: end) }
        storage.withUnsafeMutableBytes { s in
            if !name.isEmpty { copyBytes(s.baseAddress! + ns, name.baseAddress!, name.count) }
            if !value.isEmpty { copyBytes(s.baseAddress! + ns + name.count, value.baseAddress!, value.count) }
        }
        used = end
        entries.append(
            Entry(
                nameStart: Int32(ns), nameLength: Int32(name.count),
                valueStart: Int32(ns + name.count), valueLength: Int32(value.count)))
    }

    public mutating func add(name: String, value: String) {
        var n = name
        var v = value
        n.withUTF8 { nb in v.withUTF8 { vb in add(name: UnsafeRawBufferPointer(nb), value: UnsafeRawBufferPointer(vb)) } }
    }

    /// Static names must be lowercase already (they are not lowercased again).
    public mutating func add(name: StaticString, value: UnsafeRawBufferPointer) {
        addLowercase(name: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), value: value)
    }

    public mutating func add(name: StaticString, value: StaticString) {
        add(name: name, value: UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }

    public mutating func add(name: StaticString, value: String) {
        var v = value
        v.withUTF8 { vb in add(name: name, value: UnsafeRawBufferPointer(vb)) }
    }

    public mutating func add(name: StaticString, value: [UInt8]) {
        value.withUnsafeBytes { add(name: name, value: $0) }
    }

    /// Appends a field whose value is a decimal number.
    public mutating func add(name: StaticString, decimal: Int) {
        withDecimalDigits(decimal) { add(name: name, value: $0) }
    }

    /// The first value of `name` (lowercase bytes).
    public func first(bytes name: [UInt8]) -> ArraySlice<UInt8>? {
        let k = name.withUnsafeBytes { firstIndex(named: $0) }
        return k < 0 ? nil : value(at: k)
    }

    /// Calls `body` with each field's raw name and value bytes.
    public func forEachField(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) {
        storage.withUnsafeBytes { raw in
            for e in entries {
                body(
                    UnsafeRawBufferPointer(rebasing: raw[Int(e.nameStart)..<Int(e.nameStart + e.nameLength)]),
                    UnsafeRawBufferPointer(rebasing: raw[Int(e.valueStart)..<Int(e.valueStart + e.valueLength)]))
            }
        }
    }

    /// The raw parts: the name/value bytes and the index (16 bytes per field: name start, name
    /// length, value start, value length as Int32). For copying a field list as one block.
    public func withRawParts<R>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> R) -> R {
        storage.withUnsafeBytes { s in entries.withUnsafeBytes { e in body(UnsafeRawBufferPointer(rebasing: s[0..<used]), e) } }
    }

    /// Name/value pairs as Strings (tests, logs, admin API).
    public var pairs: [(String, String)] {
        (0..<entries.count).map { (name(at: $0).utf8String, value(at: $0).utf8String) }
    }
}
