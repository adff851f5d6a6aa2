import CSystem
import Glibc
import PushCore
import Runtime
import Synchronization

/// A snapshot file kept mapped read-only while records in it wait to be applied.
final class MappedSnapshot: @unchecked Sendable { // immutable after init; unmapped once, in deinit
    let base: UnsafeRawPointer?
    let size: Int

    /// `path` mapped, or nil when it cannot be opened or mapped (`errno` says why).
    init?(path: String) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        size = Int(st.st_size)
        guard size > 0 else {
            base = nil
            return
        }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else { return nil }
        _ = madvise(p, size, MADV_SEQUENTIAL)
        base = UnsafeRawPointer(p)
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: size) }

    deinit { if let base { munmap(UnsafeMutableRawPointer(mutating: base), size) } }
}

/// A store's snapshot records that a start did not apply: each is found by its key (a device's
/// token) and applied the first time anything asks for that key, and a background thread applies
/// the rest. A start with a million devices so reads each record's key, not the record, before
/// it listens.
///
/// The store asks `isPending` (one relaxed load) before each lookup by key and, while records
/// wait, calls `materialize`, which applies the key's record under this object's lock: a
/// lookup that follows finds it in the store. Anything that reads the whole store (a listing, a
/// count, a topic's members, a snapshot) calls `applyAll` first. The lock is taken only while
/// records wait, and only ever before a store's own locks, never inside them; the thread
/// applying a record may look keys up through the store's usual paths (its `materialize`
/// calls return at once).
public final class DeferredRecords: @unchecked Sendable { // `slots` is guarded by `lock`
    /// A waiting record: its key and where its frame starts in the file (0: empty; -1: applied).
    struct Slot {
        var a: UInt64
        var b: UInt64
        var at: Int
    }
    private struct Table {
        var slots: UnsafeMutableBufferPointer<Slot>
        var file: MappedSnapshot
        var cursor = 0
    }
    private let lock = FutexLock<Table?>(nil)
    private let waiting = Atomic<Int>(0)
    /// The thread applying records (0: none).
    private let applier = Atomic<UInt>(0)
    /// Records that could not be applied when their turn came (their key reads as absent).
    let failed = Atomic<Int>(0)
    /// The store's name, for messages.
    let store: String

    /// Nothing waiting yet (a start hands over records through `adopt`).
    public init(store: String) { self.store = store }

    deinit { lock.withLock { Self.free(&$0) } }

    /// Whether any record waits: true only from a start until every record is applied.
    @inline(__always) public var isPending: Bool { waiting.load(ordering: .relaxed) > 0 }

    /// How many wait.
    public var count: Int { waiting.load(ordering: .relaxed) }

    /// Takes `entries` (key and frame offset, one per record) from `file`: a start's, once,
    /// before anything else can look.
    func adopt(_ entries: [[Slot]], file: MappedSnapshot) {
        let n = entries.reduce(0) { $0 + $1.count }
        guard n > 0 else { return }
        var capacity = 16
        while capacity < n + n / 2 { capacity <<= 1 }
        let slots = UnsafeMutableBufferPointer<Slot>.allocate(capacity: capacity)
        slots.initialize(repeating: Slot(a: 0, b: 0, at: 0))
        let mask = capacity - 1
        var added = 0
        for list in entries {
            for e in list {
                var i = Int(truncatingIfNeeded: e.a) & mask
                while slots[i].at != 0 && !(slots[i].a == e.a && slots[i].b == e.b) { i = (i + 1) & mask }
                if slots[i].at == 0 { added += 1 }
                slots[i] = e // a key twice: the later record, as applying both in order would leave it
            }
        }
        lock.withLock { t in
            Self.free(&t)
            t = Table(slots: slots, file: file)
        }
        waiting.store(added, ordering: .releasing)
    }

    /// Applies the record kept for `key`, if one waits, with `apply` (the store's own, which
    /// must not ask this object again).
    public func materialize(_ key: TokenKey, _ apply: (RecordView) throws -> Void) {
        if applier.load(ordering: .relaxed) == UInt(pthread_self()) { return }
        lock.withLock { t in
            guard let table = t else { return }
            let mask = table.slots.count - 1
            var i = Int(truncatingIfNeeded: key.a) & mask
            while table.slots[i].at != 0 {
                if table.slots[i].a == key.a && table.slots[i].b == key.b {
                    if table.slots[i].at > 0 { take(&t, i, apply) }
                    return
                }
                i = (i + 1) & mask
            }
        }
    }

    /// Applies every waiting record (before a read of the whole store, and the background pass).
    public func applyAll(_ apply: (RecordView) throws -> Void) {
        if applier.load(ordering: .relaxed) == UInt(pthread_self()) { return }
        while isPending { applySome(1_024, apply) }
    }

    /// Applies up to `limit` waiting records, in file order of their slots; false once none wait.
    @discardableResult
    public func applySome(_ limit: Int, _ apply: (RecordView) throws -> Void) -> Bool {
        lock.withLock { t in
            var done = 0
            while done < limit, let table = t, table.cursor < table.slots.count {
                let i = table.cursor
                t?.cursor += 1
                if table.slots[i].at > 0 {
                    take(&t, i, apply)
                    done += 1
                }
            }
            return t != nil
        }
    }

    /// Forgets every waiting record (a reset, or a damaged snapshot given up).
    public func discard() {
        lock.withLock { Self.free(&$0) }
        waiting.store(0, ordering: .releasing)
    }

    /// Applies slot `i` (lock held) and frees the table after the last.
    private func take(_ t: inout Table?, _ i: Int, _ apply: (RecordView) throws -> Void) {
        guard let table = t else { return }
        let at = table.slots[i].at
        table.slots[i].at = -1
        let b = table.file.bytes
        let n = Int(StateFrame.u32(b, at))
        applier.store(UInt(pthread_self()), ordering: .relaxed)
        defer { applier.store(0, ordering: .relaxed) }
        do {
            let e = try StateLog.envelope(b, (at + StateFrame.headerSize)..<(at + StateFrame.headerSize + n))
            try apply(RecordView(kind: e.kind, version: e.version, atMs: e.atMs, body: UnsafeRawBufferPointer(rebasing: b[e.body])))
        } catch {
            failed.add(1, ordering: .relaxed)
            csys_write_stderr("pushemu: a saved \(store) record could not be applied (\(error)); it is left out\n")
        }
        if waiting.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { Self.free(&t) }
    }

    private static func free(_ t: inout Table?) {
        t?.slots.deallocate()
        t = nil
    }
}

extension RecordView {
    /// The key of the string in top-level field `field` (a token), or nil when it has none, or
    /// one that is not ASCII.
    public func key(field: Int) -> TokenKey? {
        var r = StateReader(body)
        while let f = try? r.next() {
            if f == field { return r.key() }
            guard (try? r.skip()) != nil else { return nil }
        }
        return nil
    }
}

extension StateReader {
    /// The current field's string as a token's key, consumed; nil when it is not a string, or
    /// not ASCII (its key would differ from the decoded string's).
    public mutating func key() -> TokenKey? {
        guard let span = try? span() else { return nil }
        let raw = UnsafeRawBufferPointer(rebasing: base[span])
        for b in raw where b >= 0x80 { return nil }
        return TokenKey(raw)
    }
}
