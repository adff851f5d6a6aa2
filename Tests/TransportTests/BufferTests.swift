import XCTest

@testable import Transport

/// The two byte buffers that grow without zero-filling: what was written is what is read back,
/// across partial consumption and growth.
final class BufferTests: XCTestCase {
    func testOutputBufferKeepsUnconsumedBytesAcrossGrowth() {
        var out = OutputBuffer()
        var expected: [UInt8] = []
        func drain(_ n: Int) {
            var got: [UInt8] = []
            out.withUnconsumed { raw in
                let k = min(n, raw.count)
                got = Array(raw.prefix(k))
                return k
            }
            XCTAssertEqual(got, Array(expected.prefix(got.count)))
            expected.removeFirst(got.count)
        }
        out.append("HTTP/1.1 ")
        out.appendDecimal(200)
        expected += Array("HTTP/1.1 200".utf8)
        XCTAssertEqual(out.count, expected.count)
        drain(5) // a partial write
        for i in 0..<2000 { // forces several growths with a consumed prefix
            let chunk = [UInt8](repeating: UInt8(i & 0xFF), count: i % 97)
            out.append(chunk)
            expected += chunk
            if i % 7 == 0 { drain(i % 300) }
        }
        XCTAssertEqual(out.count, expected.count)
        drain(Int.max)
        XCTAssertTrue(out.isEmpty)
        XCTAssertTrue(expected.isEmpty)
        out.append(UnsafeRawBufferPointer(start: nil, count: 0))
        XCTAssertTrue(out.isEmpty)
    }

    func testFieldsGrowPastTheirFirstAllocation() {
        var f = HTTPFields()
        f.reserveCapacity(bytes: 16, fields: 1)
        for i in 0..<200 { f.add(name: "X-Name-\(i)", value: String(repeating: "v", count: i)) }
        XCTAssertEqual(f.count, 200)
        for i in 0..<200 {
            XCTAssertEqual(Array(f.name(at: i)), Array("x-name-\(i)".utf8))
            XCTAssertEqual(Array(f.value(at: i)), Array(String(repeating: "v", count: i).utf8))
        }
        f.removeAll()
        f.add(name: "a", value: "b")
        XCTAssertEqual(f.byteCount, 2)
        XCTAssertEqual(f.first("a").map { Array($0) }, Array("b".utf8))
    }
}
