import PushCore

/// Which campaign a tracking attempt journaled without one belongs to (format 4 keeps it with
/// the attempt; older journals, and attempts recorded without it, do not): its notification's,
/// found among the requests summarised recently (an FCM topic or condition send's deliveries by
/// the first half of the send's id). At most `capacity` requests are remembered, oldest forgotten
/// first; an attempt summarised before its request (the device fired while the answer waited for
/// its commit) waits, for up to `patience` segments, then counts as no campaign's.
final class TrackingAttribution {
    struct Attempt {
        var id: UUIDValue
        var event: String
        var outcome: String
        var attempt: Int
        var events: Int
        var atMs: Int64
        var waited = 0
    }

    let capacity: Int
    let patience: Int
    private var byID: [UUIDValue: String?] = [:]
    private var byFanOut: [UInt64: String?] = [:]
    private var order: [(UUIDValue, Bool)] = []
    private var next = 0
    private(set) var waiting: [Attempt] = []

    init(capacity: Int = 1 << 16, patience: Int = 64) {
        self.capacity = capacity
        self.patience = patience
        byID.reserveCapacity(min(capacity, 1 << 12))
    }

    /// A request summarised: its id names `campaign` (and, for a fan-out send, so does every id of its deliveries).
    func note(_ id: UUIDValue, campaign: String?, fanOut: Bool) {
        if order.count < capacity {
            order.append((id, fanOut))
        } else {
            let (old, wasFanOut) = order[next]
            byID.removeValue(forKey: old)
            if wasFanOut { byFanOut.removeValue(forKey: old.high) }
            order[next] = (id, fanOut)
            next = (next + 1) % capacity
        }
        byID[id] = .some(campaign)
        if fanOut { byFanOut[id.high] = .some(campaign) }
    }

    /// The campaign of a notification id (`.none`: not known here).
    func campaign(of id: UUIDValue) -> String?? { byID[id] ?? byFanOut[id.high] }

    /// An attempt whose request is not known yet, kept (up to `capacity`) for `resolve`.
    func wait(_ a: Attempt) -> Bool {
        guard waiting.count < capacity else { return false }
        waiting.append(a)
        return true
    }

    /// The waiting attempts now known, or waited long enough (`.some(nil)`: no campaign's), taken out.
    func resolve(giveUp: Bool = false) -> [(Attempt, String?)] {
        guard !waiting.isEmpty else { return [] }
        var out: [(Attempt, String?)] = []
        var still: [Attempt] = []
        for var a in waiting {
            if let c = campaign(of: a.id) {
                out.append((a, c))
            } else if giveUp || a.waited >= patience {
                out.append((a, nil))
            } else {
                a.waited += 1
                still.append(a)
            }
        }
        waiting = still
        return out
    }
}
