import FCM
import PushCore
import XCTest

/// The connection's message memo: whatever sequence of bodies and settings a connection's parser
/// is given, each answer is the one a parser with fresh scratch space gives, and a body that
/// differs from the last accepted one only in a valid token of the same length is answered
/// from memory.
final class FCMMessageMemoTests: XCTestCase {
    static let tokenChars = Array("abcXYZ0189-_:".utf8)

    /// A registration token of `count` bytes drawn from `rng`.
    static func token(_ count: Int, _ rng: inout FastRandom) -> String {
        String(decoding: (0..<count).map { _ in tokenChars[Int(rng.next() % UInt64(tokenChars.count))] }, as: UTF8.self)
    }

    static func send(_ token: String, _ fields: String = #","notification":{"title":"Sale","body":"Half price"},"data":{"k":"v"}"#)
        -> [UInt8]
    {
        Array(#"{"message":{"token":"\#(token)"\#(fields)}}"#.utf8)
    }

    /// Parses `body` with `parser` and `scratch` and checks the answer against fresh scratch.
    @discardableResult
    func check(
        _ parser: FCMMessageParser, _ scratch: FCMScratch, _ body: [UInt8], file: StaticString = #filePath, line: UInt = #line
    ) -> Result<FCMParsedMessage, FCMError> {
        let answer = parser.parse(body, scratch: scratch)
        let fresh = parser.parse(body, scratch: FCMScratch())
        XCTAssertEqual(answer, fresh, "answer for \(String(decoding: body, as: UTF8.self))", file: file, line: line)
        return answer
    }

    /// `check`, for a body that must be accepted: its message.
    @discardableResult
    func accepted(
        _ parser: FCMMessageParser, _ scratch: FCMScratch, _ body: [UInt8], file: StaticString = #filePath, line: UInt = #line
    ) throws -> FCMParsedMessage {
        try check(parser, scratch, body, file: file, line: line).get()
    }

    func testAnotherTokenOfTheSameLengthIsRecalledWithItsOwnRange() throws {
        var rng = FastRandom(seed: 1)
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        let first = Self.send(Self.token(163, &rng))
        try accepted(parser, scratch, first)
        XCTAssertEqual(scratch.memo.recalled, 0)
        for n in 1...5 {
            let token = Self.token(163, &rng)
            let body = Self.send(token)
            let m = try accepted(parser, scratch, body)
            XCTAssertEqual(scratch.memo.recalled, n, "a send differing only in its token is recalled")
            guard case .token(let r) = m.target else { return XCTFail("not a token target") }
            XCTAssertEqual(String(decoding: body[r], as: UTF8.self), token, "the range reads the new body's token")
        }
    }

    /// The very body again (a test's device, a load test) is recalled with its token unread:
    /// it was a valid token when remembered.
    func testTheSameBodyAgainIsRecalled() throws {
        var rng = FastRandom(seed: 7)
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        let body = Self.send(Self.token(163, &rng))
        let first = try accepted(parser, scratch, body)
        for n in 1...3 {
            XCTAssertEqual(try accepted(parser, scratch, body), first)
            XCTAssertEqual(scratch.memo.recalled, n)
        }
        // A token sharing the last one's every byte but its first is still checked and recalled.
        var other = body
        let at = #"{"message":{"token":""#.utf8.count // the token's first byte
        other[at] = other[at] == UInt8(ascii: "a") ? UInt8(ascii: "b") : UInt8(ascii: "a")
        try accepted(parser, scratch, other)
        XCTAssertEqual(scratch.memo.recalled, 4)
        other[at] = UInt8(ascii: "!")
        XCTAssertThrowsError(try accepted(parser, scratch, other), "a byte no token holds is parsed, and refused")
        XCTAssertEqual(scratch.memo.recalled, 4)
    }

    func testATokenByteThatIsNoTokenCharacterIsParsedInFull() throws {
        var rng = FastRandom(seed: 2)
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        let token = Self.token(150, &rng)
        try accepted(parser, scratch, Self.send(token))
        // Each of these keeps the body's length but changes what its JSON is, or makes the token invalid.
        let breakers: [(String, String)] = [
            (#"""#, "a quote ends the string early"), (#"\"#, "a backslash starts an escape"), (" ", "a space is no token byte"),
            ("é", "not ASCII"), (".", "a dot is no token byte"),
        ]
        for (replacement, why) in breakers {
            var t = Array(token.utf8)
            let r = Array(replacement.utf8)
            t.replaceSubrange(70..<(70 + r.count), with: r)
            let result = check(parser, scratch, Self.send(String(decoding: t, as: UTF8.self)))
            guard case .failure = result else { return XCTFail("accepted: \(why)") }
            XCTAssertEqual(scratch.memo.recalled, 0, why)
        }
        // The memo still holds the accepted message.
        try accepted(parser, scratch, Self.send(Self.token(150, &rng)))
        XCTAssertEqual(scratch.memo.recalled, 1)
    }

    func testAnythingElseThatDiffersIsParsedInFull() throws {
        var rng = FastRandom(seed: 3)
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        try accepted(parser, scratch, Self.send(Self.token(163, &rng)))
        // Another length of token, another title of the same length, a reserved data key, a bad TTL.
        try accepted(parser, scratch, Self.send(Self.token(162, &rng)))
        try accepted(
            parser, scratch, Self.send(Self.token(162, &rng), #","notification":{"title":"Sold","body":"Half price"},"data":{"k":"v"}"#))
        guard
            case .failure = check(
                parser, scratch,
                Self.send(Self.token(162, &rng), #","notification":{"title":"Sold","body":"Half price"},"data":{"from":"v"}"#))
        else {
            return XCTFail("a reserved data key was accepted")
        }
        guard case .failure = check(parser, scratch, Self.send(Self.token(162, &rng), #","android":{"ttl":"-5s"}"#)) else {
            return XCTFail("a negative TTL was accepted")
        }
        XCTAssertEqual(scratch.memo.recalled, 0)
    }

    func testABodyPastTheBoundIsParsedEachTimeAndForgetsTheLastOne() throws {
        var rng = FastRandom(seed: 5)
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        let small = Self.token(163, &rng)
        try accepted(parser, scratch, Self.send(small))
        // Accepted (webpush data is outside FCM's size count), but longer than a memo keeps.
        let big = #","webpush":{"data":{"k":"\#(String(repeating: "x", count: 5000))"}}"#
        for _ in 0..<3 { try accepted(parser, scratch, Self.send(Self.token(163, &rng), big)) }
        try accepted(parser, scratch, Self.send(small))
        XCTAssertEqual(scratch.memo.recalled, 0)
        try accepted(parser, scratch, Self.send(Self.token(163, &rng)))
        XCTAssertEqual(scratch.memo.recalled, 1)
    }

    func testTheParserSettingsArePartOfWhatIsRemembered() throws {
        var rng = FastRandom(seed: 4)
        let scratch = FCMScratch()
        var parser = FCMMessageParser()
        let body = Self.send(Self.token(163, &rng), #","apns":{"payload":{"aps":{"badge":"3"}}}"#)
        XCTAssertFalse(try accepted(parser, scratch, body).warnings.isEmpty)
        parser.strictAPNsPayload = true
        guard case .failure = check(parser, scratch, body) else { return XCTFail("strict accepted a remembered lint warning") }
        parser.strictAPNsPayload = false
        parser.sizeMode = .message
        let bySize = try accepted(parser, scratch, body)
        XCTAssertEqual(bySize.size, bySize.messageRange.count)
        XCTAssertEqual(scratch.memo.recalled, 0)
    }

    func testTopicAndConditionSendsAreRecalledOnlyByteForByte() throws {
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        let topic = Array(#"{"message":{"topic":"news","data":{"k":"v"}}}"#.utf8)
        try accepted(parser, scratch, topic)
        try accepted(parser, scratch, topic)
        XCTAssertEqual(scratch.memo.recalled, 1)
        try accepted(parser, scratch, Array(#"{"message":{"topic":"nexs","data":{"k":"v"}}}"#.utf8))
        XCTAssertEqual(scratch.memo.recalled, 1)
        let condition = Array(#"{"message":{"condition":"'a' in topics && 'b' in topics","data":{"k":"v"}}}"#.utf8)
        try accepted(parser, scratch, condition)
        try accepted(parser, scratch, condition)
        XCTAssertEqual(scratch.memo.recalled, 2)
    }

    /// A bounded, seeded walk through sends that change a token byte (to any byte, a token
    /// character or not), the token's length, a byte elsewhere, or nothing: every answer is the
    /// one fresh scratch space gives.
    func testAnySequenceAnswersAsFreshScratch() {
        var rng = FastRandom(seed: 23)
        let parser = FCMMessageParser()
        let scratch = FCMScratch()
        let anyBytes = Array(#"{}[]":,1-aZ_\ .é"#.utf8) + Self.tokenChars
        let shapes = [
            #","notification":{"title":"Sale","body":"Half price"},"data":{"k":"v"}"#,
            #","android":{"priority":"high","ttl":"3600s","collapse_key":"c"},"data":{"_mId":"1"}"#,
            #","apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"content-available":1}}}"#,
        ]
        var token = Array(Self.token(163, &rng).utf8)
        var shape = shapes[0]
        for _ in 0..<600 {
            let step = rng.next() % 7
            switch step {
            case 0, 1: token[Int(rng.next() % UInt64(token.count))] = Self.tokenChars[Int(rng.next() % UInt64(Self.tokenChars.count))]
            case 2: token[Int(rng.next() % UInt64(token.count))] = anyBytes[Int(rng.next() % UInt64(anyBytes.count))]
            case 3: token = Array(Self.token(100 + Int(rng.next() % 80), &rng).utf8)
            case 4: shape = shapes[Int(rng.next() % UInt64(shapes.count))]
            default: break // the same send again, or (5) one byte of it changed
            }
            var body = Self.send(String(decoding: token, as: UTF8.self), shape)
            if step == 5 { body[Int(rng.next() % UInt64(body.count))] = anyBytes[Int(rng.next() % UInt64(anyBytes.count))] }
            check(parser, scratch, body)
        }
        XCTAssertGreaterThan(scratch.memo.recalled, 100, "the walk exercised the memo")
    }
}
