import PushCore

/// OneSignal: `PUT /notifications/{id}/report_received` on receive (unless `receiveReceipts` is false) and `PUT /notifications/{id}` with `opened` on open.
/// Its web SDK (OneSignal-Website-SDK's service worker) reads `custom.i` at the payload's top
/// level, reports itself by `DeliveryPlatformKind` (5 Chrome-like, 8 Firefox, 17 Safari with
/// VAPID), and sends no receive receipt on Safari (its push handler's time limit).
struct OneSignalPreset: TrackingPreset {
    let name = "onesignal"
    let campaignPathsAPNs: [String] = ["custom.i"]
    let campaignPathsFCM: [String] = ["data.custom.i"]

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        guard let i = ctx.appValue("custom.i") else { return .skip("onesignal needs custom.i") }
        if ctx.event == .receive && c.options["receiveReceipts"] == "false" { return .skip("onesignal receive receipts are off") }
        let web = ctx.platform == "web"
        if web && ctx.event == .receive && ctx.webService == "apple" {
            return .skip("onesignal's web SDK sends no receive receipt on Safari (its push handler's time limit)")
        }
        let appID = c.options["appId"] ?? ""
        let player = c.options["playerId"] ?? ctx.hwid
        var body = "{\"app_id\":" + JSONWriter.quote(appID) + ",\"player_id\":" + JSONWriter.quote(player)
        if ctx.event == .open { body += ",\"opened\":true" }
        body += ",\"device_type\":\(OneSignalPreset.deviceType(ctx))}"
        let url = ctx.event == .receive ? "\(base)/notifications/\(i)/report_received" : "\(base)/notifications/\(i)"
        return .send(
            TrackingRequest(
                method: "PUT", url: url,
                headers: [
                    ("Accept", "application/vnd.onesignal.v1+json"),
                    ("Content-Type", "application/json; charset=UTF-8"),
                    ("SDK-Version", c.options["sdkVersion"] ?? (web ? "onesignal/web/160400" : "onesignal/android/050100")),
                    ("OneSignal-Subscription-Id", player), ("OneSignal-Install-Id", ctx.hwid),
                ],
                body: Array(body.utf8)))
    }

    /// OneSignal's device type: 0 iOS, 1 Android; on the web its `DeliveryPlatformKind`.
    static func deviceType(_ ctx: TrackingContext) -> Int {
        switch ctx.platform {
        case "ios": return 0
        case "web":
            switch ctx.webService {
            case "apple": return 17
            case "mozilla": return 8
            default: return 5 // Chrome and Edge
            }
        default: return 1
        }
    }
}
