import Glibc
import Transport

/// A strict, single-pass, validating JSON tokenizer over bytes (RFC 8259).
///
/// It produces a flat array of tokens that doubles as a small DOM: containers know where their
/// subtree ends (`next`), so lookups skip whole values without re-scanning. No Foundation, no
/// String until a caller asks for one. Accepts every `y_` and rejects every `n_` case of the
/// JSONTestSuite; invalid UTF-8 inside strings is rejected, lone `\u` surrogates are accepted.

/// One JSON value, as a span of the document's bytes: its kind, where it is, and how to skip it.
public struct JSONToken: Sendable {
    /// The value's JSON type.
    public enum Kind: UInt8, Sendable { case object, array, string, number, `true`, `false`, null }
    /// Its JSON type.
    public var kind: Kind
    /// Strings: the bytes between the quotes (escapes not decoded). Others: the value's bytes.
    public var start: Int32
    /// Where its bytes end (exclusive; for strings, the closing quote).
    public var end: Int32
    /// Index of the first token after this value (and its children).
    public var next: Int32
    /// Members (object) or elements (array).
    public var count: Int32
    /// Strings: contains at least one backslash escape.
    public var escaped: Bool
}

/// Reusable storage for parsed tokens: a plain growable buffer (appending to an Array costs a
/// uniqueness and capacity check per token). Owned by one thread at a time.
public final class JSONTokenBuffer {
    @usableFromInline var base: UnsafeMutablePointer<JSONToken>
    @usableFromInline var capacity: Int
    @usableFromInline var count = 0

    /// An empty buffer with room for `capacity` tokens.
    public init(capacity: Int = 64) {
        self.capacity = max(8, capacity)
        base = UnsafeMutablePointer<JSONToken>.allocate(capacity: self.capacity)
    }

    /// A buffer holding `tokens` (tests and cold paths).
    public convenience init(_ tokens: [JSONToken]) {
        self.init(capacity: tokens.count)
        for t in tokens { append(t) }
    }

    deinit { base.deallocate() }

    @inline(__always)
    func append(_ t: JSONToken) {
        if count == capacity { grow() }
        base[count] = t
        count += 1
    }

    @inline(never)
    func grow() {
        let bigger = UnsafeMutablePointer<JSONToken>.allocate(capacity: capacity * 2)
        bigger.moveInitialize(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity *= 2
    }

    /// The tokens, valid while this buffer is alive and not parsed into again.
    public var tokens: UnsafeBufferPointer<JSONToken> { UnsafeBufferPointer(start: base, count: count) }
    /// The tokens as an array (tests and cold paths).
    public var array: [JSONToken] { Array(tokens) }

    /// A copy of the tokens, kept when this buffer is parsed into again.
    public func copy() -> JSONTokenBuffer {
        let c = JSONTokenBuffer(capacity: count)
        c.base.initialize(from: base, count: count)
        c.count = count
        return c
    }

    /// The tokens of one value and its children (from token `root`), as a document of their
    /// own whose bytes start at offset `origin` of this one's: offsets and successors rebased.
    public func copy(subtree root: Int, origin: Int) -> JSONTokenBuffer {
        let n = Int(base[root].next) &- root
        let c = JSONTokenBuffer(capacity: n)
        // The tokens are moved as they are, then each one's three fields rebased in place
        // (offsets within one parsed document: no overflow to check).
        c.base.initialize(from: base + root, count: n)
        let shift = Int32(truncatingIfNeeded: origin)
        let first = Int32(truncatingIfNeeded: root)
        var t = c.base
        for _ in 0..<n {
            t.pointee.start &-= shift
            t.pointee.end &-= shift
            t.pointee.next &-= first
            t += 1
        }
        c.count = n
        return c
    }
}

/// Why a document is not JSON, and the byte offset where that was found.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The byte offset of the problem.
    public let offset: Int
    /// What is wrong, in words.
    public let message: String
    /// The message with its offset.
    public var description: String { "\(message) at byte \(offset)" }
}

/// Bounds a document must keep to (beyond the parser's depth limit).
public struct JSONLimits: Sendable {
    var maxDepth = 64
    /// Tokens at most: a document with more is refused rather than parsed.
    public var maxTokens = 1 << 16
    /// The defaults: 65,536 tokens.
    public init() {}
}

/// A document and the tokens `JSONParser` left for it, lent for a read made at once (the
/// tokens' buffer is parsed into again by the next request): the journal reads a pushed
/// payload's campaign from the tokens its gateway made instead of parsing the body again.
public struct ParsedJSON {
    /// One value of the parsed document, as a slice of the document's bytes (the slice's
    /// indices are the tokens' offsets): the whole document, or a member (FCM's `message`).
    public let bytes: ArraySlice<UInt8>
    /// Its tokens.
    public let tokens: JSONTokenBuffer

    /// `tokens`, parsed from the document `bytes` is a value of.
    public init(bytes: ArraySlice<UInt8>, tokens: JSONTokenBuffer) {
        self.bytes = bytes
        self.tokens = tokens
    }

    /// The index of the token of the value `bytes` holds (the first at or after its start, the
    /// whitespace before it skipped), nil when no token spans exactly into `bytes`.
    public var root: Int? {
        let all = tokens.tokens
        guard let i = all.firstIndex(where: { Int($0.start) >= bytes.startIndex }) else { return nil }
        // A string's token starts after its quote; a payload is an object or an array.
        guard all[i].kind == .object || all[i].kind == .array, Int(all[i].end) <= bytes.endIndex else { return nil }
        return i
    }
}

/// A parsed document: the tokens plus the bytes they point into (valid while the bytes are).
public struct JSONView {
    /// The document's bytes.
    public let bytes: UnsafeRawBufferPointer
    private let buffer: JSONTokenBuffer
    /// Its tokens, in document order.
    public let tokens: UnsafeBufferPointer<JSONToken>

    /// A view over `tokens` parsed from `bytes` (tests and cold paths).
    public init(bytes: UnsafeRawBufferPointer, tokens: [JSONToken]) {
        self.init(bytes: bytes, buffer: JSONTokenBuffer(tokens))
    }

    /// A view over the tokens `buffer` holds for `bytes`.
    public init(bytes: UnsafeRawBufferPointer, buffer: JSONTokenBuffer) {
        self.bytes = bytes
        self.buffer = buffer
        self.tokens = buffer.tokens
    }

    /// The document's top-level value (nil: an empty view).
    public var root: Int? { tokens.isEmpty ? nil : 0 }

    /// Index of the value for `key` in the object at `object`, or nil.
    public func member(_ object: Int, _ key: StaticString) -> Int? {
        let o = tokens[object]
        guard o.kind == .object else { return nil }
        var i = object + 1
        let end = Int(o.next)
        while i < end {
            if keyEquals(i, key) { return i + 1 }
            i = Int(tokens[i + 1].next)
        }
        return nil
    }

    /// Calls `body(keyIndex, valueIndex)` for every member of the object at `object`.
    public func forEachMember(_ object: Int, _ body: (Int, Int) -> Void) {
        let o = tokens[object]
        guard o.kind == .object else { return }
        var i = object + 1
        let end = Int(o.next)
        while i < end {
            body(i, i + 1)
            i = Int(tokens[i + 1].next)
        }
    }

    /// Calls `body(valueIndex)` for every element of the array at `array`.
    public func forEachElement(_ array: Int, _ body: (Int) -> Void) {
        let a = tokens[array]
        guard a.kind == .array else { return }
        var i = array + 1
        let end = Int(a.next)
        while i < end {
            body(i)
            i = Int(tokens[i].next)
        }
    }

    /// True when the string token at `i` (unescaped) equals `key`.
    public func keyEquals(_ i: Int, _ key: StaticString) -> Bool {
        let t = tokens[i]
        guard t.kind == .string, !t.escaped else { return t.kind == .string && string(i) == key.description }
        return UnsafeRawBufferPointer(rebasing: bytes[Int(t.start)..<Int(t.end)]).equals(key)
    }

    /// The raw bytes of token `i` (strings without quotes; containers: the whole text).
    public func raw(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[Int(tokens[i].start)..<Int(tokens[i].end)])
    }

    /// True when the raw bytes of the (unescaped) string token `i` equal `literal`.
    @inline(__always)
    public func rawEquals(_ i: Int, _ literal: StaticString) -> Bool {
        let t = tokens[i]
        guard Int(t.end - t.start) == literal.utf8CodeUnitCount else { return false }
        return sameBytes(bytes.baseAddress! + Int(t.start), literal.utf8Start, literal.utf8CodeUnitCount)
    }

    /// The decoded string value of token `i`.
    public func string(_ i: Int) -> String {
        let t = tokens[i]
        let r = raw(i)
        if !t.escaped { return String(decoding: r, as: UTF8.self) }
        return JSONParser.unescape(r)
    }

    /// The number at `i` as a Double (nil for other kinds).
    public func number(_ i: Int) -> Double? {
        guard tokens[i].kind == .number else { return nil }
        return Double(String(decoding: raw(i), as: UTF8.self))
    }

    /// The number at `i` as an Int when it is an integer literal that fits (what `Int(text)`
    /// gives for the number's text, read from the bytes: no String made).
    public func integer(_ i: Int) -> Int? {
        guard tokens[i].kind == .number else { return nil }
        let r = raw(i)
        guard var p = r.baseAddress, !r.isEmpty else { return nil }
        let end = p + r.count
        let negative = p.load(as: UInt8.self) == UInt8(ascii: "-")
        if negative { p += 1 }
        guard p < end else { return nil }
        // Accumulated negatively, so Int.min fits; a fraction or exponent is not an Int.
        var value = 0
        while p < end {
            let d = p.load(as: UInt8.self) &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.subtractingReportingOverflow(Int(d))
            guard !o1 && !o2 else { return nil }
            value = next
            p += 1
        }
        if negative { return value }
        return value == .min ? nil : -value
    }
}

/// The JSON tokenizer: one pass over the bytes into a token buffer, no Strings made.
public enum JSONParser {
    /// Parses `bytes` into `buffer` (emptied first). Returns nil on success.
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, into buffer: JSONTokenBuffer,
        limits: JSONLimits = JSONLimits()
    ) -> JSONError? {
        // Offsets (and so token counts) are Int32s in a token.
        guard bytes.count > 0 else {
            buffer.count = 0
            return JSONError(offset: 0, message: "unexpected end of JSON")
        }
        guard bytes.count < Int(Int32.max) else {
            buffer.count = 0
            return JSONError(offset: 0, message: "JSON text too large")
        }
        var p = Parser(b: bytes, limits: limits, buffer: buffer)
        defer { buffer.count = p.count }
        do {
            p.skipWS()
            try p.value(depth: 0)
            p.skipWS()
            if p.i != bytes.count { throw JSONError(offset: p.i, message: "unexpected data after the JSON value") }
            return nil
        } catch let e as JSONError {
            return e
        } catch {
            return JSONError(offset: 0, message: "\(error)")
        }
    }

    /// Parses `bytes` into `tokens` (replaced). Returns nil on success.
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, into tokens: inout [JSONToken],
        limits: JSONLimits = JSONLimits()
    ) -> JSONError? {
        let buffer = JSONTokenBuffer()
        let e = parse(bytes, into: buffer, limits: limits)
        tokens = buffer.array
        return e
    }

    /// Decodes the contents of a JSON string (the bytes between the quotes, escapes included).
    public static func decodeString(_ raw: UnsafeRawBufferPointer) -> String {
        raw.contains(0x5C) ? unescape(raw) : String(decoding: raw, as: UTF8.self)
    }

    /// True when `bytes` is one valid JSON text.
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var tokens: [JSONToken] = []
        return parse(bytes, into: &tokens) == nil
    }

    /// Writes tokens straight into the buffer's memory: no reference counting per token (the
    /// buffer is only touched to grow, and gets its count back when the parse ends).
    ///
    /// The input is read through a plain pointer and its length (an optional base address
    /// cost a nil test at every byte read), and offsets become the tokens' Int32s unchecked
    /// (`parse` refuses an input whose offsets would not fit).
    struct Parser {
        let b: UnsafePointer<UInt8>
        let n: Int
        let limits: JSONLimits
        let buffer: Unmanaged<JSONTokenBuffer>
        var base: UnsafeMutablePointer<JSONToken>
        var capacity: Int
        var count = 0
        var i = 0

        init(b: UnsafeRawBufferPointer, limits: JSONLimits, buffer: JSONTokenBuffer) {
            self.b = b.baseAddress!.assumingMemoryBound(to: UInt8.self)
            n = b.count
            self.limits = limits
            self.buffer = Unmanaged.passUnretained(buffer)
            base = buffer.base
            capacity = buffer.capacity
        }

        /// A token for `start..<end` (offsets that fit, see `parse`), its successor the next one.
        @inline(__always)
        func token(_ kind: JSONToken.Kind, start: Int, end: Int, escaped: Bool = false) -> JSONToken {
            JSONToken(
                kind: kind, start: Int32(truncatingIfNeeded: start), end: Int32(truncatingIfNeeded: end),
                next: Int32(truncatingIfNeeded: count &+ 1), count: 0, escaped: escaped)
        }

        @inline(__always)
        mutating func append(_ token: JSONToken) {
            if count == capacity { grow() }
            base[count] = token
            count += 1
        }

        @inline(never)
        mutating func grow() {
            let n = count
            buffer._withUnsafeGuaranteedRef { t in
                t.count = n
                t.grow()
                base = t.base
                capacity = t.capacity
            }
        }

        @inline(__always)
        mutating func skipWS() {
            while i < n {
                let c = b[i]
                if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { i += 1 } else { break }
            }
        }

        func fail(_ m: String) -> JSONError { JSONError(offset: i, message: m) }

        mutating func value(depth: Int) throws {
            guard i < n else { throw fail("unexpected end of JSON") }
            if count >= limits.maxTokens { throw fail("too many JSON values") }
            switch b[i] {
            case UInt8(ascii: "{"): try object(depth: depth + 1)
            case UInt8(ascii: "["): try array(depth: depth + 1)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true", .true)
            case UInt8(ascii: "f"): try literal("false", .false)
            case UInt8(ascii: "n"): try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString, _ kind: JSONToken.Kind) throws {
            let w = word.utf8CodeUnitCount
            guard i + w <= n, UnsafeRawBufferPointer(start: b + i, count: w).equals(word) else { throw fail("invalid literal") }
            append(token(kind, start: i, end: i + w))
            i += w
        }

        mutating func number() throws {
            let s = i
            if b[i] == UInt8(ascii: "-") { i += 1 }
            guard i < n else { throw fail("invalid number") }
            if b[i] == UInt8(ascii: "0") {
                i += 1
            } else if b[i] >= UInt8(ascii: "1") && b[i] <= UInt8(ascii: "9") {
                while i < n && b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
            } else {
                throw fail("invalid number")
            }
            if i < n && b[i] == UInt8(ascii: ".") {
                i += 1
                let f = i
                while i < n && b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
                if i == f { throw fail("invalid number: digits expected after '.'") }
            }
            if i < n && (b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E")) {
                i += 1
                if i < n && (b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-")) { i += 1 }
                let e = i
                while i < n && b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
                if i == e { throw fail("invalid number: digits expected in exponent") }
            }
            append(token(.number, start: s, end: i))
        }

        @inline(__always)
        mutating func string() throws {
            i += 1
            let s = i
            var escaped = false
            while true {
                // Fast path: 8 bytes at a time while none is '"', '\\', a control byte or non-ASCII
                // (in locals: the parser's `i` lives in memory, and storing it every word cost
                // a third of the loop).
                do {
                    let base = UnsafeRawPointer(b)
                    var j = i
                    let last = n &- 8
                    while j <= last {
                        let w = (base + j).loadUnaligned(as: UInt64.self)
                        let ones: UInt64 = 0x0101_0101_0101_0101
                        let highs: UInt64 = 0x8080_8080_8080_8080
                        let q = w ^ 0x2222_2222_2222_2222
                        let bs = w ^ 0x5C5C_5C5C_5C5C_5C5C
                        let special = ((q &- ones) & ~q) | ((bs &- ones) & ~bs) | (w &- 0x2020_2020_2020_2020) | w
                        let hit = special & highs
                        // The lowest flagged byte is always a real one (borrows only flag bytes
                        // above it): go straight to it.
                        if hit != 0 {
                            j &+= hit.trailingZeroBitCount &>> 3
                            break
                        }
                        j &+= 8
                    }
                    i = j
                }
                while i < n {
                    let c = b[i]
                    if c == 0x22 || c == 0x5C || c < 0x20 || c >= 0x80 { break }
                    i += 1
                }
                guard i < n else { throw fail("unterminated string") }
                let c = b[i]
                if c == 0x22 { break }
                if c < 0x20 { throw fail("control character in string") }
                if c == 0x5C {
                    escaped = true
                    i += 1
                    guard i < n else { throw fail("unterminated escape") }
                    switch b[i] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        i += 1
                    case UInt8(ascii: "u"):
                        guard i + 4 < n else { throw fail("incomplete \\u escape") }
                        for k in 1...4 where hex(b[i + k]) == nil { throw fail("invalid \\u escape") }
                        i += 5
                    default:
                        throw fail("invalid escape")
                    }
                    continue
                }
                try utf8Sequence()
            }
            append(token(.string, start: s, end: i, escaped: escaped))
            i += 1
        }

        /// Validates one multi-byte UTF-8 sequence at `i` (no overlongs, surrogates or > U+10FFFF).
        mutating func utf8Sequence() throws {
            let c = b[i]
            var need = 0
            var lo: UInt8 = 0x80
            var hi: UInt8 = 0xBF
            switch c {
            case 0xC2...0xDF: need = 1
            case 0xE0:
                need = 2
                lo = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: need = 2
            case 0xED:
                need = 2
                hi = 0x9F
            case 0xF0:
                need = 3
                lo = 0x90
            case 0xF1...0xF3: need = 3
            case 0xF4:
                need = 3
                hi = 0x8F
            default: throw fail("invalid UTF-8")
            }
            guard i + need < n else { throw fail("truncated UTF-8") }
            let first = b[i + 1]
            guard first >= lo && first <= hi else { throw fail("invalid UTF-8") }
            if need > 1 {
                for k in 2...need where b[i + k] & 0xC0 != 0x80 { throw fail("invalid UTF-8") }
            }
            i += need + 1
        }

        mutating func object(depth: Int) throws {
            if depth > limits.maxDepth { throw fail("JSON nested too deeply") }
            let me = count
            append(token(.object, start: i, end: 0))
            i += 1
            skipWS()
            var members: Int32 = 0
            if i < n && b[i] == UInt8(ascii: "}") {
                i += 1
            } else {
                while true {
                    guard i < n, b[i] == UInt8(ascii: "\"") else { throw fail("object key expected") }
                    try string()
                    skipWS()
                    guard i < n, b[i] == UInt8(ascii: ":") else { throw fail("':' expected") }
                    i += 1
                    skipWS()
                    try value(depth: depth)
                    members &+= 1
                    skipWS()
                    guard i < n else { throw fail("unterminated object") }
                    if b[i] == UInt8(ascii: ",") {
                        i += 1
                        skipWS()
                        continue
                    }
                    if b[i] == UInt8(ascii: "}") {
                        i += 1
                        break
                    }
                    throw fail("',' or '}' expected")
                }
            }
            base[me].end = Int32(truncatingIfNeeded: i)
            base[me].next = Int32(truncatingIfNeeded: count)
            base[me].count = members
        }

        mutating func array(depth: Int) throws {
            if depth > limits.maxDepth { throw fail("JSON nested too deeply") }
            let me = count
            append(token(.array, start: i, end: 0))
            i += 1
            skipWS()
            var members: Int32 = 0
            if i < n && b[i] == UInt8(ascii: "]") {
                i += 1
            } else {
                while true {
                    try value(depth: depth)
                    members &+= 1
                    skipWS()
                    guard i < n else { throw fail("unterminated array") }
                    if b[i] == UInt8(ascii: ",") {
                        i += 1
                        skipWS()
                        continue
                    }
                    if b[i] == UInt8(ascii: "]") {
                        i += 1
                        break
                    }
                    throw fail("',' or ']' expected")
                }
            }
            base[me].end = Int32(truncatingIfNeeded: i)
            base[me].next = Int32(truncatingIfNeeded: count)
            base[me].count = members
        }
    }

    @inline(__always)
    static func hex(_ c: UInt8) -> UInt32? {
        switch c {
        case 0x30...0x39: UInt32(c - 0x30)
        case 0x41...0x46: UInt32(c - 0x41 + 10)
        case 0x61...0x66: UInt32(c - 0x61 + 10)
        default: nil
        }
    }

    /// Decodes the escapes of a validated string's raw bytes (lone surrogates become U+FFFD).
    static func unescape(_ r: UnsafeRawBufferPointer) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(r.count)
        var i = 0
        func appendScalar(_ v: UInt32) {
            let s = Unicode.Scalar(v) ?? "\u{FFFD}"
            out.append(contentsOf: Array(String(s).utf8))
        }
        while i < r.count {
            let c = r[i]
            guard c == 0x5C else {
                out.append(c)
                i += 1
                continue
            }
            let e = r[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var v: UInt32 = 0
                for k in 0..<4 { v = v << 4 | (hex(r[i + k]) ?? 0) }
                i += 4
                if v >= 0xD800 && v < 0xDC00, i + 5 < r.count, r[i] == 0x5C, r[i + 1] == UInt8(ascii: "u") {
                    var lo: UInt32 = 0
                    for k in 0..<4 { lo = lo << 4 | (hex(r[i + 2 + k]) ?? 0) }
                    if lo >= 0xDC00 && lo < 0xE000 {
                        i += 6
                        appendScalar(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00))
                        continue
                    }
                }
                appendScalar(v)
            default: out.append(e)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension UnsafeRawBufferPointer {
    @inlinable @inline(__always)
    func equals(_ literal: StaticString) -> Bool {
        guard count == literal.utf8CodeUnitCount else { return false }
        if count == 0 { return true }
        return sameBytes(baseAddress!, UnsafeRawPointer(literal.utf8Start), count)
    }
}

/// JSON text helpers for writing responses without Foundation.
public enum JSONWriter {
    /// `s` as a JSON string literal.
    public static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}
