import PushCore
import Tracking

/// Pushwoosh's SDK (tracking.md §3):
///
/// - `pushwoosh.missing-pw-msg` (error): no `pw_msg`: the SDK does not treat it as a Pushwoosh push, and sends no statistics (§3.1).
/// - `pushwoosh.missing-hash` (error): no `p`: `messageDeliveryEvent` and `pushStat` carry it as `hash`; no statistics without it (§3.2).
/// - `pushwoosh.invalid-custom-data` (warning): `u` is not JSON: the app's custom data cannot be read (§3.1).
/// - `pushwoosh.receive-needs-extension` (warning, iOS): no `mutable-content`: the delivery event
///   is sent from the notification service extension, which then never runs (§3.2).
/// - the link in `l` and the sound: `LinkAndSoundLint`.
struct PushwooshLint: SDKConventions {
    let preset = "pushwoosh"
    let presentsInForeground = true

    func linkPaths(ios: Bool) -> [String] { PushwooshLint.links }
    func appKeys(ios: Bool) -> [String] { PushwooshLint.keys }
    static let links = ["l"]
    static let keys = ["pw_msg", "p", "u", "pw_silent", "silent", "l"]

    func lint(_ p: LintInput, _ out: inout [LintFinding]) {
        if p.app("pw_msg") == nil {
            out.append(
                LintFinding(
                    "pushwoosh.missing-pw-msg", .error, "no pw_msg: the SDK does not see a Pushwoosh push, and sends no statistics for it",
                    path: p.appPath("pw_msg")))
        }
        if p.app("p") == nil {
            out.append(
                LintFinding(
                    "pushwoosh.missing-hash", .error,
                    "no p (the push hash): messageDeliveryEvent and pushStat need it, so the push has no statistics",
                    path: p.appPath("p")))
        }
        if let u = p.app("u"), !PayloadReader(Array(u.value.utf8)).isJSON {
            out.append(
                LintFinding("pushwoosh.invalid-custom-data", .warning, "u must be JSON custom data; '\(u.value)' is not", path: u.path))
        }
        if p.ios && !p.mutableContent && !LintText.truthy(p.app("pw_silent")?.value) {
            out.append(
                LintFinding(
                    "pushwoosh.receive-needs-extension", .warning,
                    "no aps.mutable-content: iOS sends messageDeliveryEvent from the notification service extension, which does not run",
                    path: "aps"))
        }
    }

    func dataMessageDisplay(_ p: LintInput) -> Display.Reason? {
        guard p.app("pw_msg") != nil else { return nil }
        return LintText.truthy(p.app("silent")?.value) || LintText.truthy(p.app("pw_silent")?.value) ? .sdkSilent : .sdkRendered
    }
}
