import Glibc
import Transport

/// How an HTTP/1.1 answer's body is framed (RFC 9112 section 6.3).
enum AnswerBody {
    /// Bytes still to come.
    case length(Int)
    case chunked(ChunkedBody)
    /// Until the server closes the connection (no length given).
    case untilClose
}

/// An answer's head, as `PlainHTTPClient` needs it.
struct AnswerHead {
    var status: Int
    /// 1xx: another head follows.
    var interim: Bool
    /// The connection may carry another request after this answer.
    var keepAlive: Bool
    var body: AnswerBody
}

extension PlainHTTPClient {
    /// The index just past the blank line that ends a head (`\r\n\r\n` or a bare `\n\n`), when
    /// `head` has it; the search starts at `from`.
    static func headEnd(_ head: [UInt8], from: Int) -> Int? {
        head.withUnsafeBytes { raw -> Int? in
            guard let base = raw.baseAddress else { return nil }
            var i = max(0, from)
            while i < raw.count, let hit = memchr(base + i, 0x0A, raw.count - i) {
                let at = base.distance(to: UnsafeRawPointer(hit))
                if at + 1 < raw.count, raw[at + 1] == 0x0A { return at + 2 }
                if at + 2 < raw.count, raw[at + 1] == 0x0D, raw[at + 2] == 0x0A { return at + 3 }
                i = at + 1
            }
            return nil
        }
    }

    /// Parses an answer's head (status line and fields, up to and including its blank line); nil
    /// when it is not an HTTP/1.x answer.
    static func parseHead(_ head: ArraySlice<UInt8>, method: String) -> AnswerHead? {
        var pos = head.startIndex
        func nextLine() -> ArraySlice<UInt8>? {
            guard pos < head.endIndex else { return nil }
            let end = head[pos...].firstIndex(of: 0x0A) ?? head.endIndex
            var line = head[pos..<end]
            pos = min(end + 1, head.endIndex)
            if line.last == 0x0D { line = line.dropLast() }
            return line
        }
        guard let statusLine = nextLine() else { return nil }
        // "HTTP/1.x NNN[ reason]"
        let s = Array(statusLine)
        guard s.count >= 12, s.starts(with: Array("HTTP/1.".utf8)), s[7] >= 0x30, s[7] <= 0x39, s[8] == 0x20,
            s[9...11].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), s.count == 12 || s[12] == 0x20
        else { return nil }
        let status = s[9...11].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard status >= 100 else { return nil }
        var keepAlive = s[7] != 0x30 // HTTP/1.0 closes unless it says keep-alive
        var length: Int?
        var chunked = false
        var otherCoding = false
        while let line = nextLine(), !line.isEmpty {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let value = trimmed(line[(colon + 1)...])
            switch HeadField(line[..<colon]) {
            case .contentLength:
                guard !value.isEmpty, value.count <= 18, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                let n = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                if let l = length, l != n { return nil }
                length = n
            case .transferEncoding:
                let codings = value.split(separator: UInt8(ascii: ",")).map { trimmed($0) }
                chunked = codings.last?.equalsIgnoringCase("chunked") ?? false
                otherCoding = !chunked && !codings.isEmpty
            case .connection:
                for token in value.split(separator: UInt8(ascii: ",")).map({ trimmed($0) }) {
                    if token.equalsIgnoringCase("close") {
                        keepAlive = false
                    } else if token.equalsIgnoringCase("keep-alive") {
                        keepAlive = true
                    }
                }
            case .other:
                break
            }
        }
        if status < 200 {
            guard status != 101 else { return nil } // no upgrade was asked for
            return AnswerHead(status: status, interim: true, keepAlive: keepAlive, body: .length(0))
        }
        if method == "HEAD" || status == 204 || status == 304 {
            return AnswerHead(status: status, interim: false, keepAlive: keepAlive, body: .length(0))
        }
        if chunked { return AnswerHead(status: status, interim: false, keepAlive: keepAlive, body: .chunked(ChunkedBody())) }
        if otherCoding { return AnswerHead(status: status, interim: false, keepAlive: false, body: .untilClose) }
        if let length { return AnswerHead(status: status, interim: false, keepAlive: keepAlive, body: .length(length)) }
        return AnswerHead(status: status, interim: false, keepAlive: false, body: .untilClose)
    }

    static func trimmed(_ v: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var v = v
        while let f = v.first, f == 0x20 || f == 0x09 { v = v.dropFirst() }
        while let l = v.last, l == 0x20 || l == 0x09 { v = v.dropLast() }
        return v
    }
}

/// The answer fields that frame it, recognised by name without making a String of each name.
enum HeadField {
    case contentLength, transferEncoding, connection, other

    init(_ name: ArraySlice<UInt8>) {
        if name.equalsIgnoringCase("content-length") {
            self = .contentLength
        } else if name.equalsIgnoringCase("transfer-encoding") {
            self = .transferEncoding
        } else if name.equalsIgnoringCase("connection") {
            self = .connection
        } else {
            self = .other
        }
    }
}

/// A chunked body being read and dropped: chunk sizes (with extensions), data, trailers. Lines
/// are bounded to 4 KiB; sizes to 15 hex digits.
struct ChunkedBody {
    enum Step { case more, done, invalid }
    private enum State {
        case size
        case data(Int)
        case dataEnd
        case trailers
    }
    private var state = State.size
    private var line: [UInt8] = []
    static let maxLine = 4096

    /// Reads from `bytes` at `i` (advanced past what was used); `.done` right after the body's
    /// last byte.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, from i: inout Int) -> Step {
        while i < bytes.count {
            switch state {
            case .data(let left):
                let n = min(left, bytes.count - i)
                i += n
                state = left - n == 0 ? .dataEnd : .data(left - n)
            case .size, .dataEnd, .trailers:
                let b = bytes[i]
                i += 1
                if b != 0x0A {
                    guard line.count < ChunkedBody.maxLine else { return .invalid }
                    line.append(b)
                    continue
                }
                if line.last == 0x0D { line.removeLast() }
                defer { line.removeAll(keepingCapacity: true) }
                switch state {
                case .size:
                    guard let size = ChunkedBody.size(line) else { return .invalid }
                    state = size == 0 ? .trailers : .data(size)
                case .dataEnd:
                    guard line.isEmpty else { return .invalid }
                    state = .size
                case .trailers:
                    if line.isEmpty { return .done }
                case .data:
                    break
                }
            }
        }
        return .more
    }

    /// A chunk-size line's size (hex, then optional whitespace and `;extensions`).
    static func size(_ line: [UInt8]) -> Int? {
        var v = 0
        var digits = 0
        for b in line {
            let d: Int
            switch b {
            case 0x30...0x39: d = Int(b - 0x30)
            case 0x41...0x46: d = Int(b - 0x41 + 10)
            case 0x61...0x66: d = Int(b - 0x61 + 10)
            case 0x3B, 0x20, 0x09: return digits > 0 ? v : nil
            default: return nil
            }
            digits += 1
            guard digits <= 15 else { return nil }
            v = v * 16 + d
        }
        return digits > 0 ? v : nil
    }
}
