import EmulatorTesting
import Foundation
import TestSupport
import XCTest

/// Devices register their tokens as their SDK does, through the tracking dispatcher, to a local
/// sink: on creation, again only when something changed (Adobe), on a token refresh (the new
/// token, the hardware id kept), on uninstall (Pushwoosh), and on an app open (Pushwoosh).
final class RegistrationTests: XCTestCase {
    func json(_ r: TestResponse) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any], r.text)
    }

    func form(_ body: String) -> [String: String] {
        var out: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let value = String(kv.count > 1 ? kv[1] : "").replacingOccurrences(of: "+", with: " ")
            out[String(kv[0])] = value.removingPercentEncoding ?? value
        }
        return out
    }

    func testAdobeRegistersOnceUntilSomethingChanges() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let registration =
            #"{"preset":"adobe-campaign","url":"\#(sink.url)","integrationKey":"key-1","userKey":"jane","additionalParams":{"tier":"gold"}}"#
        var r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices", body: #"{"platform":"android","app":"com.example","registration":\#(registration)}"#))
        XCTAssertEqual(r.status, 201, r.text)
        let token = try XCTUnwrap(try json(r)["token"] as? String)
        XCTAssertEqual(sink.wait(for: 1), 1)
        let first = try XCTUnwrap(sink.requests.first)
        XCTAssertEqual(first.method, "POST")
        XCTAssertEqual(first.target, "/nms/mobile/1/registerAndroid.jssp")
        XCTAssertEqual(first.headers["content-type"], "application/x-www-form-urlencoded;charset=UTF-8")
        let fields = form(first.body)
        XCTAssertEqual(fields["registrationToken"], token)
        XCTAssertEqual(fields["mobileAppUuid"], "key-1")
        XCTAssertEqual(fields["userKey"], "jane")
        XCTAssertEqual(fields["additionalParams"], #"<additionalParameters><param name="tier" value="gold"/></additionalParameters>"#)

        // The same registration again: the SDK sends nothing. A new user key: it registers. The
        // calls of one device keep their order, so two requests in all prove the first was skipped.
        r = try emulator.http1(TestRequest("PATCH", "/emulator/v1/devices/\(token)", body: #"{"registration":\#(registration)}"#))
        XCTAssertEqual(r.status, 200, r.text)
        let changed = registration.replacingOccurrences(of: #""userKey":"jane""#, with: #""userKey":"john""#)
        r = try emulator.http1(TestRequest("PATCH", "/emulator/v1/devices/\(token)", body: #"{"registration":\#(changed)}"#))
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(sink.wait(for: 2), 2)
        XCTAssertEqual(form(sink.requests[1].body)["userKey"], "john")

        // A token refresh registers the new token.
        r = try emulator.http1(TestRequest("POST", "/emulator/v1/devices/\(token):rotate"))
        XCTAssertEqual(r.status, 200, r.text)
        let fresh = try XCTUnwrap(try json(r)["token"] as? String)
        XCTAssertNotEqual(fresh, token)
        XCTAssertEqual(sink.wait(for: 3), 3)
        XCTAssertEqual(form(sink.requests[2].body)["registrationToken"], fresh)
        // Uninstall: Adobe's SDK sends nothing; the attempt log has the three registrations.
        r = try emulator.http1(TestRequest("DELETE", "/emulator/v1/devices/\(fresh)"))
        XCTAssertLessThan(r.status, 300, r.text)
        r = try emulator.get("/emulator/v1/tracking?event=register&limit=10")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try XCTUnwrap(try json(r)["tracking"] as? [Any]).count, 3, r.text)
        XCTAssertEqual(sink.count, 3)
    }

    func testPushwooshFromTheServerDefault() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(
            .inProcess, arguments: ["--registration-preset", "pushwoosh", "--registration-url", sink.url + "/pw"])
        defer { emulator.stop() }
        var r = try emulator.http1(TestRequest("POST", "/emulator/v1/devices", body: #"{"platform":"ios","app":"com.example.app"}"#))
        XCTAssertEqual(r.status, 201, r.text)
        let token = try XCTUnwrap(try json(r)["token"] as? String)
        XCTAssertEqual(sink.wait(for: 1), 1)
        XCTAssertEqual(sink.requests[0].target, "/pw/json/1.3/registerDevice")
        let register = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(sink.requests[0].body.utf8)) as? [String: [String: Any]])["request"]
        XCTAssertEqual(register?["push_token"] as? String, token)
        XCTAssertEqual(register?["device_type"] as? Int, 1)
        let hwid = try XCTUnwrap(register?["hwid"] as? String)

        r = try emulator.http1(TestRequest("POST", "/emulator/v1/devices/\(token):rotate"))
        let fresh = try XCTUnwrap(try json(r)["token"] as? String)
        XCTAssertEqual(sink.wait(for: 2), 2)
        let again = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(sink.requests[1].body.utf8)) as? [String: [String: Any]])["request"]
        XCTAssertEqual(again?["push_token"] as? String, fresh)
        XCTAssertEqual(again?["hwid"] as? String, hwid, "the hardware id survives a token refresh")

        r = try emulator.http1(TestRequest("DELETE", "/emulator/v1/devices/\(fresh)"))
        XCTAssertEqual(sink.wait(for: 3), 3)
        XCTAssertEqual(sink.requests[2].target, "/pw/json/1.3/unregisterDevice")
        XCTAssertTrue(sink.requests[2].body.contains(hwid))
        XCTAssertEqual(sink.requests[2].headers["authorization"]?.hasPrefix("Token"), true)
    }

    func testConfigurationIsChecked() throws {
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/devices",
                body: #"{"platform":"ios","app":"a","registration":{"preset":"onesignal","url":"http://127.0.0.1:9"}}"#))
        XCTAssertEqual(r.status, 400)
        XCTAssertTrue(r.text.contains("webhook preset"), r.text)
        XCTAssertThrowsError(try TestEmulator(.inProcess, arguments: ["--registration-preset", "adobe-campaign"]))
        XCTAssertThrowsError(try TestEmulator(.inProcess, arguments: ["--registration-url", "http://127.0.0.1:9"]))
    }

    /// Polls the fleet until its registration is `state` (at most `timeout` seconds).
    func progress(_ emulator: TestEmulator, _ id: String, until state: String, timeout: Double = 60) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let fleet = try json(try emulator.get("/emulator/v1/fleets/\(id)"))
            let p = try XCTUnwrap(fleet["registrationProgress"] as? [String: Any], "\(fleet)")
            if p["state"] as? String == state || Date() > deadline { return p }
            usleep(20_000)
        }
    }

    func testAFleetRegistersEveryMemberOnce() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        let count = 100_000
        var r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/fleets",
                body:
                    #"{"platform":"android","app":"com.example","project":"p","count":\#(count),"uninstalledRate":0.01,"registerRate":1000000,"registration":{"preset":"webhook","method":"GET","url":"\#(sink.url)/reg/{device.token}"}}"#
            ))
        XCTAssertEqual(r.status, 201, r.text)
        let id = try XCTUnwrap(try json(r)["id"] as? String)
        let done = try progress(emulator, id, until: "done")
        XCTAssertEqual(done["state"] as? String, "done", "\(done)")
        let registered = try XCTUnwrap(done["registered"] as? Int)
        let skipped = try XCTUnwrap(done["skipped"] as? Int)
        XCTAssertEqual(registered + skipped, count)
        XCTAssertGreaterThan(skipped, 500, "about 1% start uninstalled and never register")
        XCTAssertLessThan(skipped, 1_500)
        XCTAssertEqual(sink.wait(for: registered, timeout: 60), registered)
        // Every call names a member of the fleet, and no member is registered twice.
        r = try emulator.get("/emulator/v1/fleets/\(id)/tokens?limit=\(count)")
        let members = Set(try XCTUnwrap(try json(r)["tokens"] as? [String]))
        XCTAssertEqual(members.count, count)
        let received = sink.requests.map { String($0.target.dropFirst("/reg/".count)) }
        XCTAssertEqual(received.count, registered)
        XCTAssertEqual(Set(received).count, registered, "a member registered twice")
        XCTAssertTrue(Set(received).isSubset(of: members))
        usleep(200_000)
        XCTAssertEqual(sink.count, registered, "nothing more after done")
    }

    func testAFleetRegistrationPausesAndResumes() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        let emulator = try TestEmulator(.inProcess)
        defer { emulator.stop() }
        var r = try emulator.http1(
            TestRequest(
                "POST", "/emulator/v1/fleets",
                body:
                    #"{"platform":"ios","app":"com.example.app","count":4000,"registerRate":2000,"registration":{"preset":"pushwoosh","url":"\#(sink.url)","appCode":"A"}}"#
            ))
        XCTAssertEqual(r.status, 201, r.text)
        let id = try XCTUnwrap(try json(r)["id"] as? String)
        XCTAssertGreaterThanOrEqual(sink.wait(for: 100), 100)
        r = try emulator.http1(TestRequest("POST", "/emulator/v1/fleets/\(id):pauseRegistration"))
        XCTAssertEqual(r.status, 200, r.text)
        let paused = try progress(emulator, id, until: "paused")
        XCTAssertEqual(paused["state"] as? String, "paused")
        let atPause = try XCTUnwrap(paused["registered"] as? Int)
        XCTAssertLessThan(atPause, 4000)
        usleep(300_000)
        XCTAssertEqual(try progress(emulator, id, until: "paused")["registered"] as? Int, atPause, "a paused registration sends nothing")
        r = try emulator.http1(TestRequest("POST", "/emulator/v1/fleets/\(id):resumeRegistration"))
        XCTAssertEqual(r.status, 200, r.text)
        let done = try progress(emulator, id, until: "done")
        XCTAssertEqual(done["registered"] as? Int, 4000, "\(done)")
        XCTAssertEqual(sink.wait(for: 4000), 4000)
        XCTAssertEqual(Set(sink.requests.map(\.body)).count, 4000, "each member once, from where it paused")
        XCTAssertTrue(sink.requests.allSatisfy { $0.target == "/json/1.3/registerDevice" })
        r = try emulator.http1(TestRequest("POST", "/emulator/v1/fleets/\(id):rotate"))
        XCTAssertEqual(r.status, 404)
    }
}
