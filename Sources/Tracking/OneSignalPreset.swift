import PushCore

/// OneSignal: `PUT /notifications/{id}/report_received` on receive (unless `receiveReceipts` is false) and `PUT /notifications/{id}` with `opened` on open.
struct OneSignalPreset: TrackingPreset {
    let name = "onesignal"
    let campaignPathsAPNs: [String] = ["custom.i"]
    let campaignPathsFCM: [String] = ["data.custom.i"]

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        guard let i = ctx.appValue("custom.i") else { return .skip("onesignal needs custom.i") }
        if ctx.event == .receive && c.options["receiveReceipts"] == "false" { return .skip("onesignal receive receipts are off") }
        let appID = c.options["appId"] ?? ""
        let player = c.options["playerId"] ?? ctx.hwid
        var body = "{\"app_id\":" + JSONWriter.quote(appID) + ",\"player_id\":" + JSONWriter.quote(player)
        if ctx.event == .open { body += ",\"opened\":true" }
        body += ",\"device_type\":\(ctx.platform == "ios" ? 0 : 1)}"
        let url = ctx.event == .receive ? "\(base)/notifications/\(i)/report_received" : "\(base)/notifications/\(i)"
        return .send(
            TrackingRequest(
                method: "PUT", url: url,
                headers: [
                    ("Accept", "application/vnd.onesignal.v1+json"),
                    ("Content-Type", "application/json; charset=UTF-8"),
                    ("SDK-Version", c.options["sdkVersion"] ?? "onesignal/android/050100"),
                    ("OneSignal-Subscription-Id", player), ("OneSignal-Install-Id", ctx.hwid),
                ],
                body: Array(body.utf8)))
    }
}
