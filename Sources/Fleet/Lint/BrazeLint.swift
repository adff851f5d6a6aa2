import PushCore
import Tracking

/// Braze's SDK (tracking.md §4):
///
/// - `braze.not-braze` (error): Android without `_ab: "true"`, or iOS without the `ab` dictionary: not seen as a Braze push.
/// - `braze.missing-campaign-id` (warning): no `cid` (Android) or `ab.c` (iOS): opens are not attributed to a campaign.
/// - `braze.delivery-tracking-off` (info, Android): no `bz_p_e`: the push-delivery event `pd` is not sent.
/// - the deep link in `ab_uri` (iOS) or `uri` (Android): `LinkAndSoundLint`.
struct BrazeLint: SDKConventions {
    let preset = "braze"
    let presentsInForeground = true

    func linkPaths(ios: Bool) -> [String] { ios ? BrazeLint.iosLinks : BrazeLint.androidLinks }
    func appKeys(ios: Bool) -> [String] { ios ? BrazeLint.iosLinks : BrazeLint.androidKeys }
    static let iosLinks = ["ab_uri"]
    static let androidLinks = ["uri"]
    static let androidKeys = ["_ab", "cid", "bz_p_e", "a", "t", "uri"]

    func lint(_ p: LintInput, _ out: inout [LintFinding]) {
        if p.ios {
            guard LintText.isObject(p.payload.value("ab")) else {
                out.append(LintFinding("braze.not-braze", .error, "no ab dictionary: the SDK does not see a Braze push", path: "ab"))
                return
            }
            if p.payload.value("ab.c") == nil {
                out.append(
                    LintFinding("braze.missing-campaign-id", .warning, "no ab.c: opens are not attributed to a campaign", path: "ab.c"))
            }
            return
        }
        guard p.app("_ab")?.value == "true" else {
            out.append(
                LintFinding("braze.not-braze", .error, "_ab is not \"true\": the SDK does not see a Braze push", path: p.appPath("_ab")))
            return
        }
        if p.app("cid") == nil {
            out.append(
                LintFinding("braze.missing-campaign-id", .warning, "no cid: opens are not attributed to a campaign", path: p.appPath("cid"))
            )
        }
        if p.app("bz_p_e") == nil {
            out.append(
                LintFinding(
                    "braze.delivery-tracking-off", .info, "no bz_p_e: the SDK sends no push-delivery event (pd)", path: p.appPath("bz_p_e"))
            )
        }
    }

    func dataMessageDisplay(_ p: LintInput) -> Display.Reason? {
        guard p.app("_ab")?.value == "true" else { return nil }
        return p.app("a") != nil || p.app("t") != nil ? .sdkRendered : .sdkSilent
    }
}
