import Synchronization
import XCTest

@testable import Transport

/// Route groups: prefixes, named parameters, middleware scoped to a group and run outer first,
/// driven without sockets through `EmbeddedTransport`.
final class RouterGroupTests: XCTestCase {
    /// Appends its name to a shared trace, then goes on (or answers 401 itself).
    struct Tag: RouterMiddleware {
        let name: String
        let trace: TraceLog
        var refuse = false

        func handle(_ ex: Exchange, next: Handler) throws {
            trace.append(name)
            if refuse { return ex.respond(.text(401, "refused by \(name)\n")) }
            try next(ex)
        }
    }

    final class TraceLog: Sendable {
        private let entries = Mutex<[String]>([])
        func append(_ s: String) { entries.withLock { $0.append(s) } }
        func take() -> [String] {
            entries.withLock { e in
                defer { e = [] }
                return e
            }
        }
    }

    func testGroupsParametersAndMiddlewareOrder() throws {
        let trace = TraceLog()
        var router = Router()
        router.group("/api", middleware: [Tag(name: "outer", trace: trace)]) { api in
            api.add(.get, "/ping") { ex in ex.respond(.text(200, "pong")) }
            api.group("/users/{user}", middleware: [Tag(name: "inner", trace: trace)]) { users in
                users.add(.get, "/posts/{post}") { ex in
                    trace.append("handler")
                    ex.respond(.text(200, "\(ex.parameter("user").utf8String)/\(ex.parameter("post").utf8String)"))
                }
                users.add(.get, "") { ex in ex.respond(.text(200, "user \(ex.parameter("user").utf8String)")) }
            }
            api.group("/locked", middleware: [Tag(name: "lock", trace: trace, refuse: true)]) { locked in
                locked.add(.get, "/*") { ex in ex.respond(.text(200, "never")) }
            }
        }
        router.group { root in root.add(.get, "") { ex in ex.respond(.text(200, "root")) } }
        let t = try EmbeddedTransport(router: router)

        XCTAssertEqual(t.request(.get, "/api/users/ada/posts/42")?.text, "ada/42")
        XCTAssertEqual(trace.take(), ["outer", "inner", "handler"])
        XCTAssertEqual(t.request(.get, "/api/users/ada")?.text, "user ada")
        XCTAssertEqual(trace.take(), ["outer", "inner"])
        XCTAssertEqual(t.request(.get, "/api/ping")?.text, "pong")
        XCTAssertEqual(trace.take(), ["outer"], "a group's middleware does not run for its siblings' routes")
        let refused = t.request(.get, "/api/locked/a/b")
        XCTAssertEqual(refused?.status, 401)
        XCTAssertEqual(trace.take(), ["outer", "lock"])
        XCTAssertEqual(t.request(.get, "/")?.text, "root")
        XCTAssertEqual(t.request(.get, "/api/nothing")?.status, 404)
        XCTAssertEqual(t.request(.post, "/api/ping")?.status, 405)
        XCTAssertEqual(trace.take(), [], "no middleware runs for an unrouted request")
        XCTAssertEqual(
            router.parameterNames[router.routes.firstIndex { $0.pattern == "/api/users/{user}/posts/{post}" }!], ["user", "post"])
    }

    func testLaterAnswersAndResetsAreWaitedFor() throws {
        var router = Router()
        router.add(.get, "/later") { ex in
            ex.eventLoop.schedule(afterNanoseconds: 20_000_000) { ex.respond(.text(200, "late")) }
        }
        router.add(.get, "/elsewhere") { ex in
            Thread.detachNewThread { ex.respond(.text(202, "from another thread")) }
        }
        router.add(.get, "/throws") { _ in throw CancellationError() }
        router.add(.post, "/small", maxBodySize: 4) { ex in ex.respond(.text(200, "\(ex.request.body.count)")) }
        let t = try EmbeddedTransport(router: router)
        XCTAssertEqual(t.request(.get, "/later")?.text, "late")
        XCTAssertEqual(t.request(.get, "/elsewhere")?.status, 202)
        XCTAssertEqual(t.request(.get, "/throws")?.wasReset, true)
        XCTAssertEqual(t.request(.post, "/small", body: [1, 2, 3])?.text, "3")
        XCTAssertEqual(t.request(.post, "/small", body: [1, 2, 3, 4, 5])?.status, 413)
        XCTAssertNil(t.request(.get, "/later", timeout: 0.005), "no answer within the time given")
    }
}
