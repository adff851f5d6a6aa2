import PushCore
import XCTest

/// `scope=`'s three forms, read the same by the admin API and fault rules.
final class PushScopeTests: XCTestCase {
    func testTheThreeFormsAndTheirText() throws {
        XCTAssertEqual(try PushScope.parse("team:ABCDE12345"), .team("ABCDE12345"))
        XCTAssertEqual(try PushScope.parse("project:demo-project"), .project("demo-project"))
        XCTAssertEqual(try PushScope.parse("label:job:42"), .label("job:42"))
        for text in ["team:T", "project:p", "label:a:b"] { XCTAssertEqual(try PushScope.parse(text).text, text) }
    }

    func testAnythingElseSaysWhatIsWrong() {
        for (text, problem) in [
            ("team", "must be team:TEAMID, project:PROJECTID or label:NAME, not team"),
            ("fleet:7", "must be team:TEAMID, project:PROJECTID or label:NAME, not fleet:7"),
            ("label:", "label: needs a value of at most 256 bytes"),
            ("team:" + String(repeating: "x", count: 257), "team: needs a value of at most 256 bytes"),
        ] {
            XCTAssertThrowsError(try PushScope.parse(text), text) { error in
                XCTAssertEqual((error as? PushScope.Invalid)?.problem, problem)
                XCTAssertEqual((error as? PushScope.Invalid)?.description, "scope " + problem)
            }
        }
    }
}
