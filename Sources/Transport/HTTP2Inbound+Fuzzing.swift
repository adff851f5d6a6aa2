/// The fuzz entry for HTTP/2's receive path ahead of nghttp2 (`pushemu-fuzz h2`): the input
/// is a client's bytes after the connection preface, fed to `HTTP2Inbound` in reads whose
/// sizes the input's first byte picks, every block's fields taken as the session takes them;
/// then the input again as one HPACK block, twice on one decoder (its table carried over).
public enum HTTP2ReceiveFuzzing {
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private struct Discard: HPACKFieldSink {
        var bytes = 0
        mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, role: FieldRole, valueIsPlain: Bool) {
            bytes &+= name.count &+ value.count
        }
    }

    public static func run(_ bytes: UnsafeRawBufferPointer) {
        let inbound = HTTP2Inbound(maxHeaderListSize: 16 * 1024)
        let stream = preface + Array(bytes)
        let readSize = 1 + Int(bytes.first ?? 0) % 97
        var fields = HTTPFields()
        stream.withUnsafeBytes { all in
            var offset = 0
            while offset < all.count {
                let end = min(offset + readSize, all.count)
                let read = UnsafeRawBufferPointer(rebasing: all[offset..<end])
                offset = end
                var position = 0
                steps: while true {
                    switch inbound.step(read, &position) {
                    case .done, .tooManyContinuations: break steps
                    case .pass(let range): precondition(range.upperBound <= read.count)
                    case .emit(let block):
                        precondition(inbound.output.count >= 9 || block == nil)
                        if block?.verdict == .plain { inbound.takeFields(into: &fields) }
                    }
                }
            }
        }
        let decoder = HPACKDecoder()
        var sink = Discard()
        try? decoder.decode(bytes, into: &sink)
        try? decoder.decode(bytes, into: &sink)
    }
}
