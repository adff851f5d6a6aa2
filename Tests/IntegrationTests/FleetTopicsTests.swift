import Foundation
import TestSupport
import XCTest

/// FCM topics at fleet scale through the real binary: a fleet subscribes a share of its members
/// in its definition, the Instance ID API changes single members' subscriptions, topic and
/// condition sends reach exactly the members subscribed, none of it makes a record per member,
/// and all of it is the same after a restart.
final class FleetTopicsTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-fleet-topics-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func serve() throws -> ServerProcess {
        try ServerProcess(["--in-memory=false", "--data-dir", dir + "/data", "--state-snapshot-interval", "0"])
    }

    func call(_ s: ServerProcess, _ method: String, _ path: String, _ body: String? = nil) throws -> (Int, [String: Any]) {
        var args = ["-sS", "-w", "\n%{http_code}", "-X", method, "-H", "authorization: Bearer any", "-H", "content-type: application/json"]
        if let body { args += ["-d", body] }
        let r = try runCommand("curl", args + ["http://127.0.0.1:\(s.httpPort)" + path], timeout: 20)
        let parts = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let code = Int(parts.last ?? "") ?? 0
        let text = parts.dropLast().joined(separator: "\n")
        let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? ["text": text]
        return (code, object)
    }

    /// Sends to `target` (`"topic":"news"` or `"condition":"..."`) and returns how many devices
    /// the fan-out delivered to.
    func send(_ s: ServerProcess, _ target: String) throws -> Int {
        let before = try fanOut(s)
        let (code, body) = try call(s, "POST", "/v1/projects/demo/messages:send", #"{"message":{\#(target),"data":{"k":"v"}}}"#)
        XCTAssertEqual(code, 200, "\(body)")
        let deadline = Date().addingTimeInterval(20)
        var now = try fanOut(s)
        while now.completed == before.completed && Date() < deadline {
            usleep(20_000)
            now = try fanOut(s)
        }
        XCTAssertEqual(now.completed, before.completed + 1, "the fan-out finished")
        return now.delivered - before.delivered
    }

    func fanOut(_ s: ServerProcess) throws -> (completed: Int, delivered: Int) {
        let f = try XCTUnwrap(try call(s, "GET", "/emulator/v1/stats").1["fanOut"] as? [String: Any])
        return (f["completed"] as? Int ?? -1, f["delivered"] as? Int ?? -1)
    }

    func topics(_ s: ServerProcess, _ token: String) throws -> [String] {
        let (code, body) = try call(s, "GET", "/iid/info/\(token)?details=true")
        XCTAssertEqual(code, 200, "\(body)")
        return ((body["rel"] as? [String: Any])?["topics"] as? [String: Any])?.keys.sorted() ?? []
    }

    func testAFleetSubscribesByShareAndTheInstanceIDAPIChangesMembers() throws {
        var s = try serve()
        // Refused: topics on an iOS fleet, a share past 1, a name FCM refuses.
        XCTAssertEqual(
            try call(s, "POST", "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example.app","count":10,"topics":{"news":1}}"#).0, 400
        )
        XCTAssertEqual(
            try call(s, "POST", "/emulator/v1/fleets", #"{"platform":"android","app":"a.b","count":10,"topics":{"news":1.5}}"#).0, 400)
        XCTAssertEqual(
            try call(s, "POST", "/emulator/v1/fleets", #"{"platform":"android","app":"a.b","count":10,"topics":{"bad name!":1}}"#).0, 400)
        let (created, fleet) = try call(
            s, "POST", "/emulator/v1/fleets",
            #"{"platform":"android","app":"com.example.app","project":"demo","count":3000,"seed":9,"topics":{"news":1.0,"sports":0.3}}"#)
        XCTAssertEqual(created, 201, "\(fleet)")
        XCTAssertEqual(fleet["topics"] as? [String: Double], ["news": 1.0, "sports": 0.3])
        let tokens = try XCTUnwrap(try call(s, "GET", "/emulator/v1/fleets/fleet-1/tokens?limit=3000").1["tokens"] as? [String])
        XCTAssertEqual(tokens.count, 3000)

        // Every member has news; about three in ten sports (the same ones in every run).
        XCTAssertEqual(try send(s, #""topic":"news""#), 3000)
        let sports = try send(s, #""topic":"sports""#)
        XCTAssertEqual(Double(sports), 900, accuracy: 90)
        XCTAssertEqual(try send(s, #""topic":"weather""#), 0)

        // The Instance ID API: three members join vip, one leaves news, one leaves sports.
        let sportsMember = try XCTUnwrap(tokens.first { try self.topics(s, $0).contains("sports") })
        let add = try call(
            s, "POST", "/iid/v1:batchAdd", #"{"to":"/topics/vip","registration_tokens":["\#(tokens[0])","\#(tokens[1])","\#(tokens[2])"]}"#)
        XCTAssertEqual(add.0, 200)
        XCTAssertEqual(add.1["results"] as? [[String: String]], [[:], [:], [:]])
        XCTAssertEqual(try call(s, "POST", "/iid/v1:batchRemove", #"{"to":"/topics/news","registration_tokens":["\#(tokens[5])"]}"#).0, 200)
        XCTAssertEqual(
            try call(s, "POST", "/iid/v1:batchRemove", #"{"to":"/topics/sports","registration_tokens":["\#(sportsMember)"]}"#).0, 200)
        XCTAssertEqual(try topics(s, tokens[0]).filter { $0 != "sports" }, ["news", "vip"])
        XCTAssertFalse(try topics(s, tokens[5]).contains("news"))
        XCTAssertFalse(try topics(s, sportsMember).contains("sports"))
        XCTAssertEqual(try send(s, #""topic":"vip""#), 3)
        XCTAssertEqual(try send(s, #""topic":"news""#), 2999)
        XCTAssertEqual(try send(s, #""topic":"sports""#), sports - 1)
        XCTAssertEqual(try send(s, #""condition":"'vip' in topics && 'news' in topics""#), 3)
        XCTAssertEqual(
            try send(s, #""condition":"'sports' in topics || 'vip' in topics""#),
            sports - 1 + (try [0, 1, 2].filter { try !self.topics(s, tokens[$0]).contains("sports") }.count))

        // A member's inbox comes from the journal: FCM's collapse_key collapses there as on a record.
        let member = tokens[7]
        for n in 1...2 {
            let (code, body) = try call(
                s, "POST", "/v1/projects/demo/messages:send",
                #"{"message":{"token":"\#(member)","android":{"collapse_key":"score"},"data":{"n":"\#(n)"}}}"#)
            XCTAssertEqual(code, 200, "\(body)")
        }
        let device = try call(s, "GET", "/emulator/v1/devices/\(member)").1
        XCTAssertGreaterThanOrEqual(device["received"] as? Int ?? 0, 4, "two topic sends and two of its own")
        XCTAssertEqual(device["inbox"] as? Int, 1, "\(device)")
        XCTAssertEqual(device["collapsed"] as? Int, 1, "\(device)")
        let inbox = try XCTUnwrap(try call(s, "GET", "/emulator/v1/devices/\(member)/inbox").1["inbox"] as? [[String: Any]])
        XCTAssertEqual(inbox.first?["collapseId"] as? String, "score")
        // No record per member: neither device records nor FCM registry tokens.
        let stats = try call(s, "GET", "/emulator/v1/stats").1
        XCTAssertEqual((stats["devices"] as? [String: Any])?["records"] as? Int, 0, "\(stats)")
        XCTAssertEqual((stats["devices"] as? [String: Any])?["fcmTokens"] as? Int, 0, "\(stats)")

        // A restart (and a kill after it: the changes are in the log) keeps every subscription.
        XCTAssertEqual(s.stop(), 0)
        s = try serve()
        XCTAssertEqual(try send(s, #""topic":"vip""#), 3)
        XCTAssertEqual(try send(s, #""topic":"news""#), 2999)
        XCTAssertEqual(try call(s, "POST", "/iid/v1:batchAdd", #"{"to":"/topics/news","registration_tokens":["\#(tokens[5])"]}"#).0, 200)
        s.stop(signal: SIGKILL, timeout: 5)
        s = try serve()
        defer { s.stop() }
        XCTAssertEqual(try send(s, #""topic":"news""#), 3000)
        XCTAssertEqual(try send(s, #""topic":"sports""#), sports - 1)

        // An uninstalled member is no instance: 404, and a subscription is NOT_FOUND.
        let gone = tokens[8]
        XCTAssertEqual(try call(s, "DELETE", "/emulator/v1/devices/\(gone)").0, 200)
        XCTAssertEqual(try call(s, "GET", "/iid/info/\(gone)").0, 404)
        let refused = try call(s, "POST", "/iid/v1:batchAdd", #"{"to":"/topics/vip","registration_tokens":["\#(gone)"]}"#)
        XCTAssertEqual(refused.1["results"] as? [[String: String]], [["error": "NOT_FOUND"]])
        XCTAssertEqual(try send(s, #""topic":"news""#), 2999, "an uninstalled member is not sent to")
    }
}
