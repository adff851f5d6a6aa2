import Synchronization

extension Atomic where Value == Int {
    /// Adds one unless the value has reached `limit`; whether it did (a bounded queue's room,
    /// claimed before what fills it is handed over).
    public func increment(below limit: Int) -> Bool {
        var current = load(ordering: .relaxed)
        while current < limit {
            let (done, seen) = compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if done { return true }
            current = seen
        }
        return false
    }
}
