import Foundation
import PushCore
import TestSupport
import XCTest

@testable import Tracking

/// Tracking URLs reach the sink as libcurl's own parse would send them, whether the dispatcher
/// hands libcurl a pre-parsed URL (`CurlURLs`) or the text alone.
final class TrackingURLTests: XCTestCase {
    /// Which URLs take the pre-parsed path, and where their path and query start.
    func testSplitTakesOnlyURLsLibcurlWouldNotChange() {
        func split(_ s: String) -> [Int?]? {
            var s = s
            return s.withUTF8 { CurlURLs.split($0) }.map { [$0.pathStart, $0.queryStart] }
        }
        XCTAssertEqual(split("http://127.0.0.1:9/r/?id=h1,2,1"), [18, 22])
        XCTAssertEqual(split("https://t.example.com/path"), [21, nil])
        XCTAssertEqual(split("http://h/a?b=c&d=e"), [8, 11])
        XCTAssertNil(split("http://h/a/../b")) // dot segments are removed by libcurl
        XCTAssertNil(split("http://h/./b"))
        XCTAssertNil(split("http://h/p%41")) // percent-encodings are normalised
        XCTAssertNil(split("http://h/a b")) // not printable ASCII
        XCTAssertNil(split("http://h/a#frag"))
        XCTAssertNil(split("http://h/a\\b"))
        XCTAssertNil(split("http://h?x=1")) // no path
        XCTAssertNil(split("http://h/r?")) // an empty query
        XCTAssertNil(split("http:///r")) // no host
        XCTAssertNil(split("127.0.0.1/r")) // no scheme
        XCTAssertNil(split("http://h/é"))
    }

    /// Each URL arrives with the request target and Host libcurl's parse gives it, and one easy
    /// handle moving between two servers (pre-parsed authority changing) reaches each.
    func testRequestsReachTheSinkAsLibcurlWouldSendThem() throws {
        let a = try TrackingSink()
        let b = try TrackingSink()
        defer {
            a.stop()
            b.stop()
        }
        var o = TrackingDispatcher.Options()
        o.threads = 1
        o.maxInFlight = 1 // one easy handle, reused for every request
        let log = TrackingLog()
        let d = TrackingDispatcher(options: o, log: log)
        d.start()
        defer { d.stop() }
        let hostA = "127.0.0.1:\(a.port)"
        let hostB = "127.0.0.1:\(b.port)"
        let cases: [(url: String, sink: TrackingSink, target: String)] = [
            ("http://\(hostA)/r/?id=h75bcd15,campaign-42,1", a, "/r/?id=h75bcd15,campaign-42,1"),
            ("http://\(hostB)/r/?id=h1,2,2", b, "/r/?id=h1,2,2"),
            ("http://\(hostA)/only/path", a, "/only/path"),
            ("HTTP://\(hostB)/upper?x=1", b, "/upper?x=1"),
            ("http://\(hostA)/a/../dedotted?q=1", a, "/dedotted?q=1"),
            ("http://\(hostB)?x=1", b, "/?x=1"),
            ("http://\(hostA)/kept%2Fslash?v=%41", a, "/kept%2Fslash?v=%41"),
            ("http://\(hostB)/r/?id=h3,4,1", b, "/r/?id=h3,4,1"),
        ]
        for (i, c) in cases.enumerated() {
            let before = c.sink.count
            d.submit(
                TrackingJob(
                    request: TrackingRequest(method: "GET", url: c.url), event: .receive, preset: "webhook",
                    token: "t", notificationID: "n\(i)", notBeforeMs: 0))
            // One at a time, so each request's order and sink are known.
            XCTAssertEqual(c.sink.wait(for: before + 1), before + 1, c.url)
        }
        let expectedA = cases.filter { $0.sink === a }.map(\.target)
        let expectedB = cases.filter { $0.sink === b }.map(\.target)
        XCTAssertEqual(a.requests.map(\.target), expectedA)
        XCTAssertEqual(b.requests.map(\.target), expectedB)
        XCTAssertEqual(Set(a.requests.compactMap { $0.headers["host"] }), [hostA])
        XCTAssertEqual(Set(b.requests.compactMap { $0.headers["host"] }), [hostB])
        // The sink has the last request before the dispatcher has its answer: wait (bounded).
        let deadline = Date().addingTimeInterval(5)
        while log.counters.succeeded < UInt64(cases.count) && Date() < deadline { usleep(5_000) }
        XCTAssertEqual(log.counters.succeeded, UInt64(cases.count))
    }

    /// https tracking: the server is verified against the configured CA (by the name in the
    /// URL, pre-parsed or not), and a server the CAs do not vouch for fails every attempt,
    /// recorded with libcurl's error, without a response status.
    func testHTTPSTrackingVerifiesTheServer() throws {
        let sink = try TrackingSink(tls: true)
        defer { sink.stop() }
        var o = TrackingDispatcher.Options()
        o.threads = 1
        o.caFile = ServerProcess.repositoryRoot + "/Certs/ca.pem"
        let log = TrackingLog()
        let d = TrackingDispatcher(options: o, log: log)
        d.start()
        defer { d.stop() }
        let urls = [sink.url + "/r/?id=h1,2,1", sink.url + "/a/../r/?id=h3,4,2", "https://127.0.0.1:\(sink.port)/ip?x=1"]
        for (i, u) in urls.enumerated() {
            d.submit(
                TrackingJob(
                    request: TrackingRequest(method: "GET", url: u), event: .receive, preset: "webhook",
                    token: "t\(i)", notificationID: "n\(i)", notBeforeMs: 0))
        }
        XCTAssertEqual(sink.wait(for: urls.count), urls.count)
        XCTAssertEqual(Set(sink.requests.map(\.target)), ["/r/?id=h1,2,1", "/r/?id=h3,4,2", "/ip?x=1"])

        var untrusted = TrackingDispatcher.Options()
        untrusted.threads = 1
        untrusted.maxAttempts = 2
        untrusted.backoffBaseMs = 10
        untrusted.caFile = ServerProcess.repositoryRoot + "/Certs/apns-sandbox-client.pem" // neither the issuer nor the server
        let failLog = TrackingLog()
        let f = TrackingDispatcher(options: untrusted, log: failLog)
        f.start()
        defer { f.stop() }
        f.submit(
            TrackingJob(
                request: TrackingRequest(method: "GET", url: sink.url + "/r/?id=h5,6,1"), event: .receive,
                preset: "webhook", token: "t", notificationID: "n", notBeforeMs: 0))
        let deadline = Date().addingTimeInterval(10)
        while failLog.counters.failed < 1 && Date() < deadline { usleep(10_000) }
        let attempts = failLog.query(TrackingLog.Filter())
        XCTAssertEqual(attempts.map(\.outcome), ["retrying", "failed"])
        XCTAssertEqual(attempts.map(\.status), [0, 0])
        XCTAssertTrue(
            attempts.allSatisfy { ($0.error ?? "").contains("certificate") || ($0.error ?? "").contains("SSL") },
            attempts.map { $0.error ?? "nil" }.joined(separator: "; "))
        XCTAssertEqual(sink.count, urls.count) // no request got through
    }
}
