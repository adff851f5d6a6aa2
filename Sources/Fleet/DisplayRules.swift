import PushCore
import Tracking

/// Whether the operating system and the app's SDK display an accepted notification, from the
/// device's notification permission, app state and what the payload shows; decided at delivery
/// and recorded on the notification (`Display`). Open tracking needs a displayed notification
/// (`Display.tappable`): a user cannot tap what was never shown.
///
/// iOS (Apple's User Notifications documentation):
/// - a Live Activity push updates the activity: shown;
/// - no `alert`: `content-available` wakes the app and shows nothing (not even that, once the
///   user force-quit it), and a badge or sound alone displays nothing;
/// - permission denied: nothing is displayed;
/// - app in the foreground: shown only if the app's `willPresent` handler presents it, as the
///   Braze, OneSignal, Pushwoosh and MoEngage SDKs do by default (Adobe's leaves it to the app);
/// - provisional authorization: delivered quietly to Notification Center;
/// - `interruption-level: passive`: quietly, without lighting the screen or a sound;
/// - otherwise the alert is shown.
///
/// Android (Firebase's "Receive messages in an Android app"):
/// - a notification message: the system tray shows it while the app is in the background (or
///   not running); in the foreground it goes to `onMessageReceived`, which displays nothing;
/// - a data message reaches the app in every state; it is displayed only when the SDK inside
///   builds a notification from its keys (`SDKLint.dataMessageDisplay`);
/// - permission denied (Android 13's `POST_NOTIFICATIONS`): nothing is displayed, data still arrives.
enum DisplayRules {
    /// The device's side of the decision (a few bytes, read under the record's lock).
    struct DeviceState: Sendable {
        var platform: DevicePlatform
        var appState: SimDevice.AppState
        var permission: SimDevice.Permission

        init(_ d: borrowing SimDevice) {
            platform = d.platform
            appState = d.appState
            permission = d.permission
        }

        init(_ d: SDKView) {
            platform = d.platform
            appState = d.appState
            permission = d.permission
        }
    }

    /// `sdk`: the payload as the app's SDK (its tracking preset) reads it; nil for an app without one.
    static func display(_ s: DeviceState, _ d: borrowing Delivery, sdk: LintInput?) -> Display {
        switch s.platform {
        case .ios: return ios(s, d, sdk: sdk)
        case .android: return android(s, d, sdk: sdk)
        case .web: return web(s, d)
        }
    }

    /// A browser: a message it cannot decrypt is dropped; otherwise its service worker, written
    /// the common way, shows the payload's title (the gateway marks a push that has one).
    static func web(_ s: DeviceState, _ d: borrowing Delivery) -> Display {
        if d.alerts.contains(.undecryptable) { return Display(.notShown, .decryptFailed) }
        if s.permission == .denied { return Display(.notShown, .permissionDenied) }
        guard d.alerts.contains(.notification) else {
            // Chromium's userVisibleOnly: a push that shows nothing gets the browser's own notice.
            let chromium = d.environment == "fcm" || d.environment == "wns"
            return chromium ? Display(.shown, .siteUpdatedInBackground) : Display(.notShown, .noAlert)
        }
        return s.permission == .denied ? Display(.notShown, .permissionDenied) : Display(.shown, .serviceWorker)
    }

    static func ios(_ s: DeviceState, _ d: borrowing Delivery, sdk: LintInput?) -> Display {
        let a = d.alerts
        if a.contains(.liveActivity) { return Display(.shown, .liveActivity) }
        guard a.contains(.alert) else {
            if d.contentAvailable { return Display(.notShown, s.appState == .killed ? .appKilled : .background) }
            return Display(.notShown, .noAlert)
        }
        if s.permission == .denied { return Display(.notShown, .permissionDenied) }
        if s.appState == .foreground {
            return sdk.map(SDKLint.presentsInForeground) == true
                ? Display(.shown, .foregroundPresented) : Display(.notShown, .foregroundNotPresented)
        }
        if s.permission == .provisional { return Display(.quiet, .provisional) }
        if a.contains(.passive) { return Display(.quiet, .passive) }
        return Display(.shown, .alert)
    }

    static func android(_ s: DeviceState, _ d: borrowing Delivery, sdk: LintInput?) -> Display {
        if d.alerts.contains(.notification) {
            if s.appState == .foreground { return Display(.notShown, .foregroundNotificationMessage) }
            return s.permission == .denied ? Display(.notShown, .permissionDenied) : Display(.shown, .tray)
        }
        guard let sdk, let reason = SDKLint.dataMessageDisplay(sdk) else {
            return Display(.notShown, .dataMessage)
        }
        if reason == .sdkRendered && s.permission == .denied { return Display(.notShown, .permissionDenied) }
        return Display(reason == .sdkRendered ? .shown : .notShown, reason)
    }
}
