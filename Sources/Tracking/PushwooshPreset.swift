import PushCore

/// Pushwoosh: `messageDeliveryEvent` on receive and `pushStat` on open (`POST {base}/json/1.3/...`, or `https://{appCode}.api.pushwoosh.com` when no url is set).
/// Its web SDK reads the message hash `p` at the payload's top level (or under `data`) and
/// reports the browser's platform code (10 Safari, 11 Chrome, 12 Firefox; Edge as Chrome, unconfirmed).
struct PushwooshPreset: TrackingPreset {
    let name = "pushwoosh"
    let campaignPathsAPNs: [String] = ["p"]
    let campaignPathsFCM: [String] = ["data.p"]

    /// With an `appCode` the SDK's own host is used, so no url is needed.
    func needsURL(_ options: [String: String]) -> Bool { options["appCode"] == nil }

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        let web = ctx.platform == "web"
        if web {
            guard ctx.appValue("p") != nil else { return .skip("pushwoosh's web SDK needs the message hash p") }
        } else {
            guard ctx.appValue("pw_msg") != nil else { return .skip("pushwoosh needs pw_msg") }
        }
        let appCode = c.options["appCode"] ?? ""
        let root = base.isEmpty ? "https://\(appCode).api.pushwoosh.com" : base
        let path = ctx.event == .receive ? "messageDeliveryEvent" : "pushStat"
        var body = "{\"request\":{\"application\":" + JSONWriter.quote(appCode) + ",\"hwid\":" + JSONWriter.quote(ctx.hwid)
        body += ",\"v\":" + JSONWriter.quote(c.options["sdkVersion"] ?? (web ? "3.0.0" : "6.7.0"))
        body += ",\"device_type\":\(PushwooshPreset.deviceType(ctx))"
        body += ",\"userId\":" + JSONWriter.quote(ctx.userID ?? ctx.hwid)
        body += ",\"hash\":" + (ctx.appValue("p").map(JSONWriter.quote) ?? "null")
        body += ",\"metaData\":" + (ctx.appValue("md").map(JSONWriter.quote) ?? "null") + "}}"
        return .send(
            TrackingRequest(
                method: "POST", url: "\(root)/json/1.3/\(path)",
                headers: [
                    ("Content-Type", "application/json; charset=utf-8"),
                    ("Authorization", "Token " + (c.options["apiToken"] ?? "")),
                ],
                body: Array(body.utf8)))
    }

    /// Pushwoosh's platform code: 1 iOS, 3 Android; 10 Safari, 11 Chrome, 12 Firefox.
    static func deviceType(_ ctx: TrackingContext) -> Int {
        switch ctx.platform {
        case "ios": return 1
        case "web":
            switch ctx.webService {
            case "apple": return 10
            case "mozilla": return 12
            default: return 11
            }
        default: return 3
        }
    }
}
