import PushCore
import Tracking

/// MoEngage's SDK (tracking.md §2):
///
/// - `moengage.not-moengage` (error): Android without `push_from: moengage` (`isFromMoEngagePlatform`
///   is false, the SDK ignores it), or iOS without the `moengage` dictionary.
/// - `moengage.missing-campaign-id` (error): no `gcm_campaign_id` (Android) or `moengage.cid`
///   (iOS): the receive and click events carry no campaign.
/// - `moengage.invalid-cid-attr` (warning, Android): `moe_cid_attr` is not a JSON string of an object.
/// - `moengage.invalid-app-extra` (warning, iOS): `app_extra` is not a dictionary.
/// - `moengage.receive-needs-extension` (warning, iOS): no `mutable-content`: `NOTIFICATION_RECEIVED_IOS_MOE`
///   needs the notification service extension (§2.2).
struct MoEngageLint: SDKConventions {
    let preset = "moengage"
    let presentsInForeground = true

    func linkPaths(ios: Bool) -> [String] { ios ? [] : MoEngageLint.androidLinks }
    func appKeys(ios: Bool) -> [String] { ios ? [] : MoEngageLint.androidKeys }
    static let androidLinks = ["gcm_webUrl"]
    static let androidKeys = ["push_from", "gcm_campaign_id", "moe_cid_attr", "gcm_webUrl"]

    func lint(_ p: LintInput, _ out: inout [LintFinding]) {
        if p.ios {
            guard LintText.isObject(p.payload.value("moengage")) else {
                out.append(
                    LintFinding(
                        "moengage.not-moengage", .error, "no moengage dictionary: the SDK does not see a MoEngage push", path: "moengage"))
                return
            }
            if p.payload.value("moengage.cid") == nil {
                out.append(
                    LintFinding(
                        "moengage.missing-campaign-id", .error, "no moengage.cid: the receive and click events carry no campaign",
                        path: "moengage.cid"))
            }
            if let extra = p.payload.value("app_extra"), !LintText.isObject(extra) {
                out.append(LintFinding("moengage.invalid-app-extra", .warning, "app_extra must be a dictionary", path: "app_extra"))
            }
            if !p.mutableContent {
                out.append(
                    LintFinding(
                        "moengage.receive-needs-extension", .warning,
                        "no aps.mutable-content: NOTIFICATION_RECEIVED_IOS_MOE is sent from the notification service extension, which does not run",
                        path: "aps"))
            }
            return
        }
        guard p.app("push_from")?.value == "moengage" else {
            out.append(
                LintFinding(
                    "moengage.not-moengage", .error,
                    "push_from is not \"moengage\": isFromMoEngagePlatform is false and the SDK ignores it",
                    path: p.appPath("push_from")))
            return
        }
        if p.app("gcm_campaign_id") == nil {
            out.append(
                LintFinding(
                    "moengage.missing-campaign-id", .error, "no gcm_campaign_id: the receive and click events carry no campaign",
                    path: p.appPath("gcm_campaign_id")))
        }
        if let attr = p.app("moe_cid_attr"), !PayloadReader(Array(attr.value.utf8)).isObject {
            out.append(
                LintFinding(
                    "moengage.invalid-cid-attr", .warning, "moe_cid_attr must be a JSON string of an object (the event attributes)",
                    path: attr.path))
        }
    }

    func dataMessageDisplay(_ p: LintInput) -> Display.Reason? { p.app("push_from")?.value == "moengage" ? .sdkRendered : nil }
}
