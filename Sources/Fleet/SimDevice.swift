import PushCore
import Tracking

/// One simulated device: an app with a marketing SDK inside.
package struct SimDevice: Sendable {
    package enum AppState: String, Sendable { case foreground, background, offline }
    package enum Permission: String, Sendable { case authorized, provisional, denied }

    package struct InboxEntry: Sendable {
        package var notificationID: UUIDValue
        package var receivedAtMs: Int64
        package var collapseID: String?
        package var displayed: Bool
    }

    /// A notification held for an offline device.
    package struct Pending: Sendable {
        package var delivery: Delivery
        /// nil: no expiry.
        package var expiresAtMs: Int64?
    }

    package var token: String
    package var platform: DevicePlatform
    package var app: String?
    /// iOS: sandbox or production. Android: the FCM project it belongs to (nil: any).
    package var environment: String?
    package var createdAtMs: Int64
    package var uninstalledAtMs: Int64?
    /// When the token was rotated: the new token (the old one answers as uninstalled).
    package var rotatedTo: String?
    package var appState = AppState.background
    package var permission = Permission.authorized
    package var nseInstalled = true
    package var privacyOptOut = false
    package var labels: [String] = []
    /// The device's own tracking, when it has one (most use their fleet's or the server's).
    package var tracking: TrackingConfig? {
        get { overrides?.tracking }
        set { overrides = Overrides.make(tracking: newValue, behavior: behavior) }
    }
    /// The device's own behaviour profile, when it has one.
    package var behavior: Behavior? {
        get { overrides?.behavior }
        set { overrides = Overrides.make(tracking: tracking, behavior: newValue) }
    }
    /// `tracking` and `behavior`, out of line: inline they were 153 of a record's 376 bytes, and
    /// nil for nearly every device (a campaign's devices are records too). Never mutated: a
    /// change stores a new box, so records keep value semantics.
    private(set) var overrides: Overrides?
    final class Overrides: Sendable {
        let tracking: TrackingConfig?
        let behavior: Behavior?
        private init(tracking: TrackingConfig?, behavior: Behavior?) {
            self.tracking = tracking
            self.behavior = behavior
        }
        static func make(tracking: TrackingConfig?, behavior: Behavior?) -> Overrides? {
            tracking == nil && behavior == nil ? nil : Overrides(tracking: tracking, behavior: behavior)
        }
    }
    package var fleet: Int?
    package var fleetIndex: Int?
    package var seed: UInt64
    /// A ring once full: the oldest entry is at `inboxStart` (see `inboxEntries`).
    package var inbox: [InboxEntry] = []
    package var inboxStart = 0
    package var evicted: UInt64 = 0
    package var collapsed: UInt64 = 0
    package var pending: [Pending] = []
    package var dropped: UInt64 = 0
    package var received: UInt64 = 0
    package var opened: UInt64 = 0

    package init(token: String, platform: DevicePlatform, app: String?, environment: String?, createdAtMs: Int64, seed: UInt64) {
        self.token = token
        self.platform = platform
        self.app = app
        self.environment = environment
        self.createdAtMs = createdAtMs
        self.seed = seed
    }

    /// The inbox, oldest first.
    package var inboxEntries: [InboxEntry] { Array(inbox[inboxStart...] + inbox[..<inboxStart]) }

    mutating func normalizeInbox() {
        if inboxStart != 0 {
            inbox = inboxEntries
            inboxStart = 0
        }
    }

    package func json(fleetID: String?) -> String {
        var s =
            "{\"token\":" + JSONWriter.quote(token) + ",\"platform\":\"\(platform.rawValue)\",\"app\":"
            + (app.map(JSONWriter.quote) ?? "null")
        if platform == .ios {
            s += ",\"environment\":" + (environment.map(JSONWriter.quote) ?? "null")
        } else {
            s += ",\"project\":" + (environment.map(JSONWriter.quote) ?? "null")
        }
        s += ",\"installed\":\(uninstalledAtMs == nil),\"uninstalledAt\":" + (uninstalledAtMs.map { String($0) } ?? "null")
        s += ",\"rotatedTo\":" + (rotatedTo.map(JSONWriter.quote) ?? "null")
        s += ",\"appState\":\"\(appState.rawValue)\",\"permission\":\"\(permission.rawValue)\",\"nseInstalled\":\(nseInstalled)"
        s += ",\"privacyOptOut\":\(privacyOptOut),\"labels\":[" + labels.map(JSONWriter.quote).joined(separator: ",") + "]"
        s += ",\"tracking\":" + (tracking?.json ?? "null") + ",\"behavior\":" + (behavior?.json ?? "null")
        s += ",\"fleet\":" + (fleetID.map(JSONWriter.quote) ?? "null")
        s += ",\"createdAt\":\(createdAtMs),\"received\":\(received),\"opened\":\(opened),\"inbox\":\(inbox.count)"
        s += ",\"evicted\":\(evicted),\"collapsed\":\(collapsed),\"pending\":\(pending.count),\"dropped\":\(dropped)}"
        return s
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
    var tracking: TrackingConfig? { overrides?.tracking }
    var behavior: Behavior? { overrides?.behavior }
    var seed: UInt64

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
    }
}
