import CSystem

/// A value behind a lock, used as Synchronization's `Mutex` is (`withLock`), for state that
/// several threads take at once: a device every loop delivers to, the tracking inbox every loop
/// submits to, an event loop's inbox.
///
/// Why not `Mutex`: on Linux it is a priority-inheritance futex, and once a waiter sleeps, each
/// unlock hands the lock to a sleeping thread, which must be scheduled before anyone can take it
/// again. With more threads than cores (event loops beside a load generator, tracking lanes and
/// the journal's writer) a briefly held lock then moves one context switch at a time: measured
/// with 8 threads on 2 cores, 52 thousand lock-ups a second against 11.8 million here, and on a
/// 16-core machine the one-device benchmark fell from 656k req/s at 8 loops to 88k at 16. This
/// lock (`csys_lock`: spin a little, then sleep on a plain futex) lets whichever thread comes
/// first take a freed lock.
///
/// The word and the value share one allocation of whole cache lines, so two locks made one after
/// the other never share a line. Not reentrant; not fair (a sleeper may be overtaken).
public final class FutexLock<Value>: @unchecked Sendable {
    private let word: UnsafeMutablePointer<UInt32>
    private let value: UnsafeMutablePointer<Value>
    /// Right after the word, on its line: taking the lock brings the value's first bytes along.
    private static var valueOffset: Int { max(8, MemoryLayout<Value>.alignment) }

    public init(_ initial: consuming Value) {
        let offset = Self.valueOffset
        let size = (offset + MemoryLayout<Value>.size + 63) & ~63
        let raw = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: max(64, MemoryLayout<Value>.alignment))
        word = raw.initializeMemory(as: UInt32.self, repeating: 0, count: 1)
        value = (raw + offset).initializeMemory(as: Value.self, to: initial)
    }

    deinit {
        value.deinitialize(count: 1)
        UnsafeMutableRawPointer(word).deallocate()
    }

    /// Runs `body` with the value, the lock held.
    @inline(__always)
    public func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        csys_lock(word)
        defer { csys_unlock(word) }
        return try body(&value.pointee)
    }
}
