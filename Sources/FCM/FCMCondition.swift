/// A topic condition such as `'A' in topics && ('B' in topics || !('C' in topics))`.
///
/// FCM's grammar: topic tests (`'name' in topics`, single or double quotes), `!`, `&&`, `||`
/// and parentheses, at most five topics. As FCM documents, parenthesised sub-expressions are
/// evaluated first and the operators then from left to right: `&&` and `||` have equal
/// precedence (`a || b && c` is `(a || b) && c`).
public struct FCMCondition: Sendable, Equatable {
    public indirect enum Node: Sendable, Equatable {
        case topic(String)
        case not(Node)
        case and(Node, Node)
        case or(Node, Node)
    }

    public enum ParseError: Error, Equatable, Sendable {
        case syntax(String)
        case tooManyTopics(Int)
        case invalidTopic(String)
    }

    static let maxTopics = 5

    public let root: Node
    /// The distinct topic names, in order of appearance.
    public let topics: [String]

    public static func parse(_ text: String) -> Result<FCMCondition, ParseError> {
        var p = Parser(bytes: Array(text.utf8))
        do {
            let node = try p.expression(depth: 0)
            p.skipSpace()
            guard p.i == p.bytes.count else { throw ParseError.syntax("unexpected text at offset \(p.i)") }
            if p.literalCount > maxTopics { throw ParseError.tooManyTopics(p.literalCount) }
            return .success(FCMCondition(root: node, topics: p.topics))
        } catch let e as ParseError {
            return .failure(e)
        } catch {
            return .failure(.syntax("\(error)"))
        }
    }

    /// Whether a device subscribed to `subscribed` matches.
    public func matches(_ subscribed: (String) -> Bool) -> Bool { Self.eval(root, subscribed) }

    static func eval(_ n: Node, _ has: (String) -> Bool) -> Bool {
        switch n {
        case .topic(let t): has(t)
        case .not(let a): !eval(a, has)
        case .and(let a, let b): eval(a, has) && eval(b, has)
        case .or(let a, let b): eval(a, has) || eval(b, has)
        }
    }

    struct Parser {
        let bytes: [UInt8]
        var i = 0
        var topics: [String] = []
        var literalCount = 0

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        mutating func eat(_ s: StaticString) -> Bool {
            skipSpace()
            let n = s.utf8CodeUnitCount
            guard i + n <= bytes.count else { return false }
            for k in 0..<n where bytes[i + k] != s.utf8Start[k] { return false }
            i += n
            return true
        }

        /// term (('&&' | '||') term)*, folded left to right.
        mutating func expression(depth: Int) throws -> Node {
            guard depth < 32 else { throw ParseError.syntax("nesting is too deep") }
            var left = try term(depth: depth)
            while true {
                if eat("&&") {
                    left = .and(left, try term(depth: depth))
                } else if eat("||") {
                    left = .or(left, try term(depth: depth))
                } else {
                    return left
                }
            }
        }

        mutating func term(depth: Int) throws -> Node {
            skipSpace()
            guard i < bytes.count else { throw ParseError.syntax("the condition ends early") }
            if eat("!") { return .not(try term(depth: depth + 1)) }
            if eat("(") {
                let inner = try expression(depth: depth + 1)
                guard eat(")") else { throw ParseError.syntax("missing ')'") }
                return inner
            }
            let q = bytes[i]
            guard q == UInt8(ascii: "'") || q == UInt8(ascii: "\"") else {
                throw ParseError.syntax("expected a quoted topic name at offset \(i)")
            }
            i += 1
            let start = i
            while i < bytes.count, bytes[i] != q { i += 1 }
            guard i < bytes.count else { throw ParseError.syntax("unterminated topic name") }
            let name = bytes[start..<i]
            i += 1
            guard FCMFormats.topicName(name) != nil, !name.starts(with: Array("/topics/".utf8)) else {
                throw ParseError.invalidTopic(String(decoding: name, as: UTF8.self))
            }
            skipSpace()
            guard eat("in"), i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09, eat("topics") else {
                throw ParseError.syntax("expected 'in topics' after a topic name")
            }
            if i < bytes.count, FCMFormats.isTopicByte(bytes[i]) { throw ParseError.syntax("expected 'in topics' after a topic name") }
            literalCount += 1
            let t = String(decoding: name, as: UTF8.self)
            if !topics.contains(t) { topics.append(t) }
            return .topic(t)
        }
    }
}
