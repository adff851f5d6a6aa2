import PushCore

/// Fleet tokens: derived from (fleet secret, index) so that any token is recognised in O(1) and
/// costs no memory. The first 8 bytes are (fleet number, index) under a 4-round Feistel
/// permutation keyed by the store's secret (so they look random and invert); the rest is a
/// keyed hash of (fleet secret, index), which a forged token cannot match.
/// APNs: 64 hex characters. FCM: `<22 base64url>:APA91b<134 base64url>`, as real tokens look.
public struct FleetTokens: Sendable {
    let key: (UInt64, UInt64)

    public init(secret: (UInt64, UInt64)) { key = secret }

    static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    func round(_ r: UInt32, _ i: UInt64) -> UInt32 {
        UInt32(truncatingIfNeeded: FleetTokens.mix(UInt64(r) ^ (key.0 &+ i &* key.1)))
    }

    /// The 64-bit header for (fleet, index): fleet in the top 24 bits, index in the low 40.
    func header(fleet: Int, index: Int) -> UInt64 {
        var l = UInt32(truncatingIfNeeded: (UInt64(fleet) << 8) | (UInt64(index) >> 32))
        var r = UInt32(truncatingIfNeeded: UInt64(index))
        for i in 0..<4 { (l, r) = (r, l ^ round(r, UInt64(i))) }
        return UInt64(l) << 32 | UInt64(r)
    }

    func open(_ h: UInt64) -> (fleet: Int, index: Int) {
        var l = UInt32(truncatingIfNeeded: h >> 32), r = UInt32(truncatingIfNeeded: h)
        for i in (0..<4).reversed() { (l, r) = (r ^ round(l, UInt64(i)), l) }
        let hi = UInt64(l), lo = UInt64(r)
        return (Int(hi >> 8), Int((hi & 0xFF) << 32 | lo))
    }

    /// `n` bytes of keyed hash for (fleet secret, index).
    static func tail(_ secret: UInt64, _ index: Int, _ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        var ctr: UInt64 = 0
        var k = 0
        while k < n {
            var w = mix(secret ^ mix(UInt64(index) &+ ctr &* 0x632B_E59B_D9B4_E019))
            for _ in 0..<8 where k < n { out[k] = UInt8(truncatingIfNeeded: w); w >>= 8; k += 1 }
            ctr += 1
        }
        return out
    }

    static let hex = Array("0123456789abcdef".utf8)
    static let b64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public func apnsToken(fleet: Int, secret: UInt64, index: Int) -> String {
        String(decoding: apnsTokenBytes(fleet: fleet, secret: secret, index: index), as: UTF8.self)
    }

    /// The token's 64 hex characters (built in place: recognising a fleet member compares these).
    func apnsTokenBytes(fleet: Int, secret: UInt64, index: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        var h = header(fleet: fleet, index: index)
        var k = 0
        for _ in 0..<8 {
            let b = Int(h >> 56)
            out[k] = FleetTokens.hex[b >> 4]
            out[k + 1] = FleetTokens.hex[b & 15]
            k += 2
            h <<= 8
        }
        for b in FleetTokens.tail(secret, index, 24) {
            out[k] = FleetTokens.hex[Int(b >> 4)]
            out[k + 1] = FleetTokens.hex[Int(b & 15)]
            k += 2
        }
        return out
    }

    public func fcmToken(fleet: Int, secret: UInt64, index: Int) -> String {
        String(decoding: fcmTokenBytes(fleet: fleet, secret: secret, index: index), as: UTF8.self)
    }

    func fcmTokenBytes(fleet: Int, secret: UInt64, index: Int) -> [UInt8] {
        // 22 characters = 132 bits: the 64-bit header, then 68 bits of keyed hash.
        let h = header(fleet: fleet, index: index)
        let t = FleetTokens.tail(secret, index, 110)
        var bits: [UInt8] = []   // 6-bit groups
        var acc: UInt64 = h
        for _ in 0..<10 { bits.append(UInt8(acc >> 58)); acc <<= 6 }
        let rem = UInt8((h & 0xF) << 2) | (t[0] >> 6)   // last 4 header bits + 2 hash bits
        bits.append(rem)
        for i in 0..<11 { bits.append(t[1 + i] & 63) }
        var s = bits.map { FleetTokens.b64[Int($0)] }
        s += Array(":APA91b".utf8)
        for i in 0..<134 { s.append(FleetTokens.b64[Int(t[12 + (i % 98)] >> 2 ^ UInt8(i & 63)) & 63]) }
        return s
    }

    /// The (fleet, index) a token claims, before checking it against the fleet's secret.
    public func claim(_ token: ArraySlice<UInt8>, platform: DevicePlatform) -> (fleet: Int, index: Int)? {
        switch platform {
        case .ios:
            guard token.count == 64 else { return nil }
            var h: UInt64 = 0
            for c in token.prefix(16) {
                let v: UInt8
                switch c {
                case 0x30...0x39: v = c - 0x30
                case 0x61...0x66: v = c - 0x61 + 10
                case 0x41...0x46: v = c - 0x41 + 10
                default: return nil
                }
                h = h << 4 | UInt64(v)
            }
            return open(h)
        case .android:
            guard token.count == 163 else { return nil }
            var h: UInt64 = 0
            var groups: [UInt64] = []
            for c in token.prefix(11) {
                guard let v = FleetTokens.b64.firstIndex(of: c) else { return nil }
                groups.append(UInt64(v))
            }
            for g in groups.prefix(10) { h = h << 6 | g }
            h = h << 4 | (groups[10] >> 2)
            return open(h)
        }
    }
}
