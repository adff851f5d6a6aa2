import Transport

/// A connection's last device token and its `TokenKey`: a sender that pushes to one device
/// again and again (a test's device, a load test) has its token hashed once, not per request.
///
/// Comparing a token with the last one costs a `memcmp`; hashing it costs about 3.5
/// instructions a byte (570 for a 163-byte FCM registration token). A token is copied and
/// kept only when it comes twice in a row (its length and last 8 bytes as the one before), so a
/// campaign, whose every token is new, pays a compare of one word, not a copy. Owned by the
/// connection's loop; no lock.
public struct TokenKeyMemo {
    /// The token kept (`kept`), whose key is `key`.
    private var token: [UInt8] = []
    private var kept = false
    private var key = TokenKey([UInt8]())
    /// Whether a token comes twice in a row.
    private var witness = RepeatWitness()

    public init() {}

    /// `TokenKey(token)`, from memory when `token` is the one kept.
    public mutating func key(of token: ArraySlice<UInt8>) -> TokenKey {
        let n = token.count
        // A token longer than any device's is hashed and not kept (bounds what a connection holds).
        guard n >= 8, n <= 4096 else { return TokenKey(token) }
        return token.withUnsafeBytes { t -> TokenKey in
            let p = t.baseAddress!
            if kept, n == self.token.count, self.token.withUnsafeBytes({ sameTokenBytes(p, $0.baseAddress!, n) }) { return key }
            let k = TokenKey(t)
            kept = witness.repeats(t)
            if kept {
                self.token.removeAll(keepingCapacity: true)
                self.token.append(contentsOf: t)
                key = k
            }
            return k
        }
    }
}

/// True when the `n` bytes of two tokens at `a` and `b` are equal, their last word compared
/// first: a campaign's tokens may share a long prefix (an app's instance id part, a test's
/// numbered tokens), and a `memcmp` then reads most of both before it fails.
@inline(__always)
public func sameTokenBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Bool {
    if n > 16, a.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self) != b.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self) {
        return false
    }
    return sameBytes(a, b, n)
}
