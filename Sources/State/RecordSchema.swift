import PushCore
import Transport

/// What a field of a change record holds, for its JSON form (the binary form is the codec's).
public indirect enum FieldType: Sendable {
    case uint
    case int
    case bool
    case double
    case string
    /// Bytes, base64url in JSON.
    case bytes
    /// A string holding JSON text (a tracking configuration, a rule's match), written inline in
    /// JSON rather than quoted.
    case json
    /// A number written by name in JSON: the names in order, from 0.
    case enumeration([String])
    /// 16 bytes; in JSON the canonical lowercase UUID.
    case uuid
    case message([FieldSchema])
}

/// One numbered field of a record kind.
public struct FieldSchema: Sendable {
    public let number: Int
    public let name: String
    public let type: FieldType
    /// Written once per element (a JSON array); otherwise the last occurrence counts.
    public let repeated: Bool

    public init(_ number: Int, _ name: String, _ type: FieldType, repeated: Bool = false) {
        self.number = number
        self.name = name
        self.type = type
        self.repeated = repeated
    }
}

/// One kind of change record a store writes: its number in the store, its name in JSON, its
/// version and its fields. A record of a newer version than the store knows is refused.
public struct RecordSchema: Sendable {
    public let kind: Int
    public let name: String
    public let version: Int
    public let fields: [FieldSchema]

    public init(kind: Int, name: String, version: Int = 1, fields: [FieldSchema]) {
        self.kind = kind
        self.name = name
        self.version = version
        self.fields = fields
    }
}

/// The JSON form of record bodies, driven by their schemas: written in schema order, so the
/// same record always gives the same text (an export imported and exported again is the same
/// file), and read back into the same binary fields.
public enum RecordJSON {
    /// The body's fields as JSON members (without braces), in schema order.
    public static func members(_ body: [UInt8], _ fields: [FieldSchema]) throws -> String {
        try body.withUnsafeBytes { raw in
            var r = StateReader(raw)
            return try members(&r, fields)
        }
    }

    static func members(_ r: inout StateReader, _ fields: [FieldSchema]) throws -> String {
        // Where each field's values are, in order of appearance.
        var found: [Int: [(wire: Int, from: Int, to: Int)]] = [:]
        while let field = try r.next() {
            let from = r.at
            let wire = r.wire
            try r.skip()
            found[field, default: []].append((wire, from, r.at))
        }
        var out = ""
        for f in fields {
            guard let values = found[f.number], !values.isEmpty else { continue }
            if !out.isEmpty { out += "," }
            out += JSONWriter.quote(f.name) + ":"
            if f.repeated {
                out += "["
                for (i, v) in values.enumerated() {
                    if i > 0 { out += "," }
                    var sub = StateReader(r.base, from: v.from, to: v.to)
                    sub.wire = v.wire
                    out += try value(&sub, f)
                }
                out += "]"
            } else {
                let v = values[values.count - 1]
                var sub = StateReader(r.base, from: v.from, to: v.to)
                sub.wire = v.wire
                out += try value(&sub, f)
            }
        }
        return out
    }

    static func value(_ r: inout StateReader, _ f: FieldSchema) throws -> String {
        switch f.type {
        case .uint: return String(try r.uint())
        case .int: return String(try r.int())
        case .bool: return try r.bool() ? "true" : "false"
        case .double:
            let d = try r.double()
            guard d.isFinite else { throw StateFormatError("\(f.name) is not a finite number") }
            return d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .string: return JSONWriter.quote(try r.string())
        case .bytes: return "\"" + Base64URL.encode(try r.bytes()) + "\""
        case .json:
            let text = try r.rawBytes()
            guard !text.isEmpty, JSONParser.isValid(text) else { throw StateFormatError("\(f.name) does not hold JSON") }
            return String(decoding: text, as: UTF8.self)
        case .enumeration(let names):
            let n = try r.uint()
            return n < UInt64(names.count) ? JSONWriter.quote(names[Int(n)]) : String(n)
        case .uuid: return JSONWriter.quote(try r.uuid().description)
        case .message(let fields):
            var sub = try r.message()
            return "{" + (try members(&sub, fields)) + "}"
        }
    }

    /// Writes the members of the JSON object at token `object` (except those named in `skip`)
    /// as fields of `fields` into `w`. Unknown and mistyped members are errors naming them;
    /// `null` is an absent field.
    public static func write(
        _ v: JSONView, object: Int, _ fields: [FieldSchema], into w: inout StateWriter, skip: Set<String> = [], path: String = ""
    ) throws {
        var failure: StateFormatError?
        v.forEachMember(object) { k, val in
            guard failure == nil else { return }
            let name = v.string(k)
            if skip.contains(name) { return }
            guard let f = fields.first(where: { $0.name == name }) else {
                failure = StateFormatError("unknown field \(path)\(name)")
                return
            }
            if v.tokens[val].kind == .null { return }
            do {
                if f.repeated {
                    guard v.tokens[val].kind == .array else { throw StateFormatError("\(path)\(name) must be an array") }
                    var inner: StateFormatError?
                    v.forEachElement(val) { e in
                        guard inner == nil else { return }
                        do { try writeValue(v, e, f, into: &w, path: path) } catch let e as StateFormatError { inner = e } catch {}
                    }
                    if let inner { throw inner }
                } else {
                    try writeValue(v, val, f, into: &w, path: path)
                }
            } catch let e as StateFormatError {
                failure = e
            } catch {
                failure = StateFormatError("\(error)")
            }
        }
        if let failure { throw failure }
    }

    static func writeValue(_ v: JSONView, _ i: Int, _ f: FieldSchema, into w: inout StateWriter, path: String) throws {
        let kind = v.tokens[i].kind
        let name = path + f.name
        switch f.type {
        case .uint:
            guard kind == .number, let n = unsignedInteger(v.raw(i)) else {
                throw StateFormatError("\(name) must be a non-negative integer")
            }
            w.uint(f.number, n)
        case .int:
            guard kind == .number, let n = signedInteger(v.raw(i)) else { throw StateFormatError("\(name) must be an integer") }
            w.int(f.number, n)
        case .bool:
            guard kind == .true || kind == .false else { throw StateFormatError("\(name) must be true or false") }
            w.bool(f.number, kind == .true)
        case .double:
            guard kind == .number, let d = v.number(i), d.isFinite else { throw StateFormatError("\(name) must be a number") }
            w.double(f.number, d)
        case .string:
            guard kind == .string else { throw StateFormatError("\(name) must be a string") }
            w.string(f.number, v.string(i))
        case .bytes:
            guard kind == .string, let b = Base64URL.decode(Array(v.string(i).utf8)[...]) else {
                throw StateFormatError("\(name) must be base64url text")
            }
            w.bytes(f.number, b)
        case .json:
            w.bytes(f.number, v.raw(i))
        case .uuid:
            guard kind == .string, let id = UUIDValue.parseCanonicalLowercase(Array(v.string(i).utf8)) else {
                throw StateFormatError("\(name) must be a lowercase UUID")
            }
            w.uuid(f.number, id)
        case .enumeration(let names):
            guard kind == .string, let n = names.firstIndex(of: v.string(i)) else {
                throw StateFormatError("\(name) must be one of \(names.joined(separator: ", "))")
            }
            w.uint(f.number, UInt64(n))
        case .message(let fields):
            guard kind == .object else { throw StateFormatError("\(name) must be an object") }
            var failure: StateFormatError?
            w.message(f.number) { inner in
                do { try write(v, object: i, fields, into: &inner, path: name + ".") } catch let e as StateFormatError { failure = e } catch
                {}
            }
            if let failure { throw failure }
        }
    }

    /// A JSON number's text as an unsigned 64-bit integer (exact: no detour through a double).
    static func unsignedInteger(_ raw: UnsafeRawBufferPointer) -> UInt64? {
        guard !raw.isEmpty, raw.count <= 20 else { return nil }
        var n: UInt64 = 0
        for b in raw {
            guard b >= 0x30, b <= 0x39 else { return nil }
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(b - 0x30))
            guard !o1, !o2 else { return nil }
            n = s
        }
        return n
    }

    static func signedInteger(_ raw: UnsafeRawBufferPointer) -> Int64? {
        guard let first = raw.first else { return nil }
        if first == UInt8(ascii: "-") {
            guard let m = unsignedInteger(UnsafeRawBufferPointer(rebasing: raw.dropFirst())), m <= UInt64(Int64.max) + 1 else { return nil }
            return m == UInt64(Int64.max) + 1 ? Int64.min : -Int64(m)
        }
        guard let m = unsignedInteger(raw), m <= UInt64(Int64.max) else { return nil }
        return Int64(m)
    }
}
