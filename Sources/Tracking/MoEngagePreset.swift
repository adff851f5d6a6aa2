import PushCore
import Runtime

/// MoEngage: `NOTIFICATION_RECEIVED_MOE` / `NOTIFICATION_CLICKED_MOE` events (the `_IOS_` ones on iOS), batched into `POST {base}/v2/sdk/report/{appId}`.
struct MoEngagePreset: TrackingPreset {
    let name = "moengage"
    let campaignPathsAPNs: [String] = ["moengage.moe_campaign_id", "moengage.cid", "moe_campaign_id", "gcm_campaign_id"]
    let campaignPathsFCM: [String] = ["data.gcm_campaign_id", "data.moe_cid_attr.moe_campaign_id", "data.moe_campaign_id"]

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        if ctx.platform == "web" {
            return .skip(
                "moengage's web SDK (a service worker from its CDN) has no public source for its tracking: use the webhook preset for web devices"
            )
        }
        var attrs: [(String, String)] = []
        let ios = ctx.platform == "ios"
        if ios {
            guard let cid = ctx.payload.value("moengage.cid") else { return .skip("moengage needs moengage.cid") }
            attrs.append(("gcm_campaign_id", cid))
            for k in ["moe_campaign_id", "moe_campaign_channel", "moe_delivery_type"] {
                if let v = ctx.payload.value("moengage." + k) { attrs.append((k, v)) }
            }
        } else {
            guard ctx.appValue("push_from") == "moengage" else { return .skip("moengage needs push_from=moengage") }
            var cid = ctx.appValue("gcm_campaign_id") ?? ""
            if let r = TrackingPresets.find("DTSDK", in: cid) { cid = String(cid.utf8.prefix(r))! }
            attrs.append(("gcm_campaign_id", cid))
            for k in [
                "moe_campaign_id", "moe_campaign_name", "moe_campaign_type", "moe_delivery_type", "moe_campaign_channel", "sent_epoch_time",
            ] {
                if let v = ctx.appValue("moe_cid_attr." + k) { attrs.append((k, v)) }
            }
        }
        let action =
            ctx.event == .receive
            ? (ios ? "NOTIFICATION_RECEIVED_IOS_MOE" : "NOTIFICATION_RECEIVED_MOE")
            : (ios ? "NOTIFICATION_CLICKED_IOS_MOE" : "NOTIFICATION_CLICKED_MOE")
        let attrJSON = "{" + attrs.map { JSONWriter.quote($0.0) + ":" + JSONWriter.quote($0.1) }.joined(separator: ",") + "}"
        var item = "{\"EVENT_ACTION\":\"\(action)\",\"EVENT_ATTRS\":" + JSONWriter.quote(attrJSON)
        item += ",\"EVENT_G_TIME\":\"\(ctx.atMs)\",\"EVENT_L_TIME\":\"\(Templates.moengageTime(ctx.atMs))\""
        if ctx.event == .receive { item += ",\"N_I_E\":1" }
        item += "}"
        let appID = c.options["appId"] ?? ""
        let hwid = ctx.hwid
        let token = ctx.token
        let platform = ctx.platform
        let url = "\(base)/v2/sdk/report/\(appID)"
        let batch = TrackingBatch(
            key: "moengage|\(url)|\(token)", item: Array(item.utf8),
            flushAfterMs: Int64(c.options["flushMs"] ?? "") ?? 1000,
            maxItems: Int(c.options["batchSize"] ?? "") ?? 30,
            kind: .moengage, fields: [url, appID, hwid, token, platform])
        return .send(TrackingRequest(method: "POST", url: url), batch: batch)
    }

    /// The batched report request carrying `items` (`fields`: url, app id, hwid, token, platform).
    static func batchRequest(fields f: [String], items: [[UInt8]]) -> TrackingRequest {
        let (url, appID, hwid, token, platform) = (f[0], f[1], f[2], f[3], f[4])
        var r = FastRandom()
        let bid = UUIDValue.random(&r).description
        var body =
            "{\"query_params\":{\"os\":\"\(platform == "ios" ? "iOS" : "ANDROID")\",\"unique_id\":\"\(hwid)\",\"app_id\":"
            + JSONWriter.quote(appID)
        body +=
            ",\"push_id\":" + JSONWriter.quote(token)
            + "},\"meta\":{\"bid\":\"\(bid)\",\"request_time\":\"\(Templates.iso8601(Clock.nowMs()))\"}"
        body +=
            ",\"viewsCount\":\(items.count),\"viewsInfo\":[" + items.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ",")
            + "]}"
        return TrackingRequest(
            method: "POST", url: url, headers: [("MOE-REQUEST-ID", bid), ("Content-Type", "application/json")],
            body: Array(body.utf8))
    }
}
