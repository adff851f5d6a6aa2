import Foundation
import PushCore
import XCTest

@testable import Observation

/// `EventBus`'s bounds: a reader that does not keep up loses events, is told how many, and
/// never makes the bus hold more than its ring and the stream's unsent limit.
final class EventBusTests: XCTestCase {
    /// A sink whose thread is the test: timers wait in `timers` until `tick`.
    final class Sink: EventSink, @unchecked Sendable {
        var written: [UInt8] = []
        var unsent = 0
        var timers: [() -> Void] = []
        var closers: [@Sendable () -> Void] = []
        var open = true
        var isOpen: Bool { open }
        var unsentBytes: Int { unsent }
        func write(_ bytes: [UInt8]) -> Bool {
            written += bytes
            return open
        }
        func write(contentsOf bytes: UnsafeRawBufferPointer) -> Bool {
            written += bytes
            return open
        }
        func onClose(_ handler: @escaping @Sendable () -> Void) { closers.append(handler) }
        func runLater(afterNanoseconds: UInt64, _ task: @escaping () -> Void) -> () -> Void {
            timers.append(task)
            return {}
        }
        /// Runs the timers due now (the drain reschedules itself for the next tick).
        func tick() {
            let due = timers
            timers = []
            for t in due { t() }
        }
        func close() {
            open = false
            for c in closers { c() }
        }
        var text: String { String(decoding: written, as: UTF8.self) }
    }

    static func selector(token: String) -> EventSelector {
        var s = EventSelector()
        s.token = token
        return s
    }

    func publish(_ bus: EventBus, _ n: Int, token: String = "t") {
        bus.publish(EmulatorEvent(kind: .accepted, provider: .apns, token: token, status: 200)) { $0.add("n", n) }
    }

    func testQuietWithoutSubscribers() {
        let bus = EventBus()
        XCTAssertFalse(bus.isActive)
        publish(bus, 1) // nobody to take it: nothing happens
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink, selector: EventSelector()))
        XCTAssertTrue(bus.isActive)
        XCTAssertTrue(bus.wants(.accepted))
        XCTAssertEqual(sink.text, ": pushemu event stream\nretry: 2000\n\n")
        sink.close()
        XCTAssertFalse(bus.isActive)
        XCTAssertFalse(bus.wants(.accepted))
        XCTAssertEqual(bus.subscriberCount, 0)
        // A stream of rejected pushes only: accepted ones are not wanted, so not even built.
        var rejectedOnly = EventSelector()
        rejectedOnly.take(.rejected, first: true)
        XCTAssertTrue(bus.subscribe(Sink(), selector: rejectedOnly))
        XCTAssertTrue(bus.wants(.rejected))
        XCTAssertFalse(bus.wants(.accepted))
    }

    func testOverwrittenRingDropsAndSaysHowMany() {
        let bus = EventBus(ringCapacity: 10)
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink, selector: Self.selector(token: "t")))
        sink.written = []
        for n in 0..<25 { publish(bus, n) }
        // Filtered out by every subscriber: its JSON is never made, nothing is stored.
        var built = false
        bus.publish(EmulatorEvent(kind: .accepted, provider: .apns, token: "other", status: 200)) { _ in built = true }
        XCTAssertFalse(built)
        sink.tick()
        let text = sink.text
        // The ring kept the newest ten; the fifteen before them are reported lost, first.
        XCTAssertTrue(text.hasPrefix("event: dropped\ndata: {\"dropped\":15}\n\nid: 16\nevent: accepted\ndata: {\"n\":15}\n\n"), text)
        XCTAssertEqual(text.components(separatedBy: "event: accepted\n").count - 1, 10, text)
        XCTAssertTrue(text.hasSuffix("id: 25\nevent: accepted\ndata: {\"n\":24}\n\n"), text)
        // Once read, events flow again with no further notice, a batch per tick.
        sink.written = []
        publish(bus, 30)
        publish(bus, 31)
        XCTAssertEqual(sink.text, "", "nothing is written between ticks")
        sink.tick()
        XCTAssertEqual(sink.text, "id: 26\nevent: accepted\ndata: {\"n\":30}\n\nid: 27\nevent: accepted\ndata: {\"n\":31}\n\n")
    }

    func testUnreadStreamDropsUntilItCatchesUp() {
        let bus = EventBus(unsentLimit: 4096)
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink, selector: EventSelector()))
        sink.written = []
        sink.unsent = 4096 // the peer has not read: the stream is at its limit
        for n in 0..<5 { publish(bus, n) }
        sink.tick()
        XCTAssertEqual(sink.text, "", "nothing more is buffered for a reader that does not read")
        sink.unsent = 0
        publish(bus, 5)
        sink.tick()
        XCTAssertEqual(sink.text, "event: dropped\ndata: {\"dropped\":5}\n\nid: 6\nevent: accepted\ndata: {\"n\":5}\n\n")
    }

    func testEachReaderFiltersFromItsOwnPosition() {
        let bus = EventBus()
        let early = Sink()
        XCTAssertTrue(bus.subscribe(early, selector: EventSelector()))
        publish(bus, 1)
        let late = Sink()
        XCTAssertTrue(bus.subscribe(late, selector: Self.selector(token: "u")))
        publish(bus, 2, token: "u")
        publish(bus, 3)
        early.tick()
        late.tick()
        XCTAssertEqual(early.text.components(separatedBy: "event: accepted").count - 1, 3, early.text)
        // The late one starts after what was published before it, and takes only its token's.
        XCTAssertTrue(late.text.hasSuffix("id: 2\nevent: accepted\ndata: {\"n\":2}\n\n"), late.text)
        XCTAssertEqual(late.text.components(separatedBy: "event: accepted").count - 1, 1, late.text)
    }

    func testDataIsEscapedJSON() {
        let bus = EventBus()
        let sink = Sink()
        XCTAssertTrue(bus.subscribe(sink, selector: EventSelector()))
        sink.written = []
        bus.publish(EmulatorEvent(kind: .device, provider: nil)) { w in
            w.add("s", "quote \" backslash \\ line\nfeed\u{1} é")
            w.add("n", nil)
            w.add("b", true)
            w.add("z", 0)
            w.add("m", -120)
            w.add("big", Int64.min)
            w.add("t", bytes: Array("ab".utf8)[...])
            w.addMembers(ofObject: #"{"x":1,"y":[2]}"#)
        }
        sink.tick()
        XCTAssertEqual(
            sink.text,
            #"id: 1\#nevent: device\#ndata: {"s":"quote \" backslash \\ line\nfeed\u0001 é","n":null,"b":true,"z":0,"m":-120,"big":-9223372036854775808,"t":"ab","x":1,"y":[2]}\#n\#n"#
        )
        let data = sink.text.split(separator: "\n")[2].dropFirst(6)
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(data.utf8)))
    }

    func testSubscriberLimit() {
        let bus = EventBus()
        let sinks = (0..<EventBus.maxSubscribers).map { _ in Sink() }
        for s in sinks { XCTAssertTrue(bus.subscribe(s, selector: EventSelector())) }
        XCTAssertFalse(bus.subscribe(Sink(), selector: EventSelector()))
        sinks[0].close()
        XCTAssertTrue(bus.subscribe(Sink(), selector: EventSelector()))
    }

    /// Frames of every size wrap around the byte ring's end and read back whole, for a stream
    /// that takes everything (one span) and a filtered one (frame by frame); frames whose bytes
    /// newer ones overwrote are reported lost, never read half-written.
    func testFramesWrapTheByteRingAndOverwrittenBytesAreLost() {
        let bus = EventBus(ringCapacity: 64) // 64 KiB of frames: far fewer than 64 large ones fit
        let all = Sink()
        let odd = Sink()
        XCTAssertTrue(bus.subscribe(all, selector: EventSelector()))
        XCTAssertTrue(bus.subscribe(odd, selector: Self.selector(token: "odd")))
        all.written = []
        odd.written = []
        var expectedAll = ""
        var expectedOdd = ""
        var id = 0
        for round in 0..<300 {
            let size = (round * 7919) % 1500
            let token = round % 2 == 1 ? "odd" : "even"
            bus.publish(EmulatorEvent(kind: .accepted, provider: .fcm, token: token, status: 200)) { w in
                w.add("n", round)
                w.add("pad", String(repeating: "x", count: size))
            }
            id += 1
            let frame = "id: \(id)\nevent: accepted\ndata: {\"n\":\(round),\"pad\":\"\(String(repeating: "x", count: size))\"}\n\n"
            expectedAll += frame
            if token == "odd" { expectedOdd += frame }
            if round % 5 == 4 { // read every five: the ring holds them
                all.tick()
                odd.tick()
            }
        }
        all.tick()
        odd.tick()
        XCTAssertEqual(all.text, expectedAll)
        XCTAssertEqual(odd.text, expectedOdd)

        // Now 60 events of 4 KiB at once: the 64 KiB of frames keep the newest 15 or so.
        all.written = []
        for n in 0..<60 {
            bus.publish(EmulatorEvent(kind: .accepted, provider: .fcm, token: "even", status: 200)) { w in
                w.add("n", n)
                w.add("pad", String(repeating: "y", count: 4000))
            }
        }
        all.tick()
        let text = all.text
        let dropped = Int(text.split(separator: "\n")[1].dropFirst(17).prefix { $0.isNumber }) ?? -1
        XCTAssertTrue(text.hasPrefix("event: dropped\ndata: {\"dropped\":"), String(text.prefix(80)))
        let frames = text.components(separatedBy: "event: accepted\n").count - 1
        XCTAssertEqual(dropped + frames, 60, "every event read or counted lost")
        XCTAssertGreaterThan(frames, 10)
        XCTAssertTrue(text.hasSuffix("\"n\":59,\"pad\":\"" + String(repeating: "y", count: 4000) + "\"}\n\n"))
        for block in text.components(separatedBy: "\n\n").dropFirst().dropLast() {
            XCTAssertTrue(block.hasPrefix("id: ") && block.hasSuffix("\"}"), String(block.prefix(60)))
        }
    }

    /// The word-at-a-time escape test agrees with the byte-by-byte rule for every byte value at
    /// every position of a 1- to 17-byte value.
    func testEscapeScanAgreesWithTheRuleEverywhere() {
        for length in 1...17 {
            for position in 0..<length {
                for value in 0...255 {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = UInt8(value)
                    let expected = value == 0x22 || value == 0x5C || value < 0x20
                    let found = bytes.withUnsafeBytes { EventJSON.needsEscape($0.baseAddress!, length) }
                    XCTAssertEqual(found, expected, "byte \(value) at \(position) of \(length)")
                }
            }
        }
    }
}
