import Synchronization
import Transport

/// One thing that happened, as the event stream (`GET /emulator/v1/events`) sends it: its
/// kind, the fields a subscriber's filter reads, and its `data:` JSON, written once however
/// many subscribers take it.
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
    /// The JSON object sent as the event's data (one line).
    public var json: String

    public init(
        kind: Kind, provider: PushProvider?, token: String = "", topic: String = "", environment: String = "", status: Int = 0,
        reason: String = "", json: String
    ) {
        self.kind = kind
        self.provider = provider
        self.token = token
        self.topic = topic
        self.environment = environment
        self.status = status
        self.reason = reason
        self.json = json
    }
}

/// Where a subscriber's events go: an event stream (`ResponseStream`), or a test's sink.
/// Every member but `run` is used on the sink's own thread, which `run` hops to.
public protocol EventSink: AnyObject, Sendable {
    var isOpen: Bool { get }
    var unsentBytes: Int { get }
    @discardableResult func write(_ bytes: [UInt8]) -> Bool
    func onClose(_ handler: @escaping @Sendable () -> Void)
    /// Runs `task` on the sink's thread (from any thread).
    func run(_ task: @escaping @Sendable () -> Void)
    /// Runs `task` on the sink's thread after a while; the answer cancels it.
    func runLater(afterNanoseconds: UInt64, _ task: @escaping () -> Void) -> () -> Void
}

extension ResponseStream: EventSink {
    public func run(_ task: @escaping @Sendable () -> Void) { eventLoop.execute(task) }
    public func runLater(afterNanoseconds n: UInt64, _ task: @escaping () -> Void) -> () -> Void {
        let timer = eventLoop.schedule(afterNanoseconds: n, task)
        return { timer.cancel() }
    }
}

/// Fans events out to the event-stream subscribers. Publishing costs one relaxed atomic load
/// while nobody listens (`isActive`): callers build an event only when it is true.
///
/// With subscribers, each event is offered to each subscriber's inbox (a short lock of that
/// subscriber's own; the list itself is copied out under its lock). An inbox holds at most
/// `inboxLimit` events and is drained on the subscriber's own event loop, which writes them
/// to its stream while the stream holds less than `unsentLimit` unsent bytes. Past either
/// bound an event is dropped and counted, and the subscriber is told how many it lost in a
/// `dropped` event: a slow reader never slows the publishers or their loops.
public final class EventBus: Sendable {
    /// At most this many streams at once (one more gets a 503).
    public static let maxSubscribers = 64
    let inboxLimit: Int
    let unsentLimit: Int
    /// A comment line this often keeps proxies and idle timers from closing a quiet stream.
    static let heartbeatNanos: UInt64 = 15_000_000_000

    private let active = Atomic<Int>(0)
    private let sequence = Atomic<UInt64>(0)
    private let subscribers = Mutex<[EventSubscriber]>([])

    /// `inboxLimit` events wait per subscriber; `unsentLimit` bytes may wait in its stream.
    public init(inboxLimit: Int = 4096, unsentLimit: Int = 1 << 20) {
        self.inboxLimit = max(1, inboxLimit)
        self.unsentLimit = max(1, unsentLimit)
    }

    /// True while at least one stream is subscribed.
    @inline(__always)
    public var isActive: Bool { active.load(ordering: .relaxed) > 0 }

    public var subscriberCount: Int { active.load(ordering: .relaxed) }

    /// Offers an event to every subscriber (from any thread). Build it only when `isActive`.
    public func publish(_ event: EmulatorEvent) {
        let list = subscribers.withLock { $0 }
        guard !list.isEmpty else { return }
        let id = sequence.add(1, ordering: .relaxed).newValue
        for s in list { s.offer(event, id: id) }
    }

    /// Streams events that `accepts` takes to `stream` until it closes. False (nothing
    /// subscribed) when `maxSubscribers` are already listening.
    public func subscribe(_ stream: any EventSink, accepts: @escaping @Sendable (EmulatorEvent) -> Bool) -> Bool {
        let subscriber = EventSubscriber(stream: stream, accepts: accepts, inboxLimit: inboxLimit, unsentLimit: unsentLimit)
        let added = subscribers.withLock { list -> Bool in
            guard list.count < EventBus.maxSubscribers else { return false }
            list.append(subscriber)
            return true
        }
        guard added else { return false }
        active.add(1, ordering: .relaxed)
        subscriber.start()
        stream.onClose { [weak self] in
            subscriber.stop()
            guard let self else { return }
            let removed = self.subscribers.withLock { list -> Bool in
                guard let i = list.firstIndex(where: { $0 === subscriber }) else { return false }
                list.remove(at: i)
                return true
            }
            if removed { self.active.subtract(1, ordering: .relaxed) }
        }
        return true
    }
}

/// One stream's inbox and writer (see `EventBus`).
final class EventSubscriber: @unchecked Sendable {
    /// Touched on the stream's thread only.
    private let stream: any EventSink
    private let accepts: @Sendable (EmulatorEvent) -> Bool
    private let inboxLimit: Int
    private let unsentLimit: Int

    private struct Inbox {
        var events: [(UInt64, EmulatorEvent)] = []
        var dropped = 0
        var scheduled = false
    }
    private let inbox = Mutex(Inbox())
    /// Loop-confined: events lost and not yet reported, the heartbeat timer.
    private var lost = 0
    private var cancelHeartbeat: (() -> Void)?

    init(stream: any EventSink, accepts: @escaping @Sendable (EmulatorEvent) -> Bool, inboxLimit: Int, unsentLimit: Int) {
        self.stream = stream
        self.accepts = accepts
        self.inboxLimit = inboxLimit
        self.unsentLimit = unsentLimit
    }

    /// On the loop: the opening comment and the heartbeat.
    func start() {
        stream.write(Array(": pushemu event stream\nretry: 2000\n\n".utf8))
        scheduleHeartbeat()
    }

    func stop() {
        cancelHeartbeat?()
        cancelHeartbeat = nil
    }

    private func scheduleHeartbeat() {
        cancelHeartbeat = stream.runLater(afterNanoseconds: EventBus.heartbeatNanos) { [weak self] in
            guard let self, self.stream.isOpen else { return }
            var out: [UInt8] = []
            self.appendLost(&out)
            out.append(contentsOf: ": heartbeat\n\n".utf8)
            self.stream.write(out)
            self.scheduleHeartbeat()
        }
    }

    /// From any thread.
    func offer(_ event: EmulatorEvent, id: UInt64) {
        guard accepts(event) else { return }
        let wake = inbox.withLock { box -> Bool in
            if box.events.count >= inboxLimit {
                box.dropped += 1
            } else {
                box.events.append((id, event))
            }
            if box.scheduled { return false }
            box.scheduled = true
            return true
        }
        if wake { stream.run { self.drain() } }
    }

    private func drain() {
        let (events, dropped) = inbox.withLock { box -> ([(UInt64, EmulatorEvent)], Int) in
            let taken = (box.events, box.dropped)
            box.events = []
            box.dropped = 0
            box.scheduled = false
            return taken
        }
        guard stream.isOpen else { return }
        lost += dropped
        var out: [UInt8] = []
        out.reserveCapacity(events.count * 256)
        let room = unsentLimit - stream.unsentBytes
        for (id, event) in events {
            if out.count >= room {
                lost += 1
                continue
            }
            appendLost(&out)
            out.append(contentsOf: "id: ".utf8)
            out.append(contentsOf: String(id).utf8)
            out.append(contentsOf: "\nevent: ".utf8)
            out.append(contentsOf: event.kind.rawValue.utf8)
            out.append(contentsOf: "\ndata: ".utf8)
            out.append(contentsOf: event.json.utf8)
            out.append(contentsOf: "\n\n".utf8)
        }
        if !out.isEmpty { stream.write(out) }
    }

    /// The `dropped` event for what was lost since the last one.
    private func appendLost(_ out: inout [UInt8]) {
        guard lost > 0 else { return }
        out.append(contentsOf: "event: dropped\ndata: {\"dropped\":\(lost)}\n\n".utf8)
        lost = 0
    }
}
