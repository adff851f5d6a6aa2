/// A JSON object read by the fields its reader asks for: each field is declared once, at the
/// place it is read, with its type (and range), and every problem is reported in one format,
/// naming the field by its path from the body:
///
/// - a field of the wrong type: `behavior.openRate must be a number from 0 to 1`;
/// - a required field that is missing: `platform is required`;
/// - a field nobody asked for: `unknown field behavior.opnRate (did you mean behavior.openRate?)`.
///
/// For the admin API's and the configuration's bodies (a few per second at most); the push
/// path's parsers (the APNs payload, the FCM message) keep their own, faster, readers.
public struct JSONObjectReader {
    /// A body that cannot be read as asked, with the message to answer.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public let view: JSONView
    public let index: Int
    /// The object's path from the body, with a trailing dot ("" for the body itself).
    public let path: String
    /// The members, by name (the last of a repeated name wins, as JSON parsers commonly do).
    private var members: [(name: String, value: Int)] = []
    private var read = Set<String>()

    /// The object at token `index` of `view`; `what` names it when it is not an object.
    public init(_ view: JSONView, _ index: Int, path: String = "", what: String? = nil) throws(Failure) {
        guard view.tokens[index].kind == .object else {
            throw Failure(what ?? (path.isEmpty ? "the body must be a JSON object" : "\(path.dropLast()) must be an object"))
        }
        self.view = view
        self.index = index
        self.path = path
        var list: [(String, Int)] = []
        view.forEachMember(index) { k, v in list.append((view.string(k), v)) }
        members = list
    }

    /// Parses `bytes` and reads the object with `body`, then `finish()`es it. `example` is
    /// added to the message when the bytes are not a JSON object.
    /// `path` ("tracking.") names a nested object given as its own text.
    public static func read<T>(
        _ bytes: [UInt8], path: String = "", example: String? = nil, limits: JSONLimits = JSONLimits(),
        _ body: (inout JSONObjectReader) throws -> T
    ) throws -> T {
        try bytes.withUnsafeBytes { raw throws -> T in
            var tokens: [JSONToken] = []
            let whole = path.isEmpty ? "the body" : String(path.dropLast())
            let notObject = Failure("\(whole) must be a JSON object" + (example.map { " such as \($0)" } ?? ""))
            guard JSONParser.parse(raw, into: &tokens, limits: limits) == nil, tokens.first?.kind == .object else { throw notObject }
            var reader = try JSONObjectReader(JSONView(bytes: raw, tokens: tokens), 0, path: path)
            let out = try body(&reader)
            try reader.finish()
            return out
        }
    }

    /// The token of member `name`, marked as read (nil when absent).
    public mutating func value(_ name: String) -> Int? {
        read.insert(name)
        return members.last { $0.name == name }?.value
    }

    /// Whether the object has member `name` (without reading it).
    public func has(_ name: String) -> Bool { members.contains { $0.name == name } }

    public mutating func string(_ name: String, required: Bool = false) throws(Failure) -> String? {
        guard let i = try present(name, required) else { return nil }
        guard view.tokens[i].kind == .string else { throw mistyped(name, "a string") }
        return view.string(i)
    }

    public mutating func bool(_ name: String, required: Bool = false) throws(Failure) -> Bool? {
        guard let i = try present(name, required) else { return nil }
        switch view.tokens[i].kind {
        case .true: return true
        case .false: return false
        default: throw mistyped(name, "true or false")
        }
    }

    /// An integer in `range` (a number written with a fraction or exponent is not one).
    public mutating func int(_ name: String, in range: ClosedRange<Int>, required: Bool = false) throws(Failure) -> Int? {
        guard let i = try present(name, required) else { return nil }
        guard let n = view.integer(i), range.contains(n) else {
            throw mistyped(name, "an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    /// A finite number in `range`.
    public mutating func double(_ name: String, in range: ClosedRange<Double>, required: Bool = false) throws(Failure) -> Double? {
        guard let i = try present(name, required) else { return nil }
        guard let d = view.number(i), d.isFinite, range.contains(d) else {
            throw mistyped(name, "a number from \(JSONObjectReader.text(range.lowerBound)) to \(JSONObjectReader.text(range.upperBound))")
        }
        return d
    }

    /// An array of strings.
    public mutating func strings(_ name: String, required: Bool = false) throws(Failure) -> [String]? {
        guard let i = try present(name, required) else { return nil }
        guard view.tokens[i].kind == .array else { throw mistyped(name, "an array of strings") }
        var out: [String] = []
        var bad = false
        view.forEachElement(i) { e in
            if view.tokens[e].kind == .string { out.append(view.string(e)) } else { bad = true }
        }
        if bad { throw mistyped(name, "an array of strings") }
        return out
    }

    /// An object of string values (`{"name": "value", ...}`), in the order written.
    public mutating func stringPairs(_ name: String) throws(Failure) -> [(String, String)]? {
        guard let i = try present(name, false) else { return nil }
        guard view.tokens[i].kind == .object else { throw mistyped(name, "an object of strings") }
        var out: [(String, String)] = []
        var bad = false
        view.forEachMember(i) { k, v in
            if view.tokens[v].kind == .string { out.append((view.string(k), view.string(v))) } else { bad = true }
        }
        if bad { throw mistyped(name, "an object of strings") }
        return out
    }

    /// The nested object `name`, read with its own reader (whose paths continue this one's).
    public mutating func object(_ name: String, required: Bool = false) throws(Failure) -> JSONObjectReader? {
        guard let i = try present(name, required) else { return nil }
        return try JSONObjectReader(view, i, path: path + name + ".")
    }

    /// The members nobody read yet, for an object whose other keys are free (a preset's
    /// options): each is then counted as read.
    public mutating func remaining() -> [(name: String, value: Int)] {
        let rest = members.filter { !read.contains($0.name) }
        for m in rest { read.insert(m.name) }
        return rest
    }

    /// Fails on the first member nobody read, naming the nearest field that was.
    public func finish() throws(Failure) {
        guard let unknown = members.first(where: { !read.contains($0.name) }) else { return }
        let hint = NearestName.suggest(unknown.name, in: read.sorted()).map { " (did you mean \(path)\($0)?)" } ?? ""
        throw Failure("unknown field \(path)\(unknown.name)\(hint)")
    }

    /// A failure for `name` in this object: `<path><name> <message>`.
    public func failure(_ name: String, _ message: String) -> Failure { Failure("\(path)\(name) \(message)") }

    private mutating func present(_ name: String, _ required: Bool) throws(Failure) -> Int? {
        guard let i = value(name) else {
            if required { throw Failure("\(path)\(name) is required") }
            return nil
        }
        return i
    }

    private func mistyped(_ name: String, _ what: String) -> Failure { Failure("\(path)\(name) must be \(what)") }

    private static func text(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d) }
}
