import Glibc

/// Room that keeps an object which several threads write, each its own, off its neighbours'
/// cache lines: per-thread shards made one after another at start-up sit side by side in the
/// heap, and two threads writing one 64-byte line (a lock word, a counter) pass it between their
/// cores at every write although they share nothing. A stored `CacheLinePadding` after an
/// object's fields puts 128 bytes between the fields of consecutive objects (two lines: the
/// adjacent-line prefetcher pairs them).
public struct CacheLinePadding: Sendable {
    private let words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
    private let more: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
    public init() {
        words = (0, 0, 0, 0, 0, 0, 0, 0)
        more = (0, 0, 0, 0, 0, 0, 0, 0)
    }
}

/// Picks the calling thread's stripe among `count`: counters that every event loop adds to are
/// kept as stripes, each thread adding to its own (mostly; two threads may share one) and
/// readers summing them; the journal picks the shard of a thread that is not a loop the same way.
public enum ThreadStripes {
    /// Stable for the life of the calling thread. `count` is at least 1.
    @inline(__always)
    public static func index(count: Int) -> Int {
        // pthread_self is the thread's control block: addresses a stack apart, so mixed by a
        // multiply (its high bits depend on every bit) rather than used as they are.
        let t = UInt64(pthread_self())
        return Int(truncatingIfNeeded: (t &* 0x9E37_79B9_7F4A_7C15) >> 32) % count
    }
}
