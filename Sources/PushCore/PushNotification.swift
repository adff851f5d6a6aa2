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

    /// Appends the FCM message id's bytes (no String on the request path).
    public static func appendFCMMessageID(_ id: UUIDValue, receivedAtMs: Int64, to out: inout [UInt8]) {
        var buf: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &buf) { b in
            let n = writeFCMMessageID(id, receivedAtMs: receivedAtMs, to: b.baseAddress!)
            out.append(contentsOf: UnsafeRawBufferPointer(start: b.baseAddress!, count: n))
        }
    }

    /// The most bytes `writeFCMMessageID` writes: "0:", 20 digits, "%", 16 hex digits.
    public static let fcmMessageIDCapacity = 39

    /// Writes the FCM message id's bytes at `out` (room for `fcmMessageIDCapacity`) and returns
    /// how many: the digits two at a time into a stack buffer (right-aligned before the "%"),
    /// the hex a word at a time.
    public static func writeFCMMessageID(_ id: UUIDValue, receivedAtMs: Int64, to out: UnsafeMutableRawPointer) -> Int {
        var us = UInt64(max(0, receivedAtMs)) &* 1000 &+ id.high % 1000
        var buf: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &buf) { b -> Int in
            let p = b.baseAddress!
            let pairs = UnsafeRawPointer(PushNotification.digitPairs.utf8Start)
            var i = 22
            while us >= 100 {
                let r = Int(truncatingIfNeeded: us % 100)
                us /= 100
                i -= 2
                p.storeBytes(of: pairs.loadUnaligned(fromByteOffset: 2 * r, as: UInt16.self), toByteOffset: i, as: UInt16.self)
            }
            if us >= 10 {
                i -= 2
                p.storeBytes(of: pairs.loadUnaligned(fromByteOffset: 2 * Int(us), as: UInt16.self), toByteOffset: i, as: UInt16.self)
            } else {
                i -= 1
                p.storeBytes(of: UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: us), toByteOffset: i, as: UInt8.self)
            }
            p.storeBytes(of: UInt8(ascii: ":"), toByteOffset: i - 1, as: UInt8.self)
            p.storeBytes(of: UInt8(ascii: "0"), toByteOffset: i - 2, as: UInt8.self)
            p.storeBytes(of: UInt8(ascii: "%"), toByteOffset: 22, as: UInt8.self)
            UUIDValue.writeHex16(id.high, to: p + 23)
            let n = 39 - (i - 2)
            out.copyMemory(from: p + (i - 2), byteCount: n)
            return n
        }
    }

    /// "00" to "99", two bytes each (a literal: no array, no lazy global).
    static let digitPairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """
}
