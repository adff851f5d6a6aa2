import PushCore
import Transport

/// One connection's memory of the last `messages:send` body it accepted, so that the next
/// message that differs from it only in its registration token is not parsed again.
///
/// A campaign sent through firebase-admin's `send_each`, a multicast split into single sends,
/// or a test looping over devices sends one message again and again with only `message.token`
/// changed. Parsing a body (the proto3-JSON walk and FCM's rules) is a pure function of its
/// bytes and the parser's settings (about 7,000 of a send's 41,000 instructions on the loop),
/// and a token's bytes take no part in it beyond the token check: every token byte is a
/// base64url character or `:` (`FCMFormats.isRegistrationToken`), none of which can end a string,
/// start an escape or change a JSON token's extent. So a body of the same length whose bytes
/// outside the remembered token's span are equal, and whose bytes inside it are a valid token,
/// has the same JSON tokens and the same verdict; its `FCMParsedMessage` (ranges into the body,
/// the token's among them) is the remembered one. Anything else is parsed in full: a body of
/// another length, a byte changed outside the token, a token with a byte no token may hold, a
/// changed setting, and a message with any other target, which must match byte for byte.
///
/// Only accepted messages are remembered: an error's text names what the sender sent. Bodies
/// longer than `maxRemembered` are not remembered, so the copy a connection keeps is bounded:
/// at `--max-connections` (10,000) connections, 40 MiB. Touched only by the connection's loop.
public final class FCMMessageMemo {
    /// The body last remembered: a copy (the request is not retained), in storage reused from
    /// one miss to the next. Empty: nothing remembered.
    private var bytes: [UInt8] = []
    private var message = FCMParsedMessage()
    /// The span of `bytes` that may differ: the token's, for a token send; empty otherwise.
    private var tokenSpan: Range<Int> = 0..<0
    private var sizeMode = FCMSizeMode.fields
    private var strictAPNsPayload = false

    /// The largest body remembered: FCM's own limit for a message's data and notification. A
    /// campaign's messages fit; a larger body (a big `apns.payload` or webpush block beside
    /// them) is parsed every time.
    static let maxRemembered = 4096

    /// How many bodies were answered from memory (read by tests).
    public private(set) var recalled = 0

    public init() {}

    /// Writes the remembered message into `message` when `body` is the remembered one but for
    /// its token, parsed with the same settings; false (and `message` untouched) when it must be
    /// parsed.
    func recall(_ body: UnsafeRawBufferPointer, sizeMode: FCMSizeMode, strictAPNsPayload: Bool, into message: inout FCMParsedMessage)
        -> Bool
    {
        let count = bytes.count
        guard count != 0, body.count == count, sizeMode == self.sizeMode, strictAPNsPayload == self.strictAPNsPayload
        else { return false }
        let span = tokenSpan
        // 0: another body; 1: the same but for its token; 2: the same, token too (checked when remembered).
        let same = bytes.withUnsafeBytes { old -> Int in
            let a = old.baseAddress!
            let b = body.baseAddress!
            guard sameBytes(a, b, span.lowerBound), sameBytes(a + span.upperBound, b + span.upperBound, count - span.upperBound)
            else { return 0 }
            return sameTokenBytes(a + span.lowerBound, b + span.lowerBound, span.count) ? 2 : 1
        }
        guard same != 0 else { return false }
        if same == 1, !FCMFormats.isRegistrationToken(UnsafeRawBufferPointer(rebasing: body[span])) { return false }
        recalled &+= 1
        message = self.message
        return true
    }

    /// Remembers an accepted `message` parsed from `body` with these settings.
    func remember(_ body: UnsafeRawBufferPointer, _ message: FCMParsedMessage, sizeMode: FCMSizeMode, strictAPNsPayload: Bool) {
        guard body.count <= Self.maxRemembered, body.count > 0 else { return forget() }
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: body)
        self.message = message
        if case .token(let r) = message.target { tokenSpan = r } else { tokenSpan = 0..<0 }
        self.sizeMode = sizeMode
        self.strictAPNsPayload = strictAPNsPayload
    }

    /// Nothing remembered: the next body is parsed.
    func forget() {
        bytes.removeAll(keepingCapacity: true)
        message = FCMParsedMessage()
        tokenSpan = 0..<0
    }
}
