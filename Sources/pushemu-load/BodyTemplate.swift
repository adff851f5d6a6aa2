/// A request body or path with per-request fields: `{n}` becomes the request's number (0, 1,
/// 2, …), `{hex}` 32 hexadecimal digits drawn from it (a message id), `{name}` one of a list of
/// first names of different lengths. Every request of a run is then a different byte string,
/// as a sender of personalised messages sends, so no cache of a connection's last body applies.
struct BodyTemplate {
    private enum Part {
        case literal([UInt8])
        case number
        case hex
        case name
    }

    private let parts: [Part]
    /// Whether any field varies (without one, every request is the template itself).
    let varies: Bool

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
    private static let names: [[UInt8]] = [
        "Ana", "Bartholomew", "Chloé", "Dmitri", "Eve", "Fatima-Zahra", "Gus", "Hiroshi", "Ines", "Jean-Baptiste",
        "Kai", "Leonora", "Mo", "Nkechi", "Olaf", "Priyanka",
    ].map { Array($0.utf8) }

    init(_ bytes: [UInt8]) {
        var parts: [Part] = []
        var literal: [UInt8] = []
        var index = 0
        let fields: [([UInt8], Part)] = [(Array("{n}".utf8), .number), (Array("{hex}".utf8), .hex), (Array("{name}".utf8), .name)]
        scan: while index < bytes.count {
            if bytes[index] == UInt8(ascii: "{") {
                for (marker, part) in fields where bytes[index...].starts(with: marker) {
                    if !literal.isEmpty { parts.append(.literal(literal)) }
                    literal = []
                    parts.append(part)
                    index += marker.count
                    continue scan
                }
            }
            literal.append(bytes[index])
            index += 1
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
        varies = parts.contains {
            if case .literal = $0 { return false }
            return true
        }
    }

    /// The bytes of request number `n`, appended to `out`.
    func render(_ n: Int, into out: inout [UInt8]) {
        for part in parts {
            switch part {
            case .literal(let bytes): out.append(contentsOf: bytes)
            case .number: out.append(contentsOf: String(n).utf8)
            case .hex:
                // Two rounds of a 64-bit mix (splitmix64's finaliser): distinct for distinct n.
                for round in 0..<2 {
                    var x = UInt64(truncatingIfNeeded: n) &+ UInt64(round) &* 0x9E37_79B9_7F4A_7C15
                    x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
                    x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
                    x ^= x >> 31
                    for shift in stride(from: 60, through: 0, by: -4) {
                        out.append(Self.hexDigits[Int((x >> UInt64(shift)) & 0xF)])
                    }
                }
            case .name: out.append(contentsOf: Self.names[n % Self.names.count])
            }
        }
    }

    func render(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        render(n, into: &out)
        return out
    }
}
