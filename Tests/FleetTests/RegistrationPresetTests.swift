import Fleet
import Foundation
import PushCore
import Tracking
import XCTest

/// Each registration preset builds the request tracking.md §1.3 and the Pushwoosh SDK give,
/// byte for byte, and Adobe's skips a registration when nothing changed.
final class RegistrationPresetTests: XCTestCase {
    func config(_ json: String) throws -> RegistrationConfig { try RegistrationConfig.parse(Array(json.utf8)) }

    func ctx(_ event: TrackingEvent, _ platform: String, token: String = "tok 1&2", previous: String? = nil) -> RegistrationContext {
        RegistrationContext(
            event: event, platform: platform, token: token, previousToken: previous, app: "com.example.app",
            hwid: "5f0c7a2e-0000-4000-8000-000000000001", atMs: 1_800_000_000_000)
    }

    func request(_ c: RegistrationConfig, _ x: RegistrationContext, last: String? = nil) -> (TrackingRequest, String?)? {
        if case .job(let job, let fingerprint) = RegistrationPresets.job(c, x, lastFingerprint: last) { return (job.request, fingerprint) }
        return nil
    }

    func testAdobeCampaignRegistersAsTheSDKDoes() throws {
        let c = try config(
            #"{"preset":"adobe-campaign","url":"https://mkt.example.com/","integrationKey":"abc-123","userKey":"jane@example.com","additionalParams":{"plan":"gold & <vip>","age":"42"}}"#
        )
        let (android, fingerprint) = try XCTUnwrap(request(c, ctx(.register, "android")))
        XCTAssertEqual(android.method, "POST")
        XCTAssertEqual(android.url, "https://mkt.example.com/nms/mobile/1/registerAndroid.jssp")
        XCTAssertEqual(android.headers.map { "\($0.0): \($0.1)" }, ["Content-Type: application/x-www-form-urlencoded;charset=UTF-8"])
        let params =
            "<additionalParameters><param name=\"plan\" value=\"gold &amp; &lt;vip&gt;\"/><param name=\"age\" value=\"42\"/></additionalParameters>"
        func form(_ s: String) -> String { RegistrationPresetTests.javaURLEncode(s) }
        XCTAssertEqual(
            String(decoding: android.body, as: UTF8.self),
            "registrationToken=tok+1%262&mobileAppUuid=abc-123&userKey=jane%40example.com&deviceImei=&deviceName=Pixel+8"
                + "&deviceModel=Pixel+8&deviceBrand=google&deviceManufacturer=Google&osName=android&osVersion=14&osLanguage=en-US"
                + "&additionalParams=" + form(params))
        // iOS: registerIOS.jssp, the same fields without deviceImei.
        let (ios, _) = try XCTUnwrap(request(c, ctx(.register, "ios")))
        XCTAssertEqual(ios.url, "https://mkt.example.com/nms/mobile/1/registerIOS.jssp")
        let body = String(decoding: ios.body, as: UTF8.self)
        XCTAssertFalse(body.contains("deviceImei"))
        XCTAssertTrue(body.contains("&osName=ios&osVersion=17.4&"), body)
        // Unchanged token, user key, parameters and key: no second call; any change: a call.
        guard case .skip = RegistrationPresets.job(c, ctx(.register, "android"), lastFingerprint: fingerprint) else {
            return XCTFail("an unchanged registration was sent again")
        }
        XCTAssertNotNil(request(c, ctx(.register, "android", token: "tok-2"), last: fingerprint), "a refreshed token registers")
        let other = try config(
            #"{"preset":"adobe-campaign","url":"https://mkt.example.com","integrationKey":"abc-123","userKey":"john@example.com","additionalParams":{"plan":"gold & <vip>","age":"42"}}"#
        )
        XCTAssertNotNil(request(other, ctx(.register, "android"), last: fingerprint), "a new user key registers")
        // Adobe's SDK sends nothing on uninstall or app open.
        for event in [TrackingEvent.unregister, .appOpen] {
            guard case .skip = RegistrationPresets.job(c, ctx(event, "android"), lastFingerprint: nil) else { return XCTFail("\(event)") }
        }
    }

    /// What `java.net.URLEncoder.encode(s, "UTF-8")` writes.
    static func javaURLEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            if (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x2D || b == 0x2A
                || b == 0x5F
            {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else if b == 0x20 {
                out += "+"
            } else {
                out += "%" + String(format: "%02X", b)
            }
        }
        return out
    }

    func testPushwooshRegistersUnregistersAndReportsAppOpen() throws {
        let c = try config(#"{"preset":"pushwoosh","appCode":"ABCDE-12345","apiToken":"secret","userId":"jane"}"#)
        let (register, _) = try XCTUnwrap(request(c, ctx(.register, "ios", token: "aabb")))
        XCTAssertEqual(register.method, "POST")
        XCTAssertEqual(register.url, "https://ABCDE-12345.api.pushwoosh.com/json/1.3/registerDevice")
        XCTAssertEqual(
            register.headers.map { "\($0.0): \($0.1)" }, ["Content-Type: application/json; charset=utf-8", "Authorization: Token secret"])
        XCTAssertEqual(
            String(decoding: register.body, as: UTF8.self),
            #"{"request":{"application":"ABCDE-12345","hwid":"5f0c7a2e-0000-4000-8000-000000000001","push_token":"aabb","device_type":1,"language":"en","timezone":0,"device_model":"iPhone15,2","os_version":"17.4","app_version":"1.0","v":"6.7.0","userId":"jane"}}"#
        )
        let (unregister, fingerprint) = try XCTUnwrap(request(c, ctx(.unregister, "android")))
        XCTAssertNil(fingerprint)
        XCTAssertEqual(unregister.url, "https://ABCDE-12345.api.pushwoosh.com/json/1.3/unregisterDevice")
        XCTAssertEqual(
            String(decoding: unregister.body, as: UTF8.self),
            #"{"request":{"application":"ABCDE-12345","hwid":"5f0c7a2e-0000-4000-8000-000000000001","userId":"jane"}}"#)
        let (open, _) = try XCTUnwrap(request(c, ctx(.appOpen, "android")))
        XCTAssertEqual(open.url, "https://ABCDE-12345.api.pushwoosh.com/json/1.3/applicationOpen")
        XCTAssertTrue(String(decoding: open.body, as: UTF8.self).contains(#""device_type":3"#))
        // A url replaces the SDK's own host (a local sink).
        let local = try config(#"{"preset":"pushwoosh","url":"http://127.0.0.1:9/pw/","appCode":"X"}"#)
        XCTAssertEqual(try XCTUnwrap(request(local, ctx(.register, "android"))).0.url, "http://127.0.0.1:9/pw/json/1.3/registerDevice")
    }

    func testWebhookTemplatesSeeTheDeviceAndTheTokenItReplaces() throws {
        let c = try config(
            #"{"preset":"webhook","method":"PUT","url":"http://127.0.0.1:9/devices/{device.hwid}","headers":{"X-Event":"{event}"},"body":"{{\"token\":{device.token|json},\"old\":{device.previousToken|json},\"app\":{device.app|json}}}"}"#
        )
        let (r, _) = try XCTUnwrap(request(c, ctx(.register, "android", token: "new", previous: "old")))
        XCTAssertEqual(r.method, "PUT")
        XCTAssertEqual(r.url, "http://127.0.0.1:9/devices/5f0c7a2e-0000-4000-8000-000000000001")
        XCTAssertEqual(r.headers.map { "\($0.0): \($0.1)" }, ["X-Event: register"])
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), #"{"token":"new","old":"old","app":"com.example.app"}"#)
        XCTAssertEqual(try XCTUnwrap(request(c, ctx(.unregister, "android"))).0.headers.first?.1, "unregister")
    }

    func testConfigurationErrors() {
        for (json, message) in [
            (#"{"url":"http://x"}"#, "registration.preset is required"),
            (#"{"preset":"onesignal","url":"http://x"}"#, "not confirmed by a public source"),
            (#"{"preset":"braze","url":"http://x"}"#, "webhook preset"),
            (#"{"preset":"airship","url":"http://x"}"#, "unknown registration preset"),
            (#"{"preset":"adobe-campaign"}"#, "registration.url is required"),
            (#"{"preset":"adobe-campaign","url":"ftp://x"}"#, "must start with http"),
            (#"{"preset":"adobe-campaign","url":"http://x","additionalParams":{"a":1}}"#, "must be an object of strings"),
            (#"{"preset":"pushwoosh","url":"http://x","body":"x"}"#, "the webhook preset's"),
            (#"[1]"#, "must be a JSON object"),
        ] {
            XCTAssertThrowsError(try config(json), json) { e in XCTAssertTrue("\(e)".contains(message), "\(json): \(e)") }
        }
        XCTAssertNoThrow(try config(#"{"preset":"pushwoosh","appCode":"A"}"#), "with an appCode the SDK's own host is used")
    }
}
