import Transport
import XCTest

/// `equalsIgnoringCase` (a word at a time over contiguous bytes) answers as a byte-by-byte comparison does, for
/// every byte value at every position of literals of every length up to two words and a tail.
final class CaseInsensitiveBytesTests: XCTestCase {
    static func reference(_ a: [UInt8], _ lower: String) -> Bool {
        let l = Array(lower.utf8)
        guard a.count == l.count else { return false }
        for (x, y) in zip(a, l) {
            let folded = (0x41...0x5A).contains(x) ? x | 0x20 : x
            if folded != y { return false }
        }
        return true
    }

    /// Literals of every length from 0 to 20 (letters, digits and punctuation), as `StaticString`s.
    static let literals: [StaticString] = [
        "", "k", "ab", "a-z", "key=", "a[z@", "host:", "bearer", "bearer ", "z`{@a9:_", "api.push", "authority", "x-firebase",
        "content-typ", "content-type", "apns-priority", "apns-push-type", "apns-expiration", "api.sandbox.push",
        "apns-collapse-id", "x-goog-api-format", "apns-push-type-abc", "api.push.apple.com", "api-sandbox.push.ap",
        "api-broadcast.push.a",
    ]

    func testEveryByteAtEveryPosition() {
        var checked = 0
        var lengths = Set<Int>()
        for literal in Self.literals {
            let text = literal.description
            let exact = Array(text.utf8)
            XCTAssertEqual(exact.count, literal.utf8CodeUnitCount)
            lengths.insert(exact.count)
            for position in 0..<max(exact.count, 1) {
                for v in 0...255 {
                    var bytes = exact
                    if !bytes.isEmpty { bytes[position] = UInt8(v) }
                    let want = Self.reference(bytes, text)
                    bytes.withUnsafeBytes { raw in
                        XCTAssertEqual(raw.equalsIgnoringCase(literal), want, "byte \(v) at \(position) of \"\(text)\"")
                    }
                    checked += 1
                }
            }
            // Capitals throughout match; one byte more or fewer never does.
            let upper = Array(text.uppercased().utf8)
            upper.withUnsafeBytes { XCTAssertTrue($0.equalsIgnoringCase(literal), text) }
            (exact + [0x20]).withUnsafeBytes { XCTAssertFalse($0.equalsIgnoringCase(literal), text) }
            if !exact.isEmpty { exact.dropLast().withUnsafeBytes { XCTAssertFalse($0.equalsIgnoringCase(literal), text) } }
        }
        XCTAssertEqual(lengths, Set(0...20))
        XCTAssertGreaterThan(checked, 50_000)
    }

    /// `asciiLowered` folds each byte of a word on its own: every value in every lane.
    func testLoweredFoldsEachLaneAlone() {
        for lane in 0..<8 {
            for v in 0...255 {
                for fill: UInt8 in [0x00, 0x41, 0x5A, 0x7F, 0x80, 0xC1, 0xFF] {
                    var bytes = [UInt8](repeating: fill, count: 8)
                    bytes[lane] = UInt8(v)
                    let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    let want = bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
                    let got = withUnsafeBytes(of: asciiLowered(word)) { Array($0) }
                    XCTAssertEqual(got, want, "byte \(v) in lane \(lane) among \(fill)")
                }
            }
        }
    }
}
