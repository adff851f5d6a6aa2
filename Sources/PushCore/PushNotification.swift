import Transport

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
    /// What the device made of it (nil: not decided, as for a record of an older journal).
    public var display: Display?
    /// What the device's SDK found wrong with the payload.
    public var lint: [LintFinding] = []
    /// The APNs team whose credentials sent it (nil for FCM and Web Push).
    public var team: String?

    public init(
        id: UUIDValue, provider: PushProvider, receivedAtMs: Int64, environment: String,
        token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, headers: HTTPFields, payload: [UInt8],
        payloadIsJSON: Bool, warnings: [String]
    ) {
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
        var s = "{\"id\":\"\(id)\",\"provider\":\"\(provider.name)\",\"receivedAt\":\(receivedAtMs)"
        if provider == .fcm {
            s +=
                ",\"name\":"
                + JSONWriter.quote("projects/\(environment)/messages/" + PushNotification.fcmMessageID(id, receivedAtMs: receivedAtMs))
        }
        s += ",\"environment\":" + JSONWriter.quote(environment)
        if let team { s += ",\"team\":" + JSONWriter.quote(team) }
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
        s += ",\"warnings\":[" + warnings.map(JSONWriter.quote).joined(separator: ",") + "]"
        s += ",\"display\":" + (display?.json ?? "null") + ",\"lint\":[" + lint.map(\.json).joined(separator: ",") + "]}"
        return s
    }
}

extension PushNotification {
    /// FCM's message id for a notification: `0:<microseconds>%<16 hex>`, derived from the
    /// id's high half (shared by every device record of one topic send) and the receive time.
    public static func fcmMessageID(_ id: UUIDValue, receivedAtMs: Int64) -> String {
        var out: [UInt8] = []
        appendFCMMessageID(id, receivedAtMs: receivedAtMs, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the FCM message id's bytes (no String on the request path): written into a stack
    /// buffer and appended once (a byte-at-a-time append checked the array's capacity and
    /// uniqueness for each of its 36 bytes).
    public static func appendFCMMessageID(_ id: UUIDValue, receivedAtMs: Int64, to out: inout [UInt8]) {
        var us = UInt64(max(0, receivedAtMs)) &* 1000 &+ id.high % 1000
        // "0:" + at most 20 decimal digits + "%" + 16 hex digits.
        var buf:
            (
                UInt64, UInt64, UInt64, UInt64, UInt64
            ) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &buf) { b in
            // The digits right-aligned before the "%" at 22, then the hex after it.
            var i = 22
            repeat {
                i -= 1
                b[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: us % 10)
                us /= 10
            } while us > 0
            b[i - 1] = UInt8(ascii: ":")
            b[i - 2] = UInt8(ascii: "0")
            b[22] = UInt8(ascii: "%")
            let x = id.high
            for k in 0..<16 {
                let nibble = UInt8(truncatingIfNeeded: (x >> UInt64(60 - 4 * k)) & 15)
                b[23 + k] = nibble < 10 ? UInt8(ascii: "0") &+ nibble : UInt8(ascii: "a") &+ (nibble &- 10)
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[(i - 2)..<39]))
        }
    }
}
