import PushCore
import Runtime

/// How the commands that print an admin API answer show it: readable by default (a table for a
/// list, one `name  value` line per field for one object), the answer itself with `--json`.
enum ReadableOutput {
    /// A JSON value as the CLI shows it.
    indirect enum Value {
        case object([(String, Value)])
        case array([Value])
        case string(String)
        /// A number, `true`, `false`: its JSON text.
        case literal(String)
        case null

        subscript(path path: String) -> Value {
            var v = self
            for key in path.split(separator: ".") {
                guard case .object(let members) = v, let found = members.first(where: { $0.0 == key }) else { return .null }
                v = found.1
            }
            return v
        }

        var isNull: Bool {
            if case .null = self { return true }
            return false
        }

        /// Compact JSON (for a nested object in a cell).
        var json: String {
            switch self {
            case .object(let m): "{" + m.map { JSONWriter.quote($0.0) + ":" + $0.1.json }.joined(separator: ",") + "}"
            case .array(let a): "[" + a.map(\.json).joined(separator: ",") + "]"
            case .string(let s): JSONWriter.quote(s)
            case .literal(let s): s
            case .null: "null"
            }
        }

        /// A cell's text: strings bare, lists of scalars comma-separated, null empty.
        var text: String {
            switch self {
            case .string(let s): s
            case .literal(let s): s
            case .null: ""
            case .array(let a) where a.allSatisfy({ if case .object = $0 { false } else if case .array = $0 { false } else { true } }):
                a.map(\.text).joined(separator: ",")
            default: json
            }
        }
    }

    /// The answer parsed, or nil when it is not JSON.
    static func parse(_ text: String) -> Value? {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> Value? in
            let buffer = JSONTokenBuffer()
            var limits = JSONLimits()
            limits.maxTokens = 1 << 22
            guard JSONParser.parse(raw, into: buffer, limits: limits) == nil else { return nil }
            let view = JSONView(bytes: raw, tokens: buffer.array)
            return value(view, 0)
        }
    }

    static func value(_ v: JSONView, _ i: Int) -> Value {
        switch v.tokens[i].kind {
        case .object:
            var members: [(String, Value)] = []
            v.forEachMember(i) { k, val in members.append((v.string(k), value(v, val))) }
            return .object(members)
        case .array:
            var items: [Value] = []
            v.forEachElement(i) { items.append(value(v, $0)) }
            return .array(items)
        case .string: return .string(v.string(i))
        case .null: return .null
        default: return .literal(String(decoding: v.raw(i), as: UTF8.self))
        }
    }

    /// A column: its heading, the field it shows (a dotted path, or several tried in turn) and
    /// how: a time in milliseconds shown as UTC, or the text clipped at `width`.
    struct Column {
        let heading: String
        let paths: [String]
        var time = false
        var width = 60

        init(_ heading: String, _ paths: String..., time: Bool = false, width: Int = 60) {
            self.heading = heading
            self.paths = paths
            self.time = time
            self.width = width
        }

        func cell(_ row: Value) -> String {
            guard let found = paths.lazy.map({ row[path: $0] }).first(where: { !$0.isNull }) else { return "" }
            if time, case .literal(let ms) = found, let value = Int64(ms) { return Clock.iso8601(value) }
            let text = found.text.map { $0 == "\n" || $0 == "\t" ? " " : $0 }
            return text.count > width ? String(text.prefix(width - 1)) + "…" : String(text)
        }
    }

    /// Rows under their headings, columns padded to their widest cell.
    static func table(_ rows: [Value], _ columns: [Column]) -> String {
        let cells = rows.map { row in columns.map { $0.cell(row) } }
        var widths = columns.map(\.heading.count)
        for line in cells {
            for (i, c) in line.enumerated() { widths[i] = max(widths[i], c.count) }
        }
        func line(_ values: [String]) -> String {
            var s = ""
            for (i, v) in values.enumerated() {
                s += i == values.count - 1 ? v : v + String(repeating: " ", count: widths[i] - v.count + 2)
            }
            return s + "\n"
        }
        return line(columns.map(\.heading)) + cells.map(line).joined()
    }

    /// One object, a `name  value` line per field, nested objects flattened to dotted names.
    static func fields(_ value: Value) -> String {
        var lines: [(String, String)] = []
        func walk(_ prefix: String, _ v: Value) {
            if case .object(let members) = v, !members.isEmpty {
                for (k, m) in members { walk(prefix.isEmpty ? k : prefix + "." + k, m) }
                return
            }
            var text = v.text
            if prefix.hasSuffix("At") || prefix.hasSuffix("Date"), case .literal(let ms) = v, let n = Int64(ms),
                n > 946_684_800_000
            {
                text = Clock.iso8601(n)
            }
            lines.append((prefix, text))
        }
        walk("", value)
        let width = lines.map(\.0.count).max() ?? 0
        return lines.map { $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 + "\n" }.joined()
    }

    /// A list answer's `key` rows as a table, with how many there are and its `next` cursor.
    static func list(_ answer: Value, _ key: String, _ columns: [Column], noun: String) -> String {
        guard case .array(let rows) = answer[path: key] else { return fields(answer) }
        var out = rows.isEmpty ? "no \(noun)\n" : table(rows, columns)
        if case .string(let next) = answer[path: "next"] { out += "(more: --cursor \(next))\n" }
        return out
    }

    /// How a command's answer is shown.
    enum View {
        case fields, devices, notifications, fleets, faults, campaigns, activities
    }

    /// The answer as `view` shows it; an answer that is not JSON is printed as it is.
    static func render(_ answer: String, _ view: View) -> String {
        guard let value = parse(answer) else { return answer }
        switch view {
        case .fields: return fields(value)
        case .devices: return list(value, "devices", devices, noun: "devices")
        case .notifications: return list(value, "notifications", notifications, noun: "notifications match")
        case .fleets: return list(value, "fleets", fleets, noun: "fleets")
        case .faults: return list(value, "faults", faults, noun: "fault rules")
        case .activities: return list(value, "activities", activities, noun: "Live Activities")
        case .campaigns:
            guard case .array(var rows) = value[path: "campaigns"] else { return fields(value) }
            if rows.isEmpty { return "no campaigns\n" }
            // The totals as a last row.
            if case .object(var totals) = value[path: "totals"] {
                totals.removeAll { $0.0 == "campaign" }
                totals.insert(("campaign", .string("(all)")), at: 0)
                rows.append(.object(totals))
            }
            // Requests that carried no campaign id are a campaign of their own.
            rows = rows.map { row in
                guard case .object(var members) = row, let i = members.firstIndex(where: { $0.0 == "campaign" }), members[i].1.isNull
                else { return row }
                members[i].1 = .string("(no campaign id)")
                return .object(members)
            }
            return table(rows, campaigns)
        }
    }

    // MARK: each command's columns

    static let devices = [
        Column("TOKEN", "token", width: 200), Column("PLATFORM", "platform"), Column("APP", "app"),
        Column("STATE", "appState"), Column("PERMISSION", "permission"), Column("INSTALLED", "installed"),
        Column("FLEET", "fleet"), Column("LABELS", "labels", width: 30), Column("RECEIVED", "received"),
    ]
    static let notifications = [
        Column("ID", "id", width: 40), Column("RECEIVED", "receivedAt", time: true), Column("PROVIDER", "provider"),
        Column("TOKEN", "token", "payload.topic", "payload.condition", width: 200), Column("TOPIC", "topic"),
        Column("DISPLAY", "display.outcome"),
        Column("TITLE", "payload.aps.alert.title", "payload.aps.alert", "payload.notification.title", width: 40),
    ]
    static let fleets = [
        Column("ID", "id"), Column("PLATFORM", "platform"), Column("APP", "app"), Column("COUNT", "count"),
        Column("PROJECT", "project", "environment"), Column("SEED", "seed"), Column("LABELS", "labels", width: 30),
        Column("CREATED", "createdAt", time: true),
    ]
    static let faults = [
        Column("ID", "id"), Column("MATCH", "match", width: 50), Column("EFFECT", "effect", width: 50),
        Column("SEEN", "seen"), Column("FIRED", "fired"),
    ]
    static let campaigns = [
        Column("CAMPAIGN", "campaign", width: 40), Column("SENT", "sent"), Column("ACCEPTED", "accepted"),
        Column("REJECTED", "rejectedTotal"), Column("REASONS", "rejected", width: 50), Column("FIRST", "firstAt", time: true),
        Column("LAST", "lastAt", time: true),
    ]
    static let activities = [
        Column("ID", "id", width: 40), Column("TYPE", "attributesType"), Column("STATE", "state"),
        Column("CHANNEL", "channel"), Column("PUSH TOKEN", "pushToken", width: 200),
    ]
}
