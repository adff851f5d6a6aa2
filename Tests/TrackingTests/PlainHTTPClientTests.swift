import Foundation
import Glibc
import PushCore
import Synchronization
import XCTest

@testable import Tracking

/// The lane's own HTTP/1.1 client for `http://` sinks at an IP address or `localhost`: which
/// calls it takes, the bytes it sends, how it reads answers, and how it fails (with libcurl's
/// messages), against scripted servers.
final class PlainHTTPClientTests: XCTestCase {
    // MARK: what it takes, what it sends

    func testEndpointsAreLiteralAddressesOrLocalhost() {
        func endpoint(_ s: String) -> PlainHTTPClient.Endpoint? { PlainHTTPClient.Endpoint(authority: Array(s.utf8)) }
        XCTAssertEqual(endpoint("127.0.0.1:8080")?.hostHeader, Array("127.0.0.1:8080".utf8))
        XCTAssertEqual(endpoint("127.0.0.1")?.hostHeader, Array("127.0.0.1".utf8))
        XCTAssertEqual(endpoint("127.0.0.1:80")?.hostHeader, Array("127.0.0.1".utf8)) // libcurl leaves out the default port
        XCTAssertEqual(endpoint("[::1]:9")?.hostHeader, Array("[::1]:9".utf8))
        XCTAssertEqual(endpoint("[::1]")?.addresses.map(\.family), [AF_INET6])
        XCTAssertEqual(endpoint("localhost:1")?.addresses.map(\.family), [AF_INET, AF_INET6])
        XCTAssertNotNil(endpoint("LocalHost"))
        for refused in [
            "example.com", "t.example.com:80", "user@127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:8x", "127.1", "", ":80",
            "[::1", "[zz]:1",
        ] {
            XCTAssertNil(endpoint(refused), refused)
        }
    }

    func testDotSegmentsAreLeftToLibcurl() {
        func has(_ s: String) -> Bool { PlainHTTPClient.hasDotSegment(Array(s.utf8)[...]) }
        for yes in ["/a/./b", "/a/../b", "/a/..", "/.", "/..?x", "/a/.?q=1"] { XCTAssertTrue(has(yes), yes) }
        for no in ["/a/.b", "/...", "/a..b/", "/r/?id=../x", "/a/b"] { XCTAssertFalse(has(no), no) }
    }

    func testRequestBytesAreLibcurls() throws {
        let host = Array("127.0.0.1:9".utf8)
        func bytes(_ r: TrackingRequest, _ target: String = "/r/?id=1") -> String? {
            PlainHTTPClient.requestBytes(r, host: host, target: Array(target.utf8)[...]).map { String(decoding: $0, as: UTF8.self) }
        }
        XCTAssertEqual(
            bytes(TrackingRequest(method: "GET", url: "")),
            "GET /r/?id=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nAccept: */*\r\n\r\n")
        var post = TrackingRequest(method: "post", url: "")
        post.headers = [("Content-Type", "application/json"), ("X-Blank", " "), ("Accept", "application/json")]
        post.body = Array(#"{"a":1}"#.utf8)
        XCTAssertEqual(
            bytes(post, "/v1/events"),
            "POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
                + "Content-Length: 7\r\n\r\n{\"a\":1}")
        var empty = TrackingRequest(method: "PUT", url: "")
        empty.body = []
        XCTAssertEqual(bytes(empty), "PUT /r/?id=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nAccept: */*\r\nContent-Length: 0\r\n\r\n")
        // What frames the message, or is not a plain header line, is libcurl's to send.
        for header in [
            ("Content-Length", "1"), ("Transfer-Encoding", "chunked"), ("Host", "x"), ("Connection", "close"), ("X-A", "a\r\nX-B: b"),
            ("Bad Name", "v"),
        ] {
            var r = TrackingRequest(method: "GET", url: "")
            r.headers = [header]
            XCTAssertNil(bytes(r), "\(header)")
        }
        XCTAssertNil(bytes(TrackingRequest(method: "GE T", url: "")))
    }

    // MARK: reading answers

    func testAnswerHeads() throws {
        func head(_ s: String, method: String = "GET") -> AnswerHead? {
            PlainHTTPClient.parseHead(Array(s.utf8)[...], method: method)
        }
        func length(_ h: AnswerHead?) -> Int? { if case .length(let n)? = h?.body { return n } else { return nil } }
        func untilClose(_ h: AnswerHead?) -> Bool { if case .untilClose? = h?.body { return true } else { return false } }
        func chunked(_ h: AnswerHead?) -> Bool { if case .chunked? = h?.body { return true } else { return false } }

        let ok = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n")
        XCTAssertEqual(ok?.status, 200)
        XCTAssertEqual(ok?.keepAlive, true)
        XCTAssertEqual(length(ok), 12)
        XCTAssertEqual(head("HTTP/1.1 204\r\n\r\n")?.status, 204)
        XCTAssertEqual(length(head("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n")), 0)
        XCTAssertEqual(length(head("HTTP/1.1 304 Not Modified\r\n\r\n")), 0)
        XCTAssertEqual(length(head("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", method: "HEAD")), 0)
        XCTAssertEqual(head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")?.keepAlive, false)
        XCTAssertEqual(head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")?.keepAlive, false)
        XCTAssertEqual(head("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n")?.keepAlive, true)
        XCTAssertTrue(chunked(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n")))
        let gzipOnly = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n")
        XCTAssertTrue(untilClose(gzipOnly))
        XCTAssertEqual(gzipOnly?.keepAlive, false)
        let noLength = head("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n")
        XCTAssertTrue(untilClose(noLength))
        XCTAssertEqual(noLength?.keepAlive, false)
        XCTAssertEqual(head("HTTP/1.1 100 Continue\r\n\r\n")?.interim, true)
        XCTAssertEqual(head("HTTP/1.1 200 OK\nContent-Length: 1\n\n")?.status, 200) // bare LF, as libcurl accepts
        XCTAssertEqual(length(head("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n")), 4)
        for weird in [
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "HTTP/2 200\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n", "ICY 200 OK\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP/1.1 099 x\r\n\r\n",
        ] {
            XCTAssertNil(head(weird), weird)
        }
        XCTAssertEqual(PlainHTTPClient.headEnd(Array("HTTP/1.1 200 OK\r\n\r\nbody".utf8), from: 0), 19)
        XCTAssertEqual(PlainHTTPClient.headEnd(Array("HTTP/1.1 200 OK\n\nbody".utf8), from: 0), 17)
        XCTAssertNil(PlainHTTPClient.headEnd(Array("HTTP/1.1 200 OK\r\nA: b\r\n".utf8), from: 0))
    }

    /// A chunked body ends exactly after its last byte, however its bytes are split.
    func testChunkedBodiesAtEverySplit() {
        let body = Array("4;ext=1\r\nWiki\r\n5 \r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\n".utf8)
        for split in 0...body.count {
            var state = ChunkedBody()
            var result = ChunkedBody.Step.more
            var consumed = 0
            body.withUnsafeBytes { all in
                for part in [UnsafeRawBufferPointer(rebasing: all[0..<split]), UnsafeRawBufferPointer(rebasing: all[split...])] {
                    var i = 0
                    result = state.feed(part, from: &i)
                    consumed += i
                    if result != .more { break }
                }
            }
            XCTAssertEqual(result, .done, "split at \(split)")
            XCTAssertEqual(consumed, body.count, "split at \(split)")
        }
        for bad in [
            "x\r\n", "4\r\nWikiX\r\n", "1234567890abcdef0\r\n", ";\r\n",
            String(repeating: "1", count: 3) + String(repeating: " ", count: 5000),
        ] {
            var state = ChunkedBody()
            var i = 0
            let step = Array(bad.utf8).withUnsafeBytes { state.feed($0, from: &i) }
            XCTAssertEqual(step, .invalid, bad.prefix(30).description)
        }
    }

    // MARK: against scripted servers

    /// Keep-alive: sequential calls share one connection; chunked, close-delimited and 1xx
    /// answers are read to their end; each attempt is recorded with its status.
    func testAnswersOfEveryFramingOverOneConnection() throws {
        let server = try ScriptedServer { index, _ in
            switch index {
            case 0: return .answer("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            case 1:
                return .answer(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
            case 2: return .answer("HTTP/1.1 204 No Content\r\n\r\n")
            default: return .answerAndClose("HTTP/1.1 202 Accepted\r\n\r\nread until the connection closes")
            }
        }
        defer { server.stop() }
        let (dispatcher, log) = start()
        defer { dispatcher.stop() }
        for i in 0..<4 {
            dispatcher.submit(job("http://127.0.0.1:\(server.port)/t\(i)?n=\(i)", id: i))
            XCTAssertTrue(wait { log.counters.attempts == UInt64(i + 1) }, "call \(i)")
        }
        let attempts = log.query(TrackingLog.Filter()).sorted { $0.sequence < $1.sequence }
        XCTAssertEqual(attempts.map(\.status), [200, 201, 204, 202])
        XCTAssertEqual(attempts.map(\.outcome), ["succeeded", "succeeded", "succeeded", "succeeded"])
        XCTAssertEqual(server.connections, 1)
        XCTAssertEqual(server.targets, ["/t0?n=0", "/t1?n=1", "/t2?n=2", "/t3?n=3"])
    }

    /// A kept connection the server closed while idle is replaced without a failed attempt.
    func testAnIdleConnectionTheServerClosedIsReplaced() throws {
        let server = try ScriptedServer { index, _ in
            index == 0
                ? .answerAndCloseLater("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                : .answer("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        }
        defer { server.stop() }
        let (dispatcher, log) = start()
        defer { dispatcher.stop() }
        dispatcher.submit(job("http://127.0.0.1:\(server.port)/a", id: 0))
        XCTAssertTrue(wait { log.counters.succeeded == 1 })
        XCTAssertTrue(wait { server.closedByServer == 1 })
        usleep(50_000)
        dispatcher.submit(job("http://127.0.0.1:\(server.port)/b", id: 1))
        XCTAssertTrue(wait { log.counters.succeeded == 2 })
        XCTAssertEqual(log.counters.failed + log.counters.retried, 0)
        XCTAssertEqual(server.connections, 2)
    }

    /// A kept connection that the server drops as the next request arrives (its keep-alive
    /// timeout firing at that moment) is replaced once, and the call succeeds on the new one.
    func testAKeptConnectionDroppedOnReuseIsReplacedOnce() throws {
        let server = try ScriptedServer { index, _ in
            index == 1 ? .close : .answer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        defer { server.stop() }
        let (dispatcher, log) = start()
        defer { dispatcher.stop() }
        dispatcher.submit(job("http://127.0.0.1:\(server.port)/a", id: 0))
        XCTAssertTrue(wait { log.counters.succeeded == 1 })
        dispatcher.submit(job("http://127.0.0.1:\(server.port)/b", id: 1))
        XCTAssertTrue(wait { log.counters.succeeded == 2 })
        XCTAssertEqual(log.counters.failed + log.counters.retried, 0)
        XCTAssertEqual(server.connections, 2)
        XCTAssertEqual(server.targets, ["/a", "/b", "/b"])
    }

    /// Failures carry libcurl's messages and status 0, and are retried like libcurl's.
    func testFailuresCarryLibcurlsMessages() throws {
        // Refused: a port nothing listens on.
        let closed = try ScriptedServer { _, _ in .answer("") }
        let port = closed.port
        closed.stop()
        var o = TrackingDispatcher.Options()
        o.threads = 1
        o.maxAttempts = 2
        o.backoffBaseMs = 10
        o.timeoutMs = 300
        let (refusing, refusedLog) = start(o)
        refusing.submit(job("http://127.0.0.1:\(port)/r", id: 0))
        XCTAssertTrue(wait { refusedLog.counters.failed == 1 })
        refusing.stop()
        let refused = refusedLog.query(TrackingLog.Filter()).sorted { $0.sequence < $1.sequence }
        XCTAssertEqual(refused.map(\.outcome), ["retrying", "failed"])
        XCTAssertEqual(refused.map(\.status), [0, 0])
        XCTAssertEqual(refused.first?.error, "Couldn't connect to server") // libcurl's CURLE_COULDNT_CONNECT

        // Silent: the call times out; nothing: the server closes without a byte; weird: not HTTP.
        let server = try ScriptedServer { index, _ in
            switch index {
            case 0: return .silent
            case 1: return .close
            default: return .answer("SSH-2.0-OpenSSH\r\n\r\n")
            }
        }
        defer { server.stop() }
        o.maxAttempts = 1
        let (d, log) = start(o)
        defer { d.stop() }
        for i in 0..<3 {
            d.submit(job("http://127.0.0.1:\(server.port)/f\(i)", id: i))
            XCTAssertTrue(wait { log.counters.failed == UInt64(i + 1) }, "call \(i)")
        }
        let errors = log.query(TrackingLog.Filter()).sorted { $0.sequence < $1.sequence }.map { $0.error ?? "" }
        XCTAssertEqual(
            errors,
            // libcurl's messages for CURLE_OPERATION_TIMEDOUT, CURLE_GOT_NOTHING, CURLE_WEIRD_SERVER_REPLY
            ["Timeout was reached", "Server returned nothing (no headers, no data)", "Weird server reply"])
    }

    /// Calls beyond `maxPerHost` wait for a connection instead of opening more.
    func testConnectionsPerHostAreBounded() throws {
        let server = try ScriptedServer { _, _ in .answerAfter(0.05, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") }
        defer { server.stop() }
        var o = TrackingDispatcher.Options()
        o.threads = 1
        o.maxPerHost = 2
        o.maxInFlight = 8
        let (d, log) = start(o)
        defer { d.stop() }
        for i in 0..<12 { d.submit(job("http://localhost:\(server.port)/c\(i)", id: i)) }
        XCTAssertTrue(wait { log.counters.succeeded == 12 })
        XCTAssertEqual(server.connections, 2)
        XCTAssertLessThanOrEqual(server.maxConcurrent, 2)
    }

    // MARK: helpers

    func start(_ options: TrackingDispatcher.Options? = nil) -> (TrackingDispatcher, TrackingLog) {
        var o = options ?? TrackingDispatcher.Options()
        o.threads = 1
        let log = TrackingLog()
        let d = TrackingDispatcher(options: o, log: log)
        d.start()
        return (d, log)
    }

    func job(_ url: String, id: Int) -> TrackingJob {
        TrackingJob(
            request: TrackingRequest(method: "GET", url: url), event: .receive, preset: "webhook", token: "t",
            notificationID: "n\(id)", notBeforeMs: 0)
    }

    func wait(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() && Date() < deadline { usleep(5_000) }
        return condition()
    }
}

/// A TCP server on 127.0.0.1 that answers each request (the n-th over all connections) as its
/// script says, one thread per connection, blocking sockets.
final class ScriptedServer: @unchecked Sendable {
    enum Action {
        case answer(String)
        case answerAfter(Double, String)
        case answerAndClose(String)
        /// Answer, then close the connection 100 ms later (while the client keeps it idle).
        case answerAndCloseLater(String)
        case silent
        case close
    }

    private let listener: Int32
    let port: Int
    private let script: @Sendable (Int, Int) -> Action
    private let state = Mutex<
        (requests: Int, connections: Int, open: Int, maxOpen: Int, closedByServer: Int, targets: [String], fds: [Int32])
    >(
        (0, 0, 0, 0, 0, [], []))
    private let stopping = Atomic<Bool>(false)
    private var acceptThread: Thread?

    var connections: Int { state.withLock { $0.connections } }
    var maxConcurrent: Int { state.withLock { $0.maxOpen } }
    var closedByServer: Int { state.withLock { $0.closedByServer } }
    var targets: [String] { state.withLock { $0.targets } }

    init(_ script: @escaping @Sendable (_ request: Int, _ connection: Int) -> Action) throws {
        self.script = script
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else { throw NSError(domain: "ScriptedServer", code: Int(errno)) }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &len) } }
        port = Int(UInt16(bigEndian: a.sin_port))
        let t = Thread { [self] in acceptLoop() }
        acceptThread = t
        t.start()
    }

    func stop() {
        stopping.store(true, ordering: .releasing)
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        for fd in state.withLock({ $0.fds }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while !stopping.load(ordering: .acquiring) {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            let index = state.withLock { s -> Int in
                s.connections += 1
                s.open += 1
                s.maxOpen = max(s.maxOpen, s.open)
                s.fds.append(fd)
                return s.connections - 1
            }
            Thread { [self] in serve(fd, connection: index) }.start()
        }
    }

    private func serve(_ fd: Int32, connection: Int) {
        defer {
            state.withLock { $0.open -= 1 }
            Glibc.close(fd)
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopping.load(ordering: .acquiring) {
            // One request head (the tests send no bodies).
            var end: Int?
            while end == nil {
                if let e = PlainHTTPClient.headEnd(pending, from: 0) {
                    end = e
                    break
                }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { return }
                pending.append(contentsOf: buffer[0..<n])
            }
            let head = String(decoding: pending[0..<end!], as: UTF8.self)
            pending.removeFirst(end!)
            let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            let index = state.withLock { s -> Int in
                s.targets.append(target)
                s.requests += 1
                return s.requests - 1
            }
            func send(_ s: String) { _ = Array(s.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
            switch script(index, connection) {
            case .answer(let s): send(s)
            case .answerAfter(let seconds, let s):
                usleep(UInt32(seconds * 1_000_000))
                send(s)
            case .answerAndClose(let s):
                send(s)
                return
            case .answerAndCloseLater(let s):
                send(s)
                usleep(100_000)
                state.withLock { $0.closedByServer += 1 }
                return
            case .silent:
                while !stopping.load(ordering: .acquiring) {
                    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if n <= 0 { return }
                }
                return
            case .close:
                return
            }
        }
    }
}
