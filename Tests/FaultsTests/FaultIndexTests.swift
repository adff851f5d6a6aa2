import Faults
import PushCore
import Transport
import XCTest

/// The rule index: a request is tested only against the rules that can match it, whatever the
/// number of rules aimed elsewhere (paths, projects, fleets, labels, windows not yet open); the
/// first rule in rule order still wins across buckets; the number of rules is bounded.
final class FaultIndexTests: XCTestCase {
    func ctx(_ provider: PushProvider = .apns, token: String = "tok", path: String? = nil, project: String = "sandbox") -> FaultContext {
        FaultContext(
            provider: provider, token: Array(token.utf8)[...], topic: Array("com.a".utf8)[...], project: project,
            path: Array((path ?? "/3/device/\(token)").utf8)[...], headers: HTTPFields([]), device: { _ in ("fleet-1", ["beta"]) })
    }

    func rule(_ json: String, id: String, now: Int64 = 1_000) throws -> FaultRule {
        try FaultParser.rule(Array(json.utf8), id: id, nowMs: now)
    }

    func testRulesAimedElsewhereAreNeverTested() throws {
        let e = FaultEngine(loops: 1, inlineRules: .max)
        var list: [FaultRule] = []
        for i in 0..<25_000 {
            list.append(try rule(#"{"match":{"path":"/3/device/\#(String(format: "%064x", i))"},"effect":{"status":500}}"#, id: "p\(i)"))
            list.append(try rule(#"{"match":{"project":"proj-\#(i)"},"effect":{"status":500}}"#, id: "j\(i)"))
            list.append(try rule(#"{"match":{"fleet":"fleet-x\#(i)"},"effect":{"status":500}}"#, id: "f\(i)"))
            list.append(try rule(#"{"match":{"label":"label-\#(i)"},"effect":{"status":500}}"#, id: "l\(i)"))
        }
        try e.add(list)
        XCTAssertEqual(e.all.count, 100_000)
        let other = ctx(token: String(repeating: "f", count: 64))
        XCTAssertEqual(e.candidateCount(other, loop: 0, nowMs: 2_000), 0, "none of 100,000 rules is tested")
        XCTAssertNil(e.evaluate(other, loop: 0, nowMs: 2_000))
        // Each kind still finds its own.
        let hex = String(format: "%064x", 777)
        XCTAssertEqual(e.evaluate(ctx(token: hex), loop: 0, nowMs: 2_000)?.id, "p777")
        XCTAssertEqual(e.candidateCount(ctx(token: hex), loop: 0, nowMs: 2_000), 1)
        XCTAssertEqual(e.evaluate(ctx(project: "proj-12"), loop: 0, nowMs: 2_000)?.id, "j12")
        let labelled = FaultContext(
            provider: .apns, token: Array("t".utf8)[...], topic: nil, project: nil, path: Array("/3/device/t".utf8)[...],
            headers: HTTPFields([]), device: { _ in ("fleet-x5", ["label-9"]) })
        XCTAssertEqual(e.evaluate(labelled, loop: 0, nowMs: 2_000)?.id, "f5", "the fleet rule was added before the label rule")
    }

    /// Large buckets (a Bloom filter in front of their table): every rule is still found by what
    /// it is aimed at, and nothing else is.
    func testEveryRuleOfALargeBucketIsFound() throws {
        let e = FaultEngine(loops: 1, inlineRules: .max)
        let n = 20_000
        var list: [FaultRule] = []
        for i in 0..<n {
            list.append(try rule(#"{"match":{"token":"tok-\#(i)"},"effect":{"status":500}}"#, id: "t\(i)"))
            list.append(try rule(#"{"match":{"path":"/3/device/p-\#(String(format: "%08d", i))"},"effect":{"status":500}}"#, id: "p\(i)"))
        }
        try e.add(list)
        for i in 0..<n {
            XCTAssertEqual(e.evaluate(ctx(token: "tok-\(i)", path: "/x"), loop: 0, nowMs: 2_000)?.id, "t\(i)")
            XCTAssertEqual(
                e.evaluate(ctx(token: "z", path: "/3/device/p-\(String(format: "%08d", i))"), loop: 0, nowMs: 2_000)?.id, "p\(i)")
            XCTAssertEqual(e.candidateCount(ctx(token: "tok+\(i)", path: "/3/device/q-\(i)"), loop: 0, nowMs: 2_000), 0)
        }
    }

    func testRulesWhoseWindowIsNotOpenAreNotTestedAndOpenOnTime() throws {
        let e = FaultEngine(loops: 1, inlineRules: .max)
        try e.add((0..<10_000).map { try rule(#"{"match":{"after":"3600s"},"effect":{"status":500}}"#, id: "w\($0)") })
        try e.add(try rule(#"{"match":{"after":"2500ms"},"effect":{"status":503}}"#, id: "soon"))
        XCTAssertEqual(e.candidateCount(ctx(), loop: 0, nowMs: 1_000), 0)
        XCTAssertNil(e.evaluate(ctx(), loop: 0, nowMs: 3_499))
        XCTAssertEqual(e.evaluate(ctx(), loop: 0, nowMs: 3_500)?.id, "soon", "at its window's first millisecond")
        XCTAssertEqual(e.evaluate(ctx(), loop: 0, nowMs: 3_600_999)?.id, "soon")
        XCTAssertEqual(e.candidateCount(ctx(), loop: 0, nowMs: 3_601_000), 10_001, "the hour's rules open too")
        // A closed window is dropped at the next rebuild.
        let f = FaultEngine(loops: 1, inlineRules: .max)
        try f.add(try rule(#"{"match":{"for":"1s"},"effect":{"status":500}}"#, id: "brief"))
        XCTAssertEqual(f.evaluate(ctx(), loop: 0, nowMs: 1_500)?.id, "brief")
        XCTAssertNil(f.evaluate(ctx(), loop: 0, nowMs: 2_000))
    }

    func testTheFirstRuleWinsAcrossBuckets() throws {
        let e = FaultEngine(loops: 1, inlineRules: .max)
        try e.add(try rule(#"{"match":{"provider":"apns"},"effect":{"status":500}}"#, id: "general"))
        try e.add(try rule(#"{"match":{"path":"/3/"},"effect":{"status":503}}"#, id: "path"))
        try e.add(try rule(#"{"match":{"token":"tok"},"effect":{"status":429,"reason":"TooManyRequests"}}"#, id: "token"))
        XCTAssertEqual(e.evaluate(ctx(), loop: 0, nowMs: 2_000)?.id, "general")
        let f = FaultEngine(loops: 1, inlineRules: .max)
        try f.add(try rule(#"{"match":{"token":"tok"},"effect":{"status":429,"reason":"TooManyRequests"}}"#, id: "token"))
        try f.add(try rule(#"{"match":{"path":"/3/"},"effect":{"status":503}}"#, id: "path"))
        try f.add(try rule(#"{"match":{"provider":"apns"},"effect":{"status":500}}"#, id: "general"))
        XCTAssertEqual(f.evaluate(ctx(), loop: 0, nowMs: 2_000)?.id, "token")
        // A rule that matches but does not fire lets the next one fire; each counts what it saw.
        let g = FaultEngine(loops: 1, inlineRules: .max)
        try g.add(try rule(#"{"match":{"path":"/3/","every":2},"effect":{"status":503}}"#, id: "second"))
        try g.add(try rule(#"{"match":{"provider":"apns"},"effect":{"status":500}}"#, id: "rest"))
        XCTAssertEqual(g.evaluate(ctx(), loop: 0, nowMs: 2_000)?.id, "rest")
        XCTAssertEqual(g.evaluate(ctx(), loop: 0, nowMs: 2_000)?.id, "second")
        XCTAssertEqual(g.all.map(\.seenCount), [2, 1])
    }

    func testPathPrefixesAgreeWithATestOfEachRule() throws {
        var random = FastRandom(seed: 7)
        let alphabet = Array("/3dev".utf8)
        func word(_ max: Int) -> String {
            String(decoding: (0..<Int(random.next() % UInt64(max + 1))).map { _ in alphabet[Int(random.next() % 5)] }, as: UTF8.self)
        }
        // Lengths 0 to 8 (nine: the sorted list), then lengths 3 and 6 only (hashed by length).
        try check(Set((0..<300).map { _ in word(8) }))
        try check(Set((0..<300).map { _ in word(8) }.filter { $0.utf8.count == 3 || $0.utf8.count == 6 }))
    }

    func check(_ prefixes: Set<String>) throws {
        var random = FastRandom(seed: 11)
        let alphabet = Array("/3dev".utf8)
        func word(_ max: Int) -> String {
            String(decoding: (0..<Int(random.next() % UInt64(max + 1))).map { _ in alphabet[Int(random.next() % 5)] }, as: UTF8.self)
        }
        let e = FaultEngine(loops: 1, inlineRules: .max)
        try e.add(
            prefixes.sorted().enumerated().map {
                try rule(#"{"match":{"path":"\#($1)","every":1000000},"effect":{"status":500}}"#, id: "r\($0)")
            })
        for _ in 0..<2_000 {
            let path = word(12)
            let expected = prefixes.filter { path.hasPrefix($0) }.count
            XCTAssertEqual(e.candidateCount(ctx(path: path), loop: 0, nowMs: 2_000), expected, path)
        }
    }

    /// Past a costly build, a loop keeps its snapshot while one background thread builds the
    /// next: the new rule fires once that is ready, and never stalls the caller.
    func testCostlyRebuildsHappenInTheBackground() throws {
        let e = FaultEngine(loops: 1, inlineRules: 0)
        try e.add((0..<50_000).map { try rule(#"{"match":{"path":"/never/\#($0)"},"effect":{"status":500}}"#, id: "n\($0)") })
        XCTAssertNil(e.evaluate(ctx(), loop: 0, nowMs: 2_000))
        try e.add(try rule(#"{"match":{"token":"tok"},"effect":{"status":503}}"#, id: "new"))
        let deadline = Date().addingTimeInterval(10)
        var fired: String?
        while fired == nil && Date() < deadline {
            fired = e.evaluate(ctx(), loop: 0, nowMs: 2_000)?.id
            if fired == nil { usleep(1_000) }
        }
        XCTAssertEqual(fired, "new")
    }

    func testTheNumberOfRulesIsBounded() throws {
        let e = FaultEngine(loops: 1, inlineRules: .max)
        let one = try rule(#"{"match":{"path":"/x"},"effect":{"status":500}}"#, id: "x")
        try e.add(Array(repeating: one, count: FaultEngine.maxRules - 1))
        XCTAssertThrowsError(try e.add([one, one])) { XCTAssertTrue("\($0)".contains("at most 100000 fault rules"), "\($0)") }
        XCTAssertEqual(e.all.count, FaultEngine.maxRules - 1, "all or none")
        try e.add(one)
        XCTAssertThrowsError(try e.add(one))
    }
}
