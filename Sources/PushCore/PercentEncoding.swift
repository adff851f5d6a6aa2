/// `%XX` encoding and decoding for query values, form fields and path segments.
public enum PercentEncoding {
    /// Escapes every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`), as `%XX`.
    public static func encode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            if (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x2E || b == 0x5F
                || b == 0x7E
            {
                out.append(b)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes `%XX` escapes (malformed ones are kept as they are); `+` becomes a space when
    /// `plusAsSpace` (query strings and forms, not paths).
    public static func decode(_ s: ArraySlice<UInt8>, plusAsSpace: Bool) -> String {
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var i = s.startIndex
        while i < s.endIndex {
            let c = s[i]
            if c == UInt8(ascii: "%"), i + 2 < s.endIndex, let h = hex(s[i + 1]), let l = hex(s[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(plusAsSpace && c == UInt8(ascii: "+") ? 0x20 : c)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
