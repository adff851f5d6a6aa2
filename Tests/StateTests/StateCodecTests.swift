import PushCore
import XCTest

@testable import State

final class StateCodecTests: XCTestCase {
    func testFieldsRoundTripWithEveryWireType() throws {
        var w = StateWriter()
        w.uint(1, 0)
        w.uint(2, UInt64.max)
        w.int(3, -1)
        w.int(4, Int64.min)
        w.int(5, Int64.max)
        w.bool(6, true)
        w.double(7, -2.5e-9)
        w.string(8, "héllo \u{0}")
        w.bytes(9, [0, 255, 7])
        w.message(10) { m in
            m.string(1, "inner")
            m.message(2) { $0.uint(1, 42) }
        }
        w.uint(200_000, 9)
        let bytes = w.bytes
        try bytes.withUnsafeBytes { raw in
            var r = StateReader(raw)
            var seen: [Int] = []
            while let f = try r.next() {
                seen.append(f)
                switch f {
                case 1: XCTAssertEqual(try r.uint(), 0)
                case 2: XCTAssertEqual(try r.uint(), UInt64.max)
                case 3: XCTAssertEqual(try r.int(), -1)
                case 4: XCTAssertEqual(try r.int(), Int64.min)
                case 5: XCTAssertEqual(try r.int(), Int64.max)
                case 6: XCTAssertTrue(try r.bool())
                case 7: XCTAssertEqual(try r.double(), -2.5e-9)
                case 8: XCTAssertEqual(try r.string(), "héllo \u{0}")
                case 9: XCTAssertEqual(try r.bytes(), [0, 255, 7])
                case 10:
                    var m = try r.message()
                    XCTAssertEqual(try m.next(), 1)
                    XCTAssertEqual(try m.string(), "inner")
                    XCTAssertEqual(try m.next(), 2)
                    var n = try m.message()
                    XCTAssertEqual(try n.next(), 1)
                    XCTAssertEqual(try n.uint(), 42)
                    XCTAssertNil(try n.next())
                    XCTAssertNil(try m.next())
                default: try r.skip()
                }
            }
            XCTAssertEqual(seen, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200_000])
        }
    }

    /// Every truncation of a valid record is refused with an error, never a crash or a read past
    /// the end; so are wrong wire types.
    func testTruncatedAndMistypedInputIsRefused() throws {
        var w = StateWriter()
        w.string(1, "a string long enough")
        w.message(2) { $0.uint(1, 1 << 40) }
        w.double(3, 1)
        let full = w.bytes
        // The first field is 22 bytes: every cut inside it fails; no cut anywhere reads past the end.
        for n in 1..<full.count {
            let cut = Array(full.prefix(n))
            var failed = false
            cut.withUnsafeBytes { raw in
                var r = StateReader(raw)
                do {
                    while let f = try r.next() {
                        switch f {
                        case 1: _ = try r.string()
                        case 2:
                            var m = try r.message()
                            while try m.next() != nil { _ = try m.uint() }
                        case 3: _ = try r.double()
                        default: try r.skip()
                        }
                    }
                } catch { failed = true }
            }
            if n < 22 { XCTAssertTrue(failed, "a record cut at byte \(n) was read") }
        }
        try full.withUnsafeBytes { raw in
            var r = StateReader(raw)
            _ = try r.next()
            XCTAssertThrowsError(try r.uint(), "a string read as a number")
        }
        // A varint of more than ten bytes.
        let long = [UInt8](repeating: 0xFF, count: 12) + [0x01]
        try long.withUnsafeBytes { raw in
            var r = StateReader(raw)
            XCTAssertThrowsError(try r.next())
        }
        // A length past the end.
        try [UInt8]([0x0A, 0x7F, 0x41]).withUnsafeBytes { raw in
            var r = StateReader(raw)
            XCTAssertEqual(try? r.next(), 1)
            XCTAssertThrowsError(try r.string())
        }
    }

    static let fields: [FieldSchema] = [
        FieldSchema(1, "name", .string), FieldSchema(2, "count", .uint), FieldSchema(3, "delta", .int),
        FieldSchema(4, "on", .bool), FieldSchema(5, "ratio", .double), FieldSchema(6, "blob", .bytes),
        FieldSchema(7, "config", .json), FieldSchema(8, "state", .enumeration(["active", "ended"])),
        FieldSchema(9, "tags", .string, repeated: true),
        FieldSchema(10, "child", .message([FieldSchema(1, "x", .int), FieldSchema(2, "y", .string)]), repeated: true),
    ]

    /// Binary -> JSON -> binary -> JSON gives the same text (the export's byte-identical round
    /// trip), with numbers kept exactly (a seed of 2^64-1).
    func testJSONFormRoundTripsExactly() throws {
        var w = StateWriter()
        w.string(1, "quote \" and \\ and \n")
        w.uint(2, UInt64.max)
        w.int(3, Int64.min)
        w.bool(4, false)
        w.double(5, 0.1)
        w.bytes(6, [1, 2, 3, 250])
        w.bytes(7, Array(#"{"preset":"webhook","n":[1,2,{"a":null}]}"#.utf8))
        w.uint(8, 1)
        w.string(9, "a")
        w.string(9, "b")
        w.message(10) { m in
            m.int(1, -7)
            m.string(2, "y")
        }
        let text = try RecordJSON.members(w.bytes, StateCodecTests.fields)
        XCTAssertEqual(
            text,
            #""name":"quote \" and \\ and \n","count":18446744073709551615,"delta":-9223372036854775808,"on":false,"ratio":0.1,"blob":"AQID-g","config":{"preset":"webhook","n":[1,2,{"a":null}]},"state":"ended","tags":["a","b"],"child":[{"x":-7,"y":"y"}]"#
        )
        let again = try parse("{" + text + "}")
        XCTAssertEqual(try RecordJSON.members(again, StateCodecTests.fields), text)
    }

    func testJSONFormRefusesWhatTheSchemaDoesNot() {
        for (json, message) in [
            (#"{"nope":1}"#, "unknown field nope"),
            (#"{"count":-1}"#, "count must be a non-negative integer"),
            (#"{"count":1.5}"#, "count must be a non-negative integer"),
            (#"{"count":18446744073709551616}"#, "count must be a non-negative integer"),
            (#"{"name":3}"#, "name must be a string"),
            (#"{"state":"gone"}"#, "state must be one of active, ended"),
            (#"{"tags":"a"}"#, "tags must be an array"),
            (#"{"child":[{"x":"1"}]}"#, "child.x must be an integer"),
            (#"{"blob":"***"}"#, "blob must be base64url text"),
        ] {
            XCTAssertThrowsError(try parse(json), json) { XCTAssertEqual("\($0)", message, json) }
        }
        // null is an absent field.
        XCTAssertEqual(try? parse(#"{"name":null}"#), [])
    }

    private func parse(_ json: String) throws -> [UInt8] {
        let bytes = Array(json.utf8)
        return try bytes.withUnsafeBytes { raw in
            var tokens: [JSONToken] = []
            XCTAssertNil(JSONParser.parse(raw, into: &tokens))
            var w = StateWriter()
            try RecordJSON.write(JSONView(bytes: raw, tokens: tokens), object: 0, StateCodecTests.fields, into: &w)
            return w.bytes
        }
    }
}
