import PushCore
import XCTest

/// The word-at-a-time token checks answer as a byte-by-byte check does, for every byte value
/// at every position of every length up to three words and a tail.
final class TokenCharactersTests: XCTestCase {
    static func isHex(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b)
    }

    static func isRegistration(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x2D || b == 0x5F || b == 0x3A
    }

    func testEveryByteAtEveryPosition() {
        var checked = 0
        for n in 0...27 {
            for position in 0..<max(n, 1) {
                for v in 0...255 {
                    // Allowed bytes around the one tried (both sets hold '7', 'a' and 'F').
                    var bytes = (0..<n).map { [UInt8(ascii: "7"), UInt8(ascii: "a"), UInt8(ascii: "F")][$0 % 3] }
                    if n > 0 { bytes[position] = UInt8(v) }
                    let hex = bytes.allSatisfy(Self.isHex)
                    let registration = bytes.allSatisfy(Self.isRegistration)
                    bytes.withUnsafeBytes { raw in
                        XCTAssertEqual(TokenCharacters.allHex(raw), hex, "hex: byte \(v) at \(position) of \(n)")
                        XCTAssertEqual(TokenCharacters.allRegistrationToken(raw), registration, "token: byte \(v) at \(position) of \(n)")
                    }
                    checked += 1
                }
            }
        }
        XCTAssertGreaterThan(checked, 90_000)
        // Two bad bytes in one word, and a bad byte only in the last word.
        let good = Array(repeating: UInt8(ascii: "b"), count: 64)
        var two = good
        two[3] = 0x80
        two[4] = 0x20
        var last = good
        last[63] = UInt8(ascii: "g")
        for (bytes, hex) in [(good, true), (two, false), (last, false)] {
            bytes.withUnsafeBytes { XCTAssertEqual(TokenCharacters.allHex($0), hex) }
        }
    }
}
