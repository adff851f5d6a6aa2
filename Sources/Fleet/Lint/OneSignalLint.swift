import PushCore
import Tracking

/// OneSignal's SDK (tracking.md §5):
///
/// - `onesignal.missing-id` (error): no `custom.i`: receive receipts and opens cannot be reported.
/// - `onesignal.malformed-id` (warning): `custom.i` is not a UUID (OneSignal's notification ids are).
/// - the link in `custom.u`: `LinkAndSoundLint`.
struct OneSignalLint: SDKConventions {
    let preset = "onesignal"
    let presentsInForeground = true

    func linkPaths(ios: Bool) -> [String] { OneSignalLint.links }
    func appKeys(ios: Bool) -> [String] { OneSignalLint.keys }
    static let links = ["custom.u"]
    static let keys = ["custom", "alert"]

    func lint(_ p: LintInput, _ out: inout [LintFinding]) {
        guard let id = p.app("custom.i") else {
            out.append(
                LintFinding(
                    "onesignal.missing-id", .error, "no custom.i: the SDK cannot report the receipt or the open",
                    path: p.appPath("custom.i")))
            return
        }
        if !AdobeIDs.isUUID(id.value) {
            out.append(LintFinding("onesignal.malformed-id", .warning, "custom.i '\(id.value)' is not a UUID", path: id.path))
        }
    }

    func dataMessageDisplay(_ p: LintInput) -> Display.Reason? {
        guard p.app("custom") != nil else { return nil }
        return p.app("alert") != nil ? .sdkRendered : .sdkSilent
    }
}
