import PushCore

/// Adobe Campaign: the receive and open tracking GETs (`{base}/r/?id=h{mId hex},{dId},{tag}`; tag 1 receive, 2 open, or the `tagReceive`/`tagOpen` options).
struct AdobeCampaignPreset: TrackingPreset {
    let name = "adobe-campaign"
    let campaignPathsAPNs: [String] = ["_dId"]
    let campaignPathsFCM: [String] = ["data._dId", "android.data._dId"]

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        if ctx.platform == "web" {
            return .skip(
                "Adobe Campaign's SDK tracks mobile apps only (web push is Journey Optimizer's): use the webhook preset for web devices")
        }
        guard let mId = ctx.appValue("_mId"), let dId = ctx.appValue("_dId") else { return .skip("adobe-campaign needs _mId and _dId") }
        guard let hex = AdobeIDs.hex(mId) else { return .skip("adobe-campaign: _mId '\(mId)' is neither a UUID nor a decimal id") }
        let receive = ctx.event == .receive
        let tag =
            c.options.isEmpty
            ? (receive ? "1" : "2")
            : receive ? (c.options["tagReceive"] ?? "1") : (c.options["tagOpen"] ?? "2")
        // {base}/r/?id=h{hex},{dId},{tag} in one allocation (campaign rate: once per device).
        return .send(TrackingRequest(method: "GET", url: Bytes.concat(base, "/r/?id=h", hex, ",", dId, ",", tag)))
    }
}
