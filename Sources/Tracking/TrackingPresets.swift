import PushCore

/// Builds the request a platform's SDK makes for an event, as `tracking.md` documents each one,
/// or says why that SDK would stay silent (its gate is not met).
public enum TrackingPresets {
    /// The UTF-8 offset of `needle` in `s`.
    static func find(_ needle: String, in s: String) -> Int? {
        let h = Array(s.utf8), n = Array(needle.utf8)
        guard !n.isEmpty, h.count >= n.count else { return nil }
        for i in 0...(h.count - n.count) where h[i..<(i + n.count)].elementsEqual(n) { return i }
        return nil
    }

    public enum Outcome: Sendable {
        case job(TrackingJob)
        case skip(String)
    }

    public static func job(_ c: TrackingConfig, _ ctx: TrackingContext) -> Outcome {
        guard c.events.contains(ctx.event) else { return .skip("\(c.preset) does not report \(ctx.event.rawValue)") }
        func make(_ r: TrackingRequest, delayMs: Int64 = 0, batch: TrackingBatch? = nil) -> Outcome {
            let j = TrackingJob(request: r, event: ctx.event, preset: c.preset, token: ctx.token, notificationID: ctx.notificationID,
                                notBeforeMs: ctx.atMs + delayMs, batch: batch)
            return .job(j)
        }
        let base = c.url.utf8.last == UInt8(ascii: "/") ? String(c.url.dropLast()) : c.url
        switch c.preset {
        case "adobe-campaign":
            guard let mId = ctx.appValue("_mId"), let dId = ctx.appValue("_dId") else { return .skip("adobe-campaign needs _mId and _dId") }
            guard let hex = AdobeIDs.hex(mId) else { return .skip("adobe-campaign: _mId '\(mId)' is neither a UUID nor a decimal id") }
            let receive = ctx.event == .receive
            let tag = c.options.isEmpty ? (receive ? "1" : "2")
                : receive ? (c.options["tagReceive"] ?? "1") : (c.options["tagOpen"] ?? "2")
            // {base}/r/?id=h{hex},{dId},{tag} in one allocation (campaign rate: once per device).
            return make(TrackingRequest(method: "GET", url: Bytes.concat(base, "/r/?id=h", hex, ",", dId, ",", tag)))

        case "pushwoosh":
            guard ctx.appValue("pw_msg") != nil else { return .skip("pushwoosh needs pw_msg") }
            let appCode = c.options["appCode"] ?? ""
            let root = base.isEmpty ? "https://\(appCode).api.pushwoosh.com" : base
            let path = ctx.event == .receive ? "messageDeliveryEvent" : "pushStat"
            var body = "{\"request\":{\"application\":" + JSONWriter.quote(appCode) + ",\"hwid\":" + JSONWriter.quote(ctx.hwid)
            body += ",\"v\":" + JSONWriter.quote(c.options["sdkVersion"] ?? "6.7.0")
            body += ",\"device_type\":\(ctx.platform == "ios" ? 1 : 3)"
            body += ",\"userId\":" + JSONWriter.quote(ctx.userID ?? ctx.hwid)
            body += ",\"hash\":" + (ctx.appValue("p").map(JSONWriter.quote) ?? "null")
            body += ",\"metaData\":" + (ctx.appValue("md").map(JSONWriter.quote) ?? "null") + "}}"
            return make(TrackingRequest(method: "POST", url: "\(root)/json/1.3/\(path)",
                                        headers: [("Content-Type", "application/json; charset=utf-8"),
                                                  ("Authorization", "Token " + (c.options["apiToken"] ?? ""))],
                                        body: Array(body.utf8)))

        case "onesignal":
            guard let i = ctx.appValue("custom.i") else { return .skip("onesignal needs custom.i") }
            if ctx.event == .receive && c.options["receiveReceipts"] == "false" { return .skip("onesignal receive receipts are off") }
            let appID = c.options["appId"] ?? "", player = c.options["playerId"] ?? ctx.hwid
            var body = "{\"app_id\":" + JSONWriter.quote(appID) + ",\"player_id\":" + JSONWriter.quote(player)
            if ctx.event == .open { body += ",\"opened\":true" }
            body += ",\"device_type\":\(ctx.platform == "ios" ? 0 : 1)}"
            let url = ctx.event == .receive ? "\(base)/notifications/\(i)/report_received" : "\(base)/notifications/\(i)"
            return make(TrackingRequest(method: "PUT", url: url,
                                        headers: [("Accept", "application/vnd.onesignal.v1+json"),
                                                  ("Content-Type", "application/json; charset=UTF-8"),
                                                  ("SDK-Version", c.options["sdkVersion"] ?? "onesignal/android/050100"),
                                                  ("OneSignal-Subscription-Id", player), ("OneSignal-Install-Id", ctx.hwid)],
                                        body: Array(body.utf8)))

        case "moengage":
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
                for k in ["moe_campaign_id", "moe_campaign_name", "moe_campaign_type", "moe_delivery_type", "moe_campaign_channel", "sent_epoch_time"] {
                    if let v = ctx.appValue("moe_cid_attr." + k) { attrs.append((k, v)) }
                }
            }
            let action = ctx.event == .receive ? (ios ? "NOTIFICATION_RECEIVED_IOS_MOE" : "NOTIFICATION_RECEIVED_MOE")
                                               : (ios ? "NOTIFICATION_CLICKED_IOS_MOE" : "NOTIFICATION_CLICKED_MOE")
            let attrJSON = "{" + attrs.map { JSONWriter.quote($0.0) + ":" + JSONWriter.quote($0.1) }.joined(separator: ",") + "}"
            var item = "{\"EVENT_ACTION\":\"\(action)\",\"EVENT_ATTRS\":" + JSONWriter.quote(attrJSON)
            item += ",\"EVENT_G_TIME\":\"\(ctx.atMs)\",\"EVENT_L_TIME\":\"\(Templates.moengageTime(ctx.atMs))\""
            if ctx.event == .receive { item += ",\"N_I_E\":1" }
            item += "}"
            let appID = c.options["appId"] ?? ""
            let hwid = ctx.hwid, token = ctx.token, platform = ctx.platform, url = "\(base)/v2/sdk/report/\(appID)"
            let batch = TrackingBatch(key: "moengage|\(url)|\(token)", item: Array(item.utf8),
                                      flushAfterMs: Int64(c.options["flushMs"] ?? "") ?? 1000,
                                      maxItems: Int(c.options["batchSize"] ?? "") ?? 30) { items in
                var r = FastRandom()
                let bid = UUIDValue.random(&r).description
                var body = "{\"query_params\":{\"os\":\"\(platform == "ios" ? "iOS" : "ANDROID")\",\"unique_id\":\"\(hwid)\",\"app_id\":" + JSONWriter.quote(appID)
                body += ",\"push_id\":" + JSONWriter.quote(token) + "},\"meta\":{\"bid\":\"\(bid)\",\"request_time\":\"\(Templates.iso8601(Clock.nowMs()))\"}"
                body += ",\"viewsCount\":\(items.count),\"viewsInfo\":[" + items.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ",") + "]}"
                return TrackingRequest(method: "POST", url: url, headers: [("MOE-REQUEST-ID", bid), ("Content-Type", "application/json")],
                                       body: Array(body.utf8))
            }
            return make(TrackingRequest(method: "POST", url: url), batch: batch)

        case "braze":
            let cid: String
            var delayMs: Int64 = 0
            if ctx.platform == "ios" {
                guard let c = ctx.payload.value("ab.c") else { return .skip("braze needs ab.c") }
                if ctx.event == .receive { return .skip("braze reports push delivery (pd) on Android only") }
                cid = c
            } else {
                guard ctx.appValue("_ab") == "true" else { return .skip("braze needs _ab") }
                cid = ctx.appValue("cid") ?? ""
                if ctx.event == .receive {
                    guard let e = ctx.appValue("bz_p_e"), e != "false", e != "0" else { return .skip("braze push delivery needs bz_p_e") }
                    // Sent after a random delay between bz_p_fn and bz_p_fx minutes.
                    if let fn = Int64(ctx.appValue("bz_p_fn") ?? ""), let fx = Int64(ctx.appValue("bz_p_fx") ?? ""), fx >= fn, fn >= 0 {
                        var r = FastRandom(seed: UInt64(bitPattern: Int64(TokenKey(ctx.notificationID).a.hashValue)))
                        delayMs = (fn + Int64(r.next(below: UInt64(fx - fn + 1)))) * 60_000
                    }
                }
            }
            let name = ctx.event == .receive ? "pd" : "pc"
            let at = Double(ctx.atMs + delayMs) / 1000
            let item = "{\"name\":\"\(name)\",\"data\":{\"cid\":" + JSONWriter.quote(cid) + "},\"time\":\(at),\"session_id\":\"\(ctx.hwid)\",\"user_id\":"
                + (ctx.userID.map(JSONWriter.quote) ?? "null") + "}"
            let apiKey = c.options["apiKey"] ?? "", hwid = ctx.hwid, sdk = c.options["sdkVersion"] ?? "30.0.0"
            let url = "\(base)/api/v3/data"
            let batch = TrackingBatch(key: "braze|\(url)|\(ctx.token)", item: Array(item.utf8),
                                      flushAfterMs: Int64(c.options["flushMs"] ?? "") ?? 1000,
                                      maxItems: Int(c.options["batchSize"] ?? "") ?? 50) { items in
                var body = "{\"api_key\":" + JSONWriter.quote(apiKey) + ",\"device_id\":\"\(hwid)\",\"sdk_version\":" + JSONWriter.quote(sdk)
                body += ",\"time\":\(Clock.nowMs() / 1000),\"events\":[" + items.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ",") + "]}"
                return TrackingRequest(method: "POST", url: url,
                                       headers: [("Content-Type", "application/json"), ("X-Braze-Api-Key", apiKey), ("X-Braze-Req-Attempt", "1")],
                                       body: Array(body.utf8))
            }
            return make(TrackingRequest(method: "POST", url: url), delayMs: delayMs, batch: batch)

        case "webhook":
            if let w = c.when, ctx.payload.value(w.hasPrefix("payload.") ? String(w.dropFirst(8)) : w) == nil {
                return .skip("webhook condition '\(w)' not met")
            }
            let url = Templates.render(c.url, ctx, options: c.options)
            let headers = c.headers.map { ($0.0, Templates.render($0.1, ctx, options: c.options)) }
            let body = c.body.map { Array(Templates.render($0, ctx, options: c.options).utf8) } ?? []
            return make(TrackingRequest(method: c.method, url: url, headers: headers, body: body))

        default:
            return .skip("unknown preset \(c.preset)")
        }
    }
}
