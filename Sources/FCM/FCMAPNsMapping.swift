import PushCore
import Transport

/// How FCM hands a message for an iOS app's registration token to APNs: the APNs payload and
/// headers the device receives. Built from Firebase's documentation of the v1 API
/// (`ApnsConfig`: "APNs request headers" and "APNs payload as a JSON object, including both aps
/// dictionary and custom payload"; `Notification`; `ApnsFcmOptions.image`) and from what the
/// Firebase iOS SDK reads on the device (`gcm.message_id`, and `fcm_options.image` in its
/// notification service extension helper):
///
/// - `notification.title` and `.body` become `aps.alert.title` and `.body`;
/// - `data` entries become top-level custom keys (string values, as FCM sends them);
/// - `apns.payload` is merged last: its `aps` members replace the mapped ones (an `alert` given
///   there replaces the whole mapped alert) and its other members are custom keys too;
/// - an image (`apns.fcm_options.image`, else `notification.image`) becomes
///   `"fcm_options":{"image":URL}` with `aps.mutable-content: 1`, so the app's notification
///   service extension can attach it;
/// - `gcm.message_id` carries the message id (the part of the message name after `messages/`);
/// - `apns.headers` keep their meaning: `apns-collapse-id`, `apns-expiration`, `apns-priority`
///   (10 by default), `apns-push-type`;
/// - `apns.live_activity_token`: the push goes to that Live Activity instead of the app.
public struct FCMAPNsMapping: Sendable {
    /// The APNs payload the device receives.
    public var payload: [UInt8] = []
    public var mutableContent = false
    public var contentAvailable = false
    /// What the mapped `aps` shows (alert, sound, badge, passive).
    public var alerts: AlertFacts = []
    public var collapseID: String?
    /// `apns-expiration` in seconds since 1970 (0: now or never).
    public var expiration: Int64?
    public var priority = 10
    public var pushType: String?
    /// `apns.live_activity_token`, when the message updates a Live Activity.
    public var liveActivityToken: String?

    /// Maps the `message` object (its JSON text) sent with message id `messageID`.
    public static func map(message: ArraySlice<UInt8>, messageID: String) -> FCMAPNsMapping {
        var out = FCMAPNsMapping()
        Array(message).withUnsafeBytes { raw in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return }
            let v = JSONView(bytes: raw, tokens: tokens)
            func member(_ object: Int?, _ names: StaticString...) -> Int? {
                guard let object, v.tokens[object].kind == .object else { return nil }
                for name in names { if let i = v.member(object, name) { return i } }
                return nil
            }
            func string(_ i: Int?) -> String? { i.flatMap { v.tokens[$0].kind == .string ? v.string($0) : nil } }
            /// A value as JSON text (a string's raw bytes are its contents, without the quotes).
            func rawText(_ i: Int) -> String {
                v.tokens[i].kind == .string ? JSONWriter.quote(v.string(i)) : String(decoding: v.raw(i), as: UTF8.self)
            }

            let notification = member(0, "notification")
            let apns = member(0, "apns")
            let apnsPayload = member(apns, "payload")
            let apsOverride = member(apnsPayload, "aps")
            let headers = member(apns, "headers")
            let image = string(member(member(apns, "fcm_options", "fcmOptions"), "image")) ?? string(member(notification, "image"))
            out.liveActivityToken = string(member(apns, "live_activity_token", "liveActivityToken"))

            // aps: the mapped members, then the override's (which win).
            var aps: [(String, String)] = []
            var alert = JSONObjectWriter()
            var hasAlert = false
            if let title = string(member(notification, "title")) {
                alert.add("title", title)
                hasAlert = true
            }
            if let body = string(member(notification, "body")) {
                alert.add("body", body)
                hasAlert = true
            }
            if hasAlert { aps.append(("alert", alert.text)) }
            if image != nil { aps.append(("mutable-content", "1")) }
            if let apsOverride, v.tokens[apsOverride].kind == .object {
                v.forEachMember(apsOverride) { k, val in
                    let name = v.string(k)
                    aps.removeAll { $0.0 == name }
                    aps.append((name, rawText(val)))
                }
            }
            for (name, value) in aps {
                if name == "mutable-content" { out.mutableContent = value == "1" }
                if name == "content-available" { out.contentAvailable = value == "1" }
                if name == "alert" { out.alerts.insert(.alert) }
                if name == "sound" { out.alerts.insert(.sound) }
                if name == "badge" { out.alerts.insert(.badge) }
                if name == "interruption-level" && value == "\"passive\"" { out.alerts.insert(.passive) }
            }
            var text = "{\"aps\":{" + aps.map { JSONWriter.quote($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
            var keys: Set<String> = ["aps"]
            if let apnsPayload, v.tokens[apnsPayload].kind == .object {
                v.forEachMember(apnsPayload) { k, val in
                    let name = v.string(k)
                    guard name != "aps", keys.insert(name).inserted else { return }
                    text += "," + JSONWriter.quote(name) + ":" + rawText(val)
                }
            }
            if let data = member(0, "data"), v.tokens[data].kind == .object {
                v.forEachMember(data) { k, val in
                    let name = v.string(k)
                    guard keys.insert(name).inserted else { return }
                    text += "," + JSONWriter.quote(name) + ":" + rawText(val)
                }
            }
            if let image, keys.insert("fcm_options").inserted { text += ",\"fcm_options\":{\"image\":" + JSONWriter.quote(image) + "}" }
            if keys.insert("gcm.message_id").inserted { text += ",\"gcm.message_id\":" + JSONWriter.quote(messageID) }
            text += "}"
            out.payload = Array(text.utf8)

            if let headers, v.tokens[headers].kind == .object {
                v.forEachMember(headers) { k, val in
                    guard v.tokens[val].kind == .string else { return }
                    let value = v.string(val)
                    switch v.string(k).lowercased() {
                    case "apns-collapse-id": out.collapseID = value
                    case "apns-expiration": out.expiration = Int64(value).flatMap { $0 >= 0 && $0 < 100_000_000_000 ? $0 : nil }
                    case "apns-priority": out.priority = Int(value) ?? 10
                    case "apns-push-type": out.pushType = value
                    default: break
                    }
                }
            }
        }
        return out
    }
}
