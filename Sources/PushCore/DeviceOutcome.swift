/// What the app on the device made of an accepted notification, as its SDK sees it: whether the
/// system displayed it (and why not), and what the SDK's payload conventions found wrong with it
/// (`lint`: empty for a clean payload, and for a device whose app has no campaign SDK).
///
/// The device layer decides it at delivery (`DeviceStore.deliver`); the notification log and the
/// journal record it with the notification, and the campaign report counts it. A lint finding is
/// never a rejection: the real gateway accepts the payload, the SDK is what mis-handles it.
public struct DeviceOutcome: Sendable, Equatable {
    /// Whether the system displayed it, and why (or why not).
    public var display: Display
    /// What the SDK's payload conventions found wrong with it (empty: clean, or no SDK).
    public var lint: [LintFinding]

    /// An outcome with its display decision and lint findings.
    public init(display: Display, lint: [LintFinding] = []) {
        self.display = display
        self.lint = lint
    }

    /// The journal's form: `outcome reason`, then a `LintFinding.storedLine` per finding, one a line.
    public var storedText: String {
        var s = display.outcome.name + " " + display.reason.code
        for f in lint { s += "\n" + f.storedLine }
        return s
    }

    /// Reads the journal's form back (nil: not one).
    public init?(storedText: String) {
        let lines = storedText.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.first else { return nil }
        let head = first.split(separator: " ")
        guard head.count == 2, let o = Display.Outcome(name: String(head[0])), let r = Display.Reason(code: String(head[1])) else {
            return nil
        }
        self.init(display: Display(o, r), lint: lines.dropFirst().compactMap { LintFinding(storedLine: $0) })
    }
}

/// Whether a notification was displayed: `shown` (a banner, an alert, a tray entry), `quiet`
/// (in Notification Center or the shade without a banner or sound), `not-shown`; and why, as a
/// stable code with a sentence for people.
public struct Display: Sendable, Equatable {
    /// Shown, quiet, or not shown.
    public enum Outcome: UInt8, Sendable, CaseIterable {
        case shown = 1
        case quiet, notShown

        /// The stable name the admin API and the journal use (`not-shown`).
        public var name: String {
            switch self {
            case .shown: "shown"
            case .quiet: "quiet"
            case .notShown: "not-shown"
            }
        }

        /// The outcome with this name (nil: none).
        public init?(name: String) {
            guard let o = Outcome.allCases.first(where: { $0.name == name }) else { return nil }
            self = o
        }
    }

    /// Why: one code per rule of `DisplayRules` (docs/devices-and-tracking.md lists their sources).
    public enum Reason: UInt8, Sendable, CaseIterable {
        case alert = 1
        case tray, sdkRendered, foregroundPresented, liveActivity
        case provisional, passive
        case permissionDenied, background, noAlert, foregroundNotPresented, foregroundNotificationMessage
        case dataMessage, sdkSilent, heldOffline, droppedOffline, uninstalled, appKilled
        case serviceWorker, decryptFailed, siteUpdatedInBackground

        /// The stable code the admin API and the journal use (`system-tray`).
        public var code: String {
            switch self {
            case .alert: "alert"
            case .tray: "system-tray"
            case .sdkRendered: "sdk-rendered"
            case .foregroundPresented: "foreground-presented"
            case .liveActivity: "live-activity"
            case .provisional: "provisional"
            case .passive: "passive"
            case .permissionDenied: "permission-denied"
            case .background: "background-push"
            case .noAlert: "no-alert"
            case .foregroundNotPresented: "foreground-not-presented"
            case .foregroundNotificationMessage: "foreground-notification-message"
            case .dataMessage: "data-message"
            case .sdkSilent: "sdk-silent"
            case .heldOffline: "held-offline"
            case .droppedOffline: "dropped-offline"
            case .uninstalled: "uninstalled"
            case .appKilled: "app-killed"
            case .serviceWorker: "service-worker"
            case .decryptFailed: "decrypt-failed"
            case .siteUpdatedInBackground: "site-updated-in-background"
            }
        }

        /// The reason with this code (nil: none).
        public init?(code: String) {
            guard let r = Reason.allCases.first(where: { $0.code == code }) else { return nil }
            self = r
        }

        /// A sentence for people: why it was or was not displayed.
        public var message: String {
            switch self {
            case .alert: "displayed: the system showed the alert"
            case .tray: "displayed: the system tray showed the notification message (the app was not running it)"
            case .sdkRendered: "displayed: the SDK built the notification from its data keys"
            case .foregroundPresented: "displayed while the app was in the foreground: the SDK's willPresent handler presents it"
            case .liveActivity: "the Live Activity on the Lock Screen and in the Dynamic Island was updated"
            case .provisional: "provisional authorization: delivered quietly to Notification Center, without a banner or sound"
            case .passive: "interruption-level passive: added to the notification list without lighting the screen or a sound"
            case .permissionDenied: "the user denied notifications: nothing is displayed (the app can still receive background data)"
            case .background: "a background push (content-available, no alert): the app is woken, nothing is displayed"
            case .noAlert: "no alert: only the badge or the sound changed"
            case .foregroundNotPresented:
                "the app was in the foreground and its SDK does not present notifications there (no willPresent handler asks)"
            case .foregroundNotificationMessage:
                "the app was in the foreground: FCM hands a notification message to onMessageReceived, which displays nothing"
            case .dataMessage: "a data message: the app received it, and no SDK in it builds a notification from these keys"
            case .sdkSilent: "the SDK reads it as a silent push: received, nothing displayed"
            case .heldOffline: "the device is offline: held by the service until it comes back"
            case .droppedOffline: "the device is offline and the notification expires now (apns-expiration 0, a Web Push TTL of 0): dropped"
            case .uninstalled: "the app was uninstalled"
            case .appKilled: "the user force-quit the app: iOS does not launch it for a background push"
            case .serviceWorker: "displayed: the site's service worker showed it (showNotification with the payload's title)"
            case .decryptFailed: "the browser could not decrypt it (RFC 8291): it drops the message, as a sender's encryption bug makes it"
            case .siteUpdatedInBackground:
                "the service worker showed nothing (no title): Chrome and Edge show \"This site has been updated in the background\" instead"
            }
        }
    }

    /// Shown, quiet or not shown.
    public var outcome: Outcome
    /// Which rule decided it.
    public var reason: Reason

    /// A decision: `outcome` because of `reason`.
    public init(_ outcome: Outcome, _ reason: Reason) {
        self.outcome = outcome
        self.reason = reason
    }

    /// Whether the user can see it and so tap it (open tracking is possible).
    public var tappable: Bool { outcome != .notShown }

    /// `{"outcome":"quiet","reason":"provisional","message":"..."}`.
    public var json: String {
        "{\"outcome\":\"\(outcome.name)\",\"reason\":\"\(reason.code)\",\"message\":" + JSONWriter.quote(reason.message) + "}"
    }

    /// Two bytes, for the notification log and the journal (0: none).
    public var storedBytes: (UInt8, UInt8) { (outcome.rawValue, reason.rawValue) }

    /// Reads the two stored bytes back (nil: none, or not a known pair).
    public init?(stored: (UInt8, UInt8)) {
        guard let o = Outcome(rawValue: stored.0), let r = Reason(rawValue: stored.1) else { return nil }
        self.init(o, r)
    }
}

/// One thing an SDK would mis-handle in a payload: `code` (`adobe.missing-ids`), `severity`,
/// a sentence, and the JSON path it is about (`data._mId`; "" for the payload as a whole).
public struct LintFinding: Sendable, Equatable {
    /// How much the finding matters to the sender.
    public enum Severity: String, Sendable {
        /// The SDK cannot do its job with it (tracking cannot fire, the push is not recognised).
        case error
        /// It works worse than the sender meant (no image, no sound, a link that opens the browser).
        case warning
        /// Worth knowing (an optional feature left off).
        case info
    }

    /// A stable code, `sdk.rule` (`adobe.missing-ids`).
    public var code: String
    /// How much it matters.
    public var severity: Severity
    /// A sentence for people.
    public var message: String
    /// The JSON path it is about (`data._mId`; "" for the whole payload).
    public var path: String

    /// A finding `code` of `severity` about `path`.
    public init(_ code: String, _ severity: Severity, _ message: String, path: String) {
        self.code = code
        self.severity = severity
        self.message = message
        self.path = path
    }

    /// The finding as the admin API returns it.
    public var json: String {
        "{\"code\":" + JSONWriter.quote(code) + ",\"severity\":\"\(severity.rawValue)\",\"message\":" + JSONWriter.quote(message)
            + ",\"path\":" + JSONWriter.quote(path) + "}"
    }

    /// One line for storage: code, severity, path, message, tab-separated (tabs and newlines in
    /// the message become spaces).
    public var storedLine: String {
        code + "\t" + severity.rawValue + "\t" + path + "\t"
            + String(message.map { $0 == "\t" || $0 == "\n" ? " " : $0 })
    }

    /// Reads a `storedLine` back (nil: not one).
    public init?(storedLine line: Substring) {
        let parts = line.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let s = Severity(rawValue: String(parts[1])) else { return nil }
        self.init(String(parts[0]), s, String(parts[3]), path: String(parts[2]))
    }
}

/// What a payload shows, as a gateway's parse found it (no second parse at delivery).
public struct AlertFacts: OptionSet, Sendable {
    /// The bits.
    public let rawValue: UInt8
    /// Facts from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// APNs `aps.alert` (or an FCM notification title/body mapped to it).
    public static let alert = AlertFacts(rawValue: 1)
    /// `aps.sound` (or an FCM notification sound).
    public static let sound = AlertFacts(rawValue: 2)
    /// `aps.badge`.
    public static let badge = AlertFacts(rawValue: 4)
    /// `aps.interruption-level: passive`.
    public static let passive = AlertFacts(rawValue: 8)
    /// FCM: the message has `notification` (or `android.notification`): a notification message.
    public static let notification = AlertFacts(rawValue: 16)
    /// A Live Activity push.
    public static let liveActivity = AlertFacts(rawValue: 32)
    /// Web Push: the browser could not decrypt the message.
    public static let undecryptable = AlertFacts(rawValue: 64)
}
