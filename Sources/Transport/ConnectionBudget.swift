import Synchronization

/// The process-wide limits every event loop shares: one count of open connections (the
/// `maxConnections` limit is the server's, not a per-loop share) and one budget of buffered
/// bytes (request bodies being read, answers not yet sent, pipelined input).
///
/// Each loop measures its own connections' buffers on its memory sweep and publishes the total
/// in its slot; whichever loop sums the slots past the budget raises `overBudget`, which the
/// dispatcher reads (one relaxed load of a value that rarely changes) to answer new requests
/// 503 in the route's format, and each loop then closes its largest buffer holders until its
/// share fits. Nothing here is touched per byte or per frame.
final class ConnectionBudget: Sendable {
    let maxConnections: Int
    let maxBufferedBytes: Int
    private let open = Atomic<Int>(0)
    /// The fixed cost of the connections holding a slot (their TLS and HTTP/2 session state),
    /// counted in the same budget as the buffers.
    private let fixed = Atomic<Int>(0)

    /// What a connection costs before it buffers anything, measured (docs/configuration.md):
    /// an HTTP/2 session (nghttp2's frame buffer, HPACK tables) and our own state, plus for
    /// TLS OpenSSL's (its read and write buffers are released while idle).
    static let cleartextCost = 24 << 10
    static let tlsCost = 44 << 10
    private let over = Atomic<Bool>(false)
    private let slots: [LoopTotal]

    init(maxConnections: Int, maxBufferedBytes: Int, loops: Int) {
        self.maxConnections = maxConnections
        self.maxBufferedBytes = maxBufferedBytes
        slots = (0..<max(1, loops)).map { _ in LoopTotal() }
    }

    var openConnections: Int { open.load(ordering: .relaxed) }

    /// The fixed cost of the connections holding a slot.
    var connectionBytes: Int { fixed.load(ordering: .relaxed) }

    /// Takes a connection slot costing `cost` bytes; false at the connection limit, or when the
    /// connections' fixed costs and the buffers would pass the memory budget.
    func admitConnection(cost: Int) -> Bool {
        var current = open.load(ordering: .relaxed)
        while true {
            guard current < maxConnections else { return false }
            let (exchanged, original) = open.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
        let buffered = slots.reduce(0) { $0 + $1.value.load(ordering: .relaxed) }
        guard fixed.add(cost, ordering: .relaxed).newValue + buffered <= maxBufferedBytes else {
            fixed.subtract(cost, ordering: .relaxed)
            open.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func releaseConnection(cost: Int) {
        fixed.subtract(cost, ordering: .relaxed)
        open.subtract(1, ordering: .relaxed)
    }

    /// True while the buffered bytes of all loops are over the budget.
    @inline(__always)
    var overBudget: Bool { over.load(ordering: .relaxed) }

    /// Publishes loop `index`'s buffered bytes and returns the process total (updating `overBudget`).
    func publish(loop index: Int, bytes: Int) -> Int {
        slots[index].value.store(bytes, ordering: .relaxed)
        let total = slots.reduce(0) { $0 + $1.value.load(ordering: .relaxed) } + fixed.load(ordering: .relaxed)
        let isOver = total > maxBufferedBytes
        if isOver != over.load(ordering: .relaxed) { over.store(isOver, ordering: .relaxed) }
        return total
    }

    /// What one loop's buffers may hold once the budget is exceeded (the connections' fixed
    /// costs taken out first).
    var perLoopShare: Int { max(maxBufferedBytes / 16, maxBufferedBytes - fixed.load(ordering: .relaxed)) / slots.count }
}

/// One loop's published total: written by that loop on its sweep (every 100 ms at most), read
/// by the others then. Too rare for false sharing to matter.
private final class LoopTotal: Sendable {
    let value = Atomic<Int>(0)
}
