import PushCore
import XCTest

/// A connection's token-key memo answers exactly `TokenKey(token)` whatever tokens it is asked
/// for, in whatever order.
final class TokenKeyMemoTests: XCTestCase {
    func testEveryAnswerIsTheTokensOwnKey() {
        var rng = FastRandom(seed: 11)
        func token(_ n: Int, prefix: [UInt8] = []) -> [UInt8] {
            prefix + (0..<max(0, n - prefix.count)).map { _ in UInt8(ascii: "a") + UInt8(rng.next() % 26) }
        }
        let shared = token(150)
        let a = token(163, prefix: shared)
        let b = token(163, prefix: shared) // the same length and prefix as a: differs at the end
        var c = a
        c[0] = c[0] == UInt8(ascii: "z") ? UInt8(ascii: "y") : UInt8(ascii: "z") // differs at the start only
        let hex = token(64)
        let sequence: [[UInt8]] = [a, a, a, b, b, a, c, c, a, hex, hex, hex, [], [1, 2, 3], Array(repeating: 0x41, count: 5000), a, a]
        var memo = TokenKeyMemo()
        for (i, t) in sequence.enumerated() {
            XCTAssertEqual(memo.key(of: t[...]), TokenKey(t), "token \(i) of \(t.count) bytes")
        }
        // A slice of a larger array (a token in a request's body) keys as its bytes do.
        let body = Array("{\"token\":\"".utf8) + a + Array("\"}".utf8)
        let slice = body[10..<(10 + a.count)]
        XCTAssertEqual(memo.key(of: slice), TokenKey(a))
        XCTAssertEqual(memo.key(of: slice), TokenKey(a))
    }
}
