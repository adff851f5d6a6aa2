import PushCore
import Synchronization
import Transport

/// The fault rules in force, read on every request without a shared lock: each event loop keeps
/// its own snapshot of the (immutable) rule list and refreshes it only when the version moves.
public final class FaultEngine: @unchecked Sendable {
    final class Snapshot: Sendable {
        let rules: [FaultRule]
        let hasRules: Bool
        init(_ r: [FaultRule]) { rules = r; hasRules = !r.isEmpty }
    }

    public struct Shaping: Sendable {
        /// Latency added to every response, per provider (a realistic service profile).
        public var latency: [PushProvider: DelayDistribution] = [:]
        public init() {}
    }

    private let rules = Mutex<[FaultRule]>([])
    private let version = Atomic<Int>(1)
    private let nextID = Atomic<Int>(0)
    /// One slot per event loop: (version, snapshot). Only that loop touches its slot.
    private let slots: UnsafeMutablePointer<(Int, Snapshot)>
    private let slotCount: Int
    public let shaping: Shaping
    public let allowOverrideHeader: Bool

    public init(loops: Int, shaping: Shaping = Shaping(), allowOverrideHeader: Bool = false) {
        slotCount = max(1, loops)
        slots = .allocate(capacity: slotCount + 1)   // the last slot: callers off the loops (under the lock)
        slots.initialize(repeating: (0, Snapshot([])), count: slotCount + 1)
        self.shaping = shaping
        self.allowOverrideHeader = allowOverrideHeader
    }

    deinit {
        slots.deinitialize(count: slotCount + 1)
        slots.deallocate()
    }

    // MARK: management

    public func add(_ r: FaultRule) {
        rules.withLock { $0.append(r) }
        version.add(1, ordering: .releasing)
    }

    public func newID() -> String { "fault-\(nextID.add(1, ordering: .relaxed).newValue)" }

    @discardableResult
    public func remove(id: String) -> Bool {
        let removed = rules.withLock { r -> Bool in
            let n = r.count
            r.removeAll { $0.id == id }
            return r.count != n
        }
        if removed { version.add(1, ordering: .releasing) }
        return removed
    }

    public func removeAll() {
        rules.withLock { $0.removeAll() }
        version.add(1, ordering: .releasing)
    }

    public var all: [FaultRule] { rules.withLock { $0 } }

    // MARK: the request path

    func snapshot(loop: Int) -> Snapshot {
        let v = version.load(ordering: .acquiring)
        let i = loop < slotCount ? loop : slotCount
        if slots[i].0 == v { return slots[i].1 }
        let s = Snapshot(rules.withLock { $0 })
        if i < slotCount { slots[i] = (v, s) }
        return s
    }

    /// The first rule that matches this request and whose selector fires (counted), if any.
    public func evaluate(_ c: FaultContext, loop: Int, nowMs: Int64) -> FaultRule? {
        let snap = snapshot(loop: loop)
        guard snap.hasRules else { return nil }
        var device: (fleet: String?, labels: [String])?
        for r in snap.rules {
            let m = r.match
            if let p = m.provider, p != c.provider { continue }
            if let t = m.tokens, !t.contains(String(decoding: c.token, as: UTF8.self)) { continue }
            if let t = m.topic {
                guard let topic = c.topic, topic.elementsEqual(t.utf8) else { continue }
            }
            if let p = m.project, c.project != p { continue }
            if let p = m.pathPrefix, !c.path.starts(with: p.utf8) { continue }
            var headersOK = true
            for (n, v) in m.headers where c.headers.firstString(n) != v { headersOK = false; break }
            if !headersOK { continue }
            if m.needsDevice {
                if device == nil { device = c.device() }
                if let f = m.fleet, device?.fleet != f { continue }
                if let l = m.label, device?.labels.contains(l) != true { continue }
            }
            let n = r.seen.add(1, ordering: .relaxed).newValue
            if r.selects(n, nowMs: nowMs) {
                r.firedCount.add(1, ordering: .relaxed)
                return r
            }
        }
        return nil
    }

    /// The per-request override (`x-pushemu-fault: status=503;reason=ServiceUnavailable;delay=200ms`),
    /// when `--allow-override-header` is on.
    public func override(_ headers: HTTPFields) -> FaultEffect? {
        guard allowOverrideHeader, let v = headers.firstString("x-pushemu-fault") else { return nil }
        return try? FaultParser.overrideEffect(v)
    }
}
