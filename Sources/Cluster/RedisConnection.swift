import Glibc
import Runtime

/// Why a Redis call failed: the connection (refused, closed, timed out) or Redis's own error.
public struct RedisError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// Redis answered with an error (the connection is still good).
    public let fromRedis: Bool
}

/// One blocking connection to Redis (RESP2), for one thread: a command is sent and its reply
/// read before the next. Connect, send and receive each have a time limit, so a Redis that stops
/// answering costs its caller at most that long, never a hang. Never used on an event loop.
final class RedisConnection {
    let url: RedisURL
    private var fd: Int32 = -1
    private var reader = RESPReader()
    /// How long a reply may take (`XREAD BLOCK` adds its own block time).
    let timeoutMs: Int

    init(_ url: RedisURL, timeoutMs: Int = 2_000) {
        self.url = url
        self.timeoutMs = timeoutMs
    }

    deinit { close() }

    var isConnected: Bool { fd >= 0 }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        reader = RESPReader()
    }

    /// Connects (resolving the host), authenticates and selects the database.
    func connect() throws(RedisError) {
        close()
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(url.host, String(url.port), &hints, &list) == 0, let first = list else {
            throw RedisError(description: "cannot resolve \(url.host)", fromRedis: false)
        }
        defer { freeaddrinfo(list) }
        var failure = "cannot connect to \(url)"
        var a: UnsafeMutablePointer<addrinfo>? = first
        while let ai = a {
            let s = socket(ai.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if s >= 0 {
                let code = connectWithin(s, ai.pointee.ai_addr, ai.pointee.ai_addrlen)
                if code == 0 {
                    var one: Int32 = 1
                    _ = setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    fd = s
                    break
                }
                failure = "cannot connect to \(url): " + (code == ETIMEDOUT ? "timed out" : RedisConnection.describe(code))
                Glibc.close(s)
            }
            a = ai.pointee.ai_next
        }
        guard fd >= 0 else { throw RedisError(description: failure, fromRedis: false) }
        if let password = url.password {
            let r = try call(["AUTH", password])
            if case .error(let e) = r { throw RedisError(description: "AUTH: \(e)", fromRedis: true) }
        }
        if url.database != 0 {
            let r = try call(["SELECT", String(url.database)])
            if case .error(let e) = r { throw RedisError(description: "SELECT: \(e)", fromRedis: true) }
        }
    }

    /// 0 once connected within the time limit, else the error (ETIMEDOUT when it ran out).
    private func connectWithin(_ s: Int32, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) -> Int32 {
        let flags = fcntl(s, F_GETFL)
        _ = fcntl(s, F_SETFL, flags | O_NONBLOCK)
        if Glibc.connect(s, addr, len) != 0 {
            guard errno == EINPROGRESS else { return errno }
            var p = pollfd(fd: s, events: Int16(POLLOUT), revents: 0)
            guard poll(&p, 1, Int32(timeoutMs)) == 1 else { return ETIMEDOUT }
            var err: Int32 = 0
            var l = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l) == 0 else { return errno }
            if err != 0 { return err }
        }
        _ = fcntl(s, F_SETFL, flags)
        return 0
    }

    static func describe(_ code: Int32) -> String {
        guard let p = strerror(code) else { return "error \(code)" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: strlen(p)), as: UTF8.self)
    }

    /// Sends a command and reads its reply (`extraWaitMs` more for a blocking command). A
    /// connection failure closes the connection (the next call reconnects).
    @discardableResult
    func call(_ args: [String], extraWaitMs: Int = 0) throws(RedisError) -> RESPValue {
        try call(bytes: args.map { Array($0.utf8) }, extraWaitMs: extraWaitMs)
    }

    func call(bytes args: [[UInt8]], extraWaitMs: Int = 0) throws(RedisError) -> RESPValue {
        if fd < 0 { try connect() }
        guard sendAll(RESPValue.command(args)) else { return try fail("send") }
        let deadline = monotonicMs() + Int64(timeoutMs + extraWaitMs)
        var buf = [UInt8](repeating: 0, count: 65_536)
        while true {
            do {
                if let v = try reader.next() { return v }
            } catch {
                return try fail("a reply: \(error)")
            }
            let left = deadline - monotonicMs()
            guard left > 0 else { return try fail("a reply (timed out)") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(left, 1_000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { return try fail("poll") }
            if ready == 0 { continue }
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else { return try fail(n == 0 ? "a reply (connection closed)" : "recv") }
            buf.withUnsafeBytes { reader.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    /// Writes all of `bytes`; false when the connection failed.
    private func sendAll(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Sends `request` as it is and reads until the peer closes (at most `limit` bytes, within
    /// `timeoutMs`): an HTTP/1.1 exchange with `Connection: close` (`PeerHTTP`).
    func exchange(_ request: [UInt8], limit: Int, timeoutMs: Int) throws(RedisError) -> [UInt8] {
        if fd < 0 { try connect() }
        defer { close() }
        guard sendAll(request) else { throw RedisError(description: "send failed", fromRedis: false) }
        let deadline = monotonicMs() + Int64(timeoutMs)
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65_536)
        while true {
            let left = deadline - monotonicMs()
            guard left > 0 else { throw RedisError(description: "timed out", fromRedis: false) }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(left, 1_000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { throw RedisError(description: "poll failed", fromRedis: false) }
            if ready == 0 { continue }
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if n == 0 { return out }
            guard n > 0 else { throw RedisError(description: "recv failed", fromRedis: false) }
            out += buf[0..<n]
            guard out.count <= limit else { throw RedisError(description: "the answer is too large", fromRedis: false) }
        }
    }

    /// Sends `request` and hands over the socket (the caller reads and closes it): a stream
    /// another node answers for as long as it lasts (`PeerEventRelay`).
    func openStream(_ request: [UInt8]) throws(RedisError) -> Int32 {
        if fd < 0 { try connect() }
        guard sendAll(request) else {
            close()
            throw RedisError(description: "send failed", fromRedis: false)
        }
        defer { fd = -1 }
        return fd
    }

    private func fail(_ what: String) throws(RedisError) -> RESPValue {
        let code = errno
        let reason = code == 0 || what.hasSuffix(")") ? "" : ": " + RedisConnection.describe(code)
        close()
        throw RedisError(description: "Redis at \(url): \(what)\(reason)", fromRedis: false)
    }
}

/// Milliseconds on the monotonic clock.
func monotonicMs() -> Int64 { Int64(Clock.monotonicNanoseconds() / 1_000_000) }
