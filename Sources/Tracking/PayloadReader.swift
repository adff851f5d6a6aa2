import Glibc
import PushCore
import Transport

/// Reads values out of a notification's JSON (an APNs payload or an FCM message) by dotted path.
/// A path that reaches a JSON *string* and goes on parses that string as JSON, so values nested
/// the way SDK payloads nest them (OneSignal's `custom`, MoEngage's `moe_cid_attr`) are reachable:
/// `data.custom.i`. The document is tokenized once, however many values are read.
public struct PayloadReader: @unchecked Sendable { // the token buffer is never written after init
    public let bytes: [UInt8]
    private let tokens: JSONTokenBuffer
    private let valid: Bool

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        let t = JSONTokenBuffer(capacity: 32)
        valid = bytes.withUnsafeBytes { JSONParser.parse($0, into: t) == nil } && t.tokens.count > 0
        tokens = t
    }

    /// A reader over one value of a document a gateway tokenized (the payload in its request's
    /// body): its tokens copied and rebased, not parsed again. Nil when `parsed.bytes` is not one
    /// object or array of the document.
    public init?(_ parsed: ParsedJSON) {
        guard let root = parsed.root else { return nil }
        let origin = parsed.bytes.startIndex
        bytes = Array(parsed.bytes)
        tokens = parsed.tokens.copy(subtree: root, origin: origin)
        valid = true
    }

    /// A reader over a document already tokenized by a provider (`parsed` holds the tokens of
    /// `bytes`, as `JSONParser.parse` left them): the tokens are copied, not parsed again.
    public init(_ bytes: [UInt8], parsed: JSONTokenBuffer) {
        self.bytes = bytes
        tokens = parsed.copy()
        valid = tokens.tokens.count > 0
    }

    /// A scalar as text (strings decoded, numbers and booleans as written), an object or array
    /// as its JSON text; nil when absent or null.
    public func value(_ path: String) -> String? {
        guard valid else { return nil }
        var path = path
        return path.withUTF8 { p in
            bytes.withUnsafeBytes { raw in PayloadReader.lookup(JSONView(bytes: raw, buffer: tokens), UnsafeRawBufferPointer(p)) }
        }
    }

    public func has(_ path: String) -> Bool { value(path) != nil }

    /// `value`, for a path relative to the object at token `object` (from `objectIndex`): an SDK
    /// reading many keys of `data` finds `data` once.
    public func value(_ path: String, in object: Int) -> String? {
        guard valid, object >= 0, object < tokens.tokens.count else { return nil }
        var path = path
        return path.withUTF8 { p in
            bytes.withUnsafeBytes { raw in
                PayloadReader.lookup(JSONView(bytes: raw, buffer: tokens), UnsafeRawBufferPointer(p), from: object)
            }
        }
    }

    /// The values of `keys` among the members of the object at token `object`, as `value` gives
    /// them, in one pass over its members (an SDK reading ten keys of `data` walks it once).
    public func values(of keys: [String], in object: Int) -> [String?] {
        var out = [String?](repeating: nil, count: keys.count)
        guard valid, object >= 0, object < tokens.tokens.count else { return out }
        bytes.withUnsafeBytes { raw in
            let v = JSONView(bytes: raw, buffer: tokens)
            guard v.tokens[object].kind == .object else { return }
            v.forEachMember(object) { k, val in
                let name = v.raw(k)
                let escaped = v.tokens[k].escaped
                for n in keys.indices where out[n] == nil {
                    // Lengths first (a member's name against every key the SDK reads: most differ
                    // there); an escaped name is decoded and compared whole.
                    let key = keys[n]
                    if !escaped && key.utf8.count != name.count { continue }
                    let same =
                        escaped
                        ? v.string(k).utf8.elementsEqual(key.utf8)
                        : key.utf8.withContiguousStorageIfAvailable { u in
                            u.isEmpty || sameBytes(name.baseAddress!, u.baseAddress!, u.count)
                        } ?? key.utf8.elementsEqual(name)
                    if same { out[n] = PayloadReader.text(v, val) }
                }
            }
        }
        return out
    }

    /// The token index of the object at `path` (dot-separated object keys), or nil.
    public func objectIndex(_ path: String) -> Int? {
        guard valid else { return nil }
        return bytes.withUnsafeBytes { raw -> Int? in
            let v = JSONView(bytes: raw, buffer: tokens)
            var i = 0
            for key in path.split(separator: ".", omittingEmptySubsequences: false) {
                guard v.tokens[i].kind == .object else { return nil }
                var found: Int?
                v.forEachMember(i) { k, val in if found == nil && v.string(k) == key { found = val } }
                guard let f = found else { return nil }
                i = f
            }
            return v.tokens[i].kind == .object ? i : nil
        }
    }

    /// Whether the bytes are one JSON document, and whether that is an object.
    public var isJSON: Bool { valid }
    public var isObject: Bool { valid && tokens.tokens[0].kind == .object }

    /// Walks `path` (dot-separated, empty segments kept, as `split(omittingEmptySubsequences:
    /// false)` would give them) over the bytes: no segment array, no `String` per key.
    static func lookup(_ v: JSONView, _ path: UnsafeRawBufferPointer, from root: Int = 0, reusing: String? = nil) -> String? {
        var i = root
        var start = 0
        while start <= path.count {
            var end = start
            while end < path.count && path[end] != UInt8(ascii: ".") { end += 1 }
            let key = UnsafeRawBufferPointer(rebasing: path[start..<end])
            switch v.tokens[i].kind {
            case .object:
                guard let f = member(v, i, key) else { return nil }
                i = f
            case .array:
                guard let n = Int(String(decoding: key, as: UTF8.self)), n >= 0 else { return nil }
                var idx = 0
                var found: Int?
                v.forEachElement(i) { e in
                    if idx == n { found = e }
                    idx += 1
                }
                guard let f = found else { return nil }
                i = f
            case .string:
                // A JSON document inside a string: parse it and go on.
                return PayloadReader(Array(v.string(i).utf8)).value(String(decoding: path[start...], as: UTF8.self))
            default:
                return nil
            }
            start = end + 1
        }
        return text(v, i, reusing: reusing)
    }

    /// The value of the first member of the object at `object` named `key` (an escaped name
    /// decoded and compared whole), or nil.
    static func member(_ v: JSONView, _ object: Int, _ key: UnsafeRawBufferPointer) -> Int? {
        var found: Int?
        v.forEachMember(object) { k, val in
            guard found == nil else { return }
            if v.tokens[k].escaped {
                if v.string(k) == String(decoding: key, as: UTF8.self) { found = val }
            } else {
                let r = v.raw(k)
                if sameBytes(r, key) { found = val }
            }
        }
        return found
    }

    /// `member` for a literal name.
    static func member(_ v: JSONView, _ object: Int, _ key: StaticString) -> Int? {
        member(v, object, UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
    }

    /// A value as `value` gives it: a string decoded, nil for null, anything else as written.
    /// `reusing`, when it is that text already (the same bytes, nothing to decode), is returned
    /// instead of a new String.
    static func text(_ v: JSONView, _ i: Int, reusing: String? = nil) -> String? {
        let t = v.tokens[i]
        if t.kind == .null { return nil }
        if let reusing, !(t.kind == .string && t.escaped) {
            let raw = v.raw(i)
            if reusing.utf8.withContiguousStorageIfAvailable({ sameBytes(UnsafeRawBufferPointer($0), raw) }) == true { return reusing }
        }
        return t.kind == .string ? v.string(i) : String(decoding: v.raw(i), as: UTF8.self)
    }
}
