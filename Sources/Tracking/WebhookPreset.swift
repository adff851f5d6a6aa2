import PushCore

/// A webhook: method, URL, headers and body templates of the device fields (`when`: a payload path that must be present).
struct WebhookPreset: TrackingPreset {
    let name = "webhook"
    let campaignPathsAPNs: [String] = []
    let campaignPathsFCM: [String] = []

    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction {
        if let w = c.when, ctx.payload.value(w.hasPrefix("payload.") ? String(w.dropFirst(8)) : w) == nil {
            return .skip("webhook condition '\(w)' not met")
        }
        let url = Templates.render(c.url, ctx, options: c.options)
        let headers = c.headers.map { ($0.0, Templates.render($0.1, ctx, options: c.options)) }
        let body = c.body.map { Array(Templates.render($0, ctx, options: c.options).utf8) } ?? []
        return .send(TrackingRequest(method: c.method, url: url, headers: headers, body: body))
    }
}
