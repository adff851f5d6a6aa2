import PushCore
import Runtime

/// Braze: push delivered (`pd`, Android, after the `bz_p_fn`..`bz_p_fx` minutes delay) and push clicked (`pc`) events, batched into `POST {base}/api/v3/data`.
struct BrazePreset: TrackingPreset {
    let name = "braze"
    let campaignPathsAPNs: [String] = ["ab.c"]
    let campaignPathsFCM: [String] = ["data.cid"]

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        if ctx.platform == "web" {
            return .skip(
                "braze's web SDK (a minified service worker) has no public source for its tracking: use the webhook preset for web devices")
        }
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
        let item =
            "{\"name\":\"\(name)\",\"data\":{\"cid\":" + JSONWriter.quote(cid)
            + "},\"time\":\(at),\"session_id\":\"\(ctx.hwid)\",\"user_id\":"
            + (ctx.userID.map(JSONWriter.quote) ?? "null") + "}"
        let apiKey = c.options["apiKey"] ?? ""
        let hwid = ctx.hwid
        let sdk = c.options["sdkVersion"] ?? "30.0.0"
        let url = "\(base)/api/v3/data"
        let batch = TrackingBatch(
            key: "braze|\(url)|\(ctx.token)", item: Array(item.utf8),
            flushAfterMs: Int64(c.options["flushMs"] ?? "") ?? 1000,
            maxItems: Int(c.options["batchSize"] ?? "") ?? 50,
            kind: .braze, fields: [url, apiKey, hwid, sdk])
        return .send(TrackingRequest(method: "POST", url: url), delayMs: delayMs, batch: batch)
    }

    /// The batched data request carrying `items` (`fields`: url, api key, hwid, SDK version).
    static func batchRequest(fields f: [String], items: [[UInt8]]) -> TrackingRequest {
        let (url, apiKey, hwid, sdk) = (f[0], f[1], f[2], f[3])
        var body = "{\"api_key\":" + JSONWriter.quote(apiKey) + ",\"device_id\":\"\(hwid)\",\"sdk_version\":" + JSONWriter.quote(sdk)
        body +=
            ",\"time\":\(Clock.nowMs() / 1000),\"events\":[" + items.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ",")
            + "]}"
        return TrackingRequest(
            method: "POST", url: url,
            headers: [("Content-Type", "application/json"), ("X-Braze-Api-Key", apiKey), ("X-Braze-Req-Attempt", "1")],
            body: Array(body.utf8))
    }
}
