import PushCore
import Tracking
import XCTest

@testable import Fleet

/// The display outcome for each permission, app state and kind of payload (`DisplayRules`),
/// and what it means for open tracking.
final class DisplayRulesTests: XCTestCase {
    typealias State = DisplayRules.DeviceState

    func state(_ platform: DevicePlatform, _ app: SimDevice.AppState = .background, _ permission: SimDevice.Permission = .authorized)
        -> State
    {
        var d = SimDevice(token: "t", platform: platform, app: "a", environment: nil, createdAtMs: 0, seed: 1)
        d.appState = app
        d.permission = permission
        return State(d)
    }

    func ios(_ alerts: AlertFacts, contentAvailable: Bool = false) -> Delivery {
        var d = Delivery(
            provider: .apns, platform: .ios, token: "t", app: "a", environment: "sandbox", notificationID: UUIDValue(high: 1, low: 1),
            messageName: nil, receivedAtMs: 0, payload: Array(#"{"aps":{}}"#.utf8))
        d.alerts = alerts
        d.contentAvailable = contentAvailable
        return d
    }

    /// The app's SDK as the device layer hands it to the rules: its preset, and the payload as it reads it.
    func sdk(_ preset: String, _ d: Delivery) -> LintInput {
        LintInput(
            preset: preset, ios: d.platform == .ios, payload: PayloadReader(Array(d.payload)), size: d.payload.count,
            mutableContent: false, contentAvailable: false, profile: nil)
    }

    func android(_ message: String) -> Delivery {
        var d = Delivery(
            provider: .fcm, platform: .android, token: "t", app: nil, environment: "p", notificationID: UUIDValue(high: 1, low: 1),
            messageName: nil, receivedAtMs: 0, payload: Array(message.utf8))
        let reader = PayloadReader(Array(message.utf8))
        d.hasData = reader.has("data")
        if reader.has("notification") { d.alerts = .notification }
        return d
    }

    func check(_ got: Display, _ outcome: Display.Outcome, _ reason: Display.Reason, line: UInt = #line) {
        XCTAssertEqual(got.outcome, outcome, "\(got.reason.code)", line: line)
        XCTAssertEqual(got.reason, reason, line: line)
    }

    func web(_ alerts: AlertFacts, service: String) -> Delivery {
        var d = Delivery(
            provider: .webpush, platform: .web, token: "t", app: "https://shop.example", environment: service,
            notificationID: UUIDValue(high: 1, low: 1), messageName: nil, receivedAtMs: 0, payload: Array(#"{"title":"x"}"#.utf8))
        d.alerts = alerts
        return d
    }

    /// A browser: a titled message is shown by its service worker; an untitled one gets
    /// Chromium's "updated in the background" notice (Chrome, Edge) or nothing (Firefox,
    /// Safari); one it cannot decrypt is dropped; a denied permission shows nothing.
    func testWeb() {
        check(DisplayRules.display(state(.web), web(.notification, service: "mozilla"), sdk: nil), .shown, .serviceWorker)
        check(DisplayRules.display(state(.web), web([], service: "fcm"), sdk: nil), .shown, .siteUpdatedInBackground)
        check(DisplayRules.display(state(.web), web([], service: "wns"), sdk: nil), .shown, .siteUpdatedInBackground)
        check(DisplayRules.display(state(.web), web([], service: "mozilla"), sdk: nil), .notShown, .noAlert)
        check(DisplayRules.display(state(.web), web([], service: "apple"), sdk: nil), .notShown, .noAlert)
        check(DisplayRules.display(state(.web), web(.undecryptable, service: "fcm"), sdk: nil), .notShown, .decryptFailed)
        check(
            DisplayRules.display(state(.web, .background, .denied), web(.notification, service: "fcm"), sdk: nil), .notShown,
            .permissionDenied)
    }

    func testIOS() {
        let alert = ios([.alert, .sound])
        check(DisplayRules.display(state(.ios), alert, sdk: nil), .shown, .alert)
        check(DisplayRules.display(state(.ios, .background, .provisional), alert, sdk: nil), .quiet, .provisional)
        check(DisplayRules.display(state(.ios, .killed, .denied), alert, sdk: nil), .notShown, .permissionDenied)
        check(DisplayRules.display(state(.ios), ios([.alert, .passive]), sdk: nil), .quiet, .passive)
        check(DisplayRules.display(state(.ios), ios([], contentAvailable: true), sdk: nil), .notShown, .background)
        check(DisplayRules.display(state(.ios, .killed), ios([], contentAvailable: true), sdk: nil), .notShown, .appKilled)
        check(DisplayRules.display(state(.ios), ios([.badge]), sdk: nil), .notShown, .noAlert)
        check(DisplayRules.display(state(.ios), ios([.liveActivity]), sdk: nil), .shown, .liveActivity)
        // A killed app's alert still shows (the system displays it).
        check(DisplayRules.display(state(.ios, .killed), alert, sdk: nil), .shown, .alert)
    }

    func testIOSForegroundDependsOnTheSDK() {
        let alert = ios([.alert])
        check(DisplayRules.display(state(.ios, .foreground), alert, sdk: nil), .notShown, .foregroundNotPresented)
        check(DisplayRules.display(state(.ios, .foreground), alert, sdk: sdk("adobe-campaign", alert)), .notShown, .foregroundNotPresented)
        for preset in ["braze", "onesignal", "pushwoosh", "moengage"] {
            check(DisplayRules.display(state(.ios, .foreground), alert, sdk: sdk(preset, alert)), .shown, .foregroundPresented)
        }
    }

    func testAndroid() {
        let note = android(#"{"token":"t","notification":{"title":"Hi"},"data":{"k":"v"}}"#)
        check(DisplayRules.display(state(.android), note, sdk: nil), .shown, .tray)
        check(DisplayRules.display(state(.android, .killed), note, sdk: nil), .shown, .tray)
        check(
            DisplayRules.display(state(.android, .foreground), note, sdk: sdk("braze", note)), .notShown, .foregroundNotificationMessage)
        check(DisplayRules.display(state(.android, .background, .denied), note, sdk: nil), .notShown, .permissionDenied)

        let data = android(#"{"token":"t","data":{"pw_msg":"1","p":"h","title":"Hi"}}"#)
        check(DisplayRules.display(state(.android), data, sdk: nil), .notShown, .dataMessage)
        check(DisplayRules.display(state(.android), data, sdk: sdk("pushwoosh", data)), .shown, .sdkRendered)
        check(DisplayRules.display(state(.android, .foreground), data, sdk: sdk("pushwoosh", data)), .shown, .sdkRendered)
        check(
            DisplayRules.display(state(.android, .background, .denied), data, sdk: sdk("pushwoosh", data)), .notShown, .permissionDenied)
        check(DisplayRules.display(state(.android), data, sdk: sdk("braze", data)), .notShown, .dataMessage)
        check(DisplayRules.display(state(.android), data, sdk: sdk("webhook", data)), .notShown, .dataMessage)

        let silent = android(#"{"token":"t","data":{"pw_msg":"1","p":"h","silent":"1"}}"#)
        check(DisplayRules.display(state(.android), silent, sdk: sdk("pushwoosh", silent)), .notShown, .sdkSilent)
        let brazeSilent = android(#"{"token":"t","data":{"_ab":"true","cid":"c"}}"#)
        check(DisplayRules.display(state(.android), brazeSilent, sdk: sdk("braze", brazeSilent)), .notShown, .sdkSilent)
        let os = android(#"{"token":"t","data":{"alert":"Hi","custom":"{\"i\":\"x\"}"}}"#)
        check(DisplayRules.display(state(.android), os, sdk: sdk("onesignal", os)), .shown, .sdkRendered)
        let moe = android(#"{"token":"t","data":{"push_from":"moengage","gcm_alert":"Hi"}}"#)
        check(DisplayRules.display(state(.android), moe, sdk: sdk("moengage", moe)), .shown, .sdkRendered)
        let adobe = android(#"{"token":"t","data":{"_mId":"1","_dId":"2","_msg":"Hi"}}"#)
        check(DisplayRules.display(state(.android), adobe, sdk: sdk("adobe-campaign", adobe)), .shown, .sdkRendered)
    }

    /// A fleet's permission and app state shares: every member draws one, reproducibly, in about the shares given.
    func testFleetStatesDrawTheirShares() throws {
        var states = FleetDeviceStates()
        let body = Array(#"{"permission":{"authorized":0.7,"provisional":0.1,"denied":0.2},"appState":"killed","nseInstalled":0.5}"#.utf8)
        try JSONObjectReader.read(body) { try states.read(&$0) }
        var counts: [SimDevice.Permission: Int] = [:]
        var nse = 0
        for i in 0..<10_000 {
            var d = SimDevice(token: "t", platform: .ios, app: "a", environment: nil, createdAtMs: 0, seed: FleetTokens.mix(UInt64(i)))
            states.apply(to: &d, seed: d.seed)
            counts[d.permission, default: 0] += 1
            XCTAssertEqual(d.appState, .killed)
            if d.nseInstalled { nse += 1 }
            var again = SimDevice(token: "t", platform: .ios, app: "a", environment: nil, createdAtMs: 0, seed: d.seed)
            states.apply(to: &again, seed: d.seed)
            XCTAssertEqual(again.permission, d.permission)
        }
        XCTAssertEqual(Double(counts[.authorized] ?? 0) / 10_000, 0.7, accuracy: 0.03)
        XCTAssertEqual(Double(counts[.provisional] ?? 0) / 10_000, 0.1, accuracy: 0.02)
        XCTAssertEqual(Double(counts[.denied] ?? 0) / 10_000, 0.2, accuracy: 0.02)
        XCTAssertEqual(Double(nse) / 10_000, 0.5, accuracy: 0.03)
    }

    func testFleetStatesRefuseBadShares() {
        for bad in [
            #"{"permission":{"authorized":0.7}}"#, #"{"permission":"maybe"}"#, #"{"appState":{"foreground":2,"background":-1}}"#,
            #"{"nseInstalled":"yes"}"#, #"{"nseInstalled":1.5}"#,
        ] {
            var states = FleetDeviceStates()
            var failed = false
            do { try JSONObjectReader.read(Array(bad.utf8)) { try states.read(&$0) } } catch { failed = true }
            XCTAssertTrue(failed, bad)
        }
    }
}
