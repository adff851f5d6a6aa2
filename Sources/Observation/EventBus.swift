import PushCore
import Runtime
import Synchronization
import Transport

/// One thing that happened, as a subscriber's filter sees it: its kind and the fields filters
/// read. Its `data:` JSON is made only once some subscriber takes it (see `EventBus.publish`).
public struct EmulatorEvent: Sendable {
    /// The `event:` name of each kind.
    public enum Kind: String, Sendable, CaseIterable {
        /// A push answered 200 (its notification recorded).
        case accepted
        /// A push answered with an error (the provider's, a fault's, a journal that could not store it).
        case rejected
        /// A notification reached a device after its answer (a topic or broadcast fan-out, an
        /// offline device's inbox handed over as it came online).
        case delivered
        /// An SDK tracking call and its outcome (one per try).
        case tracking
        /// A fault rule fired.
        case fault
        /// A device was registered, changed, uninstalled, came online or went offline, or a fleet was made.
        case device
    }

    public var kind: Kind
    public var provider: PushProvider?
    public var token: String
    public var topic: String
    /// APNs environment or FCM project ("" when none).
    public var environment: String
    /// The HTTP status (accepted, rejected, tracking), 0 otherwise.
    public var status: Int
    /// The provider's reason, the fault's name, the tracking outcome, the device change.
    public var reason: String
    /// The APNs team whose credentials sent the push ("" when none).
    public var team: String = ""

    public init(
        kind: Kind, provider: PushProvider?, token: String = "", topic: String = "", environment: String = "", status: Int = 0,
        reason: String = ""
    ) {
        self.kind = kind
        self.provider = provider
        self.token = token
        self.topic = topic
        self.environment = environment
        self.status = status
        self.reason = reason
    }
}

/// An event's `data:` object written straight into bytes (no intermediate `String`s): names
/// are static, values escaped as JSON strings only where a byte needs it. It writes into the
/// publisher's stack scratch (`EventBus.publish`), moving to the heap only for a large event,
/// and the ring copies the result once.
public struct EventJSON: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    private var empty = true
    /// The buffer is the heap's (grown past the scratch), freed with the writer.
    private var owned = false

    init(scratch: UnsafeMutableBufferPointer<UInt8>) {
        base = scratch.baseAddress!
        capacity = scratch.count
        byte(UInt8(ascii: "{"))
    }

    deinit { if owned { base.deallocate() } }

    private mutating func reserve(_ n: Int) {
        guard count + n > capacity else { return }
        let grown = max(capacity * 2, count + n)
        let fresh = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        fresh.update(from: base, count: count)
        if owned { base.deallocate() }
        base = fresh
        capacity = grown
        owned = true
    }

    @inline(__always)
    private mutating func byte(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    @inline(__always)
    private mutating func append(_ b: UnsafeBufferPointer<UInt8>) {
        guard let src = b.baseAddress, b.count > 0 else { return }
        reserve(b.count)
        (base + count).update(from: src, count: b.count)
        count += b.count
    }

    @inline(__always)
    private mutating func append(_ raw: UnsafeRawBufferPointer) {
        append(raw.bindMemory(to: UInt8.self))
    }

    /// Bytes of a literal.
    @inline(__always)
    private mutating func append(_ s: StaticString) {
        s.withUTF8Buffer { append($0) }
    }

    private mutating func appendDecimal(_ value: Int64) {
        reserve(20)
        if value == 0 { return byte(UInt8(ascii: "0")) }
        var v = value.magnitude
        if value < 0 { byte(UInt8(ascii: "-")) }
        var digits = 0
        var t = v
        while t > 0 {
            digits += 1
            t /= 10
        }
        var i = count + digits - 1
        while v > 0 {
            base[i] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
            i -= 1
        }
        count += digits
    }

    /// `,"name":` (no comma first), in one copy.
    private mutating func key(_ name: StaticString) {
        let n = name.utf8CodeUnitCount
        reserve(n + 4)
        var at = count
        if !empty {
            base[at] = UInt8(ascii: ",")
            at += 1
        }
        empty = false
        base[at] = UInt8(ascii: "\"")
        (base + at + 1).update(from: name.utf8Start, count: n)
        base[at + 1 + n] = UInt8(ascii: "\"")
        base[at + 2 + n] = UInt8(ascii: ":")
        count = at + 3 + n
    }

    /// A string value (null for nil).
    public mutating func add(_ name: StaticString, _ value: String?) {
        key(name)
        guard var value else { return append("null") }
        value.withUTF8 { appendQuoted($0) }
    }

    /// A UUID in its canonical form.
    public mutating func add(_ name: StaticString, id value: UUIDValue?) {
        key(name)
        guard let value else { return append("null") }
        byte(UInt8(ascii: "\""))
        value.withBytes { append($0) }
        byte(UInt8(ascii: "\""))
    }

    /// A string value from bytes (a token as received).
    public mutating func add(_ name: StaticString, bytes value: ArraySlice<UInt8>) {
        key(name)
        value.withUnsafeBufferPointer { appendQuoted($0) }
    }

    public mutating func add(_ name: StaticString, _ value: Int64) {
        key(name)
        appendDecimal(value)
    }

    public mutating func add(_ name: StaticString, _ value: Int) { add(name, Int64(value)) }

    public mutating func add(_ name: StaticString, _ value: Bool) {
        key(name)
        value ? append("true") : append("false")
    }

    /// A value that is JSON already (null for nil).
    public mutating func add(_ name: StaticString, json: String?) {
        key(name)
        guard var json else { return append("null") }
        json.withUTF8 { append($0) }
    }

    /// The members of a JSON object that is written already (`{...}` without its braces are added).
    public mutating func addMembers(ofObject json: String) {
        var json = json
        json.withUTF8 { b in
            guard b.count > 2, b[0] == UInt8(ascii: "{"), b[b.count - 1] == UInt8(ascii: "}") else { return }
            if !empty { byte(UInt8(ascii: ",")) }
            empty = false
            append(UnsafeBufferPointer(rebasing: b[1..<(b.count - 1)]))
        }
    }

    private mutating func appendQuoted(_ b: UnsafeBufferPointer<UInt8>) {
        // Most values (tokens, ids, topics) need no escape: found eight bytes at a time, they go
        // in with one copy.
        if let src = b.baseAddress, !EventJSON.needsEscape(UnsafeRawPointer(src), b.count) {
            reserve(b.count + 2)
            base[count] = UInt8(ascii: "\"")
            (base + count + 1).update(from: src, count: b.count)
            base[count + 1 + b.count] = UInt8(ascii: "\"")
            count += b.count + 2
            return
        }
        byte(UInt8(ascii: "\""))
        var start = 0
        for i in 0..<b.count {
            let c = b[i]
            guard c == 0x22 || c == 0x5C || c < 0x20 else { continue }
            append(UnsafeBufferPointer(rebasing: b[start..<i]))
            switch c {
            case 0x22: append("\\\"")
            case 0x5C: append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            default:
                append("\\u00")
                byte(c >> 4 < 10 ? UInt8(ascii: "0") + (c >> 4) : UInt8(ascii: "a") + (c >> 4) - 10)
                byte(c & 15 < 10 ? UInt8(ascii: "0") + (c & 15) : UInt8(ascii: "a") + (c & 15) - 10)
            }
            start = i + 1
        }
        append(UnsafeBufferPointer(rebasing: b[start..<b.count]))
        byte(UInt8(ascii: "\""))
    }

    /// Whether any of `n` bytes is a quote, a backslash or a control character (SWAR: a zero
    /// byte of `w ^ 0x22..` or `w ^ 0x5C..`, or a byte under 0x20, sets its high bit).
    @inline(__always)
    static func needsEscape(_ p: UnsafeRawPointer, _ n: Int) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func zeroByte(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
        var i = 0
        while i + 8 <= n {
            let w = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if (zeroByte(w ^ (ones &* 0x22)) | zeroByte(w ^ (ones &* 0x5C)) | ((w &- ones &* 0x20) & ~w & highs)) != 0 { return true }
            i += 8
        }
        while i < n {
            let c = p.load(fromByteOffset: i, as: UInt8.self)
            if c == 0x22 || c == 0x5C || c < 0x20 { return true }
            i += 1
        }
        return false
    }

    /// The object's bytes, closed.
    mutating func finish() -> UnsafeRawBufferPointer {
        byte(UInt8(ascii: "}"))
        return UnsafeRawBufferPointer(start: base, count: count)
    }
}

/// Where a subscriber's events go: an event stream (`ResponseStream`), or a test's sink.
/// Every member is used on the sink's own thread (the stream's event loop).
public protocol EventSink: AnyObject, Sendable {
    var isOpen: Bool { get }
    var unsentBytes: Int { get }
    @discardableResult func write(_ bytes: [UInt8]) -> Bool
    /// Bytes copied in as they lie (an event batch straight from the ring).
    @discardableResult func write(contentsOf bytes: UnsafeRawBufferPointer) -> Bool
    func onClose(_ handler: @escaping @Sendable () -> Void)
    /// Runs `task` on the sink's thread after a while; the answer cancels it.
    func runLater(afterNanoseconds: UInt64, _ task: @escaping () -> Void) -> () -> Void
}

extension ResponseStream: EventSink {
    public func runLater(afterNanoseconds n: UInt64, _ task: @escaping () -> Void) -> () -> Void {
        let timer = eventLoop.schedule(afterNanoseconds: n, task)
        return { timer.cancel() }
    }
}

/// Fans events out to the event-stream subscribers. Publishing costs one relaxed atomic load
/// while nobody wants the event's kind (`wants`): callers build an event only when it is true.
///
/// With subscribers, the filters read the event's fields first; only when one takes it is its
/// JSON written, once, into a frame that goes into one ring of the last `ringCapacity` frames
/// (a short lock; no per-subscriber work on the publisher's side). Each subscriber reads the
/// ring from its own position on its own event loop every `drainNanos`, filters, and writes
/// what it takes to its stream in one write while the stream holds less than `unsentLimit`
/// unsent bytes. A frame that does not fit is dropped and counted; so are frames the ring
/// overwrote before a reader reached them (counted whether or not its filter would have taken
/// them). The count goes to the stream as a `dropped` event before the next one written: a slow
/// reader never slows the publishers or their loops, and costs at most the ring and its limit.
public final class EventBus: Sendable {
    /// At most this many streams at once (one more gets a 503).
    public static let maxSubscribers = 64
    let unsentLimit: Int
    let ring: EventRing
    /// A comment line after this long without a write keeps proxies and idle timers from
    /// closing a quiet stream.
    static let heartbeatNanos: UInt64 = 15_000_000_000
    /// How often a subscriber reads the ring (a batch per read: one write, not one per event).
    static let drainNanos: UInt64 = 10_000_000

    private let active = Atomic<Int>(0)
    /// The kinds some subscriber takes (the union of their selectors' bits).
    private let wanted = Atomic<UInt8>(0)
    /// The kinds some subscriber takes whole (no filter beyond kinds): publishing one of them
    /// needs no look at the subscribers' filters.
    private let takenWhole = Atomic<UInt8>(0)
    private let subscribers = FutexLock<[EventSubscriber]>([])
    /// A cluster node's name, the first member of every event's data (nil on a single node).
    /// Set once, before anything is published.
    nonisolated(unsafe) private var node: String?

    /// Names this node in every event from now on (a cluster node, before it serves).
    public func name(node: String) { self.node = node }

    /// `ringCapacity` frames are kept for the readers; `unsentLimit` bytes may wait in a stream.
    public init(ringCapacity: Int = 16_384, unsentLimit: Int = 1 << 20) {
        ring = EventRing(capacity: max(1, ringCapacity))
        self.unsentLimit = max(1, unsentLimit)
    }

    /// True while at least one stream is subscribed.
    @inline(__always)
    public var isActive: Bool { active.load(ordering: .relaxed) > 0 }

    public var subscriberCount: Int { active.load(ordering: .relaxed) }

    /// True while some subscriber may take events of `kind`: one relaxed atomic load, for the
    /// publishers to check before they build anything.
    @inline(__always)
    public func wants(_ kind: EmulatorEvent.Kind) -> Bool { wanted.load(ordering: .relaxed) & kind.bit != 0 }

    /// Offers an event to the subscribers (from any thread); `write` (its data's members) is
    /// called once, and only when a subscriber's selector takes the event. Call only when
    /// `wants(event.kind)`.
    public func publish(_ event: EmulatorEvent, _ write: (inout EventJSON) -> Void) {
        guard
            takenWhole.load(ordering: .relaxed) & event.kind.bit != 0
                || subscribers.withLock({ list in list.contains { $0.selector.matches(event) } })
        else { return }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { scratch in
            var w = EventJSON(scratch: scratch)
            if let node { w.add("node", node) }
            write(&w)
            ring.append(event, data: w.finish())
        }
    }

    /// Streams events that `selector` takes to `stream` until it closes, from the next one
    /// published. False (nothing subscribed) when `maxSubscribers` are already listening.
    /// `relayed`: frames from other nodes (a cluster's reader), written with this node's own.
    public func subscribe(_ stream: any EventSink, selector: EventSelector, relayed: EventInbox? = nil) -> Bool {
        let subscriber = EventSubscriber(stream: stream, selector: selector, ring: ring, unsentLimit: unsentLimit)
        subscriber.relayed = relayed
        let added = subscribers.withLock { list -> Bool in
            guard list.count < EventBus.maxSubscribers else { return false }
            list.append(subscriber)
            EventBus.summarise(list, wanted: wanted, takenWhole: takenWhole)
            return true
        }
        guard added else { return false }
        active.add(1, ordering: .relaxed)
        subscriber.start()
        stream.onClose { [weak self] in
            subscriber.stop()
            relayed?.close()
            guard let self else { return }
            let removed = self.subscribers.withLock { list -> Bool in
                guard let i = list.firstIndex(where: { $0 === subscriber }) else { return false }
                list.remove(at: i)
                EventBus.summarise(list, wanted: self.wanted, takenWhole: self.takenWhole)
                return true
            }
            if removed { self.active.subtract(1, ordering: .relaxed) }
        }
        return true
    }

    /// The kinds the subscribers want, and those some subscriber takes whole.
    private static func summarise(_ list: [EventSubscriber], wanted: borrowing Atomic<UInt8>, takenWhole: borrowing Atomic<UInt8>) {
        wanted.store(list.reduce(UInt8(0)) { $0 | $1.selector.kinds }, ordering: .relaxed)
        takenWhole.store(list.reduce(UInt8(0)) { $0 | ($1.selector.filtersOnlyKinds ? $1.selector.kinds : 0) }, ordering: .relaxed)
    }
}

/// One stream's reader (see `EventBus`). Its state is touched on the stream's thread only.
final class EventSubscriber: @unchecked Sendable {
    private let stream: any EventSink
    let selector: EventSelector
    private let ring: EventRing
    private let unsentLimit: Int
    private var position: UInt64
    /// Events lost and not yet reported.
    private var lost: UInt64 = 0
    private var lastWriteNs: UInt64 = 0
    private var cancelTimer: (() -> Void)?
    private var stopped = false
    /// Other nodes' frames for this reader (a cluster's), written at each drain.
    var relayed: EventInbox?
    /// Frames read at most per drain (more wait for the next, right after).
    static let batch = 4096

    init(stream: any EventSink, selector: EventSelector, ring: EventRing, unsentLimit: Int) {
        self.stream = stream
        self.selector = selector
        self.ring = ring
        self.unsentLimit = unsentLimit
        position = ring.head
    }

    /// On the loop: the opening comment, then a drain every `EventBus.drainNanos`.
    func start() {
        write(Array(": pushemu event stream\nretry: 2000\n\n".utf8))
        schedule(EventBus.drainNanos)
    }

    func stop() {
        stopped = true
        cancelTimer?()
        cancelTimer = nil
    }

    private func schedule(_ nanos: UInt64) {
        guard !stopped else { return }
        cancelTimer = stream.runLater(afterNanoseconds: nanos) { [weak self] in self?.drain() }
    }

    private func write(_ bytes: [UInt8]) {
        stream.write(bytes)
        lastWriteNs = Clock.monotonicNanoseconds()
    }

    /// Reads what was published since the last drain and writes what the filter takes, copied
    /// from the ring into the stream's output as it lies (a `dropped` notice first when events
    /// were lost).
    func drain() {
        guard stream.isOpen, !stopped else { return }
        let room = unsentLimit - stream.unsentBytes
        var wrote = false
        let taken = ring.read(from: position, limit: EventSubscriber.batch, room: max(0, room - 64), selector: selector) {
            span, overwritten in
            if !wrote {
                lost += overwritten
                if lost > 0 { stream.write(lostNotice()) }
            }
            wrote = true
            stream.write(contentsOf: span)
        }
        position = taken.next
        if let relayed {
            let (frames, lostThere) = relayed.take(room: max(0, room - 64))
            lost += lostThere
            if !frames.isEmpty {
                stream.write(frames)
                wrote = true
            }
        }
        if !wrote {
            lost += taken.overwritten
            if lost > 0, room > 64 {
                stream.write(lostNotice())
                wrote = true
            }
        }
        lost += taken.dropped
        if !wrote && Clock.monotonicNanoseconds() &- lastWriteNs > EventBus.heartbeatNanos {
            stream.write(Array(": heartbeat\n\n".utf8))
            wrote = true
        }
        if wrote { lastWriteNs = Clock.monotonicNanoseconds() }
        // A full batch: more are waiting, read them now.
        schedule(taken.read + Int(taken.overwritten) >= EventSubscriber.batch ? 0 : EventBus.drainNanos)
    }

    /// The `dropped` event for what was lost since the last one.
    private func lostNotice() -> [UInt8] {
        defer { lost = 0 }
        return Array("event: dropped\ndata: {\"dropped\":\(lost)}\n\n".utf8)
    }
}

extension EventJSON {
    /// Every display outcome's JSON, made once (indexed by raw values).
    private static let displays: [[String?]] = {
        var table = [[String?]](
            repeating: [String?](repeating: nil, count: 256), count: Int(Display.Outcome.allCases.map(\.rawValue).max() ?? 0) + 1)
        for o in Display.Outcome.allCases {
            for r in Display.Reason.allCases { table[Int(o.rawValue)][Int(r.rawValue)] = Display(o, r).json }
        }
        return table
    }()

    /// `display.json`, without building it per event.
    public static func display(_ d: Display) -> String {
        displays[Int(d.outcome.rawValue)][Int(d.reason.rawValue)] ?? d.json
    }
}

/// Frames from other nodes for one reader of a cluster's event stream: their relay writes them
/// (whole `event:`/`data:` frames), the reader's drain takes them. At most `limit` bytes wait;
/// past that frames are counted as lost (the reader is told, as for its own node's).
public final class EventInbox: Sendable {
    private let state = FutexLock<(frames: [UInt8], lost: UInt64, closed: Bool)>(([], 0, false))
    let limit: Int

    public init(limit: Int = 1 << 20) { self.limit = limit }

    /// Adds one frame; false once the reader has gone (the relay then stops).
    @discardableResult
    public func put(_ frame: [UInt8]) -> Bool {
        state.withLock { s in
            guard !s.closed else { return false }
            if s.frames.count + frame.count > limit { s.lost += 1 } else { s.frames += frame }
            return true
        }
    }

    /// Whether the reader has gone.
    public var isClosed: Bool { state.withLock { $0.closed } }

    func close() { state.withLock { $0 = ([], 0, true) } }

    /// The frames waiting (at most about `room` bytes: whole frames while they fit, the rest
    /// left) and the count lost since the last take.
    func take(room: Int) -> ([UInt8], UInt64) {
        state.withLock { s in
            defer { s.lost = 0 }
            guard s.frames.count > room else {
                defer { s.frames.removeAll(keepingCapacity: true) }
                return (s.frames, s.lost)
            }
            // Cut after the last frame that fits ("\n\n").
            var cut = 0
            var i = 1
            while i < min(room, s.frames.count) {
                if s.frames[i] == 10 && s.frames[i - 1] == 10 { cut = i + 1 }
                i += 1
            }
            let out = Array(s.frames[0..<cut])
            s.frames.removeFirst(cut)
            return (out, s.lost)
        }
    }
}
