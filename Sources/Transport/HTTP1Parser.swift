/// A small, strict HTTP/1.1 request parser (RFC 9112), written to refuse anything ambiguous:
/// no request smuggling through conflicting framing, obs-fold, bare cr or lf, or odd chunk sizes.

public struct HTTP1Limits: Sendable {
    public var maxRequestLineLength = 8 * 1024
    /// Request line plus all header lines.
    public var maxHeadLength = 32 * 1024
    public var maxHeaderCount = 100
    public init() {}
}

public enum HTTP1Framing: Equatable, Sendable {
    case none
    case contentLength(Int)
    case chunked
}

public enum HTTP1ParseError: Error, Equatable, Sendable {
    case requestLineTooLong
    case headTooLarge
    case tooManyHeaders
    case badRequestLine
    case badTarget
    case unsupportedVersion
    case badHeaderName
    case badHeaderValue
    case obsFold
    case bareCR
    case bareLF
    case badContentLength
    case conflictingContentLength
    case contentLengthWithTransferEncoding
    case badTransferEncoding
    case missingHost
    case duplicateHost
    case unsupportedExpectation
    case badChunkSize
    case badChunkFraming
    case trailersTooLarge
    case chunkExtensionTooLong

    /// The status the error is answered with.
    public var status: Int {
        switch self {
        case .unsupportedVersion: 505
        case .unsupportedExpectation: 417
        default: 400
        }
    }
}

public struct HTTP1RequestHead: Sendable {
    public var method: HTTPMethod
    public var version: HTTPVersion
    /// Header fields with lowercase names, preceded by the synthesized `:path`
    /// (and `:authority` for an absolute-form target).
    public var fields: HTTPFields
    public var framing: HTTP1Framing
    public var keepAlive: Bool
    public var expectContinue: Bool
    /// `Upgrade: h2c` with `Connection: Upgrade, HTTP2-Settings` and a decodable `HTTP2-Settings`.
    public var upgradeToH2C: Bool
    /// The decoded HTTP2-Settings payload when `upgradeToH2C`.
    public var http2Settings: [UInt8]
}

public enum HTTP1HeadResult: Sendable {
    case incomplete
    case complete(HTTP1RequestHead, consumed: Int)
    case failure(HTTP1ParseError)
}

public enum HTTP1Parser {
    static let cr: UInt8 = 13, lf: UInt8 = 10, sp: UInt8 = 32, ht: UInt8 = 9, colon: UInt8 = 58

    /// RFC 9110 tchar.
    static let tchar = alphanumericTable(plus: "!#$%&'*+-.^_`|~")

    /// What an authority-form target may hold: a reg-name or IP literal and a port.
    static let authorityChar = alphanumericTable(plus: "-._~:[]")

    /// A byte table: true for ASCII letters, digits and `extra`.
    static func alphanumericTable(plus extra: String) -> [Bool] {
        var t = [Bool](repeating: false, count: 256)
        for c in UInt8(ascii: "0")...UInt8(ascii: "9") { t[Int(c)] = true }
        for c in UInt8(ascii: "a")...UInt8(ascii: "z") { t[Int(c)] = true }
        for c in UInt8(ascii: "A")...UInt8(ascii: "Z") { t[Int(c)] = true }
        for c in extra.utf8 { t[Int(c)] = true }
        return t
    }

    /// Parses a request head from the start of `buf`.
    public static func parseHead(_ buf: UnsafeRawBufferPointer, limits: HTTP1Limits = HTTP1Limits()) -> HTTP1HeadResult {
        let n = buf.count
        var pos = 0
        // RFC 9112 2.2: ignore at least one empty line before the request line.
        var blank = 0
        while pos + 1 < n && buf[pos] == cr && buf[pos + 1] == lf && blank < 4 {
            pos += 2
            blank += 1
        }
        if pos < n && buf[pos] == lf { return .failure(.bareLF) }
        let lineStart = pos

        // Request line.
        var lineEnd = -1
        while pos < n {
            let b = buf[pos]
            if b == cr {
                if pos + 1 >= n { break }
                if buf[pos + 1] != lf { return .failure(.bareCR) }
                lineEnd = pos
                break
            }
            if b == lf { return .failure(.bareLF) }
            pos += 1
            if pos - lineStart > limits.maxRequestLineLength { return .failure(.requestLineTooLong) }
        }
        if lineEnd < 0 {
            return pos - lineStart > limits.maxRequestLineLength ? .failure(.requestLineTooLong) : .incomplete
        }

        // method sp target sp version
        var i = lineStart
        while i < lineEnd && tchar[Int(buf[i])] { i += 1 }
        if i == lineStart || i >= lineEnd || buf[i] != sp { return .failure(.badRequestLine) }
        let method = HTTPMethod(bytes: UnsafeRawBufferPointer(rebasing: buf[lineStart..<i]))
        i += 1
        let targetStart = i
        while i < lineEnd && buf[i] > sp && buf[i] < 0x7F { i += 1 }
        if i == targetStart || i >= lineEnd || buf[i] != sp { return .failure(.badRequestLine) }
        let targetEnd = i
        i += 1
        let versionBytes = UnsafeRawBufferPointer(rebasing: buf[i..<lineEnd])
        let version: HTTPVersion
        if versionBytes.count != 8 || !versionBytes.hasPrefix("HTTP/") || versionBytes[6] != UInt8(ascii: ".") {
            return .failure(.badRequestLine)
        }
        let major = versionBytes[5]
        let minor = versionBytes[7]
        guard major >= 0x30 && major <= 0x39 && minor >= 0x30 && minor <= 0x39 else { return .failure(.badRequestLine) }
        if major != UInt8(ascii: "1") { return .failure(.unsupportedVersion) }
        version = minor == UInt8(ascii: "0") ? .http10 : .http11

        var fields = HTTPFields()
        fields.reserveCapacity(bytes: 512, fields: 12)
        // Target: origin-form, asterisk-form, or absolute-form.
        let target = UnsafeRawBufferPointer(rebasing: buf[targetStart..<targetEnd])
        if target[0] == UInt8(ascii: "/") {
            fields.add(name: ":path", value: target)
        } else if target.count == 1 && target[0] == UInt8(ascii: "*") {
            guard method == .options else { return .failure(.badTarget) }
            fields.add(name: ":path", value: target)
        } else if target.hasPrefix("http://") || target.hasPrefix("https://") {
            let schemeEnd = target.firstIndex(of: colon)! + 3
            var authEnd = schemeEnd
            while authEnd < target.count && target[authEnd] != UInt8(ascii: "/") && target[authEnd] != UInt8(ascii: "?") { authEnd += 1 }
            if authEnd == schemeEnd { return .failure(.badTarget) }
            fields.add(name: ":authority", value: UnsafeRawBufferPointer(rebasing: target[schemeEnd..<authEnd]))
            if authEnd == target.count {
                fields.add(name: ":path", value: "/")
            } else if target[authEnd] == UInt8(ascii: "?") {
                var p: [UInt8] = [UInt8(ascii: "/")]
                p.append(contentsOf: target[authEnd...])
                fields.add(name: ":path", value: p)
            } else {
                fields.add(name: ":path", value: UnsafeRawBufferPointer(rebasing: target[authEnd...]))
            }
        } else if method == .connect {
            // authority-form (RFC 9112 3.2.3): host:port, nothing else.
            guard target.allSatisfy({ authorityChar[Int($0)] }), target.contains(colon) else { return .failure(.badTarget) }
            fields.add(name: ":authority", value: target)
        } else {
            return .failure(.badTarget)
        }

        // Header fields.
        pos = lineEnd + 2
        var headerCount = 0
        while true {
            if pos - lineStart > limits.maxHeadLength { return .failure(.headTooLarge) }
            if pos >= n { return .incomplete }
            let first = buf[pos]
            if first == cr {
                if pos + 1 >= n { return .incomplete }
                if buf[pos + 1] != lf { return .failure(.bareCR) }
                pos += 2
                break
            }
            if first == lf { return .failure(.bareLF) }
            if first == sp || first == ht { return .failure(.obsFold) }
            // name
            let nameStart = pos
            while pos < n && tchar[Int(buf[pos])] { pos += 1 }
            if pos >= n { return pos - lineStart > limits.maxHeadLength ? .failure(.headTooLarge) : .incomplete }
            if buf[pos] != colon || pos == nameStart { return .failure(.badHeaderName) }
            let nameEnd = pos
            pos += 1
            // value: OWS field-content OWS CRLF
            while pos < n && (buf[pos] == sp || buf[pos] == ht) { pos += 1 }
            let valueStart = pos
            var valueEnd = pos
            var ended = false
            while pos < n {
                let b = buf[pos]
                if b == cr {
                    if pos + 1 >= n { break }
                    if buf[pos + 1] != lf { return .failure(.bareCR) }
                    ended = true
                    break
                }
                if b == lf { return .failure(.bareLF) }
                if b == sp || b == ht {
                    pos += 1
                    continue
                }
                if b < sp || b == 0x7F { return .failure(.badHeaderValue) }
                pos += 1
                valueEnd = pos
            }
            if !ended { return pos - lineStart > limits.maxHeadLength ? .failure(.headTooLarge) : .incomplete }
            headerCount += 1
            if headerCount > limits.maxHeaderCount { return .failure(.tooManyHeaders) }
            fields.add(
                name: UnsafeRawBufferPointer(rebasing: buf[nameStart..<nameEnd]),
                value: UnsafeRawBufferPointer(rebasing: buf[valueStart..<valueEnd]))
            pos += 2
        }
        if pos - lineStart > limits.maxHeadLength { return .failure(.headTooLarge) }

        switch interpret(&fields, method: method, version: version) {
        case .success(let head): return .complete(head, consumed: pos)
        case .failure(let e): return .failure(e)
        }
    }

    /// Framing and connection semantics from the parsed fields.
    static func interpret(_ fields: inout HTTPFields, method: HTTPMethod, version: HTTPVersion) -> Result<HTTP1RequestHead, HTTP1ParseError>
    {
        var contentLength: Int? = nil
        var transferEncodings: [ArraySlice<UInt8>] = []
        var hostCount = 0
        var keepAlive = version == .http11
        var connectionUpgrade = false
        var connectionSettings = false
        var upgradeH2C = false
        var settingsValues: [ArraySlice<UInt8>] = []
        var expectContinue = false

        for idx in 0..<fields.count {
            let name = fields.name(at: idx)
            let value = fields.value(at: idx)
            switch name.count {
            case 4 where name.equals("host"):
                hostCount += 1
            case 6 where name.equals("expect"):
                if value.equalsIgnoringCase("100-continue") { expectContinue = true } else { return .failure(.unsupportedExpectation) }
            case 7 where name.equals("upgrade"):
                for token in commaList(value) where token.equalsIgnoringCase("h2c") { upgradeH2C = true }
            case 10 where name.equals("connection"):
                for token in commaList(value) {
                    if token.equalsIgnoringCase("close") {
                        keepAlive = false
                    } else if token.equalsIgnoringCase("keep-alive") {
                        if version == .http10 { keepAlive = true }
                    } else if token.equalsIgnoringCase("upgrade") {
                        connectionUpgrade = true
                    } else if token.equalsIgnoringCase("http2-settings") {
                        connectionSettings = true
                    }
                }
            case 14 where name.equals("content-length"):
                for item in commaList(value) {
                    guard let v = parseDecimal(item) else { return .failure(.badContentLength) }
                    if let cl = contentLength, cl != v { return .failure(.conflictingContentLength) }
                    contentLength = v
                }
                if contentLength == nil { return .failure(.badContentLength) }
            case 14 where name.equals("http2-settings"):
                settingsValues.append(value)
            case 17 where name.equals("transfer-encoding"):
                let items = commaList(value)
                if items.isEmpty { return .failure(.badTransferEncoding) }
                transferEncodings.append(contentsOf: items)
            default:
                break
            }
        }
        if version == .http11 {
            if hostCount == 0 && fields.first(":authority") == nil { return .failure(.missingHost) }
        }
        if hostCount > 1 { return .failure(.duplicateHost) }

        var framing = HTTP1Framing.none
        if !transferEncodings.isEmpty {
            if contentLength != nil { return .failure(.contentLengthWithTransferEncoding) }
            if version == .http10 { return .failure(.badTransferEncoding) }
            // Only "chunked", exactly once: other codings are not supported here.
            guard transferEncodings.count == 1, transferEncodings[0].equalsIgnoringCase("chunked") else {
                return .failure(.badTransferEncoding)
            }
            framing = .chunked
        } else if let cl = contentLength, cl > 0 {
            framing = .contentLength(cl)
        }

        var settings: [UInt8] = []
        var h2c = false
        if upgradeH2C && connectionUpgrade && connectionSettings && settingsValues.count == 1,
            let decoded = Base64URL.decode(settingsValues[0]), decoded.count % 6 == 0
        {
            h2c = true
            settings = decoded
        }
        return .success(
            HTTP1RequestHead(
                method: method, version: version, fields: fields, framing: framing,
                keepAlive: keepAlive, expectContinue: expectContinue && version == .http11,
                upgradeToH2C: h2c, http2Settings: settings))
    }

    /// Comma-separated list items, trimmed of OWS, empty items dropped.
    static func commaList(_ value: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        for var item in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
            while let f = item.first, f == sp || f == ht { item = item.dropFirst() }
            while let l = item.last, l == sp || l == ht { item = item.dropLast() }
            if !item.isEmpty { out.append(item) }
        }
        return out
    }

    /// 1*DIGIT, at most 15 digits (no sign, no spaces).
    static func parseDecimal(_ s: ArraySlice<UInt8>) -> Int? {
        guard !s.isEmpty, s.count <= 15 else { return nil }
        var v = 0
        for b in s {
            guard b >= 0x30 && b <= 0x39 else { return nil }
            v = v * 10 + Int(b - 0x30)
        }
        return v
    }
}

/// Decodes a chunked request body (RFC 9112 section 7.1), strictly: hex sizes without
/// whitespace, CRLF everywhere, bounded trailers. Chunk extensions are accepted and ignored,
/// up to `maxExtensionBytes` per chunk line.
public struct ChunkedDecoder: Sendable {
    enum State: Sendable {
        case size, ext, sizeLF
        case data(Int)
        case dataCR, dataLF, trailerStart, trailerLine, trailerLF, finalLF, done
    }

    public enum Outcome: Equatable, Sendable {
        /// Consumed all input; more is needed.
        case needMore
        /// The body ended after `consumed` bytes of this input.
        case done(consumed: Int)
        case failure(HTTP1ParseError)
        /// The body would exceed the limit.
        case tooLarge
    }

    var state: State = .size
    var size = 0
    var sizeDigits = 0
    var trailerBytes = 0
    var extensionBytes = 0
    let maxTrailerBytes: Int
    let maxExtensionBytes: Int

    public init(maxTrailerBytes: Int = 8 * 1024, maxExtensionBytes: Int = 1024) {
        self.maxTrailerBytes = maxTrailerBytes
        self.maxExtensionBytes = maxExtensionBytes
    }

    var isDone: Bool { if case .done = state { return true } else { return false } }

    /// Feeds `input`, appending chunk data to `body` (at most `maxBody` bytes in all).
    public mutating func decode(_ input: UnsafeRawBufferPointer, into body: inout [UInt8], maxBody: Int) -> Outcome {
        let cr = HTTP1Parser.cr
        let lf = HTTP1Parser.lf
        var i = 0
        let n = input.count
        while i < n {
            let b = input[i]
            switch state {
            case .size:
                if let d = hexValue(b) {
                    sizeDigits += 1
                    if sizeDigits > 15 { return .failure(.badChunkSize) }
                    size = size * 16 + d
                    i += 1
                } else if sizeDigits == 0 {
                    return .failure(.badChunkSize)
                } else if b == UInt8(ascii: ";") {
                    state = .ext
                    i += 1
                } else if b == cr {
                    state = .sizeLF
                    i += 1
                } else {
                    return .failure(.badChunkSize)
                }
            case .ext:
                if b == cr {
                    state = .sizeLF
                    extensionBytes = 0
                    i += 1
                } else if b == lf || (b < 0x20 && b != HTTP1Parser.ht) || b == 0x7F {
                    return .failure(.badChunkSize)
                } else {
                    extensionBytes += 1
                    if extensionBytes > maxExtensionBytes { return .failure(.chunkExtensionTooLong) }
                    i += 1
                }
            case .sizeLF:
                guard b == lf else { return .failure(.bareCR) }
                i += 1
                if size == 0 {
                    state = .trailerStart
                } else {
                    if body.count + size > maxBody { return .tooLarge }
                    state = .data(size)
                }
                size = 0
                sizeDigits = 0
            case .data(let remaining):
                let take = min(remaining, n - i)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<(i + take)]).typedBytes)
                i += take
                state = remaining - take == 0 ? .dataCR : .data(remaining - take)
            case .dataCR:
                guard b == cr else { return .failure(.badChunkFraming) }
                state = .dataLF
                i += 1
            case .dataLF:
                guard b == lf else { return .failure(.bareCR) }
                state = .size
                i += 1
            case .trailerStart:
                if b == cr {
                    state = .finalLF
                    i += 1
                } else if b == HTTP1Parser.sp || b == HTTP1Parser.ht {
                    return .failure(.obsFold)
                } else if b == lf {
                    return .failure(.bareLF)
                } else {
                    state = .trailerLine
                }
            case .trailerLine:
                trailerBytes += 1
                if trailerBytes > maxTrailerBytes { return .failure(.trailersTooLarge) }
                if b == cr {
                    state = .trailerLF
                } else if b == lf {
                    return .failure(.bareLF)
                } else if (b < 0x20 && b != HTTP1Parser.ht) || b == 0x7F {
                    return .failure(.badHeaderValue)
                }
                i += 1
            case .trailerLF:
                guard b == lf else { return .failure(.bareCR) }
                state = .trailerStart
                i += 1
            case .finalLF:
                guard b == lf else { return .failure(.bareCR) }
                state = .done
                return .done(consumed: i + 1)
            case .done:
                return .done(consumed: i)
            }
        }
        return .needMore
    }

    private func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: Int(b - 0x30)
        case 0x41...0x46: Int(b - 0x41 + 10)
        case 0x61...0x66: Int(b - 0x61 + 10)
        default: nil
        }
    }
}
