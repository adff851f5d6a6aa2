import CCurl
import CSystem
import Glibc
import PushCore
import Transport

/// HTTP/1.1 over plain TCP for one lane's tracking calls to `http://` sinks named by an IP
/// address or `localhost`: the local sinks that CI runs and campaign dry runs point at.
///
/// libcurl spent about 57,000 instructions of the lane's thread on each such call (its request
/// is printed a byte at a time, its status line parsed with `sscanf`, its connection checked
/// with a `poll` before reuse); this client makes the same exchange in a few thousand. Every
/// other URL (https, a host name to resolve, user info, a path libcurl would rewrite, a header
/// that frames the message) stays with libcurl, so behaviour does not depend on which one a
/// call took:
///
/// - the request is the one libcurl sends: `METHOD target HTTP/1.1`, `Host` (without a default
///   port), `Accept: */*` unless the call has its own, the call's headers (one whose value is
///   blank is left out, as libcurl does), and for a method other than GET its body with
///   `Content-Length`;
/// - connections are kept alive and reused, at most `maxPerHost` per address, a call waiting
///   for one when all are busy; a reused connection that the server had closed is replaced
///   once, before anything of the answer arrived, as libcurl retries it;
/// - the connect timeout and the whole call's timeout are libcurl's options, checked every few
///   milliseconds; failures carry libcurl's own messages (`curl_easy_strerror`);
/// - answers are read as RFC 9112 frames them (Content-Length, chunked, until close; no body for
///   HEAD, 1xx, 204 and 304), their head bounded to 100 KiB, their body read and dropped.
///
/// Owned by the lane's thread; its sockets are in the lane's epoll set, tagged with `tag`.
final class PlainHTTPClient {
    /// A finished call: the status (0 on a failure) and libcurl's message for the failure.
    struct Completion {
        let job: TrackingJob
        let status: Int
        let error: String?
        let startNs: UInt64
    }

    /// Set in the epoll data of this client's sockets (the fd is in the low 32 bits).
    static let tag: UInt64 = 1 << 40
    static let maxHead = 100 * 1024
    static let maxEndpoints = 64

    private let epfd: Int32
    private let maxPerHost: Int
    private let timeoutNs: UInt64
    private let connectTimeoutNs: UInt64
    private var endpoints: [[UInt8]: Endpoint] = [:]
    private var lastEndpoint: Endpoint?
    private var byFD: [Connection?] = []
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var nextSweepNs: UInt64 = 0
    /// Calls finished since the lane last took them (`takeCompletions`).
    private var completions: [Completion] = []
    /// Calls started and not finished.
    private(set) var active = 0

    init(epfd: Int32, maxPerHost: Int, timeoutMs: Int, connectTimeoutMs: Int) {
        self.epfd = epfd
        self.maxPerHost = max(1, maxPerHost)
        timeoutNs = UInt64(max(1, timeoutMs)) * 1_000_000
        connectTimeoutNs = UInt64(max(1, connectTimeoutMs)) * 1_000_000
    }

    deinit { closeAll() }

    // MARK: starting a call

    /// Starts `job` when its URL and headers are this client's to send; false leaves it to libcurl.
    func start(_ job: TrackingJob, nowNs: UInt64) -> Bool {
        var url = job.request.url
        guard let (endpoint, target) = url.withUTF8({ route($0) }) else { return false }
        guard let request = PlainHTTPClient.requestBytes(job.request, host: endpoint.hostHeader, target: target) else { return false }
        let call = Call(job: job, request: request, startNs: nowNs, deadlineNs: nowNs &+ timeoutNs, endpoint: endpoint)
        active += 1
        assign(call)
        return true
    }

    /// The endpoint and request target of an `http://` URL with an IP address or `localhost`.
    private func route(_ url: UnsafeBufferPointer<UInt8>) -> (Endpoint, ArraySlice<UInt8>)? {
        let schemeLength = 7
        guard url.count > schemeLength, url[0..<schemeLength].equalsIgnoringCase("http://") else { return nil }
        var end = schemeLength
        while end < url.count, url[end] != UInt8(ascii: "/"), url[end] != UInt8(ascii: "?") { end += 1 }
        let authority = UnsafeBufferPointer(rebasing: url[schemeLength..<end])
        var target = Array(url[end...])[...]
        if target.isEmpty { target = Array("/".utf8)[...] }
        if target.first == UInt8(ascii: "?") { target = (Array("/".utf8) + target)[...] }
        // What libcurl would rewrite or refuse goes to libcurl.
        for b in target where b <= 0x20 || b >= 0x7F || b == UInt8(ascii: "#") || b == UInt8(ascii: "\\") { return nil }
        if PlainHTTPClient.hasDotSegment(target) { return nil }
        // The last endpoint first: a lane's calls nearly always go to one sink.
        if let last = lastEndpoint, last.authority.count == authority.count,
            last.authority.withUnsafeBytes({ memcmp($0.baseAddress!, authority.baseAddress!, authority.count) == 0 })
        {
            return (last, target)
        }
        let key = Array(authority)
        if let known = endpoints[key] {
            lastEndpoint = known
            return (known, target)
        }
        guard endpoints.count < PlainHTTPClient.maxEndpoints, let made = Endpoint(authority: key) else { return nil }
        endpoints[key] = made
        lastEndpoint = made
        return (made, target)
    }

    /// `/./`, `/../` or a final `/.` or `/..` in the path (libcurl removes them).
    static func hasDotSegment(_ target: ArraySlice<UInt8>) -> Bool {
        let path = target.prefix { $0 != UInt8(ascii: "?") }
        var i = path.startIndex
        while i < path.endIndex {
            if path[i] == UInt8(ascii: "/") {
                var j = i + 1
                var dots = 0
                while j < path.endIndex, path[j] == UInt8(ascii: "."), dots < 3 {
                    dots += 1
                    j += 1
                }
                if (dots == 1 || dots == 2) && (j == path.endIndex || path[j] == UInt8(ascii: "/")) { return true }
            }
            i += 1
        }
        return false
    }

    /// The request as libcurl writes it, or nil when a header would need libcurl's handling
    /// (one that frames the message, or a name or value that is not a plain header line).
    static func requestBytes(_ r: TrackingRequest, host: [UInt8], target: ArraySlice<UInt8>) -> [UInt8]? {
        let method = r.method.uppercased()
        guard !method.isEmpty, method.utf8.allSatisfy({ isToken($0) }) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(128 + target.count + r.body.count)
        out.append(contentsOf: method.utf8)
        out.append(0x20)
        out.append(contentsOf: target)
        out.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        out.append(contentsOf: host)
        out.append(contentsOf: "\r\n".utf8)
        var accept = true
        var headerLines: [UInt8] = []
        for (name, value) in r.headers {
            guard !name.isEmpty, name.utf8.allSatisfy({ isToken($0) }) else { return nil }
            switch name.lowercased() {
            case "host", "content-length", "transfer-encoding", "connection", "expect", "te", "upgrade": return nil
            case "accept": accept = false
            default: break
            }
            guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { return nil }
            // libcurl leaves out a header whose value is blank.
            if value.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            headerLines.append(contentsOf: name.utf8)
            headerLines.append(contentsOf: ": ".utf8)
            headerLines.append(contentsOf: value.utf8)
            headerLines.append(contentsOf: "\r\n".utf8)
        }
        if accept { out.append(contentsOf: "Accept: */*\r\n".utf8) }
        out.append(contentsOf: headerLines)
        if method != "GET" {
            out.append(contentsOf: "Content-Length: ".utf8)
            out.append(contentsOf: String(r.body.count).utf8)
            out.append(contentsOf: "\r\n\r\n".utf8)
            out.append(contentsOf: r.body)
        } else {
            out.append(contentsOf: "\r\n".utf8)
        }
        return out
    }

    static func isToken(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    /// Gives `call` a connection: an idle one, a new one within `maxPerHost`, or a place in
    /// the endpoint's queue.
    private func assign(_ call: Call) {
        let e = call.endpoint
        while let c = e.idle.popLast() {
            if c.fd >= 0 {
                send(call, on: c)
                return
            }
        }
        if e.open < maxPerHost {
            connect(call, endpoint: e, address: 0)
        } else {
            e.waiting.append(call)
        }
    }

    private func connect(_ call: Call, endpoint e: Endpoint, address: Int) {
        let addr = e.addresses[address]
        let fd = csys_tcp_socket(addr.family)
        guard fd >= 0 else { return fail(call, CURLE_COULDNT_CONNECT) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let rc = addr.connect(fd)
        if rc != 0 && errno != EINPROGRESS {
            Glibc.close(fd)
            if address + 1 < e.addresses.count { return connect(call, endpoint: e, address: address + 1) }
            return fail(call, CURLE_COULDNT_CONNECT)
        }
        let c = Connection(fd: fd, endpoint: e, address: address)
        c.connectDeadlineNs = csys_monotonic_ns() &+ connectTimeoutNs
        e.open += 1
        if Int(fd) >= byFD.count { byFD.append(contentsOf: repeatElement(nil, count: Int(fd) + 64 - byFD.count)) }
        byFD[Int(fd)] = c
        c.call = call
        call.sent = 0 // a call moved off a dropped connection starts again
        c.connecting = true
        watch(c, CSYS_EPOLLOUT)
    }

    private func send(_ call: Call, on c: Connection) {
        c.call = call
        c.resetAnswer()
        call.sent = 0
        write(c)
    }

    // MARK: events

    /// An epoll event for one of this client's sockets.
    func handle(fd: Int32, events: UInt32) {
        guard fd >= 0, Int(fd) < byFD.count, let c = byFD[Int(fd)] else { return }
        if c.connecting {
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err != 0 || events & (CSYS_EPOLLERR | CSYS_EPOLLHUP) != 0 && events & CSYS_EPOLLOUT == 0 {
                guard let call = c.call else { return close(c) }
                let next = c.address + 1
                let e = c.endpoint
                c.call = nil
                close(c)
                if next < e.addresses.count { return connect(call, endpoint: e, address: next) }
                return fail(call, CURLE_COULDNT_CONNECT)
            }
            c.connecting = false
            write(c)
            return
        }
        if events & CSYS_EPOLLOUT != 0, let call = c.call, call.sent < call.request.count { write(c) }
        guard c.fd >= 0, events & (CSYS_EPOLLIN | CSYS_EPOLLERR | CSYS_EPOLLHUP) != 0 else { return }
        read(c)
    }

    private func write(_ c: Connection) {
        guard let call = c.call else { return }
        while call.sent < call.request.count {
            let n = call.request.withUnsafeBytes { raw in
                Glibc.send(c.fd, raw.baseAddress! + call.sent, raw.count - call.sent, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                call.sent += n
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                watch(c, CSYS_EPOLLIN | CSYS_EPOLLOUT)
                return
            }
            if n < 0 && errno == EINTR { continue }
            return broken(c, CURLE_SEND_ERROR)
        }
        watch(c, CSYS_EPOLLIN)
    }

    private func read(_ c: Connection) {
        while c.fd >= 0 {
            let n = readBuffer.withUnsafeMutableBytes { Glibc.recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                guard c.call != nil else { return close(c) } // an idle connection spoke: drop it
                let done = readBuffer.withUnsafeBytes { consume(c, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                if done { return }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n < 0 && errno == EINTR { continue }
            // End of stream, or reset.
            guard c.call != nil else { return close(c) }
            if n == 0, c.answerBytes > 0, case .untilClose = c.body, c.inBody { return complete(c, reusable: false) }
            return broken(c, c.answerBytes == 0 && n == 0 && !c.reused ? CURLE_GOT_NOTHING : CURLE_RECV_ERROR)
        }
    }

    /// A connection failed during a call: a reused one that had not answered yet is replaced
    /// once (the server closed it while idle); otherwise the call fails.
    private func broken(_ c: Connection, _ code: CURLcode) {
        guard let call = c.call else { return close(c) }
        c.call = nil
        let stale = c.reused && c.answerBytes == 0 && !call.retriedStale
        close(c)
        if stale {
            call.retriedStale = true
            return assign(call)
        }
        fail(call, code)
    }

    // MARK: the answer

    /// Feeds answer bytes; true when the call finished (the connection may be gone or idle).
    private func consume(_ c: Connection, _ bytes: UnsafeRawBufferPointer) -> Bool {
        c.answerBytes += bytes.count
        var i = 0
        while i < bytes.count {
            if !c.inBody {
                // Accumulate the head up to its blank line.
                let room = PlainHTTPClient.maxHead - c.head.count
                let take = min(room, bytes.count - i)
                let before = c.head.count
                c.head.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + take)]))
                guard let headEnd = PlainHTTPClient.headEnd(c.head, from: max(0, before - 3)) else {
                    if c.head.count >= PlainHTTPClient.maxHead {
                        broken(c, CURLE_WEIRD_SERVER_REPLY)
                        return true
                    }
                    return false
                }
                // The bytes after the head belong to the body (or to nothing).
                i += headEnd - before
                guard let head = PlainHTTPClient.parseHead(c.head[0..<headEnd], method: c.call?.method ?? "") else {
                    broken(c, CURLE_WEIRD_SERVER_REPLY)
                    return true
                }
                c.head.removeAll(keepingCapacity: true)
                if head.interim { continue } // 1xx: the real answer follows
                c.status = head.status
                c.keepAlive = head.keepAlive
                c.body = head.body
                c.inBody = true
                if case .length(0) = c.body {
                    return finishAnswer(c, extra: bytes.count - i)
                }
                continue
            }
            switch c.body {
            case .length(let left):
                let n = min(left, bytes.count - i)
                i += n
                c.body = .length(left - n)
                if left - n == 0 { return finishAnswer(c, extra: bytes.count - i) }
            case .untilClose:
                i = bytes.count
            case .chunked(var state):
                switch state.feed(bytes, from: &i) {
                case .more: c.body = .chunked(state)
                case .done: return finishAnswer(c, extra: bytes.count - i)
                case .invalid:
                    broken(c, CURLE_RECV_ERROR)
                    return true
                }
            }
        }
        return false
    }

    /// The answer is whole: the call succeeds with its status; the connection goes back to the
    /// pool when the server keeps it and sent nothing more.
    private func finishAnswer(_ c: Connection, extra: Int) -> Bool {
        // An answer that came before the whole request was sent (a server refusing early)
        // leaves the connection mid-request: it is not reused.
        let sentAll = c.call.map { $0.sent == $0.request.count } ?? false
        complete(c, reusable: c.keepAlive && extra == 0 && sentAll)
        return true
    }

    private func complete(_ c: Connection, reusable: Bool) {
        guard let call = c.call else { return }
        c.call = nil
        completions.append(Completion(job: call.job, status: c.status, error: nil, startNs: call.startNs))
        active -= 1
        let e = c.endpoint
        if reusable {
            c.reused = true
            c.resetAnswer()
            if !e.waiting.isEmpty {
                send(e.waiting.removeFirst(), on: c)
            } else {
                e.idle.append(c)
            }
        } else {
            close(c)
        }
    }

    private func fail(_ call: Call, _ code: CURLcode) {
        completions.append(Completion(job: call.job, status: 0, error: PlainHTTPClient.message(code), startNs: call.startNs))
        active -= 1
    }

    static func message(_ code: CURLcode) -> String { String(cString: curl_easy_strerror(code)) }

    /// The calls finished since the last time, in the order they finished.
    func takeCompletions() -> [Completion] {
        guard !completions.isEmpty else { return [] }
        let out = completions
        completions.removeAll(keepingCapacity: true)
        return out
    }

    // MARK: time

    /// Fails calls past their timeout and connections past their connect timeout (at most
    /// every 5 ms).
    func sweep(nowNs: UInt64) {
        guard active > 0, nowNs >= nextSweepNs else { return }
        nextSweepNs = nowNs &+ 5_000_000
        for case let c? in byFD where c.fd >= 0 {
            guard let call = c.call else { continue }
            if nowNs >= call.deadlineNs || (c.connecting && nowNs >= c.connectDeadlineNs) {
                c.call = nil
                close(c)
                fail(call, CURLE_OPERATION_TIMEDOUT)
            }
        }
        for e in endpoints.values where !e.waiting.isEmpty {
            let late = e.waiting.filter { nowNs >= $0.deadlineNs }
            guard !late.isEmpty else { continue }
            e.waiting.removeAll { nowNs >= $0.deadlineNs }
            for call in late { fail(call, CURLE_OPERATION_TIMEDOUT) }
        }
    }

    // MARK: sockets

    private func watch(_ c: Connection, _ events: UInt32) {
        guard c.events != events else { return }
        let data = PlainHTTPClient.tag | UInt64(UInt32(bitPattern: c.fd))
        if c.events == 0 {
            _ = csys_epoll_add(epfd, c.fd, events, data)
        } else {
            _ = csys_epoll_mod(epfd, c.fd, events, data)
        }
        c.events = events
    }

    /// Closes a connection; a call waiting for its endpoint gets a new one in its place.
    private func close(_ c: Connection) {
        guard c.fd >= 0 else { return }
        if c.events != 0 { _ = csys_epoll_del(epfd, c.fd) }
        byFD[Int(c.fd)] = nil
        Glibc.close(c.fd)
        c.fd = -1
        let e = c.endpoint
        e.open -= 1
        e.idle.removeAll { $0 === c }
        if !e.waiting.isEmpty && e.open < maxPerHost { connect(e.waiting.removeFirst(), endpoint: e, address: 0) }
    }

    /// Closes every connection (the lane is stopping; calls still open are not answered).
    func closeAll() {
        for e in endpoints.values { e.waiting.removeAll() }
        for case let c? in byFD {
            c.call = nil
            close(c)
        }
    }
}

extension PlainHTTPClient {
    /// One call: its request's bytes, how far they were sent, its deadline.
    final class Call {
        let job: TrackingJob
        let request: [UInt8]
        let startNs: UInt64
        let deadlineNs: UInt64
        let endpoint: Endpoint
        var sent = 0
        var retriedStale = false
        var method: String { job.request.method.uppercased() }

        init(job: TrackingJob, request: [UInt8], startNs: UInt64, deadlineNs: UInt64, endpoint: Endpoint) {
            self.job = job
            self.request = request
            self.startNs = startNs
            self.deadlineNs = deadlineNs
            self.endpoint = endpoint
        }
    }

    /// A URL's authority: the addresses to try in order, the `Host` header, and its connections.
    final class Endpoint {
        /// The URL's authority, as written.
        let authority: [UInt8]
        let addresses: [SocketAddress]
        let hostHeader: [UInt8]
        /// Connections open (connecting, busy or idle).
        var open = 0
        var idle: [Connection] = []
        var waiting: [Call] = []

        /// nil unless `authority` is an IPv4 address, a bracketed IPv6 address or `localhost`,
        /// with an optional port (1-65535).
        init?(authority: [UInt8]) {
            guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { return nil }
            self.authority = authority
            var host = authority[...]
            var port = 80
            if let colon = authority.lastIndex(of: UInt8(ascii: ":")),
                authority.last != UInt8(ascii: "]") || colon > (authority.lastIndex(of: UInt8(ascii: "]")) ?? 0)
            {
                let digits = authority[(colon + 1)...]
                if !digits.isEmpty {
                    guard digits.count <= 5, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                    port = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                    guard (1...65535).contains(port) else { return nil }
                }
                host = authority[..<colon]
            }
            guard !host.isEmpty else { return nil }
            let name = String(decoding: host, as: UTF8.self)
            if name.lowercased() == "localhost" {
                addresses = [SocketAddress(ipv4: "127.0.0.1", port: port), SocketAddress(ipv6: "::1", port: port)].compactMap { $0 }
            } else if host.first == UInt8(ascii: "["), host.last == UInt8(ascii: "]"), host.count > 2 {
                guard let a = SocketAddress(ipv6: String(decoding: host.dropFirst().dropLast(), as: UTF8.self), port: port) else {
                    return nil
                }
                addresses = [a]
            } else if let a = SocketAddress(ipv4: name, port: port) {
                addresses = [a]
            } else {
                return nil
            }
            // libcurl's Host header: the host as written, the port only when it is not 80.
            hostHeader = port == 80 ? Array(host) : Array(host) + Array(":\(port)".utf8)
        }
    }

    /// One TCP connection and the answer being read on it.
    final class Connection {
        var fd: Int32
        let endpoint: Endpoint
        /// The index in `endpoint.addresses` it connects to.
        let address: Int
        var events: UInt32 = 0
        var connecting = false
        var connectDeadlineNs: UInt64 = 0
        /// It carried a whole exchange before (so it may have been closed while idle).
        var reused = false
        var call: Call?
        // The answer being read.
        var head: [UInt8] = []
        var inBody = false
        var status = 0
        var keepAlive = true
        var body = AnswerBody.length(0)
        var answerBytes = 0

        init(fd: Int32, endpoint: Endpoint, address: Int) {
            self.fd = fd
            self.endpoint = endpoint
            self.address = address
        }

        func resetAnswer() {
            head.removeAll(keepingCapacity: true)
            inBody = false
            status = 0
            keepAlive = true
            body = .length(0)
            answerBytes = 0
        }
    }

    /// An IPv4 or IPv6 socket address.
    struct SocketAddress {
        private var storage = sockaddr_storage()
        let family: Int32
        private let length: socklen_t

        init?(ipv4: String, port: Int) {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET, ipv4, &a.sin_addr) == 1 else { return nil }
            self.init(family: AF_INET, address: a)
        }

        init?(ipv6: String, port: Int) {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, ipv6, &a.sin6_addr) == 1 else { return nil }
            self.init(family: AF_INET6, address: a)
        }

        private init<Address>(family: Int32, address: Address) {
            self.family = family
            length = socklen_t(MemoryLayout<Address>.size)
            withUnsafeMutableBytes(of: &storage) { s in withUnsafeBytes(of: address) { s.copyMemory(from: $0) } }
        }

        /// `connect(2)` on a nonblocking socket: 0, or -1 with errno (EINPROGRESS while it goes on).
        func connect(_ fd: Int32) -> Int32 {
            var s = storage
            return withUnsafePointer(to: &s) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) } }
        }
    }
}
