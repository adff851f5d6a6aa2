import PushCore
import Transport

/// One connection's payload scan (`APNsPayload.inspect`), with the token buffer it parses into
/// and a memo of its last scan.
///
/// A sender pushing one campaign, a test looping over devices, and a benchmark all send the same
/// payload bytes again and again on a connection; the scan is a pure function of the bytes and
/// the push type, so a payload identical to the previous one (compared byte for byte) gets the
/// previous scan's summary and warnings without being parsed again (callgrind: the scan was
/// about 4,000 of an APNs request's 37,000 instructions; the comparison costs tens). A payload
/// that differs in any byte is scanned in full, and becomes the one remembered.
///
/// `tokens` holds the tokens of the last payload scanned, which after a memo hit are the tokens
/// of the identical payload just given: offsets into the bytes, so they read the new copy the
/// same. Only `inspect` writes them (the buffer is private to this type for that reason), so
/// they never belong to another document. Touched only by the connection's loop.
public final class APNsPayloadScanner {
    /// The last scan's tokens (see the type's comment); read by the device layer after an
    /// accepted push's decision, until the connection's next scan.
    public let tokens = JSONTokenBuffer(capacity: 64)

    /// The bytes last scanned: a copy (the request's body is not retained), in storage reused
    /// from one miss to the next.
    private var bytes: [UInt8] = []
    private var pushType: APNsPushType?
    private var summary = APNsPayloadSummary()
    private var warnings: [String] = []

    /// The largest payload remembered: every payload APNs accepts (VoIP's 5,120 bytes).
    static let maxRemembered = 5120

    public init() {}

    /// `APNsPayload.inspect(payload, pushType:, tokens:, warnings:)`, remembered: its warnings
    /// are appended to `warnings`.
    public func inspect(_ payload: [UInt8], pushType: APNsPushType, warnings: inout [String]) -> APNsPayloadSummary {
        if let hit = remembered(payload.withUnsafeBytes { same($0) }, pushType, &warnings) { return hit }
        return scan(payload, pushType, &warnings)
    }

    /// The same for bytes inside a larger document (FCM's `apns.payload`): copied only when
    /// they are not the ones remembered.
    public func inspect(_ payload: UnsafeRawBufferPointer, pushType: APNsPushType, warnings: inout [String]) -> APNsPayloadSummary {
        if let hit = remembered(same(payload), pushType, &warnings) { return hit }
        return scan(Array(payload), pushType, &warnings)
    }

    @inline(__always)
    private func same(_ payload: UnsafeRawBufferPointer) -> Bool {
        payload.count == bytes.count
            && bytes.withUnsafeBytes { b in b.count == 0 || sameBytes(b.baseAddress!, payload.baseAddress!, b.count) }
    }

    /// The remembered scan when the bytes are the same and so is the push type.
    @inline(__always)
    private func remembered(_ sameBytes: Bool, _ pushType: APNsPushType, _ warnings: inout [String]) -> APNsPayloadSummary? {
        guard sameBytes, pushType == self.pushType else { return nil }
        if !self.warnings.isEmpty { warnings.append(contentsOf: self.warnings) }
        return summary
    }

    private func scan(_ payload: [UInt8], _ pushType: APNsPushType, _ warnings: inout [String]) -> APNsPayloadSummary {
        var found: [String] = []
        let result = APNsPayload.inspect(payload, pushType: pushType, tokens: tokens, warnings: &found)
        if payload.count <= Self.maxRemembered {
            bytes.removeAll(keepingCapacity: true)
            bytes.append(contentsOf: payload)
            self.pushType = pushType
            summary = result
            self.warnings = found
        } else {
            forget()
        }
        if !found.isEmpty { warnings.append(contentsOf: found) }
        return result
    }

    /// Nothing remembered: the next payload is scanned.
    func forget() {
        pushType = nil
        bytes.removeAll(keepingCapacity: true)
        warnings = []
    }
}
