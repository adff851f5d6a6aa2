import EmulatorTesting
import Foundation
import TestSupport
import XCTest

/// The inspection API: `q=` search, cursor paging that stays stable while pushes arrive (from
/// memory and, once memory evicted, from the journal), `/latest` and one notification whole.
final class InspectionTests: XCTestCase {
    static let token = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"

    func json(_ r: TestResponse) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any], r.text)
    }

    func list(_ emulator: TestEmulator, _ query: String) throws -> (ids: [String], next: String?, titles: [String]) {
        let r = try emulator.get("/emulator/v1/notifications?" + query)
        XCTAssertEqual(r.status, 200, r.text)
        let body = try json(r)
        let items = try XCTUnwrap(body["notifications"] as? [[String: Any]], r.text)
        return (items.compactMap { $0["id"] as? String }, body["next"] as? String, items.map(title))
    }

    /// A notification's APNs alert title (or its alert, when that is a string).
    func title(_ n: [String: Any]) -> String {
        let alert = ((n["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"]
        return (alert as? [String: Any])?["title"] as? String ?? alert as? String ?? ""
    }

    struct Pusher {
        let emulator: TestEmulator
        let headers: [(String, String)]
        func push(
            _ title: String, token: String = InspectionTests.token, extra: String = "", aps: String = "", topic: String = "com.example.app"
        ) throws {
            var h = headers
            h.append(("apns-topic", topic))
            let body = #"{"aps":{"alert":{"title":"\#(title)","body":"Half price today"}\#(aps)}\#(extra)}"#
            let r = try emulator.h2([TestRequest("POST", "/3/device/\(token)", headers: h, body: body)])[0]
            XCTAssertEqual(r.status, 200, r.text)
        }
    }

    /// `prefix0` ... `prefix{count-1}`, a millisecond apart: pages are in (receive time, id)
    /// order, and the tests read arrival order.
    func pushSeries(_ p: Pusher, _ prefix: String, count: Int) throws {
        for i in 0..<count {
            try p.push("\(prefix)\(i)")
            usleep(1_500)
        }
    }

    func pusher(_ emulator: TestEmulator) throws -> Pusher {
        Pusher(
            emulator: emulator,
            headers: [("authorization", try PipelineTests.apnsAuthorization(emulator)), ("apns-push-type", "alert")])
    }

    func testSearchTerms() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let p = try pusher(emulator)
        try p.push("Spring sale", extra: #","_mId":"1","_dId":"spring""#)
        try p.push("Winter news", token: String(repeating: "ef", count: 32), extra: #","_dId":"winter""#, topic: "com.example.news")
        try p.push("Spring again", token: String(repeating: "ab", count: 32), extra: #","_dId":"spring""#, aps: #","colour":1"#)
        XCTAssertEqual(try list(emulator, "q=spring").titles, ["Spring sale", "Spring again"])
        XCTAssertEqual(try list(emulator, "q=%22half%20price%22%20winter").titles, ["Winter news"])
        XCTAssertEqual(try list(emulator, "q=campaign:spring").titles, ["Spring sale", "Spring again"])
        XCTAssertEqual(try list(emulator, "q=campaign:spring%20token:\(Self.token)").titles, ["Spring sale"])
        XCTAssertEqual(try list(emulator, "q=app:com.example.news%20topic:com.example.news").titles, ["Winter news"])
        XCTAssertEqual(try list(emulator, "q=provider:apns%20environment:sandbox%20status:200").ids.count, 3)
        XCTAssertEqual(try list(emulator, "q=status:410").ids, [])
        XCTAssertEqual(try list(emulator, "q=reason:BadDeviceToken").ids, [])
        XCTAssertEqual(try list(emulator, "q=provider:fcm").ids, [])
        XCTAssertEqual(try list(emulator, "q=after:1h%20before:2999-01-01").ids.count, 3)
        XCTAssertEqual(try list(emulator, "q=before:10m").ids, [])
        XCTAssertEqual(try list(emulator, "q=display:shown").ids.count, 3)
        XCTAssertEqual(try list(emulator, "q=has:warnings").titles, ["Spring again"]) // aps.colour is not a key APNs knows
        XCTAssertEqual(try list(emulator, "q=has:lint").ids, []) // no SDK on these devices
        for (bad, message) in [
            ("q=colour:red", "unknown search term colour:"), ("q=after:yesterday", "after: takes"), ("q=has:wings", "has: takes"),
            ("q=%22open", "unclosed quote"), ("q=provider:mail", "provider must be"), ("q=display:maybe", "display: takes"),
        ] {
            let r = try emulator.get("/emulator/v1/notifications?" + bad)
            XCTAssertEqual(r.status, 400, bad)
            XCTAssertTrue(r.text.contains(message), "\(bad): \(r.text)")
        }
    }

    /// Pages cover every notification exactly once, in order, while new pushes keep arriving.
    func pageThrough(_ emulator: TestEmulator, order: String, limit: Int, during: () throws -> Void) throws -> [String] {
        var seen: [String] = []
        var cursor: String?
        for round in 0..<100 {
            let query = "order=\(order)&limit=\(limit)" + (cursor.map { "&cursor=" + $0 } ?? "")
            let page = try list(emulator, query)
            XCTAssertLessThanOrEqual(page.ids.count, limit)
            seen += page.titles
            if round == 0 {
                try during()
                usleep(1_500)
            }
            guard let next = page.next else { break }
            cursor = next
        }
        return seen
    }

    func testCursorPagingIsStableWhilePushesArrive() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let p = try pusher(emulator)
        try pushSeries(p, "n", count: 25)
        let original = (0..<25).map { "n\($0)" }
        let desc = try pageThrough(emulator, order: "desc", limit: 10) { for i in 0..<3 { try p.push("late\(i)") } }
        XCTAssertEqual(desc.filter { !$0.hasPrefix("late") }, original.reversed(), "newest first, each once")
        XCTAssertTrue(desc.allSatisfy { !$0.hasPrefix("late") }, "pushes after the first page sort before it")
        let asc = try pageThrough(emulator, order: "asc", limit: 7) { try p.push("later") }
        XCTAssertEqual(Array(asc.prefix(25)), original, "oldest first, each once")
        XCTAssertEqual(Set(asc.dropFirst(25)), ["late0", "late1", "late2", "later"], "and what arrived meanwhile, at the end")
        // The last page says so; a cursor not from this server is refused.
        XCTAssertNil(try list(emulator, "order=desc&limit=100").next)
        let bad = try emulator.get("/emulator/v1/notifications?cursor=bm90LWEtY3Vyc29y")
        XCTAssertEqual(bad.status, 400, bad.text)
        XCTAssertEqual(try emulator.get("/emulator/v1/notifications?order=sideways").status, 400)
    }

    /// The plain list (no `order`, no `cursor`) gives a `next` too: a client that pages from the
    /// first answer reads every notification, the newest first, then older pages.
    func testPlainListGivesANextCursor() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let p = try pusher(emulator)
        try pushSeries(p, "n", count: 12)
        let first = try list(emulator, "limit=5")
        XCTAssertEqual(first.titles, ["n7", "n8", "n9", "n10", "n11"], "the newest five, oldest first")
        var seen = first.titles
        var cursor = try XCTUnwrap(first.next, "a plain answer with older ones has a next")
        for _ in 0..<10 {
            let page = try list(emulator, "limit=5&cursor=" + cursor)
            seen += page.titles
            guard let next = page.next else { break }
            cursor = next
        }
        XCTAssertEqual(seen.sorted(), (0..<12).map { "n\($0)" }.sorted(), "each once")
        XCTAssertEqual(seen.count, 12)
        // Everything in one answer: null.
        let all = try emulator.get("/emulator/v1/notifications?limit=100")
        XCTAssertTrue(all.text.hasSuffix(",\"next\":null}"), all.text)
        // A device's list answers the same way.
        let device = try json(try emulator.get("/emulator/v1/devices/\(Self.token)/notifications?limit=4"))
        XCTAssertEqual((device["notifications"] as? [Any])?.count, 4)
        XCTAssertNotNil(device["next"] as? String)
    }

    func testLatestAndOneNotificationWhole() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        var r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices",
                body:
                    #"{"platform":"ios","app":"com.example.app","token":"\#(Self.token)","tracking":{"preset":"adobe-campaign","url":"\#(sink.url)"}}"#
            ))
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(try emulator.get("/emulator/v1/notifications/latest").status, 404)
        let p = try pusher(emulator)
        try p.push("first", extra: #","_mId":"12345","_dId":"d1""#, aps: #","mutable-content":1"#)
        try p.push("second", token: String(repeating: "cd", count: 32))
        XCTAssertEqual(sink.wait(for: 1), 1)
        r = try emulator.get("/emulator/v1/notifications/latest")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(title(try json(r)), "second")
        r = try emulator.get("/emulator/v1/notifications/latest?token=\(Self.token)")
        let whole = try json(r)
        let id = try XCTUnwrap(whole["id"] as? String)
        XCTAssertEqual((whole["device"] as? [String: Any])?["token"] as? String, Self.token)
        var calls = try XCTUnwrap(whole["tracking"] as? [[String: Any]])
        for _ in 0..<40 where calls.isEmpty {
            usleep(50_000)
            calls = try XCTUnwrap(try json(try emulator.get("/emulator/v1/notifications/\(id)"))["tracking"] as? [[String: Any]])
        }
        XCTAssertEqual(calls.first?["url"] as? String, sink.url + "/r/?id=h3039,d1,1")
        XCTAssertEqual(calls.first?["outcome"] as? String, "succeeded")
        r = try emulator.get("/emulator/v1/notifications/\(id.uppercased())")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try json(r)["id"] as? String, id)
        XCTAssertEqual(try emulator.get("/emulator/v1/notifications/00000000-0000-0000-0000-000000000000").status, 404)
        XCTAssertEqual(try emulator.get("/emulator/v1/notifications/not-an-id").status, 404)
        XCTAssertEqual(try emulator.get("/emulator/v1/notifications/latest?q=winter").status, 404)

        // Twenty pushes on one connection, most within one millisecond: the latest is the last to arrive.
        var h = p.headers
        h.append(("apns-topic", "com.example.app"))
        let burst = (0..<20).map { i in
            TestRequest("POST", "/3/device/\(Self.token)", headers: h, body: #"{"aps":{"alert":{"title":"burst \#(i)"}}}"#)
        }
        XCTAssertEqual(try emulator.h2(burst).map(\.status), Array(repeating: 200, count: 20))
        r = try emulator.get("/emulator/v1/notifications/latest")
        XCTAssertEqual(title(try json(r)), "burst 19")
    }

    /// Once memory has evicted, pages and single lookups come from the journal, the same way;
    /// with two event loops, whose segments interleave in the journal.
    func testPagingReachesIntoTheJournal() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-inspect-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let emulator = try TestEmulator(.inProcess, arguments: ["--data-dir", dir, "--notification-log-size", "5", "--threads", "2"])
        defer { emulator.stop() }
        let p = try pusher(emulator)
        try pushSeries(p, "j", count: 30)
        var desc: [String] = []
        for _ in 0..<40 {
            desc = try pageThrough(emulator, order: "desc", limit: 7) {}
            if desc.count == 30 { break }
            usleep(50_000) // the journal's group commit
        }
        XCTAssertEqual(desc, (0..<30).map { "j\($0)" }.reversed())
        let oldest = try list(emulator, "order=asc&limit=1")
        XCTAssertEqual(oldest.titles, ["j0"])
        let r = try emulator.get("/emulator/v1/notifications/\(oldest.ids[0])")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try list(emulator, "q=j7").titles, ["j7"])
    }

    /// A newest-first page memory fills with notifications newer than anything it lacks is
    /// answered from memory (then right while the journal's group commit may still hold the
    /// older ones); the next pages continue into the journal; and after a restart
    /// (an empty log, a journal from the run before) every page comes from the journal.
    func testPagesFromMemoryThenTheJournalAndAcrossARestart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-inspect-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arguments = ["--data-dir", dir, "--notification-log-size", "20", "--threads", "1"]
        let expected = (0..<12).map { "p\($0)" } + (0..<3).map { "q\($0)" }
        do {
            let emulator = try TestEmulator(.inProcess, arguments: arguments)
            defer { emulator.stop() }
            let p = try pusher(emulator)
            try pushSeries(p, "p", count: 12) // the loop's shard keeps 10: p0 and p1 are evicted
            usleep(20_000)
            try pushSeries(p, "q", count: 3) // p2...p4 go too; q0 is newer than anything evicted
            XCTAssertEqual(try list(emulator, "order=desc&limit=2").titles, ["q2", "q1"])
            var desc: [String] = []
            for _ in 0..<40 {
                desc = try pageThrough(emulator, order: "desc", limit: 4) {}
                if desc.count == 15 { break }
                usleep(50_000) // the journal's group commit
            }
            XCTAssertEqual(desc, expected.reversed())
        }
        let restarted = try TestEmulator(.inProcess, arguments: arguments)
        defer { restarted.stop() }
        XCTAssertEqual(try pageThrough(restarted, order: "desc", limit: 4) {}, expected.reversed())
        XCTAssertEqual(try pageThrough(restarted, order: "asc", limit: 6) {}, expected)
        XCTAssertEqual(try list(restarted, "q=q1").titles, ["q1"])
    }

    /// `GET /emulator/v1/campaigns` counts from the journal's index what the report counts by
    /// reading every record: per campaign, sent, accepted, rejections by reason, per provider.
    func testCampaignCountsMatchTheReport() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-campaigns-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let emulator = try TestEmulator(.inProcess, arguments: ["--data-dir", dir, "--notification-log-size", "5"])
        defer { emulator.stop() }
        let p = try pusher(emulator)
        for i in 0..<5 { try p.push("Spring \(i)", extra: #","_dId":"spring""#) }
        for i in 0..<3 { try p.push("Winter \(i)", extra: #","_dId":"winter""#) }
        try p.push("No campaign")
        var h = p.headers
        h.append(("apns-topic", "com.example.app"))
        for _ in 0..<2 {
            let r = try emulator.h2([
                TestRequest("POST", "/3/device/not-a-token", headers: h, body: #"{"aps":{"alert":"x"},"_dId":"spring"}"#)
            ])[0]
            XCTAssertEqual(r.status, 400, r.text)
        }
        let report = try json(try emulator.get("/emulator/v1/report"))
        let counts = try json(try emulator.get("/emulator/v1/campaigns"))
        let fields = ["campaign", "sent", "accepted", "rejectedTotal", "rejected", "byProvider", "byPlatform", "firstAt", "lastAt"]
        func pick(_ list: Any?) throws -> [String] {
            try XCTUnwrap(list as? [[String: Any]]).map { c in
                let kept = c.filter { fields.contains($0.key) }
                return String(decoding: try JSONSerialization.data(withJSONObject: kept, options: [.sortedKeys]), as: UTF8.self)
            }.sorted()
        }
        XCTAssertEqual(try pick(counts["campaigns"]), try pick(report["campaigns"]))
        XCTAssertEqual(try pick(counts["campaigns"]).count, 3)
        XCTAssertEqual(try pick([counts["totals"] as Any]), try pick([report["totals"] as Any]))
        let spring = try json(try emulator.get("/emulator/v1/campaigns?campaign=spring"))
        let only = try XCTUnwrap(spring["campaigns"] as? [[String: Any]])
        XCTAssertEqual(only.map { $0["campaign"] as? String }, ["spring"])
        XCTAssertEqual(only.first?["sent"] as? Int, 7)
        XCTAssertEqual(only.first?["rejected"] as? [String: Int], ["BadDeviceToken": 2])
        XCTAssertEqual(try emulator.get("/emulator/v1/campaigns?since=yesterday").status, 400)
        let future = try json(try emulator.get("/emulator/v1/campaigns?since=2999-01-01T00:00:00Z"))
        XCTAssertEqual((future["campaigns"] as? [Any])?.count, 0)
        XCTAssertEqual(try list(emulator, "q=campaign:winter").titles, ["Winter 0", "Winter 1", "Winter 2"])
    }

    func testDeleteForgetsWhatMatches() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let p = try pusher(emulator)
        try p.push("Spring sale", extra: #","_dId":"spring""#)
        try p.push("Spring again", extra: #","_dId":"spring""#)
        try p.push("Winter news", extra: #","_dId":"winter""#)
        var r = try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications?q=campaign:spring"))
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try json(r)["deleted"] as? Int, 2)
        XCTAssertEqual(try list(emulator, "").titles, ["Winter news"])
        XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications?q=bogus:1")).status, 400)
        r = try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications"))
        XCTAssertEqual(try json(r)["deleted"] as? Int, 1)
        XCTAssertEqual(try list(emulator, "").ids, [])
        usleep(2_000)
        try p.push("After")
        XCTAssertEqual(try list(emulator, "").titles, ["After"])
        XCTAssertEqual(
            try json(try emulator.get("/emulator/v1/stats"))["notifications"].flatMap { ($0 as? [String: Any])?["kept"] as? Int }, 1)
    }

    /// Deleted notifications stay out of the reads that reach into the journal.
    func testDeleteHoldsForTheJournal() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-delete-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let emulator = try TestEmulator(.inProcess, arguments: ["--data-dir", dir, "--notification-log-size", "3"])
        defer { emulator.stop() }
        let p = try pusher(emulator)
        try pushSeries(p, "d", count: 12)
        var all: [String] = []
        for _ in 0..<40 {
            all = try list(emulator, "limit=100").titles
            if all.count == 12 { break }
            usleep(50_000)
        }
        XCTAssertEqual(all.count, 12)
        XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications?q=d3")).status, 200)
        XCTAssertEqual(try pageThrough(emulator, order: "desc", limit: 5) {}, (0..<12).filter { $0 != 3 }.map { "d\($0)" }.reversed())
        XCTAssertEqual(try list(emulator, "q=d3").ids, [])
        XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications")).status, 200)
        XCTAssertEqual(try list(emulator, "limit=100").ids, [])
        XCTAssertEqual(try pageThrough(emulator, order: "asc", limit: 5) {}, [])
        usleep(2_000)
        try p.push("fresh")
        XCTAssertEqual(try list(emulator, "limit=100").titles, ["fresh"])
        // The journal still has every record for the report.
        let report = try json(try emulator.get("/emulator/v1/report?format=json"))
        XCTAssertEqual((report["totals"] as? [String: Any])?["sent"] as? Int, 13)
    }

    /// Deletions and scoped resets are state: after a restart the journal's records they hid stay
    /// hidden and a scope's report still starts at its reset; one query deleted again and again
    /// is kept once (it never fills the deletions' capacity).
    func testDeletionsAndScopeResetsOutliveARestart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-deletions-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arguments = ["--data-dir", dir, "--notification-log-size", "100"]
        do {
            let emulator = try TestEmulator(.inProcess, arguments: arguments)
            defer { emulator.stop() }
            let p = try pusher(emulator)
            try pushSeries(p, "d", count: 6)
            var r = try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications?q=d3"))
            XCTAssertEqual(try json(r)["deleted"] as? Int, 1, r.text)
            usleep(2_000)
            try pushSeries(p, "e", count: 3)
            r = try emulator.http1(TestRequest("POST", "/emulator/v1/reset?scope=team:TEAM123456"))
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertEqual(try json(r)["notifications"] as? Int, 8, r.text)
            usleep(2_000)
            try pushSeries(p, "f", count: 3)
            for _ in 0..<276 { // past the 256 filtered deletions kept
                XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/notifications?q=f0")).status, 200)
            }
            XCTAssertEqual(try list(emulator, "limit=100").titles, ["f1", "f2"])
            let stats = try json(try emulator.get("/emulator/v1/stats"))["notifications"] as? [String: Any]
            XCTAssertEqual(stats?["deletionsKept"] as? Int, 2, "\(String(describing: stats))")
            XCTAssertEqual(stats?["scopesReset"] as? Int, 1, "\(String(describing: stats))")
        }
        let restarted = try TestEmulator(.inProcess, arguments: arguments)
        defer { restarted.stop() }
        XCTAssertEqual(try pageThrough(restarted, order: "desc", limit: 4) {}, ["f2", "f1"])
        XCTAssertEqual(try list(restarted, "q=d3").ids, [])
        let campaigns = try json(try restarted.get("/emulator/v1/campaigns?scope=team:TEAM123456"))
        XCTAssertEqual((campaigns["totals"] as? [String: Any])?["sent"] as? Int, 3, "\(campaigns)")
        // The journal still has every record for the unscoped report.
        let report = try json(try restarted.get("/emulator/v1/report?format=json"))
        XCTAssertEqual((report["totals"] as? [String: Any])?["sent"] as? Int, 12)
    }
}
