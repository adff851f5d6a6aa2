/// An APNs team id (Apple's are 10 characters), held inline in two words so that a push's
/// subject carries it without reference counting. At most 16 bytes: a longer "team" (a lenient
/// token's issuer, a certificate's OU) is not one, and is not kept.
public struct TeamID: Sendable, Equatable {
    private var low: UInt64 = 0
    private var high: UInt64 = 0
    private var count: UInt8 = 0

    /// nil when `text` is empty or longer than 16 bytes.
    public init?(_ text: String) {
        let n = text.utf8.count
        guard n > 0, n <= 16 else { return nil }
        count = UInt8(n)
        for (i, b) in text.utf8.enumerated() {
            if i < 8 { low |= UInt64(b) << (8 * UInt64(i)) } else { high |= UInt64(b) << (8 * UInt64(i - 8)) }
        }
    }

    /// The id's bytes, in place.
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var words = (low, high)
        let n = Int(count)
        return withUnsafeBytes(of: &words) { body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }

    public var text: String { withBytes { String(decoding: $0, as: UTF8.self) } }
}
