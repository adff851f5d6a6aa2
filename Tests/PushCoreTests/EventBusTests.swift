import PushCore
import Synchronization
import XCTest

/// `EventBus`'s bounds: a subscriber that does not keep up loses events, is told how many, and
/// never holds more than its inbox and unsent limits.
final class EventBusTests: XCTestCase {
    /// A sink whose thread is the test: tasks wait in `tasks` until `runAll`.
    final class Sink: EventSink, @unchecked Sendable {
        var written: [UInt8] = []
        var unsent = 0
        var tasks: [@Sendable () -> Void] = []
        var closers: [@Sendable () -> Void] = []
        var open = true
        var isOpen: Bool { open }
        var unsentBytes: Int { unsent }
        func write(_ bytes: [UInt8]) -> Bool {
            written += bytes
            return open
        }
        func onClose(_ handler: @escaping @Sendable () -> Void) { closers.append(handler) }
        func run(_ task: @escaping @Sendable () -> Void) { tasks.append(task) }
        func runLater(afterNanoseconds: UInt64, _ task: @escaping () -> Void) -> () -> Void { {} }
        func runAll() {
            while !tasks.isEmpty { tasks.removeFirst()() }
        }
        func close() {
            open = false
            for c in closers { c() }
        }
        var text: String { String(decoding: written, as: UTF8.self) }
    }

    func event(_ n: Int, token: String = "t") -> EmulatorEvent {
        EmulatorEvent(kind: .accepted, provider: .apns, token: token, status: 200, json: "{\"n\":\(n)}")
    }

    func testQuietWithoutSubscribers() {
        let bus = EventBus()
        XCTAssertFalse(bus.isActive)
        bus.publish(event(1)) // nobody to take it: nothing happens
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink) { _ in true })
        XCTAssertTrue(bus.isActive)
        sink.close()
        XCTAssertFalse(bus.isActive)
        XCTAssertEqual(bus.subscriberCount, 0)
    }

    func testFullInboxDropsAndSaysHowMany() {
        let bus = EventBus(inboxLimit: 10)
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink) { $0.token == "t" })
        for n in 0..<25 { bus.publish(event(n)) }
        bus.publish(event(99, token: "other")) // filtered out: not counted as lost
        XCTAssertEqual(sink.tasks.count, 1, "one drain scheduled, however many events")
        sink.runAll()
        let text = sink.text
        XCTAssertTrue(text.contains("event: dropped\ndata: {\"dropped\":15}\n\n"), text)
        XCTAssertEqual(text.components(separatedBy: "event: accepted\n").count - 1, 10, text)
        XCTAssertTrue(text.contains("data: {\"n\":9}\n\n"), text)
        XCTAssertFalse(text.contains("{\"n\":10}"), text)
        XCTAssertFalse(text.contains("{\"n\":99}"), text)
        // Once it drains, events flow again, with no further notice.
        sink.written = []
        bus.publish(event(30))
        sink.runAll()
        XCTAssertEqual(sink.text.components(separatedBy: "\n\n").filter { $0.contains("event:") }.count, 1, sink.text)
        XCTAssertTrue(sink.text.contains("id: 27\nevent: accepted\ndata: {\"n\":30}\n\n"), sink.text)
    }

    func testUnreadStreamDropsUntilItCatchesUp() {
        let bus = EventBus(unsentLimit: 4096)
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink) { _ in true })
        sink.written = []
        sink.unsent = 4096 // the peer has not read: the stream is at its limit
        for n in 0..<5 { bus.publish(event(n)) }
        sink.runAll()
        XCTAssertEqual(sink.text, "", "nothing more is buffered for a reader that does not read")
        sink.unsent = 0
        bus.publish(event(5))
        sink.runAll()
        XCTAssertEqual(sink.text, "event: dropped\ndata: {\"dropped\":5}\n\nid: 6\nevent: accepted\ndata: {\"n\":5}\n\n")
    }

    func testSubscriberLimit() {
        let bus = EventBus()
        let sinks = (0..<EventBus.maxSubscribers).map { _ in Sink() }
        for s in sinks { XCTAssertTrue(bus.subscribe(s) { _ in true }) }
        XCTAssertFalse(bus.subscribe(Sink()) { _ in true })
        sinks[0].close()
        XCTAssertTrue(bus.subscribe(Sink()) { _ in true })
    }
}
