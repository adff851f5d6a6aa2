/// Builds one JSON object, member by member, in the order they are added: the admin API's
/// answers are written with it instead of concatenated by hand, so every string is quoted and
/// every separator is right.
///
/// ```swift
/// var object = JSONObjectWriter()
/// object.add("teamId", team)
/// object.add("topics", strings: topics)       // ["a","b"]
/// object.add("journal", json: journal?.json)  // a nested object, or null
/// let text = object.text                      // {"teamId":"ABCDE12345","topics":[...],"journal":null}
/// ```
public struct JSONObjectWriter {
    private var body = ""

    public init() {}

    private mutating func key(_ name: String) {
        body += body.isEmpty ? "" : ","
        body += JSONWriter.quote(name) + ":"
    }

    /// A string member; nil writes `null`.
    public mutating func add(_ name: String, _ value: String?) {
        key(name)
        body += value.map(JSONWriter.quote) ?? "null"
    }

    /// A number member; nil writes `null`.
    public mutating func add<Number: BinaryInteger>(_ name: String, _ value: Number?) {
        key(name)
        body += value.map { String($0) } ?? "null"
    }

    public mutating func add(_ name: String, _ value: Bool) {
        key(name)
        body += value ? "true" : "false"
    }

    /// An array of strings.
    public mutating func add(_ name: String, strings: [String]) {
        key(name)
        body += "[" + strings.map(JSONWriter.quote).joined(separator: ",") + "]"
    }

    /// A member whose value is JSON already (an object or array another writer or type made);
    /// nil writes `null`.
    public mutating func add(_ name: String, json: String?) {
        key(name)
        body += json ?? "null"
    }

    /// An array of values that are JSON already.
    public mutating func add(_ name: String, jsonArray: [String]) {
        key(name)
        body += "[" + jsonArray.joined(separator: ",") + "]"
    }

    /// The object.
    public var text: String { "{" + body + "}" }

    /// `{"name":[...]}`: the admin API's list shape.
    public static func list(_ name: String, _ elements: [String]) -> String {
        var object = JSONObjectWriter()
        object.add(name, jsonArray: elements)
        return object.text
    }
}
