import Synchronization

/// What the emulator's stored state may take of memory (`--max-state-memory`): device records,
/// FCM registration tokens and their topic subscriptions, APNs tokens, broadcast channels. Each
/// store takes its items' cost (measured figures, `StateMemory.Cost`) from one budget through
/// its own `Account`, and refuses a new item past it the way it refuses one past its count
/// limit: a push to a new token is delivered without a record, Instance ID answers 429
/// `RESOURCE_EXHAUSTED`, the admin API 507, channel creation `CannotCreateChannelConfig`.
/// One atomic add per new item; nothing per push to a known one.
public final class StateMemory: Sendable {
    /// Bytes per item, as measured with the emulator's own layouts (docs/configuration.md).
    public enum Cost {
        /// A device held as a record (`/emulator/v1/devices`): 705 B measured.
        public static let deviceRecord = 768
        /// An FCM registration token known to the registry, with its installation index entry
        /// (with one subscription: 1,037 B measured).
        public static let fcmToken = 832
        /// One topic subscription of a token (its entry and the topic's index entry): 220 B measured.
        public static let fcmSubscription = 208
        /// An APNs device token known to the registry (with its device record: 1,252 B measured).
        public static let apnsToken = 512
        /// A broadcast channel (its id, policy and stored message's bookkeeping): 460 B measured.
        public static let channel = 512
    }

    public let limit: Int
    private let used = Atomic<Int>(0)

    public init(limit: Int = .max) { self.limit = limit }

    public var usedBytes: Int { used.load(ordering: .relaxed) }

    /// Takes `bytes` if the budget has them.
    func take(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while true {
            guard current <= limit - bytes else { return false }
            let (done, seen) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if done { return true }
            current = seen
        }
    }

    /// Takes `bytes` whatever the budget (state read back at start, kept as it was).
    func force(_ bytes: Int) { used.add(bytes, ordering: .relaxed) }

    func give(_ bytes: Int) { used.subtract(bytes, ordering: .relaxed) }

    /// A store's share of the budget, given back whole when the store forgets everything.
    public final class Account: Sendable {
        public let memory: StateMemory
        private let mine = Atomic<Int>(0)

        public init(_ memory: StateMemory) { self.memory = memory }

        /// Takes `bytes` for a new item; false past the budget (the item is refused).
        @inline(__always)
        public func take(_ bytes: Int) -> Bool {
            guard memory.take(bytes) else { return false }
            mine.add(bytes, ordering: .relaxed)
            return true
        }

        /// Takes `bytes` whatever the budget (an item that must be kept: read back at start).
        public func force(_ bytes: Int) {
            memory.force(bytes)
            mine.add(bytes, ordering: .relaxed)
        }

        public func give(_ bytes: Int) {
            memory.give(bytes)
            mine.subtract(bytes, ordering: .relaxed)
        }

        /// Gives back everything this store took (it forgot its items).
        public func releaseAll() {
            let all = mine.exchange(0, ordering: .relaxed)
            memory.give(all)
        }

        public var usedBytes: Int { mine.load(ordering: .relaxed) }
    }
}
