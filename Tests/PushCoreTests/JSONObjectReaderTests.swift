import PushCore
import XCTest

/// The admin and configuration bodies' reader: each field read once with its type, and every
/// problem (mistyped, missing, unknown) reported in one format naming the field's path.
final class JSONObjectReaderTests: XCTestCase {
    struct Settings {
        var name: String
        var rate: Double?
        var count: Int?
        var enabled: Bool?
        var tags: [String]?
        var limit: Int?
    }

    func read(_ text: String) throws -> Settings {
        try JSONObjectReader.read(Array(text.utf8), example: #"{"name":"a"}"#) { r in
            var s = Settings(name: try r.string("name", required: true)!)
            s.rate = try r.double("rate", in: 0...1)
            s.count = try r.int("count", in: 1...10)
            s.enabled = try r.bool("enabled")
            s.tags = try r.strings("tags")
            if var nested = try r.object("limits") {
                s.limit = try nested.int("max", in: 0...100, required: true)
                try nested.finish()
            }
            return s
        }
    }

    func message(_ text: String) -> String? {
        do {
            _ = try read(text)
            return nil
        } catch {
            return "\(error)"
        }
    }

    func testReadsDeclaredFields() throws {
        let s = try read(#"{"name":"fleet","rate":0.25,"count":3,"enabled":true,"tags":["a","b"],"limits":{"max":7}}"#)
        XCTAssertEqual(s.name, "fleet")
        XCTAssertEqual(s.rate, 0.25)
        XCTAssertEqual(s.count, 3)
        XCTAssertEqual(s.enabled, true)
        XCTAssertEqual(s.tags, ["a", "b"])
        XCTAssertEqual(s.limit, 7)
        let minimal = try read(#"{"name":"x"}"#)
        XCTAssertNil(minimal.rate)
        XCTAssertNil(minimal.limit)
    }

    func testOneFormatForEveryProblem() {
        XCTAssertEqual(message(#"{"rate":0.5}"#), "name is required")
        XCTAssertEqual(message(#"{"name":1}"#), "name must be a string")
        XCTAssertEqual(message(#"{"name":"a","rate":2}"#), "rate must be a number from 0 to 1")
        XCTAssertEqual(message(#"{"name":"a","count":1.5}"#), "count must be an integer from 1 to 10")
        XCTAssertEqual(message(#"{"name":"a","count":11}"#), "count must be an integer from 1 to 10")
        XCTAssertEqual(message(#"{"name":"a","enabled":"yes"}"#), "enabled must be true or false")
        XCTAssertEqual(message(#"{"name":"a","tags":["a",2]}"#), "tags must be an array of strings")
        XCTAssertEqual(message(#"{"name":"a","rat":0.5}"#), "unknown field rat (did you mean rate?)")
        XCTAssertEqual(message(#"{"name":"a","limits":{"max":101}}"#), "limits.max must be an integer from 0 to 100")
        XCTAssertEqual(message(#"{"name":"a","limits":{}}"#), "limits.max is required")
        XCTAssertEqual(message(#"{"name":"a","limits":{"max":1,"mx":2}}"#), "unknown field limits.mx (did you mean limits.max?)")
        XCTAssertEqual(message(#"{"name":"a","limits":[1]}"#), "limits must be an object")
    }

    func testBodiesThatAreNotObjects() {
        for text in ["", "[]", "\"a\"", "{", #"{"name":"a""#, "null"] {
            XCTAssertEqual(message(text), #"the body must be a JSON object such as {"name":"a"}"#, text)
        }
    }

    func testRangeChecksBeforeArithmetic() {
        // Numbers past Int, NaN-like text and huge exponents are refused, never trapped on.
        XCTAssertEqual(message(#"{"name":"a","count":1e400}"#), "count must be an integer from 1 to 10")
        XCTAssertEqual(message(#"{"name":"a","count":99999999999999999999999}"#), "count must be an integer from 1 to 10")
        XCTAssertEqual(message(#"{"name":"a","rate":-1e400}"#), "rate must be a number from 0 to 1")
    }

    func testRemainingMembersAreFreeKeys() throws {
        let pairs = try JSONObjectReader.read(Array(#"{"preset":"p","a":"1","b":"2"}"#.utf8)) { r -> [String] in
            _ = try r.string("preset")
            return r.remaining().map(\.name)
        }
        XCTAssertEqual(pairs, ["a", "b"])
    }
}
