import PushCore

/// The campaign a notification belongs to, by the keys each platform's payload carries it in:
/// Adobe Campaign `_dId`, MoEngage `moe_campaign_id` / `gcm_campaign_id` (iOS `moengage.cid`),
/// Pushwoosh `p`, Braze `cid` / `ab.c`, OneSignal `custom.i`, FCM `fcm_options.analytics_label`.
public enum CampaignID {
    /// (A bare `moe_campaign_id` / `gcm_campaign_id` beside `aps` or in `data` is taken too:
    /// senders that build MoEngage-style payloads by hand put them there.)
    /// Each preset's paths, in `TrackingPresets.all`'s order.
    static let apnsPaths = TrackingPresets.all.flatMap(\.campaignPathsAPNs)
    /// Each preset's, then FCM's own analytics label.
    static let fcmPaths =
        TrackingPresets.all.flatMap(\.campaignPathsFCM)
        + ["fcm_options.analytics_label", "android.fcm_options.analytics_label"]

    /// A Web Push payload (the browser's plaintext): the web SDKs' top-level keys (OneSignal
    /// `custom.i`, Pushwoosh `p`), or under `data`.
    static let webPaths = apnsPaths + fcmPaths

    static func paths(_ provider: PushProvider) -> [String] {
        provider == .apns ? apnsPaths : provider == .webpush ? webPaths : fcmPaths
    }

    /// Every campaign id the payload carries (an APNs payload or an FCM message).
    /// `extra`: configured paths (`--campaign-key`), tried first.
    /// `under`: a prefix for every path (`message.` for a whole FCM request body).
    public static func candidates(_ payload: PayloadReader, provider: PushProvider, extra: [String] = [], under: String = "") -> [String] {
        (extra + paths(provider)).compactMap { payload.value(under + $0) }
    }

    /// The first campaign id the payload carries.
    public static func first(_ payload: PayloadReader, provider: PushProvider, extra: [String] = []) -> String? {
        for p in extra { if let v = payload.value(p) { return v } }
        for p in paths(provider) { if let v = payload.value(p) { return v } }
        return nil
    }

    /// The same for a whole FCM request body (`{"message":{...}}`, as a rejected request is
    /// journaled), or the message itself.
    public static func first(request payload: PayloadReader, provider: PushProvider, extra: [String] = []) -> String? {
        if let c = first(payload, provider: provider, extra: extra) { return c }
        guard provider == .fcm else { return nil }
        for p in extra + fcmPaths { if let v = payload.value("message." + p) { return v } }
        return nil
    }

    /// `first(request:)` read straight from the tokens a gateway's parse left (`parsed`: the
    /// payload, or FCM's `message`, as a value of the request's body): neither the bytes nor
    /// the tokens are copied. The same answer as `first(request: PayloadReader(parsed))`;
    /// `reusing` (the campaign read before) is returned as it is when the payload's value is
    /// the same bytes, so no String is made.
    public static func first(parsed: ParsedJSON, provider: PushProvider, extra: [String] = [], reusing: String? = nil) -> String? {
        guard let root = parsed.root else {
            return first(request: PayloadReader(Array(parsed.bytes)), provider: provider, extra: extra)
        }
        let origin = parsed.bytes.startIndex
        return parsed.bytes.withUnsafeBytes { slice -> String? in
            // The tokens' offsets count from the start of the whole document, of which
            // `bytes` is a value: a view from that start, read only within the slice.
            let document = UnsafeRawBufferPointer(start: slice.baseAddress! - origin, count: origin + slice.count)
            let v = JSONView(bytes: document, buffer: parsed.tokens)
            func value(_ path: String, from object: Int) -> String? {
                var path = path
                return path.withUTF8 { PayloadReader.lookup(v, UnsafeRawBufferPointer($0), from: object, reusing: reusing) }
            }
            for p in extra { if let c = value(p, from: root) { return c } }
            for p in paths(provider) { if let c = value(p, from: root) { return c } }
            guard provider == .fcm, let message = PayloadReader.member(v, root, "message") else { return nil }
            // A JSON document inside the `message` string: read as `first(request:)` reads it.
            if v.tokens[message].kind == .string {
                let inner = PayloadReader(Array(v.string(message).utf8))
                for p in extra { if let c = inner.value(p) { return c } }
                for p in fcmPaths { if let c = inner.value(p) { return c } }
                return nil
            }
            for p in extra { if let c = value(p, from: message) { return c } }
            for p in fcmPaths { if let c = value(p, from: message) { return c } }
            return nil
        }
    }

    public static func matches(_ n: PushNotification, _ campaign: String, extra: [String] = []) -> Bool {
        n.payloadIsJSON && candidates(PayloadReader(n.payload), provider: n.provider, extra: extra).contains(campaign)
    }
}
