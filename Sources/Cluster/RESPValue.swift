/// A Redis reply (RESP2): a simple string, an error, an integer, a bulk string (nil: the null
/// bulk), or an array (nil: the null array).
public indirect enum RESPValue: Sendable, Equatable {
    case simple(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8]?)
    case array([RESPValue]?)

    /// A bulk or simple string's text.
    public var text: String? {
        switch self {
        case .simple(let s): return s
        case .bulk(let b?): return String(decoding: b, as: UTF8.self)
        default: return nil
        }
    }

    public var elements: [RESPValue] {
        if case .array(let a?) = self { return a }
        return []
    }

    /// A command as RESP's array of bulk strings.
    static func command(_ args: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + args.reduce(0) { $0 + $1.count + 16 })
        out += Array("*\(args.count)\r\n".utf8)
        for a in args {
            out += Array("$\(a.count)\r\n".utf8)
            out += a
            out += [13, 10]
        }
        return out
    }
}

/// Reads RESP2 replies from bytes as they arrive. Bounded: a bulk string of more than
/// `maxBulk` bytes, an array of more than `maxElements`, or nesting deeper than 8 is a
/// protocol error (a Redis this node trusts never sends one; a stranger must not exhaust it).
struct RESPReader {
    static let maxBulk = 64 << 20
    static let maxElements = 1 << 20
    private(set) var buffer: [UInt8] = []
    private var start = 0

    struct ProtocolError: Error, CustomStringConvertible {
        let description: String
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete reply, or nil when more bytes are needed.
    mutating func next() throws -> RESPValue? {
        var i = start
        guard let v = try parse(&i, depth: 0) else { return nil }
        start = i
        if start > 1 << 16 {
            buffer.removeFirst(start)
            start = 0
        }
        return v
    }

    private func line(_ i: inout Int) -> String? {
        var j = i
        while j + 1 < buffer.count {
            if buffer[j] == 13 && buffer[j + 1] == 10 {
                let s = String(decoding: buffer[i..<j], as: UTF8.self)
                i = j + 2
                return s
            }
            j += 1
        }
        return nil
    }

    private func parse(_ i: inout Int, depth: Int) throws -> RESPValue? {
        guard depth <= 8 else { throw ProtocolError(description: "a reply nested too deep") }
        guard i < buffer.count else { return nil }
        let type = buffer[i]
        var j = i + 1
        guard let l = line(&j) else { return nil }
        switch type {
        case UInt8(ascii: "+"):
            i = j
            return .simple(l)
        case UInt8(ascii: "-"):
            i = j
            return .error(l)
        case UInt8(ascii: ":"):
            guard let n = Int64(l) else { throw ProtocolError(description: "a bad integer reply") }
            i = j
            return .integer(n)
        case UInt8(ascii: "$"):
            guard let n = Int(l), n >= -1, n <= RESPReader.maxBulk else { throw ProtocolError(description: "a bad bulk length") }
            if n == -1 {
                i = j
                return .bulk(nil)
            }
            guard j + n + 2 <= buffer.count else { return nil }
            let b = Array(buffer[j..<(j + n)])
            i = j + n + 2
            return .bulk(b)
        case UInt8(ascii: "*"):
            guard let n = Int(l), n >= -1, n <= RESPReader.maxElements else { throw ProtocolError(description: "a bad array length") }
            if n == -1 {
                i = j
                return .array(nil)
            }
            var items: [RESPValue] = []
            items.reserveCapacity(min(n, 1024))
            for _ in 0..<n {
                guard let v = try parse(&j, depth: depth + 1) else { return nil }
                items.append(v)
            }
            i = j
            return .array(items)
        default:
            throw ProtocolError(description: "an unknown reply type \(type)")
        }
    }
}
