import PushCore
import Runtime

/// Safari's count of the pushes to each subscription that showed no notification: Safari
/// revokes a subscription after repeated silent pushes (the web's `userVisibleOnly` promise
/// broken), at the `safariLimit`-th (Apple does not publish the number; 3 is what developers
/// report). Counted on the deferred-delivery worker; a revocation is a state change (the
/// subscription's unsubscribe), the counts before it are not kept across a restart.
///
/// Bounded: at most `capacity` subscriptions are counted; past it the oldest counts are
/// forgotten (the table is cleared), so a flood of silent pushes never grows memory.
final class SilentPushCounts: Sendable {
    static let safariLimit = 3
    static let capacity = 1_000_000

    private let shards: [FutexLock<[TokenKey: UInt8]>] = (0..<16).map { _ in FutexLock([:]) }

    /// Counts a silent push to `token`; returns how many it has had, this one included.
    func count(_ token: [UInt8]) -> Int {
        let k = TokenKey(token[...])
        return shards[Int(k.b & 15)].withLock { m in
            if m.count >= SilentPushCounts.capacity / 16 { m.removeAll(keepingCapacity: true) }
            let n = (m[k] ?? 0) &+ 1
            m[k] = min(n, 255)
            return Int(n)
        }
    }
}
