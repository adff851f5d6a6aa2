import Observation
import PushCore
import Runtime
import Synchronization
import Transport

/// What `DELETE /emulator/v1/notifications` removed, as the reads that reach into the journal
/// must see it: the journal keeps its records (export and the report read them), so each
/// deletion is kept as its filter and the time it was made, and a journal record is gone when a
/// deletion's filter matches it and it is not newer. A deletion of everything replaces every
/// earlier one; at most `capacity` filtered ones are kept (then the caller answers 409).
package final class NotificationDeletions: Sendable {
    static let capacity = 256

    struct Deletion: Sendable {
        let filter: NotificationLog.Filter
        let upToMs: Int64
    }

    private let kept = FutexLock<(all: Int64?, filtered: [Deletion])>((nil, []))

    package init() {}

    /// Records a deletion; false when `capacity` filtered ones are kept already.
    func add(_ filter: NotificationLog.Filter, upToMs: Int64, everything: Bool) -> Bool {
        kept.withLock { k in
            if everything {
                k = (upToMs, [])
                return true
            }
            guard k.filtered.count < NotificationDeletions.capacity else { return false }
            k.filtered.append(Deletion(filter: filter, upToMs: upToMs))
            return true
        }
    }

    package func removeAll() {
        kept.withLock { $0 = (nil, []) }
        scopeResets.withLock { $0.removeAll() }
    }

    /// When each scope was last reset (`POST /reset?scope=`): its report counts what came after.
    private let scopeResets = FutexLock<[String: Int64]>([:])

    func resetScope(_ scope: Scope, atMs: Int64) { scopeResets.withLock { $0[scope.text] = atMs } }

    /// The time of `scope`'s last reset (`.min` when none).
    func resetMs(_ scope: Scope) -> Int64 { scopeResets.withLock { $0[scope.text] } ?? .min }

    /// Whether `n` was deleted.
    func removes(_ n: PushNotification) -> Bool {
        let k = kept.withLock { $0 }
        if let all = k.all, n.receivedAtMs <= all { return true }
        for d in k.filtered where n.receivedAtMs <= d.upToMs && NotificationLog.admits(d.filter, n) { return true }
        return false
    }

    /// `filter`, also refusing what was deleted (itself when nothing was).
    func excluding(_ filter: NotificationLog.Filter) -> NotificationLog.Filter {
        guard kept.withLock({ $0.all != nil || !$0.filtered.isEmpty }) else { return filter }
        var f = filter
        let previous = filter.matches
        f.matches = { [self] n in !self.removes(n) && (previous?(n) ?? true) }
        return f
    }
}
