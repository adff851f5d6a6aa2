import PushCore

/// Fleet tokens: derived from (fleet secret, index) so that any token is recognised in O(1) and
/// costs no memory. The first 8 bytes are (fleet tag, index) under a 4-round Feistel
/// permutation keyed by the codec's key (so they look random and invert); the rest is a
/// keyed hash of (fleet secret, index), which a forged token cannot match. The `fleet`
/// parameters below are the fleet's 24-bit tag.
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
        var l = UInt32(truncatingIfNeeded: h >> 32)
        var r = UInt32(truncatingIfNeeded: h)
        for i in (0..<4).reversed() { (l, r) = (r ^ round(l, UInt64(i)), l) }
        let hi = UInt64(l)
        let lo = UInt64(r)
        return (Int(hi >> 8), Int((hi & 0xFF) << 32 | lo))
    }

    /// Word `ctr` of the keyed hash of (fleet secret, index).
    @inline(__always) static func hashWord(_ secret: UInt64, _ index: Int, _ ctr: UInt64) -> UInt64 {
        mix(secret ^ mix(UInt64(index) &+ ctr &* 0x632B_E59B_D9B4_E019))
    }

    /// Fills `out` with keyed-hash bytes for (fleet secret, index): 8 per word, low byte first.
    static func writeTail(_ secret: UInt64, _ index: Int, into out: UnsafeMutableRawBufferPointer) {
        var ctr: UInt64 = 0
        var k = 0
        while k < out.count {
            var w = hashWord(secret, index, ctr)
            for _ in 0..<8 where k < out.count {
                out[k] = UInt8(truncatingIfNeeded: w)
                w >>= 8
                k += 1
            }
            ctr += 1
        }
    }

    static let b64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    @inline(__always) static func b64Digit(_ v: UInt8) -> UInt8 {
        switch v {
        case 0..<26: return 0x41 &+ v
        case 26..<52: return 0x61 &+ (v &- 26)
        case 52..<62: return 0x30 &+ (v &- 52)
        case 62: return UInt8(ascii: "-")
        default: return UInt8(ascii: "_")
        }
    }

    static let apnsLength = 64
    static let fcmLength = 163

    static func length(_ platform: DevicePlatform) -> Int { platform == .ios ? apnsLength : fcmLength }

    /// The token of fleet member `index`: 64 hex characters (APNs) or an FCM registration token.
    public func token(_ platform: DevicePlatform, fleet: Int, secret: UInt64, index: Int) -> String {
        let n = FleetTokens.length(platform)
        return String(unsafeUninitializedCapacity: n) { buf in
            write(platform, fleet: fleet, secret: secret, index: index, into: UnsafeMutableRawBufferPointer(buf))
            return n
        }
    }

    /// Writes the token into `out` (at least `length(platform)` bytes).
    func write(_ platform: DevicePlatform, fleet: Int, secret: UInt64, index: Int, into out: UnsafeMutableRawBufferPointer) {
        if platform == .ios {
            writeAPNsToken(fleet: fleet, secret: secret, index: index, into: out)
        } else {
            writeFCMToken(fleet: fleet, secret: secret, index: index, into: out)
        }
    }

    /// Writes the 64 hex characters into `out` (64 bytes or more): the header's 16, then 24 bytes
    /// of keyed hash as 48. Built in place, no allocation: recognising a fleet member compares these.
    func writeAPNsToken(fleet: Int, secret: UInt64, index: Int, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= FleetTokens.apnsLength)
        let p = out.baseAddress!
        UUIDValue.writeHex16(header(fleet: fleet, index: index), to: p)
        // The hash words' bytes go low byte first: the byte-swapped word, most significant first.
        for ctr in 0..<3 {
            UUIDValue.writeHex16(FleetTokens.hashWord(secret, index, UInt64(ctr)).byteSwapped, to: p + 16 + 16 * ctr)
        }
    }

    /// Writes the 163 characters into `out` (163 bytes or more). 22 characters = 132 bits: the
    /// 64-bit header, then 68 bits of keyed hash; then `:APA91b` and 134 more of keyed hash.
    func writeFCMToken(fleet: Int, secret: UInt64, index: Int, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= FleetTokens.fcmLength)
        let h = header(fleet: fleet, index: index)
        // (A fan-out writes one per recipient: table lookups, no bounds checks, no division.)
        withUnsafeTemporaryAllocation(byteCount: 112, alignment: 8) { t in
            let words = t.baseAddress!.assumingMemoryBound(to: UInt64.self)
            for w in 0..<14 { words[w] = FleetTokens.hashWord(secret, index, UInt64(w)).littleEndian }
            let tail = UnsafeRawPointer(t.baseAddress!).assumingMemoryBound(to: UInt8.self)
            let o = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            FleetTokens.b64.withUnsafeBufferPointer { b64p in
                let b64 = b64p.baseAddress!
                var acc = h
                for k in 0..<10 {
                    o[k] = b64[Int(acc >> 58)]
                    acc <<= 6
                }
                o[10] = b64[Int(UInt8(truncatingIfNeeded: (h & 0xF) << 2) | (tail[0] >> 6))] // last 4 header bits + 2 hash bits
                for i in 0..<11 { o[11 + i] = b64[Int(tail[1 + i] & 63)] }
                (o + 22).initialize(from: FleetTokens.apa, count: 7)
                for i in 0..<98 { o[29 + i] = b64[Int((tail[12 + i] >> 2 ^ UInt8(i & 63)) & 63)] }
                for i in 98..<134 { o[29 + i] = b64[Int((tail[12 + i - 98] >> 2 ^ UInt8(i & 63)) & 63)] }
            }
        }
    }

    static let apa: [UInt8] = Array(":APA91b".utf8)

    /// Whether `token` is exactly the fleet's token at `index`, generated on the stack and
    /// compared: no allocation (a campaign's every push is some member's first sight).
    func matches(_ token: ArraySlice<UInt8>, platform: DevicePlatform, fleet: Int, secret: UInt64, index: Int) -> Bool {
        let n = FleetTokens.length(platform)
        guard token.count == n else { return false }
        return withUnsafeTemporaryAllocation(byteCount: n, alignment: 8) { buf in
            write(platform, fleet: fleet, secret: secret, index: index, into: buf)
            return Bytes.equal(token, UnsafeBufferPointer(buf.bindMemory(to: UInt8.self)))
        }
    }

    /// The (fleet, index) an FCM installation id (a fleet token's first 22 characters) claims.
    public func claim(installation fid: ArraySlice<UInt8>) -> (fleet: Int, index: Int)? {
        guard fid.count == 22 else { return nil }
        var h: UInt64 = 0
        var groups: [UInt64] = []
        for c in fid.prefix(11) {
            guard let v = FleetTokens.b64.firstIndex(of: c) else { return nil }
            groups.append(UInt64(v))
        }
        for g in groups.prefix(10) { h = h << 6 | g }
        h = h << 4 | (groups[10] >> 2)
        return open(h)
    }

    // MARK: web subscriptions

    /// A web fleet member's token in its push service's shape: FCM's registration token (Chrome),
    /// or a prefix and base64url for autopush (Firefox, `/wpush/v2/`), Apple (Safari) and WNS
    /// (Edge). The 64-bit header is in the 11 characters after the prefix.
    public enum WebShape: Int, Sendable, CaseIterable {
        case fcm, mozilla, apple, wns

        /// The shape of a push service's tokens (its name as a web device's `service`).
        public init?(service: String) {
            switch service {
            case "fcm": self = .fcm
            case "mozilla": self = .mozilla
            case "apple": self = .apple
            case "wns": self = .wns
            default: return nil
            }
        }

        var prefix: [UInt8] {
            switch self {
            case .fcm: []
            case .mozilla: Array("gAAAAAB".utf8)
            case .apple: Array("Q".utf8)
            case .wns: Array("BQYAAAB".utf8)
            }
        }

        /// Its tokens' length, as long as the service's real ones.
        var length: Int {
            switch self {
            case .fcm: FleetTokens.fcmLength
            case .mozilla: 199
            case .apple: 129
            case .wns: 135
            }
        }
    }

    /// The token of web fleet member `index`.
    public func webToken(_ shape: WebShape, fleet: Int, secret: UInt64, index: Int) -> String {
        String(unsafeUninitializedCapacity: shape.length) { buf in
            writeWebToken(shape, fleet: fleet, secret: secret, index: index, into: UnsafeMutableRawBufferPointer(buf))
            return shape.length
        }
    }

    func writeWebToken(_ shape: WebShape, fleet: Int, secret: UInt64, index: Int, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= shape.length)
        if shape == .fcm { return writeFCMToken(fleet: fleet, secret: secret, index: index, into: out) }
        let prefix = shape.prefix
        for (i, c) in prefix.enumerated() { out[i] = c }
        let h = header(fleet: fleet, index: index)
        let tailCount = shape.length - prefix.count - 11
        withUnsafeTemporaryAllocation(byteCount: tailCount + 8, alignment: 8) { t in
            FleetTokens.writeTail(secret, index, into: t)
            var acc = h
            for k in 0..<10 {
                out[prefix.count + k] = FleetTokens.b64[Int(acc >> 58)]
                acc <<= 6
            }
            out[prefix.count + 10] = FleetTokens.b64[Int(UInt8(truncatingIfNeeded: (h & 0xF) << 2) | (t[0] >> 6))]
            for i in 0..<tailCount { out[prefix.count + 11 + i] = FleetTokens.b64[Int(t[1 + i] & 63)] }
        }
    }

    /// Whether `token` is exactly web fleet member `index`'s.
    func matchesWeb(_ token: ArraySlice<UInt8>, shape: WebShape, fleet: Int, secret: UInt64, index: Int) -> Bool {
        guard token.count == shape.length else { return false }
        return withUnsafeTemporaryAllocation(byteCount: shape.length, alignment: 8) { buf in
            writeWebToken(shape, fleet: fleet, secret: secret, index: index, into: buf)
            return Bytes.equal(token, UnsafeBufferPointer(buf.bindMemory(to: UInt8.self)))
        }
    }

    /// The shape, fleet and index a web token claims, before checking it against the fleet's secret.
    public func claimWeb(_ token: ArraySlice<UInt8>) -> (shape: WebShape, fleet: Int, index: Int)? {
        for shape in WebShape.allCases where token.count == shape.length {
            let start = token.startIndex + shape.prefix.count
            if shape == .fcm {
                guard token.dropFirst(22).starts(with: FleetTokens.apa), let c = claim(token, platform: .android) else { continue }
                return (shape, c.fleet, c.index)
            }
            guard token.starts(with: shape.prefix) else { continue }
            var h: UInt64 = 0
            var ok = true
            for (k, c) in token[start..<(start + 11)].enumerated() {
                guard let v = FleetTokens.b64.firstIndex(of: c) else {
                    ok = false
                    break
                }
                h = k < 10 ? h << 6 | UInt64(v) : h << 4 | (UInt64(v) >> 2)
            }
            if ok {
                let (fleet, index) = open(h)
                return (shape, fleet, index)
            }
        }
        return nil
    }

    /// 32 bytes from which a web fleet member's browser key pair is made, and its 16-byte auth
    /// secret: the keyed hash of (fleet secret, index) under other counters than its token's.
    public static func webKeys(secret: UInt64, index: Int) -> (keySeed: [UInt8], auth: [UInt8]) {
        var seed = [UInt8](repeating: 0, count: 32)
        var auth = [UInt8](repeating: 0, count: 16)
        for w in 0..<4 {
            var x = hashWord(secret ^ 0x6B65_7973_6565_6421, index, UInt64(w))
            for b in 0..<8 {
                seed[w * 8 + b] = UInt8(truncatingIfNeeded: x)
                x >>= 8
            }
        }
        for w in 0..<2 {
            var x = hashWord(secret ^ 0x6175_7468_7365_6372, index, UInt64(w))
            for b in 0..<8 {
                auth[w * 8 + b] = UInt8(truncatingIfNeeded: x)
                x >>= 8
            }
        }
        return (seed, auth)
    }

    /// The (fleet, index) a token claims, before checking it against the fleet's secret.
    public func claim(_ token: ArraySlice<UInt8>, platform: DevicePlatform) -> (fleet: Int, index: Int)? {
        switch platform {
        case .web: return claimWeb(token).map { ($0.fleet, $0.index) }
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
