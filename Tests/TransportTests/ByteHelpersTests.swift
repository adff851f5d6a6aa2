import Transport
import XCTest

/// `sameBytes` and `copyBytes`: every length up to past the inline limit.
final class ByteHelpersTests: XCTestCase {
    func testCopyBytesCopiesExactlyTheGivenRangeAtEveryLength() {
        let src = (0..<40).map { UInt8(1 + $0) }
        for n in 0...40 {
            var dst = [UInt8](repeating: 0, count: 48)
            src.withUnsafeBytes { s in dst.withUnsafeMutableBytes { d in copyBytes(d.baseAddress! + 3, s.baseAddress!, n) } }
            XCTAssertEqual(Array(dst[0..<3]), [0, 0, 0], "length \(n): bytes before")
            XCTAssertEqual(Array(dst[3..<(3 + n)]), Array(src[0..<n]), "length \(n)")
            XCTAssertTrue(dst[(3 + n)...].allSatisfy { $0 == 0 }, "length \(n): bytes after")
        }
    }

    func testSameBytesAgreesWithElementwiseComparisonAtEveryLengthAndPosition() {
        let base = (0..<40).map { UInt8(0x41 + $0 % 26) }
        for n in 0...40 {
            for diff in -1..<n {
                var other = base
                if diff >= 0 { other[diff] ^= 0x20 }
                let expected = Array(base[0..<n]) == Array(other[0..<n])
                let got = base.withUnsafeBytes { a in other.withUnsafeBytes { b in sameBytes(a.baseAddress!, b.baseAddress!, n) } }
                XCTAssertEqual(got, expected, "length \(n), difference at \(diff)")
            }
        }
    }

    func testSameBytesReadsOnlyTheGivenRange() {
        // Equal first n bytes, different right after them: never seen.
        let a: [UInt8] = Array("apns-topicX".utf8)
        let b: [UInt8] = Array("apns-topicY".utf8)
        for n in 0...10 {
            XCTAssertTrue(a.withUnsafeBytes { x in b.withUnsafeBytes { y in sameBytes(x.baseAddress!, y.baseAddress!, n) } }, "\(n)")
        }
        XCTAssertFalse(a.withUnsafeBytes { x in b.withUnsafeBytes { y in sameBytes(x.baseAddress!, y.baseAddress!, 11) } })
    }
}
