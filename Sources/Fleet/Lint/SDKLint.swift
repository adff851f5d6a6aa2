import PushCore
import Tracking

/// What a campaign SDK inside the app would make of a payload: the lint of its conventions (the
/// keys it needs to recognise, track and open a push, and what its docs warn against), whether it
/// builds a notification from an Android data message, and whether it presents a notification
/// while its iOS app is in the foreground. One `SDKConventions` per SDK, in its own file, listed
/// once in `SDKLint.all`; the link and sound rules every SDK shares are `LinkAndSoundLint`.
///
/// The lint runs at delivery, on the thread that delivers, for devices whose app carries an SDK
/// (a tracking preset): it reads the payload through the `PayloadReader` tracking reads, and a
/// clean payload allocates nothing but that reader. docs/devices-and-tracking.md lists every
/// rule with its source.
public enum SDKLint {
    static let all: [any SDKConventions] = [AdobeLint(), PushwooshLint(), MoEngageLint(), BrazeLint(), OneSignalLint()]

    static func named(_ preset: String) -> (any SDKConventions)? { all.first { $0.preset == preset } }

    /// The findings for `input` as its preset's SDK reads it (none for a preset with no SDK
    /// conventions, such as `webhook`, beyond the shared link and sound rules).
    public static func check(_ input: LintInput) -> [LintFinding] {
        var out: [LintFinding] = []
        input.sdk?.lint(input, &out)
        LinkAndSoundLint.check(input, links: input.sdk?.linkPaths(ios: input.ios) ?? [], &out)
        return out
    }

    /// An Android data message as the input's SDK handles it: `.sdkRendered` when it builds a
    /// notification, `.sdkSilent` when it reads it as its silent push, nil when it is not the
    /// SDK's push (nothing displays it).
    static func dataMessageDisplay(_ input: LintInput) -> Display.Reason? { input.sdk?.dataMessageDisplay(input) }

    /// Whether the input's iOS SDK presents a notification that arrives while its app is in the
    /// foreground (its `userNotificationCenter(_:willPresent:)` asks for a banner).
    static func presentsInForeground(_ input: LintInput) -> Bool { input.sdk?.presentsInForeground ?? false }
}

/// One SDK's conventions (see `SDKLint`).
protocol SDKConventions: Sendable {
    /// The tracking preset that names this SDK.
    var preset: String { get }
    /// Where the SDK reads the link it opens on a tap, per platform (app-level keys, as `LintInput.app` finds them).
    func linkPaths(ios: Bool) -> [String]
    /// Every single-segment app-level key its rules and `linkPaths` read (read in one pass).
    func appKeys(ios: Bool) -> [String]
    func lint(_ p: LintInput, _ out: inout [LintFinding])
    func dataMessageDisplay(_ p: LintInput) -> Display.Reason?
    var presentsInForeground: Bool { get }
}

/// The notification as the SDK sees it: its payload (the APNs payload, or the FCM `message`
/// object), its size, the delivery's APNs flags, and what the app declares.
public struct LintInput: Sendable {
    /// The SDK's preset, which the keys read up front are for, and its conventions (nil: a preset
    /// with none, such as `webhook`).
    public let preset: String
    let sdk: (any SDKConventions)?
    public var ios: Bool
    public var payload: PayloadReader
    public var size: Int
    public var mutableContent: Bool
    public var contentAvailable: Bool
    public var profile: AppProfile?

    /// The app-level keys `preset`'s SDK reads, read in one pass over the object(s) they sit in
    /// (FCM: `android.data` first, then `data`); `scopes[i]` is where `values[i]` was found.
    private let keys: [String]
    private let values: [String?]
    private let scopes: [String]
    /// FCM: the token indexes of `android.data` and `data`, for keys outside `keys`.
    private let androidData: Int?
    private let data: Int?

    /// `preset`: the SDK that reads it (its keys are read up front).
    public init(
        preset: String, ios: Bool, payload: PayloadReader, size: Int, mutableContent: Bool, contentAvailable: Bool,
        profile: AppProfile?
    ) {
        self.preset = preset
        sdk = SDKLint.named(preset)
        self.ios = ios
        self.payload = payload
        self.size = size
        self.mutableContent = mutableContent
        self.contentAvailable = contentAvailable
        self.profile = profile
        let keys = sdk?.appKeys(ios: ios) ?? []
        self.keys = keys
        if ios {
            androidData = nil
            data = nil
            values = payload.values(of: keys, in: 0)
            scopes = []
        } else {
            let override = payload.objectIndex("android.data")
            let plain = payload.objectIndex("data")
            androidData = override
            data = plain
            let first = override.map { payload.values(of: keys, in: $0) } ?? []
            let second = plain.map { payload.values(of: keys, in: $0) } ?? []
            var values = [String?](repeating: nil, count: keys.count)
            var scopes = [String](repeating: "data.", count: keys.count)
            for i in keys.indices {
                if i < first.count, let v = first[i] {
                    values[i] = v
                    scopes[i] = "android.data."
                } else if i < second.count {
                    values[i] = second[i]
                }
            }
            self.values = values
            self.scopes = scopes
        }
    }

    /// A key the app sees: APNs top level; FCM `android.data`, then `data` (as the device
    /// receives it). Its path is made only when a finding names it.
    struct AppValue {
        let value: String
        let key: String
        let scope: String
        var path: String { scope + key }
    }

    func app(_ key: String) -> AppValue? {
        // Lengths first: the SDKs' keys are ASCII constants, and String's `==` went through its
        // general comparison for each of up to ten keys, five times a push.
        let n = key.utf8.count
        if let i = keys.firstIndex(where: { $0.utf8.count == n && $0 == key }) {
            return values[i].map { AppValue(value: $0, key: key, scope: ios ? "" : scopes[i]) }
        }
        if ios { return payload.value(key).map { AppValue(value: $0, key: key, scope: "") } }
        if let o = androidData, let v = payload.value(key, in: o) { return AppValue(value: v, key: key, scope: "android.data.") }
        if let o = data, let v = payload.value(key, in: o) { return AppValue(value: v, key: key, scope: "data.") }
        return nil
    }

    /// Where a missing app-level key belongs.
    func appPath(_ key: String) -> String { ios ? key : "data." + key }

    /// APNs and FCM both limit the payload (the FCM message's data) to 4096 bytes.
    static let payloadLimit = 4096
}

/// Helpers the rules share.
enum LintText {
    /// Whether `s` reads as a JSON object (a PayloadReader gives objects as their JSON text).
    static func isObject(_ s: String?) -> Bool { s?.utf8.first == UInt8(ascii: "{") }

    static func truthy(_ s: String?) -> Bool { s == "1" || s == "true" }
}
