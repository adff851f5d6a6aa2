import Fleet
import PushCore
import Tracking
import XCTest

/// Every SDK lint rule fires on a payload that breaks it and stays silent on one that keeps it
/// (a clean payload for its SDK has no findings at all).
final class SDKLintTests: XCTestCase {
    struct Case {
        var code: String
        var preset: String
        var ios: Bool
        var bad: String
        var good: String
        var profile: AppProfile? = nil
        var severity: LintFinding.Severity
        var path: String
    }

    static let uuid = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"

    // Clean payloads per SDK and platform.
    static let adobeIOS = #"{"aps":{"alert":"Hi","mutable-content":1},"_mId":"12345","_dId":"67890""#
    static let adobeAndroid = #"{"token":"t","data":{"_mId":"12345","_dId":"67890","_msg":"Hi""#
    static let pushwooshIOS = #"{"aps":{"alert":"Hi","mutable-content":1},"pw_msg":"1","p":"a1b2""#
    static let pushwooshAndroid = #"{"token":"t","data":{"pw_msg":"1","p":"a1b2","title":"Hi""#
    static let moengageIOS = #"{"aps":{"alert":"Hi","mutable-content":1},"moengage":{"cid":"c_L_0","app_id":"A""#
    static let moengageAndroid = #"{"token":"t","data":{"push_from":"moengage","gcm_campaign_id":"000063766282_L_0","gcm_alert":"Hi""#
    static let brazeIOS = #"{"aps":{"alert":"Hi"},"ab":{"c":"camp""#
    static let brazeAndroid = #"{"token":"t","data":{"_ab":"true","cid":"camp","bz_p_e":"1","a":"Hi""#
    static let oneSignalIOS = #"{"aps":{"alert":"Hi"},"custom":{"i":"\#(uuid)""#
    static let oneSignalAndroid = #"{"token":"t","data":{"alert":"Hi","custom":"{\"i\":\"\#(uuid)\""#

    static let cases: [Case] = [
        // Adobe Campaign
        Case(
            code: "adobe.missing-ids", preset: "adobe-campaign", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1},"_mId":"12345"}"#, good: adobeIOS + "}", severity: .error, path: "_dId"),
        Case(
            code: "adobe.missing-ids", preset: "adobe-campaign", ios: false,
            bad: #"{"token":"t","data":{"_dId":"67890","_msg":"Hi"}}"#, good: adobeAndroid + "}}", severity: .error, path: "data._mId"),
        Case(
            code: "adobe.malformed-mid", preset: "adobe-campaign", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1},"_mId":"m-12","_dId":"67890"}"#,
            good: #"{"aps":{"alert":"Hi","mutable-content":1},"_mId":"\#(uuid)","_dId":"67890"}"#, severity: .error, path: "_mId"),
        Case(
            code: "adobe.malformed-did", preset: "adobe-campaign", ios: false,
            bad: #"{"token":"t","data":{"_mId":"12345","_dId":"a b,c","_msg":"Hi"}}"#, good: adobeAndroid + "}}",
            severity: .warning, path: "data._dId"),
        Case(
            code: "adobe.payload-near-limit", preset: "adobe-campaign", ios: true,
            bad: adobeIOS + ",\"pad\":\"" + String(repeating: "x", count: 3800) + "\"}",
            good: adobeIOS + ",\"pad\":\"" + String(repeating: "x", count: 3000) + "\"}", severity: .warning, path: ""),
        Case(
            code: "adobe.mutable-content-missing", preset: "adobe-campaign", ios: true,
            bad: #"{"aps":{"alert":"Hi"},"_mId":"12345","_dId":"67890","mediaUrl":"https://cdn.example.com/a.jpg"}"#,
            good: #"{"aps":{"alert":"Hi","mutable-content":1},"_mId":"12345","_dId":"67890","mediaUrl":"https://cdn.example.com/a.jpg"}"#,
            severity: .warning, path: "mediaUrl"),
        Case(
            code: "adobe.mutable-content-missing", preset: "adobe-campaign", ios: true,
            bad: #"{"aps":{"alert":"Hi"},"_mId":"12345","_dId":"67890"}"#,
            good: #"{"aps":{"content-available":1},"_mId":"12345","_dId":"67890"}"#, severity: .warning, path: "aps"),
        Case(
            code: "adobe.missing-message", preset: "adobe-campaign", ios: false,
            bad: #"{"token":"t","data":{"_mId":"12345","_dId":"67890"}}"#, good: adobeAndroid + "}}", severity: .warning,
            path: "data._msg"),
        // Pushwoosh
        Case(
            code: "pushwoosh.missing-pw-msg", preset: "pushwoosh", ios: false,
            bad: #"{"token":"t","data":{"p":"a1b2","title":"Hi"}}"#, good: pushwooshAndroid + "}}", severity: .error, path: "data.pw_msg"),
        Case(
            code: "pushwoosh.missing-hash", preset: "pushwoosh", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1},"pw_msg":"1"}"#, good: pushwooshIOS + "}", severity: .error, path: "p"),
        Case(
            code: "pushwoosh.invalid-custom-data", preset: "pushwoosh", ios: false,
            bad: pushwooshAndroid + #","u":"{not json"}}"#, good: pushwooshAndroid + #","u":"{\"k\":1}"}}"#, severity: .warning,
            path: "data.u"),
        Case(
            code: "pushwoosh.receive-needs-extension", preset: "pushwoosh", ios: true,
            bad: #"{"aps":{"alert":"Hi"},"pw_msg":"1","p":"a1b2"}"#, good: pushwooshIOS + "}", severity: .warning, path: "aps"),
        // MoEngage
        Case(
            code: "moengage.not-moengage", preset: "moengage", ios: false,
            bad: #"{"token":"t","data":{"push_from":"other","gcm_campaign_id":"c"}}"#, good: moengageAndroid + "}}", severity: .error,
            path: "data.push_from"),
        Case(
            code: "moengage.not-moengage", preset: "moengage", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1},"cid":"c"}"#, good: moengageIOS + "}}", severity: .error, path: "moengage"),
        Case(
            code: "moengage.missing-campaign-id", preset: "moengage", ios: false,
            bad: #"{"token":"t","data":{"push_from":"moengage","gcm_alert":"Hi"}}"#, good: moengageAndroid + "}}", severity: .error,
            path: "data.gcm_campaign_id"),
        Case(
            code: "moengage.missing-campaign-id", preset: "moengage", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1},"moengage":{"app_id":"A"}}"#, good: moengageIOS + "}}", severity: .error,
            path: "moengage.cid"),
        Case(
            code: "moengage.invalid-cid-attr", preset: "moengage", ios: false,
            bad: moengageAndroid + #","moe_cid_attr":"[1,2]"}}"#,
            good: moengageAndroid + #","moe_cid_attr":"{\"moe_campaign_id\":\"c\"}"}}"#, severity: .warning, path: "data.moe_cid_attr"),
        Case(
            code: "moengage.invalid-app-extra", preset: "moengage", ios: true,
            bad: moengageIOS + #"},"app_extra":"x"}"#, good: moengageIOS + #"},"app_extra":{"screen":"home"}}"#, severity: .warning,
            path: "app_extra"),
        Case(
            code: "moengage.receive-needs-extension", preset: "moengage", ios: true,
            bad: #"{"aps":{"alert":"Hi"},"moengage":{"cid":"c_L_0"}}"#, good: moengageIOS + "}}", severity: .warning, path: "aps"),
        // Braze
        Case(
            code: "braze.not-braze", preset: "braze", ios: false,
            bad: #"{"token":"t","data":{"cid":"camp","a":"Hi"}}"#, good: brazeAndroid + "}}", severity: .error, path: "data._ab"),
        Case(
            code: "braze.not-braze", preset: "braze", ios: true, bad: #"{"aps":{"alert":"Hi"},"c":"camp"}"#, good: brazeIOS + "}}",
            severity: .error, path: "ab"),
        Case(
            code: "braze.missing-campaign-id", preset: "braze", ios: true, bad: #"{"aps":{"alert":"Hi"},"ab":{"att":{}}}"#,
            good: brazeIOS + "}}", severity: .warning, path: "ab.c"),
        Case(
            code: "braze.missing-campaign-id", preset: "braze", ios: false,
            bad: #"{"token":"t","data":{"_ab":"true","bz_p_e":"1","a":"Hi"}}"#, good: brazeAndroid + "}}", severity: .warning,
            path: "data.cid"),
        Case(
            code: "braze.delivery-tracking-off", preset: "braze", ios: false,
            bad: #"{"token":"t","data":{"_ab":"true","cid":"camp","a":"Hi"}}"#, good: brazeAndroid + "}}", severity: .info,
            path: "data.bz_p_e"),
        // OneSignal
        Case(
            code: "onesignal.missing-id", preset: "onesignal", ios: false,
            bad: #"{"token":"t","data":{"alert":"Hi","custom":"{\"u\":\"https://example.com\"}"}}"#, good: oneSignalAndroid + "}\"}}",
            severity: .error, path: "data.custom.i"),
        Case(
            code: "onesignal.missing-id", preset: "onesignal", ios: true, bad: #"{"aps":{"alert":"Hi"}}"#, good: oneSignalIOS + "}}",
            severity: .error, path: "custom.i"),
        Case(
            code: "onesignal.malformed-id", preset: "onesignal", ios: true, bad: #"{"aps":{"alert":"Hi"},"custom":{"i":"42"}}"#,
            good: oneSignalIOS + "}}", severity: .warning, path: "custom.i"),
        // Links and sounds, every SDK
        Case(
            code: "link.invalid", preset: "pushwoosh", ios: false, bad: pushwooshAndroid + #","l":"example.com/sale"}}"#,
            good: pushwooshAndroid + #","l":"https://example.com/sale"}}"#, severity: .warning, path: "data.l"),
        Case(
            code: "link.invalid", preset: "braze", ios: true, bad: brazeIOS + #"},"ab_uri":"https:///sale"}"#,
            good: brazeIOS + #"},"ab_uri":"https://example.com/sale"}"#, severity: .warning, path: "ab_uri"),
        Case(
            code: "link.not-https", preset: "braze", ios: false, bad: brazeAndroid + #","uri":"http://example.com/sale"}}"#,
            good: brazeAndroid + #","uri":"https://example.com/sale"}}"#, severity: .warning, path: "data.uri"),
        Case(
            code: "link.scheme-not-declared", preset: "onesignal", ios: true,
            bad: oneSignalIOS + #","u":"otherapp://sale"}}"#, good: oneSignalIOS + #","u":"myapp://sale"}}"#,
            profile: AppProfile(urlSchemes: ["myapp"]), severity: .error, path: "custom.u"),
        Case(
            code: "link.scheme-not-declared", preset: "adobe-campaign", ios: false,
            bad: adobeAndroid + #","url":"shop://cart"}}"#, good: adobeAndroid + #","url":"MyApp://cart"}}"#,
            profile: AppProfile(urlSchemes: ["MYAPP"]), severity: .error, path: "data.url"),
        Case(
            code: "sound.format", preset: "pushwoosh", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1,"sound":"chime.mp3"},"pw_msg":"1","p":"a1b2"}"#,
            good: #"{"aps":{"alert":"Hi","mutable-content":1,"sound":"chime.caf"},"pw_msg":"1","p":"a1b2"}"#, severity: .warning,
            path: "aps.sound"),
        Case(
            code: "sound.format", preset: "braze", ios: true,
            bad: #"{"aps":{"alert":"Hi","sound":{"name":"ping","critical":1}},"ab":{"c":"camp"}}"#,
            good: #"{"aps":{"alert":"Hi","sound":{"name":"ping.aiff","critical":1}},"ab":{"c":"camp"}}"#, severity: .warning,
            path: "aps.sound.name"),
        Case(
            code: "sound.not-bundled", preset: "pushwoosh", ios: true,
            bad: #"{"aps":{"alert":"Hi","mutable-content":1,"sound":"bell.wav"},"pw_msg":"1","p":"a1b2"}"#,
            good: #"{"aps":{"alert":"Hi","mutable-content":1,"sound":"chime.caf"},"pw_msg":"1","p":"a1b2"}"#,
            profile: AppProfile(sounds: ["chime.caf"]), severity: .warning, path: "aps.sound"),
    ]

    func lint(_ c: Case, _ payload: String) -> [LintFinding] {
        let bytes = Array(payload.utf8)
        let reader = PayloadReader(bytes)
        XCTAssertTrue(reader.isObject, "not JSON: \(payload)")
        return SDKLint.check(
            LintInput(
                preset: c.preset, ios: c.ios, payload: reader, size: bytes.count,
                mutableContent: reader.value("aps.mutable-content") == "1",
                contentAvailable: reader.value("aps.content-available") == "1", profile: c.profile))
    }

    func testEveryRuleFiresOnTheBadPayloadAndNotOnTheGoodOne() {
        for c in Self.cases {
            let bad = lint(c, c.bad)
            let found = bad.filter { $0.code == c.code }
            XCTAssertEqual(found.count, 1, "\(c.code) (\(c.preset), \(c.ios ? "ios" : "android")) on \(c.bad): \(bad)")
            XCTAssertEqual(found.first?.severity, c.severity, c.code)
            XCTAssertEqual(found.first?.path, c.path, c.code)
            XCTAssertFalse(found.first?.message.isEmpty ?? true, c.code)
            XCTAssertEqual(lint(c, c.good), [], "\(c.code) (\(c.preset), \(c.ios ? "ios" : "android")) on the good \(c.good)")
        }
    }

    /// Each documented code has a case (the docs table and this list stay one).
    func testEveryCodeIsCovered() {
        let codes = Set(Self.cases.map(\.code))
        for code in SDKLintTests.documentedCodes { XCTAssertTrue(codes.contains(code), "no test for \(code)") }
        XCTAssertEqual(codes, Set(SDKLintTests.documentedCodes))
    }

    static let documentedCodes = [
        "adobe.missing-ids", "adobe.malformed-mid", "adobe.malformed-did", "adobe.payload-near-limit",
        "adobe.mutable-content-missing", "adobe.missing-message", "pushwoosh.missing-pw-msg", "pushwoosh.missing-hash",
        "pushwoosh.invalid-custom-data", "pushwoosh.receive-needs-extension", "moengage.not-moengage",
        "moengage.missing-campaign-id", "moengage.invalid-cid-attr", "moengage.invalid-app-extra",
        "moengage.receive-needs-extension", "braze.not-braze", "braze.missing-campaign-id", "braze.delivery-tracking-off",
        "onesignal.missing-id", "onesignal.malformed-id", "link.invalid", "link.not-https", "link.scheme-not-declared",
        "sound.format", "sound.not-bundled",
    ]

    /// The webhook preset has no SDK conventions: only the shared rules (none of its links are known).
    func testWebhookHasNoSDKRules() {
        let c = Case(code: "", preset: "webhook", ios: true, bad: "", good: "", severity: .info, path: "")
        XCTAssertEqual(lint(c, #"{"aps":{"alert":"Hi"}}"#), [])
        XCTAssertEqual(lint(c, #"{"aps":{"alert":"Hi","sound":"x.mp3"}}"#).map(\.code), ["sound.format"])
    }

    /// A finding survives the notification log's and the journal's line form.
    func testStoredLineRoundTrips() {
        let f = LintFinding("link.invalid", .warning, "a\tb\nc", path: "data.l")
        XCTAssertEqual(LintFinding(storedLine: f.storedLine[...]), LintFinding("link.invalid", .warning, "a b c", path: "data.l"))
        let o = DeviceOutcome(display: Display(.notShown, .permissionDenied), lint: [f])
        XCTAssertEqual(DeviceOutcome(storedText: o.storedText)?.display, o.display)
        XCTAssertEqual(DeviceOutcome(storedText: o.storedText)?.lint.map(\.code), ["link.invalid"])
    }
}
