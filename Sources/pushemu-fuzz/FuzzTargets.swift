import APNs
import FCM
import Faults
import PushCore
import Transport

/// pushemu's fuzz targets: the parsers every byte from a client goes through. Each takes one
/// input and must return, whatever the input: a trap, an overflow, an out-of-bounds access or a
/// hang is a finding. `PUSHEMU_FUZZ_TARGET` picks one for libFuzzer (`Scripts/fuzz`); the plain
/// build replays corpus files through them (`pushemu-fuzz TARGET FILE...`), which the tests do.
enum FuzzTarget: String, CaseIterable {
    /// The HTTP/1.1 request-head parser, then the chunked-body decoder on what follows the head.
    case http1
    /// The JSON tokenizer every body goes through.
    case json
    /// FCM's `messages:send` parser and validator (proto3 JSON and FCM's rules).
    case fcm
    /// Fault rules (`POST /emulator/v1/faults`), scenarios and the `x-pushemu-fault` header.
    case faults
    /// APNs provider tokens (JWT) and the FCM bearer/OAuth grant's JWT shape.
    case jwt
    /// HTTP/2's receive path ahead of nghttp2: frames, header blocks, HPACK (`HTTP2Inbound`).
    case h2

    func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .http1:
            switch HTTP1Parser.parseHead(bytes) {
            case .complete(_, let consumed):
                var decoder = ChunkedDecoder()
                var body: [UInt8] = []
                _ = decoder.decode(UnsafeRawBufferPointer(rebasing: bytes[consumed...]), into: &body, maxBody: 1 << 20)
            case .incomplete, .failure:
                var decoder = ChunkedDecoder()
                var body: [UInt8] = []
                _ = decoder.decode(bytes, into: &body, maxBody: 1 << 20)
            }
        case .json:
            var tokens: [JSONToken] = []
            if JSONParser.parse(bytes, into: &tokens) == nil {
                for t in tokens where t.kind == .string {
                    _ = JSONParser.decodeString(UnsafeRawBufferPointer(rebasing: bytes[Int(t.start)..<Int(t.end)]))
                }
            }
        case .fcm:
            var parser = FCMMessageParser()
            let first = parser.parse(bytes, scratch: FCMFuzzState.scratch)
            // The connection's memo against fresh scratch: the input with one byte of its token
            // replaced (by the input's first byte) must get the same answer either way.
            if case .success(let m) = first, case .token(let r) = m.target, let b = bytes.first {
                var other = Array(bytes)
                other[r.lowerBound + Int(b) % r.count] = b
                let recalled = parser.parse(other, scratch: FCMFuzzState.scratch)
                precondition(recalled == parser.parse(other, scratch: FCMScratch()), "the memo answered otherwise than a fresh parse")
            }
            parser.strictAPNsPayload = true
            parser.sizeMode = .message
            _ = parser.parse(bytes, scratch: FCMFuzzState.scratch)
        case .faults:
            let array = Array(bytes)
            var n = 0
            _ = try? FaultParser.rules(array, nowMs: 1_800_000_000_000) {
                n += 1
                return "r\(n)"
            }
            _ = try? Scenario.parse(array, id: "s", nowMs: 1_800_000_000_000) {
                n += 1
                return "r\(n)"
            }
            _ = try? FaultParser.overrideEffect(String(decoding: bytes, as: UTF8.self))
        case .jwt:
            _ = ProviderToken.parse(bytes)
        case .h2:
            HTTP2ReceiveFuzzing.run(bytes)
        }
    }
}

enum FCMFuzzState {
    nonisolated(unsafe) static let scratch = FCMScratch()
}
