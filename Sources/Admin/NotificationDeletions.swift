import Observation
import PushCore
import Runtime
import State
import Synchronization
import Transport

/// What `DELETE /emulator/v1/notifications` and `POST /reset?scope=` removed, as the reads that
/// reach into the journal must see it: the journal keeps its records (export and the report read
/// them), so each deletion is kept as its query and the time it was made, and a journal record is
/// gone when a deletion's filter matches it and it is not newer. A deletion of everything
/// replaces every earlier one; at most `capacity` filtered ones are kept (then the caller answers
/// 409), and a scope's reset replaces its earlier one.
///
/// Deletions are state (store `notifications.deleted`): each is a change record, so a deletion
/// outlives a restart (the journal's records it hides stay hidden) and, on a cluster, applies on
/// every node (each forgets its own notifications of it).
package final class NotificationDeletions: PersistentStore {
    static let capacity = 256
    /// Scopes whose last reset is kept at most (then a reset of another scope answers 409).
    static let scopeCapacity = 4096

    struct Deletion: Sendable {
        /// The query string it was made with (`provider=apns&q=...`), read again at start.
        let query: String
        let filter: NotificationLog.Filter
        let upToMs: Int64
        /// Its query names no time, so a later deletion with the same query replaces it.
        let timeless: Bool
    }

    /// When each scope was last reset, by form: a notification of the scope that is not newer
    /// is gone, and the scope's report counts what came after.
    struct ScopeResets: Sendable {
        var teams: [String: Int64] = [:]
        var projects: [String: Int64] = [:]
        var labels: [String: Int64] = [:]
        var count: Int { teams.count + projects.count + labels.count }
        var isEmpty: Bool { count == 0 }

        subscript(scope: Scope) -> Int64? {
            get {
                switch scope {
                case .team(let t): return teams[t]
                case .project(let p): return projects[p]
                case .label(let l): return labels[l]
                }
            }
            set {
                switch scope {
                case .team(let t): teams[t] = newValue
                case .project(let p): projects[p] = newValue
                case .label(let l): labels[l] = newValue
                }
            }
        }
    }

    struct Kept: Sendable {
        var all: Int64?
        var filtered: [Deletion] = []
        var scopes = ScopeResets()
    }

    enum Kind {
        static let deleted = 1, scopeReset = 2
    }

    enum Outcome: Equatable {
        case kept
        /// `capacity` filtered deletions (or `scopeCapacity` scopes) are kept already.
        case full
        /// The query does not parse (a record from a newer pushemu).
        case invalid(String)
    }

    package let stateName = "notifications.deleted"
    package let changes = ChangeLink(store: "notifications.deleted")
    private let kept = FutexLock<Kept>(Kept())
    private let log: NotificationLog
    private let campaignKeys: [String]
    let labels: @Sendable (String) -> [String]

    /// Deletions of `log`'s notifications; a query's campaign terms read `campaignKeys`, its
    /// label scopes a token's device's `labels`.
    package init(log: NotificationLog, campaignKeys: [String], labels: @escaping @Sendable (String) -> [String]) {
        self.log = log
        self.campaignKeys = campaignKeys
        self.labels = labels
    }

    package var recordSchemas: [RecordSchema] {
        [
            RecordSchema(
                kind: Kind.deleted, name: "deleted",
                fields: [FieldSchema(1, "query", .string), FieldSchema(2, "upTo", .int), FieldSchema(3, "everything", .bool)]),
            RecordSchema(
                kind: Kind.scopeReset, name: "scopeReset", fields: [FieldSchema(1, "scope", .string), FieldSchema(2, "at", .int)]),
        ]
    }

    /// The filter of a deletion's query string as `DELETE /notifications` reads it (a relative
    /// time counted from `nowMs`).
    func filter(query: String, nowMs: Int64) throws(NotificationQuery.QueryError) -> (NotificationLog.Filter, NotificationQuery) {
        var h = HTTPFields()
        h.add(name: ":path", value: "/emulator/v1/notifications" + (query.isEmpty ? "" : "?" + query))
        let q = try NotificationQuery.parse(Request(version: .http2, method: .delete, headers: h), nowMs: nowMs, labels: labels)
        return (q.filter(campaignKeys: campaignKeys, limit: Int.max), q)
    }

    /// Deletes the notifications `query` finds that are not newer than `upToMs`: kept (and
    /// logged), and forgotten by the in-memory log. Returns how many the log forgot, or why not.
    func delete(query: String, upToMs: Int64) -> (Outcome, removed: Int) {
        let parsed: (NotificationLog.Filter, NotificationQuery)
        do { parsed = try filter(query: query, nowMs: upToMs) } catch { return (.invalid(error.description), 0) }
        let (filter, q) = parsed
        let everything = q.isPlain && q.token == nil && q.topic == nil && q.provider == nil
        let outcome = kept.withLock { k -> Outcome in
            guard
                add(
                    &k, query: query, filter: filter, upToMs: upToMs, everything: everything,
                    timeless: q.afterMs == nil && q.beforeMs == nil)
            else { return .full }
            changes.emit(kind: Kind.deleted, atMs: upToMs) { w in
                w.string(1, query)
                w.int(2, upToMs)
                if everything { w.bool(3, true) }
            }
            return .kept
        }
        guard outcome == .kept else { return (outcome, 0) }
        return (.kept, log.remove(NotificationDeletions.upTo(upToMs, filter)))
    }

    private func add(
        _ k: inout Kept, query: String, filter: NotificationLog.Filter, upToMs: Int64, everything: Bool, timeless: Bool, force: Bool = false
    ) -> Bool {
        if everything {
            k.all = max(k.all ?? .min, upToMs)
            k.filtered.removeAll { $0.upToMs <= upToMs }
            return true
        }
        if timeless, let i = k.filtered.firstIndex(where: { $0.timeless && $0.query == query }) {
            if k.filtered[i].upToMs < upToMs { k.filtered[i] = Deletion(query: query, filter: filter, upToMs: upToMs, timeless: true) }
            return true
        }
        guard force || k.filtered.count < NotificationDeletions.capacity else { return false }
        k.filtered.append(Deletion(query: query, filter: filter, upToMs: upToMs, timeless: timeless))
        return true
    }

    /// `filter`, also requiring a notification not newer than `upToMs`.
    static func upTo(_ upToMs: Int64, _ filter: NotificationLog.Filter) -> NotificationLog.Filter {
        var f = filter
        let previous = filter.matches
        f.matches = { n in n.receivedAtMs <= upToMs && (previous?(n) ?? true) }
        return f
    }

    /// Resets `scope` at `atMs`: its notifications not newer are gone, and its report starts
    /// afresh. Returns how many the in-memory log forgot, or `.full`. `record` false: not kept as
    /// a change (a cluster's reset, asked of each node, is recorded once by the node that asked,
    /// after every node has counted what it forgot).
    func resetScope(_ scope: Scope, atMs: Int64, record: Bool = true) -> (Outcome, removed: Int) {
        resetScope(scope, atMs: atMs, record: record, force: false)
    }

    /// `force`: kept past the capacity (a record replayed from the log was kept when made).
    private func resetScope(_ scope: Scope, atMs: Int64, record: Bool, force: Bool) -> (Outcome, removed: Int) {
        let outcome = kept.withLock { k -> Outcome in
            guard force || k.scopes[scope] != nil || k.scopes.count < NotificationDeletions.scopeCapacity else { return .full }
            k.scopes[scope] = max(k.scopes[scope] ?? .min, atMs)
            if record {
                changes.emit(kind: Kind.scopeReset, atMs: atMs) { w in
                    w.string(1, scope.text)
                    w.int(2, atMs)
                }
            }
            return .kept
        }
        guard outcome == .kept else { return (outcome, 0) }
        var f = NotificationLog.Filter()
        let labels = self.labels
        f.matches = { n in n.receivedAtMs <= atMs && scope.holds(n, labels: labels) }
        return (.kept, log.remove(f))
    }

    /// The time of `scope`'s last reset (`.min` when none).
    func resetMs(_ scope: Scope) -> Int64 { kept.withLock { $0.scopes[scope] } ?? .min }

    package func reset(_ scope: ResetScope) { kept.withLock { $0 = Kept() } }

    package func addStats(to stats: inout StatsDocument) {
        let k = kept.withLock { $0 }
        stats.add("notifications", "deletionsKept", k.filtered.count + (k.all == nil ? 0 : 1))
        stats.add("notifications", "scopesReset", k.scopes.count)
    }

    /// Whether `n` was deleted.
    func removes(_ n: PushNotification) -> Bool {
        let k = kept.withLock { $0 }
        return NotificationDeletions.removes(n, k, labels: labels)
    }

    static func removes(_ n: PushNotification, _ k: Kept, labels: (String) -> [String]) -> Bool {
        let at = n.receivedAtMs
        if let all = k.all, at <= all { return true }
        if !k.scopes.isEmpty {
            if let t = n.team, let ms = k.scopes.teams[t], at <= ms { return true }
            if n.provider == .fcm, let ms = k.scopes.projects[n.environment], at <= ms { return true }
            if !k.scopes.labels.isEmpty {
                for l in labels(String(decoding: n.token, as: UTF8.self)) {
                    if let ms = k.scopes.labels[l], at <= ms { return true }
                }
            }
        }
        for d in k.filtered where at <= d.upToMs && NotificationLog.admits(d.filter, n) { return true }
        return false
    }

    /// `filter`, also refusing what was deleted (itself when nothing was).
    func excluding(_ filter: NotificationLog.Filter) -> NotificationLog.Filter {
        let k = kept.withLock { $0 }
        guard k.all != nil || !k.filtered.isEmpty || !k.scopes.isEmpty else { return filter }
        var f = filter
        let previous = filter.matches
        let labels = self.labels
        f.matches = { n in !NotificationDeletions.removes(n, k, labels: labels) && (previous?(n) ?? true) }
        return f
    }

    // MARK: records

    package func apply(_ record: RecordView) throws {
        guard record.version == 1 else { throw StateFormatError("\(stateName) has no record kind \(record.kind) v\(record.version)") }
        switch record.kind {
        case Kind.deleted:
            var query = ""
            var upTo = record.atMs
            var everything = false
            try record.withBody { raw in
                var r = StateReader(raw)
                while let f = try r.next() {
                    switch f {
                    case 1: query = try r.string()
                    case 2: upTo = try r.int()
                    case 3: everything = try r.bool()
                    default: try r.skip()
                    }
                }
            }
            let parsed: (NotificationLog.Filter, NotificationQuery)
            do { parsed = try filter(query: query, nowMs: upTo) } catch { throw StateFormatError("a deletion's query: \(error)") }
            let (filter, q) = parsed
            kept.withLock { k in
                _ = add(
                    &k, query: query, filter: filter, upToMs: upTo, everything: everything, timeless: q.afterMs == nil && q.beforeMs == nil,
                    force: true)
            }
            _ = log.remove(NotificationDeletions.upTo(upTo, filter))
        case Kind.scopeReset:
            var text = ""
            var at = record.atMs
            try record.withBody { raw in
                var r = StateReader(raw)
                while let f = try r.next() {
                    switch f {
                    case 1: text = try r.string()
                    case 2: at = try r.int()
                    default: try r.skip()
                    }
                }
            }
            let scope: Scope
            do { scope = try Scope.parse(text) } catch { throw StateFormatError("a reset's scope: \(error)") }
            _ = resetScope(scope, atMs: at, record: false, force: true)
        default:
            throw StateFormatError("\(stateName) has no record kind \(record.kind)")
        }
    }

    package func snapshot(_ emit: (ChangeRecord) -> Void) {
        let k = kept.withLock { $0 }
        func deleted(_ query: String, _ upTo: Int64, everything: Bool) {
            var w = StateWriter()
            w.string(1, query)
            w.int(2, upTo)
            if everything { w.bool(3, true) }
            emit(ChangeRecord(store: stateName, kind: Kind.deleted, body: w.bytes, atMs: upTo))
        }
        if let all = k.all { deleted("", all, everything: true) }
        for d in k.filtered { deleted(d.query, d.upToMs, everything: false) }
        let scopes =
            k.scopes.teams.map { (Scope.team($0.key), $0.value) } + k.scopes.projects.map { (Scope.project($0.key), $0.value) }
            + k.scopes.labels.map { (Scope.label($0.key), $0.value) }
        for (scope, at) in scopes.sorted(by: { $0.0.text < $1.0.text }) {
            var w = StateWriter()
            w.string(1, scope.text)
            w.int(2, at)
            emit(ChangeRecord(store: stateName, kind: Kind.scopeReset, body: w.bytes, atMs: at))
        }
    }
}
