import PushCore
import Tracking

/// One simulated device: an app with a marketing SDK inside.
public struct SimDevice: Sendable {
    /// `killed`: the user force-quit the app (iOS then launches it for no background push).
    /// `offline`: the device has no network (the service holds its notifications).
    public enum AppState: String, Sendable, CaseIterable { case foreground, background, killed, offline }
    /// The user's notification permission: `provisional` shows quietly in the notification centre, `denied` never displays.
    public enum Permission: String, Sendable, CaseIterable { case authorized, provisional, denied }

    /// One notification in the device's inbox.
    public struct InboxEntry: Sendable {
        /// The notification's id (the `apns-id`, or the FCM message's).
        public var notificationID: UUIDValue
        /// When the device received it (ms since the epoch).
        public var receivedAtMs: Int64
        /// Its collapse id (`apns-collapse-id`, FCM `collapse_key`): a newer one replaces it.
        public var collapseID: String?
        /// Whether the system (or the SDK) displayed it.
        public var displayed: Bool
        /// A Live Activity push's facts, out of line (nil for every other entry: inboxes hold
        /// up to `--inbox-size` entries per device).
        var live: LiveFacts?

        /// An entry for a notification received at `receivedAtMs`.
        public init(notificationID: UUIDValue, receivedAtMs: Int64, collapseID: String?, displayed: Bool) {
            self.notificationID = notificationID
            self.receivedAtMs = receivedAtMs
            self.collapseID = collapseID
            self.displayed = displayed
        }

        /// A Live Activity push: the activity it started, updated or ended, and the event.
        public var activityID: String? { live?.activityID }
        /// A Live Activity push's event (`update`, `end`, `start`).
        public var activityEvent: String? { live?.activityEvent }
        /// A broadcast: its channel.
        public var channelID: String? { live?.channelID }

        final class LiveFacts: Sendable {
            let activityID: String?
            let activityEvent: String?
            let channelID: String?
            init(activityID: String?, activityEvent: String?, channelID: String?) {
                self.activityID = activityID
                self.activityEvent = activityEvent
                self.channelID = channelID
            }
        }
    }

    /// A notification held for an offline device.
    public struct Pending: Sendable {
        /// What was pushed, delivered when the device comes online.
        public var delivery: Delivery
        /// nil: no expiry.
        public var expiresAtMs: Int64?
    }

    /// The device's token (APNs hex token, or FCM registration token).
    public var token: String
    /// iOS or Android.
    public var platform: DevicePlatform
    /// The app the token belongs to (bundle id or package name; nil: not known).
    public var app: String?
    /// iOS: sandbox or production. Android: the FCM project it belongs to (nil: any).
    public var environment: String?
    /// When the device was made (ms since the epoch).
    public var createdAtMs: Int64
    /// When the app was uninstalled (nil: installed); pushes then get the provider's unregistered error.
    public var uninstalledAtMs: Int64?
    /// When the token was rotated: the new token (the old one answers as uninstalled).
    public var rotatedTo: String?
    /// Whether the app is in the foreground, background, killed, or the device offline.
    public var appState = AppState.background
    /// The notification permission the user gave.
    public var permission = Permission.authorized
    /// iOS: whether a notification service extension is installed (it may change what is shown).
    public var nseInstalled = true
    /// Whether the user opted out of the SDK's tracking (no calls are made).
    public var privacyOptOut = false
    /// Labels to find the device by (`?label=`).
    public var labels: [String] = []
    /// The device's own tracking, when it has one (most use their fleet's or the server's).
    public var tracking: TrackingConfig? {
        get { overrides?.fields.tracking }
        set { change { $0.tracking = newValue } }
    }
    /// The device's own behaviour profile, when it has one.
    public var behavior: Behavior? {
        get { overrides?.fields.behavior }
        set { change { $0.behavior = newValue } }
    }
    /// How the device's app registers its token with the campaign platform, when it has its own
    /// (else its fleet's or the server's).
    public var registration: RegistrationConfig? {
        get { overrides?.fields.registration }
        set { change { $0.registration = newValue } }
    }
    /// The URL schemes and sounds the device's app declares, when it has its own (else its fleet's).
    public var profile: AppProfile? {
        get { overrides?.fields.profile }
        set { change { $0.profile = newValue.flatMap { $0.isEmpty ? nil : $0 } } }
    }
    /// The fingerprint of the last registration sent (Adobe's SDK skips an unchanged one).
    var registrationFingerprint: String? {
        get { overrides?.fields.fingerprint }
        set { change { $0.fingerprint = newValue } }
    }
    /// The SDKs' hardware id (Pushwoosh's hwid): derived from the first token the device had,
    /// and kept across token refreshes.
    public var hardwareID: String {
        get { overrides?.fields.hardwareID ?? TrackingContext.hardwareID(token) }
        set {
            let kept = newValue == TrackingContext.hardwareID(token) ? nil : newValue
            change { $0.hardwareID = kept }
        }
    }
    /// The fields above, out of line: inline they were 153 of a record's 376 bytes, and nil for
    /// nearly every device (a campaign's devices are records too). Never mutated: a change
    /// stores a new box, so records keep value semantics.
    private(set) var overrides: Overrides?
    final class Overrides: Sendable {
        struct Fields: Sendable {
            var tracking: TrackingConfig?
            var behavior: Behavior?
            var registration: RegistrationConfig?
            var fingerprint: String?
            var hardwareID: String?
            var profile: AppProfile?
            var isEmpty: Bool {
                tracking == nil && behavior == nil && registration == nil && fingerprint == nil && hardwareID == nil && profile == nil
            }
        }
        let fields: Fields
        private init(_ fields: Fields) { self.fields = fields }
        static func make(_ fields: Fields) -> Overrides? { fields.isEmpty ? nil : Overrides(fields) }
    }
    private mutating func change(_ body: (inout Overrides.Fields) -> Void) {
        var fields = overrides?.fields ?? Overrides.Fields()
        body(&fields)
        overrides = Overrides.make(fields)
    }
    /// The number of the fleet it belongs to (nil: not a fleet member).
    public var fleet: Int?
    /// Its index in the fleet (its token derives from it).
    public var fleetIndex: Int?
    /// The seed of its behaviour's random draws (opens, delays): the same seed, the same choices.
    public var seed: UInt64
    /// A ring once full: the oldest entry is at `inboxStart` (see `inboxEntries`).
    public var inbox: [InboxEntry] = []
    var inboxStart = 0
    /// Inbox entries pushed out by newer ones (`--inbox-size`).
    public var evicted: UInt64 = 0
    /// Inbox entries replaced by a newer one with the same collapse id.
    public var collapsed: UInt64 = 0
    /// Notifications held while the device is offline.
    public var pending: [Pending] = []
    /// Notifications dropped while offline (the queue was full, or they expired).
    public var dropped: UInt64 = 0
    /// Notifications the device received.
    public var received: UInt64 = 0
    /// Notifications the user opened (by the behaviour's open rate).
    public var opened: UInt64 = 0
    /// iOS: the Live Activities the app started (locally or by push-to-start), oldest first.
    public var activities: [LiveActivity] {
        get { apple?.activities ?? [] }
        _modify { yield &appleForWriting().activities }
        set { appleForWriting().activities = newValue }
    }
    /// iOS: push-to-start tokens, one per ActivityKit attributes type.
    var pushToStartTokens: [PushToStartToken] {
        get { apple?.pushToStartTokens ?? [] }
        _modify { yield &appleForWriting().pushToStartTokens }
        set { appleForWriting().pushToStartTokens = newValue }
    }
    /// iOS with the Firebase SDK: the app's FCM registration token, and its FCM project.
    public var fcmToken: String? {
        get { apple?.fcmToken }
        set { appleForWriting().fcmToken = newValue }
    }
    /// iOS with the Firebase SDK: the FCM project of `fcmToken`.
    public var fcmProject: String? {
        get { apple?.fcmProject }
        set { appleForWriting().fcmProject = newValue }
    }
    /// The four above, out of line and nil for nearly every device (one word in the record, not
    /// six). Copied on write: a record that shares its box with a copy gets its own before a
    /// change, so records keep value semantics, and a change to a record's own box (an activity
    /// updated by a push) happens in place, without copying its activities.
    private var apple: AppleExtras?
    final class AppleExtras: @unchecked Sendable { // mutated only through a uniquely referenced record (CoW)
        var activities: [LiveActivity] = []
        var pushToStartTokens: [PushToStartToken] = []
        var fcmToken: String?
        var fcmProject: String?

        init() {}

        func copy() -> AppleExtras {
            let c = AppleExtras()
            c.activities = activities
            c.pushToStartTokens = pushToStartTokens
            c.fcmToken = fcmToken
            c.fcmProject = fcmProject
            return c
        }
    }

    /// The record's own box, made or copied first when it has none or shares it.
    private mutating func appleForWriting() -> AppleExtras {
        if apple == nil || !isKnownUniquelyReferenced(&apple!) { apple = apple?.copy() ?? AppleExtras() }
        return apple!
    }

    /// A device record with default state (background, authorized, an extension, no labels).
    public init(token: String, platform: DevicePlatform, app: String?, environment: String?, createdAtMs: Int64, seed: UInt64) {
        self.token = token
        self.platform = platform
        self.app = app
        self.environment = environment
        self.createdAtMs = createdAtMs
        self.seed = seed
    }

    /// The inbox, oldest first.
    public var inboxEntries: [InboxEntry] { Array(inbox[inboxStart...] + inbox[..<inboxStart]) }

    /// Takes what deliveries left on `other` (its inbox and counts): a change's record keeps
    /// them, and a fleet member becoming a record takes its fleet's view of them.
    mutating func takeDeliveries(of other: SimDevice) {
        inbox = other.inbox
        inboxStart = other.inboxStart
        evicted = other.evicted
        collapsed = other.collapsed
        dropped = other.dropped
        received = other.received
        opened = other.opened
    }

    mutating func normalizeInbox() {
        if inboxStart != 0 {
            inbox = inboxEntries
            inboxStart = 0
        }
    }

    /// The device as the admin API returns it, with its fleet's id when it has one.
    public func json(fleetID: String?) -> String {
        func list(_ l: [String]?) -> String { l.map { "[" + $0.map(JSONWriter.quote).joined(separator: ",") + "]" } ?? "null" }
        var s =
            "{\"token\":" + JSONWriter.quote(token) + ",\"platform\":\"\(platform.rawValue)\",\"app\":"
            + (app.map(JSONWriter.quote) ?? "null")
        if platform == .ios {
            s += ",\"environment\":" + (environment.map(JSONWriter.quote) ?? "null")
        } else if platform == .web {
            // The push service it subscribed through (fcm, mozilla, apple, wns).
            s += ",\"service\":" + (environment.map(JSONWriter.quote) ?? "null")
        } else {
            s += ",\"project\":" + (environment.map(JSONWriter.quote) ?? "null")
        }
        s += ",\"installed\":\(uninstalledAtMs == nil),\"uninstalledAt\":" + (uninstalledAtMs.map { String($0) } ?? "null")
        s += ",\"rotatedTo\":" + (rotatedTo.map(JSONWriter.quote) ?? "null")
        s += ",\"appState\":\"\(appState.rawValue)\",\"permission\":\"\(permission.rawValue)\""
        if platform != .web { s += ",\"nseInstalled\":\(nseInstalled)" }
        s += ",\"privacyOptOut\":\(privacyOptOut),\"labels\":[" + labels.map(JSONWriter.quote).joined(separator: ",") + "]"
        s += ",\"tracking\":" + (tracking?.json ?? "null") + ",\"behavior\":" + (behavior?.json ?? "null")
        s += ",\"registration\":" + (registration?.json ?? "null") + ",\"registered\":\(registrationFingerprint != nil)"
        s += ",\"urlSchemes\":" + list(profile?.urlSchemes) + ",\"sounds\":" + list(profile?.sounds)
        s += ",\"fleet\":" + (fleetID.map(JSONWriter.quote) ?? "null")
        s += ",\"createdAt\":\(createdAtMs),\"received\":\(received),\"opened\":\(opened),\"inbox\":\(inbox.count)"
        s += ",\"evicted\":\(evicted),\"collapsed\":\(collapsed),\"pending\":\(pending.count),\"dropped\":\(dropped)"
        if platform == .ios {
            s += ",\"fcmToken\":" + (fcmToken.map(JSONWriter.quote) ?? "null")
            s += ",\"fcmProject\":" + (fcmProject.map(JSONWriter.quote) ?? "null")
            s += ",\"activities\":[" + activities.map(\.json).joined(separator: ",") + "]"
            s += ",\"pushToStartTokens\":[" + pushToStartTokens.map(\.json).joined(separator: ",") + "]"
        }
        return s + "}"
    }
}

/// What a device's SDK reads when it reports an event: the device's fields without its inbox
/// and queues (copied out of the store under its lock; a whole record costs a retain per field).
struct SDKView {
    var token: String
    var platform: DevicePlatform
    var app: String?
    var appState: SimDevice.AppState
    var permission: SimDevice.Permission
    var nseInstalled: Bool
    var privacyOptOut: Bool
    /// The record's box (a retain), not copies of the structs (a retain per field).
    var overrides: SimDevice.Overrides?
    var tracking: TrackingConfig? { overrides?.fields.tracking }
    var behavior: Behavior? { overrides?.fields.behavior }
    var registration: RegistrationConfig? { overrides?.fields.registration }
    var profile: AppProfile? { overrides?.fields.profile }
    var hardwareID: String { overrides?.fields.hardwareID ?? TrackingContext.hardwareID(token) }
    var seed: UInt64
    /// Its index in its fleet (a member without a record counts its opens there).
    var fleetIndex: Int?

    init(_ d: SimDevice) {
        token = d.token
        platform = d.platform
        app = d.app
        appState = d.appState
        permission = d.permission
        nseInstalled = d.nseInstalled
        privacyOptOut = d.privacyOptOut
        overrides = d.overrides
        seed = d.seed
        fleetIndex = d.fleetIndex
    }
}
