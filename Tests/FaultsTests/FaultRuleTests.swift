import Faults
import PushCore
import Transport
import XCTest

/// Rules, selectors, the override header, distributions, scenarios and the per-token rate limit.
final class FaultRuleTests: XCTestCase {
    func rule(_ json: String, now: Int64 = 1_000) throws -> FaultRule {
        try FaultParser.rule(Array(json.utf8), id: "r", nowMs: now)
    }

    func ctx(_ provider: PushProvider = .apns, token: String = "tok", topic: String? = "com.a", headers: [(String, String)] = [])
        -> FaultContext
    {
        FaultContext(
            provider: provider, token: Array(token.utf8)[...], topic: topic.map { Array($0.utf8)[...] }, project: "sandbox",
            path: Array("/3/device/\(token)".utf8)[...], headers: HTTPFields(headers), device: { _ in ("fleet-1", ["beta"]) })
    }

    func engine(_ rules: [FaultRule]) -> FaultEngine {
        let e = FaultEngine(loops: 1)
        for r in rules { try! e.add(r) }
        return e
    }

    /// Numbers a client sends are range-checked before any arithmetic: every one of these used
    /// to reach an Int64 conversion or a time sum and trap (the process died with SIGILL).
    func testHugeNumbersAreRefusedNotTrapped() {
        let hostile = [
            #"{"match":{"after":"99999999999999999999s"},"effect":{"status":500}}"#,
            #"{"match":{"after":9223372036854775807},"effect":{"status":500}}"#,
            #"{"match":{"for":"1e300m"},"effect":{"status":500}}"#,
            #"{"match":{"after":"11y"},"effect":{"status":500}}"#,
            #"{"effect":{"stallMs":9000000000000000000}}"#,
            #"{"effect":{"stall":"4000000s"}}"#,
            #"{"effect":{"delayMs":3600001}}"#,
            #"{"effect":{"delay":{"dist":"uniform","min":0,"max":1e300}}}"#,
            #"{"effect":{"delay":{"dist":"normal","mean":1e308,"stddev":1}}}"#,
            #"{"effect":{"delay":{"dist":"lognormal","mu":1000,"sigma":1}}}"#,
            #"{"effect":{"delay":{"dist":"lognormal","mu":1,"sigma":1e9}}}"#,
            #"{"effect":{"delay":{"dist":"fixed","ms":1e19}}}"#,
            #"{"effect":{"retryAfter":9223372036854775807}}"#,
        ]
        for json in hostile {
            XCTAssertThrowsError(try FaultParser.rule(Array(json.utf8), id: "r", nowMs: 1_700_000_000_000), json)
        }
        for header in ["stall=99999999999999999999s", "delay=1e300ms", "delay=3601s", "retryAfter=9223372036854775807"] {
            XCTAssertThrowsError(try FaultParser.overrideEffect(header), header)
        }
        // The largest accepted values still work, and their arithmetic holds.
        let longest = try? FaultParser.rule(
            Array(#"{"match":{"after":"3650d","for":"3650d"},"effect":{"stall":"3600s","retryAfter":31536000}}"#.utf8), id: "r",
            nowMs: 1_700_000_000_000)
        XCTAssertNil(longest, "days are not a unit")
        let ok = try? FaultParser.rule(
            Array(#"{"match":{"after":"5256000m","for":315360000000},"effect":{"stall":"3600s","retryAfter":31536000}}"#.utf8),
            id: "r", nowMs: 1_700_000_000_000)
        XCTAssertEqual(ok?.match.afterMs, 315_360_000_000)
        XCTAssertEqual(ok?.effect.stallMs, 3_600_000)
    }

    func testParsing() throws {
        let r = try rule(
            #"{"match":{"provider":"fcm","tokens":["a","b"],"topic":"news","header":{"X-Env":"ci"},"percent":12.5,"every":3,"first":10,"after":"2s","for":500},"effect":{"status":503,"errorCode":"UNAVAILABLE","retryAfter":7,"delayMs":{"dist":"uniform","min":5,"max":9},"goaway":"Shutdown","stallMs":"1s","uninstall":true},"seed":42}"#
        )
        XCTAssertEqual(r.match.provider, .fcm)
        XCTAssertEqual(r.match.tokens, ["a", "b"])
        XCTAssertEqual(r.match.headers.first?.0, "x-env")
        XCTAssertEqual(r.match.afterMs, 2000)
        XCTAssertEqual(r.match.forMs, 500)
        XCTAssertEqual(r.effect.delay, .uniform(5, 9))
        XCTAssertEqual(r.effect.stallMs, 1000)
        XCTAssertEqual(r.seed, 42)
        XCTAssertTrue(r.json.contains(#""fired":0"#))
        for bad in [
            #"{"match":{}}"#, #"{"match":{"provider":"x"},"effect":{}}"#, #"{"effect":{"status":99}}"#,
            #"{"effect":{"nope":1}}"#, #"{"match":{"percent":101},"effect":{}}"#, #"{"effect":{"delayMs":{"dist":"weird"}}}"#, "[]",
        ] {
            XCTAssertThrowsError(try rule(bad), bad)
        }
        let list = try FaultParser.rules(Array(#"[{"effect":{"status":500}},{"effect":{"rst":true}}]"#.utf8), nowMs: 0, id: { "x" })
        XCTAssertEqual(list.count, 2)
        XCTAssertTrue(list[1].effect.rst)
        // A file as large as the rules in force may be (more tokens than an API body may hold).
        let many =
            "["
            + (0..<20_000).map { #"{"match":{"provider":"apns","path":"/3/device/\#($0)"},"effect":{"status":500}}"# }
            .joined(separator: ",") + "]"
        XCTAssertEqual(try FaultParser.rules(Array(many.utf8), nowMs: 0, id: { "x" }).count, 20_000)
        // A broken file says where.
        XCTAssertThrowsError(try FaultParser.rules(Array(#"[{"effect":{"status":500}},]"#.utf8), nowMs: 0, id: { "x" })) {
            XCTAssertTrue("\($0)".contains("at byte"), "\($0)")
        }
    }

    func testMatchingAndSelectors() throws {
        let e = engine([
            try rule(#"{"match":{"provider":"fcm"},"effect":{"status":500}}"#),
            try rule(#"{"match":{"token":"tok","every":3},"effect":{"status":503}}"#),
        ])
        var fired: [Bool] = []
        for _ in 0..<9 { fired.append(e.evaluate(ctx(), loop: 0, nowMs: 1_000) != nil) }
        XCTAssertEqual(fired, [false, false, true, false, false, true, false, false, true])
        XCTAssertEqual(e.evaluate(ctx(token: "other"), loop: 0, nowMs: 1_000)?.effect.status, nil)
        XCTAssertEqual(e.evaluate(ctx(.fcm), loop: 0, nowMs: 1_000)?.effect.status, 500)
        XCTAssertEqual(e.all.map(\.fired), [1, 3])

        let first = engine([try rule(#"{"match":{"first":2},"effect":{"status":503}}"#)])
        XCTAssertEqual((0..<4).map { _ in first.evaluate(ctx(), loop: 0, nowMs: 1_000) != nil }, [true, true, false, false])

        let window = engine([try rule(#"{"match":{"after":100,"for":50},"effect":{"status":503}}"#, now: 1_000)])
        XCTAssertNil(window.evaluate(ctx(), loop: 0, nowMs: 1_099))
        XCTAssertNotNil(window.evaluate(ctx(), loop: 0, nowMs: 1_100))
        XCTAssertNotNil(window.evaluate(ctx(), loop: 0, nowMs: 1_149))
        XCTAssertNil(window.evaluate(ctx(), loop: 0, nowMs: 1_150))

        let header = engine([
            try rule(#"{"match":{"header":{"x-tenant":"a"},"label":"beta","fleet":"fleet-1","topic":"com.a"},"effect":{"status":500}}"#)
        ])
        XCTAssertNil(header.evaluate(ctx(headers: [("x-tenant", "b")]), loop: 0, nowMs: 0))
        XCTAssertNotNil(header.evaluate(ctx(headers: [("x-tenant", "a")]), loop: 0, nowMs: 0))
        XCTAssertNil(header.evaluate(ctx(topic: "com.b", headers: [("x-tenant", "a")]), loop: 0, nowMs: 0))

        // Rules added and removed while running are seen at once.
        let live = engine([])
        XCTAssertNil(live.evaluate(ctx(), loop: 0, nowMs: 0))
        let r = try rule(#"{"effect":{"status":500}}"#)
        try live.add(r)
        XCTAssertNotNil(live.evaluate(ctx(), loop: 0, nowMs: 0))
        live.remove(id: r.id)
        XCTAssertNil(live.evaluate(ctx(), loop: 0, nowMs: 0))
    }

    func testPercentIsBinomialAndReproducible() throws {
        func run(seed: Int) throws -> [Bool] {
            let e = engine([try rule(#"{"match":{"percent":10},"effect":{"status":503},"seed":\#(seed)}"#)])
            return (0..<10_000).map { _ in e.evaluate(ctx(), loop: 0, nowMs: 0) != nil }
        }
        let a = try run(seed: 7)
        let b = try run(seed: 7)
        let c = try run(seed: 8)
        let n = a.filter { $0 }.count
        // Binomial(10000, 0.1): mean 1000, sd 30; 5 sd either side.
        XCTAssertGreaterThan(n, 850)
        XCTAssertLessThan(n, 1150)
        XCTAssertEqual(a, b)
        XCTAssertNotEqual(a, c)
    }

    func testOverrideHeader() throws {
        let e = try FaultParser.overrideEffect(
            "status=503;reason=ServiceUnavailable;retryAfter=5;delay=200ms;goaway=Shutdown;rst;close;stall=2s;uninstall")
        XCTAssertEqual(e.status, 503)
        XCTAssertEqual(e.reason, "ServiceUnavailable")
        XCTAssertEqual(e.retryAfter, 5)
        XCTAssertEqual(e.delay, .fixed(200))
        XCTAssertEqual(e.goaway, "Shutdown")
        XCTAssertTrue(e.rst && e.close && e.uninstall)
        XCTAssertEqual(e.stallMs, 2000)
        XCTAssertThrowsError(try FaultParser.overrideEffect("status=abc"))
        XCTAssertThrowsError(try FaultParser.overrideEffect("explode"))
        let off = FaultEngine(loops: 1)
        XCTAssertNil(off.override(HTTPFields([("x-pushemu-fault", "status=500")])), "off unless --allow-override-header")
        let on = FaultEngine(loops: 1, allowOverrideHeader: true)
        XCTAssertEqual(on.override(HTTPFields([("x-pushemu-fault", "status=500")]))?.status, 500)
    }

    func testDistributions() {
        var r = FastRandom(seed: 1)
        let u = (0..<1000).map { _ in DelayDistribution.uniform(10, 20).draw(&r) }
        XCTAssertTrue(u.allSatisfy { $0 >= 10 && $0 <= 20 })
        let n = (0..<20_000).map { _ in DelayDistribution.normal(mean: 100, stddev: 10).draw(&r) }
        let mean = n.reduce(0, +) / Double(n.count)
        XCTAssertEqual(mean, 100, accuracy: 1)
        let l = (0..<20_000).map { _ in DelayDistribution.lognormal(mu: 3, sigma: 0.5).draw(&r) }.sorted()
        XCTAssertEqual(l[l.count / 2], 20.1, accuracy: 1.5) // median e^mu
        XCTAssertEqual(DelayDistribution.fixed(7).draw(&r), 7)
    }

    func testScenarioSteps() throws {
        let s = try Scenario.parse(
            Array(
                #"{"name":"outage","steps":[{"at":"1s","for":"1s","effect":{"status":503}},{"at":2500,"match":{"provider":"fcm"},"effect":{"errorCode":"INTERNAL"}}]}"#
                    .utf8),
            id: "s1", nowMs: 10_000, ruleID: { "rule" })
        let e = FaultEngine(loops: 1)
        try ScenarioRegistry().add(s, to: e)
        XCTAssertNil(e.evaluate(ctx(), loop: 0, nowMs: 10_999))
        XCTAssertEqual(e.evaluate(ctx(), loop: 0, nowMs: 11_000)?.effect.status, 503)
        XCTAssertNil(e.evaluate(ctx(), loop: 0, nowMs: 12_000))
        XCTAssertEqual(e.evaluate(ctx(.fcm), loop: 0, nowMs: 12_500)?.effect.errorCode, "INTERNAL")
        XCTAssertTrue(s.json(nowMs: 11_500).contains(#""state":"active""#))
        XCTAssertTrue(s.json(nowMs: 12_600).contains(#""state":"done""#))
        XCTAssertThrowsError(try Scenario.parse(Array(#"{"steps":[{"effect":{}}]}"#.utf8), id: "x", nowMs: 0, ruleID: { "r" }))
    }

    func testTokenRateLimit() {
        let l = TokenRateLimiter(perMinute: 60)
        let t = Array("tok".utf8)[...]
        XCTAssertEqual((0..<61).filter { _ in l.allow(t, nowMs: 0) }.count, 60)
        XCTAssertTrue(l.allow(t, nowMs: 1_000)) // one more a second
        XCTAssertTrue(l.allow(Array("other".utf8)[...], nowMs: 0))
    }
}
