import Transport

public enum PushProvider: String, Sendable {
    case apns, fcm
}

/// An accepted notification as the provider layers hand it on (to the device layer; until that
/// exists, to the notification log). Bytes are kept as received: headers and payload share
/// storage with the request, nothing is re-encoded on the hot path.
public struct PushNotification: Sendable {
    public var sequence: UInt64 = 0
    public var id: UUIDValue
    public var provider: PushProvider
    public var receivedAtMs: Int64
    /// APNs: "sandbox" / "production". FCM: the project id.
    public var environment: String
    public var token: ArraySlice<UInt8>
    public var topic: ArraySlice<UInt8>?
    public var headers: HTTPFields
    public var payload: [UInt8]
    public var payloadIsJSON: Bool
    public var warnings: [String]

    public init(id: UUIDValue, provider: PushProvider, receivedAtMs: Int64, environment: String,
                token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, headers: HTTPFields, payload: [UInt8],
                payloadIsJSON: Bool, warnings: [String]) {
        self.id = id
        self.provider = provider
        self.receivedAtMs = receivedAtMs
        self.environment = environment
        self.token = token
        self.topic = topic
        self.headers = headers
        self.payload = payload
        self.payloadIsJSON = payloadIsJSON
        self.warnings = warnings
    }

    /// The notification as admin-API JSON (`{"id","provider","receivedAt","headers","payload",...}`).
    public var json: String {
        var s = "{\"id\":\"\(id)\",\"provider\":\"\(provider.rawValue)\",\"receivedAt\":\(receivedAtMs)"
        s += ",\"environment\":" + JSONWriter.quote(environment)
        s += ",\"token\":" + JSONWriter.quote(String(decoding: token, as: UTF8.self))
        if let topic { s += ",\"topic\":" + JSONWriter.quote(String(decoding: topic, as: UTF8.self)) }
        s += ",\"headers\":{"
        var first = true
        for (n, v) in headers.pairs where !n.hasPrefix(":") && n != "authorization" {
            s += (first ? "" : ",") + JSONWriter.quote(n) + ":" + JSONWriter.quote(v)
            first = false
        }
        s += "}"
        if payloadIsJSON {
            s += ",\"payload\":" + String(decoding: payload, as: UTF8.self)
        } else {
            s += ",\"payload\":null,\"payloadText\":" + JSONWriter.quote(String(decoding: payload, as: UTF8.self))
        }
        s += ",\"warnings\":[" + warnings.map(JSONWriter.quote).joined(separator: ",") + "]}"
        return s
    }
}
