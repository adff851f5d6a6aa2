import XCTest

@testable import Transport

final class RouterTests: XCTestCase {
    func path(_ s: String) -> ArraySlice<UInt8> { ArraySlice(Array(s.utf8)) }

    func testLiteralParameterAndRest() {
        var r = Router()
        r.add(.get, "/healthz") { _ in }
        r.add(.post, "/3/device/*") { _ in }
        r.add(.post, "/v1/projects/{project}/messages:send") { _ in }
        r.add([.get, .delete], "/emulator/v1/faults/{id}") { _ in }

        guard case .route(let a, _) = r.match(method: .get, path: path("/healthz")) else { return XCTFail() }
        XCTAssertEqual(r.routes[a].pattern, "/healthz")
        guard case .route(_, let p) = r.match(method: .post, path: path("/3/device/abcd")) else { return XCTFail() }
        XCTAssertEqual(p.value(0, in: path("/3/device/abcd")).utf8String, "abcd")
        guard case .route(_, let p2) = r.match(method: .post, path: path("/3/device/")) else { return XCTFail() }
        XCTAssertEqual(p2.value(0, in: path("/3/device/")).utf8String, "")
        guard case .route(_, let p3) = r.match(method: .post, path: path("/v1/projects/my-proj/messages:send")) else { return XCTFail() }
        XCTAssertEqual(p3.value(0, in: path("/v1/projects/my-proj/messages:send")).utf8String, "my-proj")

        if case .route = r.match(method: .post, path: path("/v1/projects//messages:send")) { XCTFail("empty parameter matched") }
        if case .route = r.match(method: .get, path: path("/healthz/")) { XCTFail("trailing slash matched") }
        if case .route = r.match(method: .get, path: path("/healthzz")) { XCTFail() }
        if case .route = r.match(method: .post, path: path("/3/device")) { XCTFail() }
        if case .route = r.match(method: .get, path: path("healthz")) { XCTFail() }
    }

    /// Through a connection's route memo, every request is routed as without it: the same
    /// route, its parameters read from this request's path (wherever the path lies in its
    /// buffer), 404s and 405s, and a host's routes.
    func testTheRouteMemoRoutesAsTheRouterDoes() {
        var r = Router()
        r.add(.get, "/healthz") { _ in }
        r.add(.post, "/3/device/*") { _ in }
        r.add(.post, "/v1/projects/{project}/messages:send") { _ in }
        r.add([.get, .delete], "/emulator/v1/faults/{id}") { _ in }
        r.add([.post], "/{token}", host: "fcm.example") { _ in }
        func describe(_ m: Router.Match, _ p: ArraySlice<UInt8>) -> String {
            switch m {
            case .route(let i, let params):
                return "\(r.routes[i].pattern) " + (0..<params.count).map { params.value($0, in: p).utf8String }.joined(separator: ",")
            case .methodNotAllowed(let allowed): return "405 \(allowed)"
            case .notFound: return "404"
            }
        }
        let requests: [(HTTPMethod, String)] = [
            (.post, "/v1/projects/p1/messages:send"), (.post, "/v1/projects/p1/messages:send"), (.post, "/v1/projects/p1/messages:send"),
            (.post, "/v1/projects/p2/messages:send"), (.post, "/v1/projects/p2/messages:send"), (.get, "/v1/projects/p2/messages:send"),
            (.post, "/v1/projects/p2/messages:send"), (.post, "/3/device/aaaa"), (.post, "/3/device/aaaa"), (.post, "/3/device/aaaa"),
            (.post, "/3/device/bbbb"), (.delete, "/emulator/v1/faults/f1"), (.delete, "/emulator/v1/faults/f1"),
            (.delete, "/emulator/v1/faults/f1"), (.post, "/emulator/v1/faults/f1"), (.post, "/emulator/v1/faults/f1"),
            (.post, "/abcdefghij"), (.post, "/abcdefghij"), (.post, "/abcdefghij"), (.get, "/healthz"), (.get, "/healthz"),
        ]
        var memo = RouteMemo()
        for (k, (method, text)) in requests.enumerated() {
            // The path at another offset each time, as it lies in a request's header buffer.
            let buffer = Array(repeating: UInt8(ascii: "x"), count: k) + Array(text.utf8)
            let p = buffer[k...]
            for authority in ["fcm.example", "other.example"] {
                var copy = memo
                let plain = r.match(method: method, path: p, authority: Array(authority.utf8)[...])
                let through = r.match(method: method, path: p, authority: Array(authority.utf8)[...], memo: &copy)
                XCTAssertEqual(describe(through, p), describe(plain, p), "\(method) \(text) at \(k) for \(authority)")
            }
            _ = r.match(method: method, path: p, authority: Array("fcm.example".utf8)[...], memo: &memo)
        }
    }

    func testMethodNotAllowedListsAllowedMethods() {
        var r = Router()
        r.add([.get, .delete], "/x/{id}") { _ in }
        guard case .methodNotAllowed(let allowed) = r.match(method: .post, path: path("/x/1")) else { return XCTFail() }
        XCTAssertEqual(allowed, [.get, .delete])
        guard case .notFound = r.match(method: .post, path: path("/y")) else { return XCTFail() }
    }

    /// The first-segment index keeps the order routes were added in, across routes whose first
    /// segment is a literal and routes whose first segment is a parameter or `*`.
    func testFirstMatchWinsAcrossLiteralAndParameterFirstSegments() {
        var r = Router()
        r.add(.get, "/{any}/x") { _ in } // 0
        r.add(.get, "/a/x") { _ in } // 1: shadowed by 0
        r.add(.get, "/a/y") { _ in } // 2
        r.add(.get, "/*") { _ in } // 3
        r.add(.get, "/a/z") { _ in } // 4: shadowed by 3
        r.add(.get, "/b/y") { _ in } // 5: a first segment first seen after the wildcards
        r.add(.post, "/b/{id}") { _ in } // 6
        func route(_ m: HTTPMethod, _ p: String) -> Int? {
            if case .route(let i, _) = r.match(method: m, path: path(p)) { return i }
            return nil
        }
        XCTAssertEqual(route(.get, "/a/x"), 0)
        XCTAssertEqual(route(.get, "/zz/x"), 0)
        XCTAssertEqual(route(.get, "/a/y"), 2)
        XCTAssertEqual(route(.get, "/a/z"), 3)
        XCTAssertEqual(route(.get, "/b/y"), 3)
        XCTAssertEqual(route(.get, "/other"), 3)
        XCTAssertEqual(route(.get, "/"), 3)
        XCTAssertEqual(route(.post, "/b/7"), 6)
        XCTAssertNil(route(.get, "nothing"))
        // Allowed methods are gathered from every route the path matches, in order.
        var s = Router()
        s.add(.get, "/b/{id}") { _ in }
        s.add(.put, "/{kind}/1") { _ in }
        s.add(.delete, "/b/1") { _ in }
        guard case .methodNotAllowed(let allowed) = s.match(method: .post, path: path("/b/1")) else { return XCTFail() }
        XCTAssertEqual(allowed, [.get, .put, .delete])
        guard case .notFound = s.match(method: .post, path: path("/c/2")) else { return XCTFail() }
    }

    func testRoot() {
        var r = Router()
        r.add(.get, "/") { _ in }
        guard case .route = r.match(method: .get, path: path("/")) else { return XCTFail() }
        guard case .notFound = r.match(method: .get, path: path("/a")) else { return XCTFail() }
    }
}

final class HTTPFieldsTests: XCTestCase {
    func testAddFirstCountPairs() {
        var f = HTTPFields()
        f.add(name: "Content-Type", value: "application/json")
        f.add(name: "apns-id", value: "x")
        f.add(name: "APNS-ID", value: "y")
        f.add(name: "content-length", decimal: 1234)
        XCTAssertEqual(f.count, 4)
        XCTAssertEqual(f.first("content-type")?.utf8String, "application/json")
        XCTAssertEqual(f.count(of: "apns-id"), 2)
        XCTAssertEqual(f.first("content-length")?.utf8String, "1234")
        XCTAssertNil(f.first("missing"))
        XCTAssertEqual(f.firstString("Apns-Id"), "x")
        XCTAssertEqual(f.pairs.map(\.0), ["content-type", "apns-id", "apns-id", "content-length"])
    }

    func testDecimalFormatting() {
        for v in [0, 7, 10, 99, 100, 65535, 1_000_000, Int(Int32.max)] {
            var f = HTTPFields()
            f.add(name: "n", decimal: v)
            XCTAssertEqual(f.first("n")?.utf8String, String(v))
        }
    }

    func testMethodParsing() {
        XCTAssertEqual(HTTPMethod(bytes: Array("POST".utf8)), .post)
        XCTAssertEqual(HTTPMethod(bytes: Array("DELETE".utf8)), .delete)
        XCTAssertEqual(HTTPMethod(bytes: Array("PROPFIND".utf8)), .other("PROPFIND"))
        XCTAssertEqual(HTTPMethod.other("X").name, "X")
    }

    func testRequestPathQueryAuthority() {
        var h = HTTPFields()
        h.add(name: ":path", value: "/a/b?x=1&y=&z")
        h.add(name: "host", value: "api.push.apple.com")
        let r = Request(version: .http2, method: .get, headers: h)
        XCTAssertEqual(r.path.utf8String, "/a/b")
        XCTAssertEqual(r.query?.utf8String, "x=1&y=&z")
        XCTAssertEqual(r.queryParameter("x"), "1")
        XCTAssertEqual(r.queryParameter("y"), "")
        XCTAssertEqual(r.queryParameter("z"), "")
        XCTAssertNil(r.queryParameter("w"))
        XCTAssertEqual(r.authority?.utf8String, "api.push.apple.com", "host is used when :authority is absent (aioapns)")
    }
}
