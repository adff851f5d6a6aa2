import EmulatorTesting
import Foundation
import Journal
import PushCore
import XCTest

/// What new users and real clients tripped on (round 3), in process: each case fails on the
/// build before it was fixed.
final class FrictionTests: XCTestCase {
    static let token = "e" + String(repeating: "0", count: 20) + "1:APA91b" + String(repeating: "Tok001", count: 22) + "x"

    func object(_ r: TestResponse) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any], r.text)
    }

    /// Every request the journal holds, oldest first.
    func requests(_ emulator: TestEmulator) throws -> [StoredRequest] {
        let journal = try XCTUnwrap(emulator.inProcess?.journal)
        var out: [StoredRequest] = []
        journal.scan { entry in
            if case .request(let r) = entry { out.append(r) }
            return true
        }
        return out
    }

    func send(_ emulator: TestEmulator, _ message: String, auth: Bool = true, project: String = "p1") throws -> TestResponse {
        var headers = [("content-type", "application/json")]
        if auth { headers.append(("authorization", "Bearer anything")) }
        return try emulator.h2([TestRequest("POST", "/v1/projects/\(project)/messages:send", headers: headers, body: message)])[0]
    }

    /// A rejected FCM send is journaled under the token (or fid, topic, condition) it named,
    /// whatever refused it: the registry (an uninstalled app), the credentials (before the body
    /// is read), or the message's rules.
    func testRejectedFCMSendsAreJournaledUnderWhatTheyNamed() throws {
        let emulator = try TestEmulator(.inProcess, arguments: ["--durability", "strict"])
        defer { emulator.stop() }
        let t = FrictionTests.token
        XCTAssertEqual(try emulator.http1(TestRequest("DELETE", "/emulator/v1/devices/\(t)")).status, 200)
        XCTAssertEqual(try send(emulator, #"{"message":{"token":"\#(t)","data":{"k":"v"}}}"#).status, 404)
        XCTAssertEqual(try send(emulator, #"{"message":{"token":"\#(t)","data":{"k":"v"}}}"#, auth: false).status, 401)
        XCTAssertEqual(try send(emulator, #"{"message":{"token":"\#(t)","data":{"k":1}}}"#).status, 400)
        XCTAssertEqual(try send(emulator, #"{"message":{"topic":"news","data":{"k":"v"}}}"#, auth: false).status, 401)
        XCTAssertEqual(try send(emulator, #"{"message":{"fid":"cAAAAAAAAAAAAAAAAAAAAA","data":{"k":"v"}}}"#).status, 404)
        let rejected = try requests(emulator).filter { $0.status != 200 }
        XCTAssertEqual(rejected.count, 5)
        XCTAssertEqual(rejected.map(\.token), [t, t, t, "", "cAAAAAAAAAAAAAAAAAAAAA"])
        XCTAssertEqual(rejected.map { $0.topic ?? "" }, ["", "", "", "news", ""])
        // The report counts the rejected device as a device.
        let report = try object(try emulator.get("/emulator/v1/report?format=json"))
        let totals = try XCTUnwrap(report["totals"] as? [String: Any])
        XCTAssertEqual(totals["uniqueDevices"] as? Int, 2, "\(totals)")
    }

    /// A rule for FCM's sends does not reach the OAuth token endpoint (firebase-admin then got a
    /// RefreshError instead of exercising its send retries); a rule naming the route does.
    func testProviderRulesSpareTheTokenEndpointUnlessTheyNameIt() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=not.a.jwt"
        func token() throws -> TestResponse {
            try emulator.http1(TestRequest("POST", "/token", headers: [("content-type", "application/x-www-form-urlencoded")], body: grant))
        }
        let unfaulted = try token()
        XCTAssertEqual(unfaulted.status, 400, unfaulted.text)
        var r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/faults", body: #"{"match":{"provider":"fcm"},"effect":{"errorCode":"UNAVAILABLE"}}"#))
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(try token().text, unfaulted.text, "the send rule left the token endpoint alone")
        XCTAssertEqual(try send(emulator, #"{"message":{"token":"\#(FrictionTests.token)","data":{"k":"v"}}}"#).status, 503)
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/faults", body: #"{"match":{"provider":"fcm","route":"token"},"effect":{"status":500}}"#))
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(try token().status, 500, "a rule naming the route reaches it")
        r = try emulator.http1(TestRequest("POST", "/emulator/v1/faults", body: #"{"match":{"route":"oauth"},"effect":{"status":500}}"#))
        XCTAssertEqual(r.status, 400)
        XCTAssertTrue(r.text.contains("match.route must be send, broadcast, token, channels"), r.text)
    }

    /// A rule's reason or error code is one the provider has, or refused with the nearest one;
    /// `"custom": true` sends any.
    func testRuleReasonsAreCheckedAgainstTheProvidersLists() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        func rule(_ effect: String, provider: String = "apns") throws -> TestResponse {
            try emulator.http1(
                TestRequest("POST", "/emulator/v1/faults", body: #"{"match":{"provider":"\#(provider)"},"effect":\#(effect)}"#))
        }
        var r = try rule(#"{"status":503,"reason":"Sevice Unavailable"}"#)
        XCTAssertEqual(r.status, 400)
        XCTAssertTrue(
            r.text.contains("effect.reason 'Sevice Unavailable' is not one of APNs's reasons (did you mean ServiceUnavailable?)"), r.text)
        XCTAssertTrue(r.text.contains(#"add \"custom\": true"#), r.text)
        r = try rule(#"{"status":503,"errorCode":"UNAVAILABEL"}"#, provider: "fcm")
        XCTAssertEqual(r.status, 400)
        XCTAssertTrue(r.text.contains("is not one of FCM's error codes (did you mean UNAVAILABLE?)"), r.text)
        r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/scenarios",
                body: #"{"steps":[{"at":0,"match":{"provider":"apns"},"effect":{"status":500,"reason":"InternalError"}}]}"#))
        XCTAssertEqual(r.status, 400, "scenario steps too: \(r.text)")
        r = try emulator.http1(
            TestRequest("POST", "/emulator/v1/faults", body: #"{"match":{"percent":5},"effect":{"errorCode":"QUOTA_EXCEDED"}}"#))
        XCTAssertTrue(r.status == 400 && r.text.contains("did you mean QUOTA_EXCEEDED?"), "a rule of any provider: \(r.text)")
        XCTAssertEqual(try rule(#"{"status":503,"reason":"ServiceUnavailable"}"#).status, 201)
        XCTAssertEqual(try rule(#"{"status":418,"reason":"Teapot","custom":true}"#).status, 201)
        XCTAssertEqual(
            try emulator.http1(TestRequest("GET", "/emulator/v1/faults")).text.contains(
                #""effect":{"status":418,"reason":"Teapot","custom":true}"#),
            true)
    }
}
