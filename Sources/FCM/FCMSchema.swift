/// The proto3 schema of the FCM v1 send request, as the JSON walker needs it: each message's
/// fields under their proto (snake_case) and JSON (lowerCamelCase) names, each field's kind,
/// and a role for the fields whose values the validator checks beyond their type.
/// Follows fcm.v1 (discovery revision 20241112) plus the newer fields the Admin SDKs send
/// (`fid`, `bandwidth_constrained_ok`, `restricted_satellite_ok`, `live_activity_token`).
final class ProtoMessage: Sendable {
    let typeName: StaticString
    let fields: [ProtoField]
    init(_ typeName: StaticString, _ fields: [ProtoField]) {
        self.typeName = typeName
        self.fields = fields
    }
}

final class ProtoEnum: Sendable {
    let typeName: StaticString
    /// Value names in number order (index == proto number).
    let values: [StaticString]
    init(_ typeName: StaticString, _ values: [StaticString]) {
        self.typeName = typeName
        self.values = values
    }
}

/// A schema object by address, without reference counting: every `ProtoMessage` and `ProtoEnum`
/// is a static constant of `FCMSchema` that lives as long as the process. With it `ProtoKind`
/// and `ProtoField` are plain values: the walker copies a field per key without a retain (and
/// without the generic value-witness calls a field holding references needed).
struct SchemaRef<Object: AnyObject>: @unchecked Sendable {
    unowned(unsafe) let object: Object
    init(_ object: Object) { self.object = object }
}

enum ProtoKind: Sendable {
    case string, bool, int32, float, duration, timestamp
    case enumerationRef(SchemaRef<ProtoEnum>)
    case messageRef(SchemaRef<ProtoMessage>)
    /// map<string, string>
    case stringMap
    case repeatedString
    case repeatedDuration
    /// google.protobuf.Struct: any JSON object.
    case structObject

    /// A field of enum type `e` (a static constant of `FCMSchema`).
    static func enumeration(_ e: ProtoEnum) -> ProtoKind { .enumerationRef(SchemaRef(e)) }
    /// A field of message type `m` (a static constant of `FCMSchema`).
    static func message(_ m: ProtoMessage) -> ProtoKind { .messageRef(SchemaRef(m)) }

    var typeName: String {
        switch self {
        case .string, .repeatedString, .stringMap: "TYPE_STRING"
        case .bool: "TYPE_BOOL"
        case .int32: "TYPE_INT32"
        case .float: "TYPE_FLOAT"
        case .duration, .repeatedDuration: "type.googleapis.com/google.protobuf.Duration"
        case .timestamp: "type.googleapis.com/google.protobuf.Timestamp"
        case .enumerationRef(let e): "type.googleapis.com/" + e.object.typeName.description
        case .messageRef(let m): "type.googleapis.com/" + m.object.typeName.description
        case .structObject: "type.googleapis.com/google.protobuf.Struct"
        }
    }
}

/// Fields the validator looks at after the type walk.
enum FieldRole: Int, CaseIterable, Sendable {
    case none = 0
    case validateOnly, message
    case token, topic, condition, fid
    case data, notification
    case androidData, androidTTL, androidNotification, androidColor, androidLabel, androidCollapseKey
    case webpushHeaders, webpushData, webpushNotification, webpushLink, webpushLabel
    case apnsHeaders, apnsPayload, apnsLabel
    case messageLabel
    /// A member of the oneof `target` (the four above).
    var isTarget: Bool {
        switch self {
        case .token, .topic, .condition, .fid: true
        default: false
        }
    }
}

struct ProtoField: Sendable {
    let name: StaticString
    let jsonName: StaticString
    let kind: ProtoKind
    let role: FieldRole

    init(_ name: StaticString, _ jsonName: StaticString, _ kind: ProtoKind, _ role: FieldRole = .none) {
        self.name = name
        self.jsonName = jsonName
        self.kind = kind
        self.role = role
    }
}

enum FCMSchema {
    static let androidPriority = ProtoEnum("google.firebase.fcm.v1.AndroidMessagePriority", ["NORMAL", "HIGH"])
    static let notificationPriority = ProtoEnum(
        "google.firebase.fcm.v1.AndroidNotification.NotificationPriority",
        ["PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX"])
    static let visibility = ProtoEnum(
        "google.firebase.fcm.v1.AndroidNotification.Visibility",
        ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"])
    static let proxy = ProtoEnum(
        "google.firebase.fcm.v1.AndroidNotification.Proxy",
        ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"])

    static let color = ProtoMessage(
        "google.type.Color",
        [
            ProtoField("red", "red", .float), ProtoField("green", "green", .float),
            ProtoField("blue", "blue", .float), ProtoField("alpha", "alpha", .float),
        ])
    static let lightSettings = ProtoMessage(
        "google.firebase.fcm.v1.LightSettings",
        [
            ProtoField("color", "color", .message(color)),
            ProtoField("light_on_duration", "lightOnDuration", .duration),
            ProtoField("light_off_duration", "lightOffDuration", .duration),
        ])
    static let notification = ProtoMessage(
        "google.firebase.fcm.v1.Notification",
        [
            ProtoField("title", "title", .string), ProtoField("body", "body", .string), ProtoField("image", "image", .string),
        ])
    static let androidNotification = ProtoMessage(
        "google.firebase.fcm.v1.AndroidNotification",
        [
            ProtoField("title", "title", .string), ProtoField("body", "body", .string),
            ProtoField("icon", "icon", .string), ProtoField("color", "color", .string, .androidColor),
            ProtoField("sound", "sound", .string), ProtoField("tag", "tag", .string),
            ProtoField("click_action", "clickAction", .string),
            ProtoField("body_loc_key", "bodyLocKey", .string), ProtoField("body_loc_args", "bodyLocArgs", .repeatedString),
            ProtoField("title_loc_key", "titleLocKey", .string), ProtoField("title_loc_args", "titleLocArgs", .repeatedString),
            ProtoField("channel_id", "channelId", .string), ProtoField("ticker", "ticker", .string),
            ProtoField("sticky", "sticky", .bool), ProtoField("event_time", "eventTime", .timestamp),
            ProtoField("local_only", "localOnly", .bool),
            ProtoField("notification_priority", "notificationPriority", .enumeration(notificationPriority)),
            ProtoField("default_sound", "defaultSound", .bool),
            ProtoField("default_vibrate_timings", "defaultVibrateTimings", .bool),
            ProtoField("default_light_settings", "defaultLightSettings", .bool),
            ProtoField("vibrate_timings", "vibrateTimings", .repeatedDuration),
            ProtoField("visibility", "visibility", .enumeration(visibility)),
            ProtoField("notification_count", "notificationCount", .int32),
            ProtoField("light_settings", "lightSettings", .message(lightSettings)),
            ProtoField("image", "image", .string),
            ProtoField("bypass_proxy_notification", "bypassProxyNotification", .bool),
            ProtoField("proxy", "proxy", .enumeration(proxy)),
        ])
    static let androidOptions = ProtoMessage(
        "google.firebase.fcm.v1.AndroidFcmOptions",
        [
            ProtoField("analytics_label", "analyticsLabel", .string, .androidLabel)
        ])
    static let android = ProtoMessage(
        "google.firebase.fcm.v1.AndroidConfig",
        [
            ProtoField("collapse_key", "collapseKey", .string, .androidCollapseKey),
            ProtoField("priority", "priority", .enumeration(androidPriority)),
            ProtoField("ttl", "ttl", .duration, .androidTTL),
            ProtoField("restricted_package_name", "restrictedPackageName", .string),
            ProtoField("data", "data", .stringMap, .androidData),
            ProtoField("notification", "notification", .message(androidNotification), .androidNotification),
            ProtoField("fcm_options", "fcmOptions", .message(androidOptions)),
            ProtoField("direct_boot_ok", "directBootOk", .bool),
            ProtoField("bandwidth_constrained_ok", "bandwidthConstrainedOk", .bool),
            ProtoField("restricted_satellite_ok", "restrictedSatelliteOk", .bool),
        ])
    static let webpushOptions = ProtoMessage(
        "google.firebase.fcm.v1.WebpushFcmOptions",
        [
            ProtoField("link", "link", .string, .webpushLink),
            ProtoField("analytics_label", "analyticsLabel", .string, .webpushLabel),
        ])
    static let webpush = ProtoMessage(
        "google.firebase.fcm.v1.WebpushConfig",
        [
            ProtoField("headers", "headers", .stringMap, .webpushHeaders),
            ProtoField("data", "data", .stringMap, .webpushData),
            ProtoField("notification", "notification", .structObject, .webpushNotification),
            ProtoField("fcm_options", "fcmOptions", .message(webpushOptions)),
        ])
    static let apnsOptions = ProtoMessage(
        "google.firebase.fcm.v1.ApnsFcmOptions",
        [
            ProtoField("analytics_label", "analyticsLabel", .string, .apnsLabel),
            ProtoField("image", "image", .string),
        ])
    static let apns = ProtoMessage(
        "google.firebase.fcm.v1.ApnsConfig",
        [
            ProtoField("headers", "headers", .stringMap, .apnsHeaders),
            ProtoField("payload", "payload", .structObject, .apnsPayload),
            ProtoField("fcm_options", "fcmOptions", .message(apnsOptions)),
            ProtoField("live_activity_token", "liveActivityToken", .string),
        ])
    static let messageOptions = ProtoMessage(
        "google.firebase.fcm.v1.FcmOptions",
        [
            ProtoField("analytics_label", "analyticsLabel", .string, .messageLabel)
        ])
    static let message = ProtoMessage(
        "google.firebase.fcm.v1.Message",
        [
            ProtoField("token", "token", .string, .token),
            ProtoField("data", "data", .stringMap, .data),
            ProtoField("notification", "notification", .message(notification), .notification),
            ProtoField("android", "android", .message(android)),
            ProtoField("apns", "apns", .message(apns)),
            ProtoField("topic", "topic", .string, .topic),
            ProtoField("condition", "condition", .string, .condition),
            ProtoField("webpush", "webpush", .message(webpush)),
            ProtoField("fcm_options", "fcmOptions", .message(messageOptions)),
            ProtoField("fid", "fid", .string, .fid),
            ProtoField("name", "name", .string),
        ])
    static let sendRequest = ProtoMessage(
        "google.firebase.fcm.v1.SendMessageRequest",
        [
            ProtoField("message", "message", .message(message), .message),
            ProtoField("validate_only", "validateOnly", .bool, .validateOnly),
        ])
}
