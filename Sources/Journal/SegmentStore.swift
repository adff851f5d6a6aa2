import CJournalVFS
import CSQLite
import Glibc
import Runtime
import Synchronization
import Transport

/// One stored segment: its time range (its oldest and newest record's), record counts and encoded records.
struct Segment: Sendable {
    var id: Int64
    var firstMs: Int64
    var lastMs: Int64
    var requests: Int
    var tracking: Int
    var data: [UInt8]
}

/// Where segments live. The writer thread is the only one that appends or deletes; readers may
/// call `read` from any thread.
protocol SegmentStore: AnyObject, Sendable {
    /// Appends `segments` in one transaction (one commit: one fsync in WAL mode with `FULL`);
    /// returns the id each non-empty one got, in order. `locations`: where a segment's bytes are
    /// in the write-ahead files (`AheadLog`; stored there, not copied here), by position (nil or
    /// missing: its bytes are stored here). `aheadThrough`: per event loop, how far the files
    /// are held after this commit (recorded in the same transaction).
    func append(_ segments: [SegmentEncoder], locations: [AheadLog.Location?], aheadThrough: [Int: AheadLog.Position]) throws
        -> [Int64]
    /// Segments whose last record is at or after `sinceMs`, in write order (or newest first).
    func read(sinceMs: Int64, newestFirst: Bool, _ body: (Segment) -> Bool)
    /// The segments with ids in `ids`, in write order (or newest first).
    func read(ids: ClosedRange<Int64>, newestFirst: Bool, _ body: (Segment) -> Bool)
    /// Deletes the oldest segments: those that end before `beforeMs`, then as many more as keep at
    /// least `keepRecords` records. Returns the records deleted and the last id deleted (0: none).
    func prune(beforeMs: Int64, keepRecords: Int) throws -> (records: Int, through: Int64)
    func removeAll() throws
    /// Requests and tracking attempts stored.
    func totals() -> (requests: Int, tracking: Int)
    /// The first and last segment ids stored (nil: none), and the records from `id` on.
    func span() -> ClosedRange<Int64>?
    func records(from id: Int64) -> Int
    /// The index's closed blocks, kept beside the segments (in memory: nowhere, the index has them).
    func appendBlock(_ block: BlockSummary) throws
    func blocks() -> [BlockSummary]
    /// Deletes the blocks that begin at or before segment `id`.
    func deleteBlocks(through id: Int64) throws
}

extension SegmentStore {
    func append(_ segments: [SegmentEncoder]) throws -> [Int64] { try append(segments, locations: [], aheadThrough: [:]) }
}

/// Segments in a SQLite database in WAL mode. Under strict durability a segment's bytes stay
/// in the write-ahead file its loop wrote them to (`AheadLog`) and its row says where
/// (`file_loop`, `file_serial`, `file_start`, `file_end`; `data` empty); otherwise, and for
/// segments recovered from a killed run, the row holds them (`data`). Pages are 4 KiB: a
/// segment's blob goes into new overflow pages, so a commit writes about its own bytes plus two
/// small B-tree pages (with 64 KiB pages every commit rewrote whole 64 KiB leaf and index
/// pages; measured here, the writer's CPU per strict commit fell by about a quarter with 4 KiB).
/// SQLite's default checkpoint (1,000 pages, 4 MiB) keeps the WAL small, so after its first
/// 4 MiB every commit overwrites WAL blocks already allocated, and its fdatasync (measured
/// here) costs about half the CPU and wall time of one that grows the file.
final class SQLiteSegmentStore: SegmentStore, @unchecked Sendable {
    static let coalescingVFS = "pushemu-coalescing"
    private let writer: SQLiteDatabase
    private let insert: SQLiteDatabase.Statement
    private let marker: SQLiteDatabase.Statement
    private let path: String
    /// The write-ahead files' directory.
    let aheadDirectory: String
    private let total = FutexLock((requests: 0, tracking: 0))

    /// No index on `last_ms`: it cost one more page (two more writes) in every commit, and a
    /// read since a time scans the segment rows in id order without touching their blobs (tens
    /// of thousands of rows for ten million records). Journals that have it lose it.
    static let schema = """
        CREATE TABLE IF NOT EXISTS segments (
          id INTEGER PRIMARY KEY, first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL,
          requests INTEGER NOT NULL, tracking INTEGER NOT NULL, data BLOB NOT NULL,
          file_loop INTEGER, file_serial INTEGER, file_start INTEGER, file_end INTEGER);
        DROP INDEX IF EXISTS segments_last_ms;
        CREATE TABLE IF NOT EXISTS segment_blocks (
          first_segment INTEGER PRIMARY KEY, last_segment INTEGER NOT NULL, min_ms INTEGER NOT NULL,
          max_ms INTEGER NOT NULL, requests INTEGER NOT NULL, tracking INTEGER NOT NULL,
          keys INTEGER NOT NULL, text_indexed INTEGER NOT NULL, counts BLOB NOT NULL, bloom BLOB NOT NULL, digest BLOB);
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
        INSERT OR IGNORE INTO meta VALUES ('format', 'pushemu-journal-1');
        """
    static let columns = "id, first_ms, last_ms, requests, tracking, data, file_loop, file_serial, file_start, file_end"

    /// `synchronous`: FULL fsyncs the WAL at every commit (strict), NORMAL leaves it to the OS.
    init(path: String, synchronous: String) throws {
        // With FULL (strict) the writer's commits go through the coalescing VFS: one pwrite per
        // commit instead of two per page (see coalescing_vfs.h for why that needs FULL).
        let coalescing = synchronous == "FULL" && pushemu_coalescing_vfs_register(SQLiteSegmentStore.coalescingVFS) == SQLITE_OK
        writer = try SQLiteDatabase(path: path, vfs: coalescing ? SQLiteSegmentStore.coalescingVFS : nil)
        self.path = path
        aheadDirectory = AheadLog.directory(journal: path)
        if (try? writer.prepare("SELECT 1 FROM sqlite_master WHERE name='segments'"))?.step() != SQLITE_ROW {
            try writer.exec("PRAGMA page_size=4096")
        }
        try writer.exec("PRAGMA journal_mode=WAL")
        try writer.exec("PRAGMA synchronous=\(synchronous)")
        try writer.exec(SQLiteSegmentStore.schema)
        // A journal from before segments stayed in their files gains the location columns.
        if (try? writer.prepare("SELECT file_loop FROM segments LIMIT 0")) == nil {
            try writer.exec(
                """
                ALTER TABLE segments ADD COLUMN file_loop INTEGER; ALTER TABLE segments ADD COLUMN file_serial INTEGER;
                ALTER TABLE segments ADD COLUMN file_start INTEGER; ALTER TABLE segments ADD COLUMN file_end INTEGER;
                """)
        }
        // A journal from before the blocks held campaign digests: its blocks have none (a report
        // reads their records).
        if (try? writer.prepare("SELECT digest FROM segment_blocks LIMIT 0")) == nil {
            try writer.exec("ALTER TABLE segment_blocks ADD COLUMN digest BLOB")
        }
        insert = try writer.prepare(
            "INSERT INTO segments (first_ms, last_ms, requests, tracking, data, file_loop, file_serial, file_start, file_end) VALUES (?,?,?,?,?,?,?,?,?)"
        )
        marker = try writer.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('ahead-' || ?, ?)")
        let s = try writer.prepare("SELECT coalesce(sum(requests),0), coalesce(sum(tracking),0) FROM segments")
        if s.step() == SQLITE_ROW { total.withLock { $0 = (Int(s.int(0)), Int(s.int(1))) } }
    }

    func append(_ segments: [SegmentEncoder], locations: [AheadLog.Location?], aheadThrough: [Int: AheadLog.Position]) throws
        -> [Int64]
    {
        try writer.exec("BEGIN")
        for (loop, position) in aheadThrough {
            marker.bind(1, Int64(loop))
            marker.bind(2, text: position.text)
            let rc = marker.step()
            marker.reset()
            if rc != SQLITE_DONE {
                try? writer.exec("ROLLBACK")
                throw SQLiteDatabase.SQLiteError(description: "journal write failed: \(writer.message)")
            }
        }
        var r = 0
        var t = 0
        var ids: [Int64] = []
        for (i, seg) in segments.enumerated() where !seg.isEmpty {
            insert.bind(1, seg.oldestMs)
            insert.bind(2, seg.newestMs)
            insert.bind(3, Int64(seg.requests))
            insert.bind(4, Int64(seg.tracking))
            let location = i < locations.count ? locations[i] : nil
            let rc: Int32
            if let l = location {
                insert.bindEmptyBlob(5)
                insert.bind(6, Int64(l.loop))
                insert.bind(7, Int64(bitPattern: l.serial))
                insert.bind(8, Int64(l.start))
                insert.bind(9, Int64(l.end))
                rc = insert.step()
            } else {
                // SQLite reads the blob during the step (bound without a copy), so both run inside.
                rc = seg.withBytes {
                    insert.bind(5, blob: $0)
                    return insert.step()
                }
            }
            insert.reset()
            if rc != SQLITE_DONE {
                try? writer.exec("ROLLBACK")
                throw SQLiteDatabase.SQLiteError(description: "journal write failed: \(writer.message)")
            }
            ids.append(sqlite3_last_insert_rowid(writer.db))
            r += seg.requests
            t += seg.tracking
        }
        try writer.exec("COMMIT")
        total.withLock {
            $0.requests += r
            $0.tracking += t
        }
        return ids
    }

    func read(sinceMs: Int64, newestFirst: Bool, _ body: (Segment) -> Bool) {
        // A connection per read: reads are rare (admin API, reports) and WAL lets them run beside the writer.
        guard let db = try? SQLiteDatabase(path: path),
            let s = try? db.prepare(
                "SELECT \(Self.columns) FROM segments WHERE last_ms >= ? ORDER BY id \(newestFirst ? "DESC" : "ASC")")
        else { return }
        s.bind(1, sinceMs)
        let files = AheadLog.Reader(dir: aheadDirectory)
        while s.step() == SQLITE_ROW {
            if !body(SQLiteSegmentStore.segment(s, files)) { break }
        }
    }

    func read(ids: ClosedRange<Int64>, newestFirst: Bool, _ body: (Segment) -> Bool) {
        guard let db = try? SQLiteDatabase(path: path),
            let s = try? db.prepare(
                "SELECT \(Self.columns) FROM segments WHERE id BETWEEN ? AND ? ORDER BY id \(newestFirst ? "DESC" : "ASC")")
        else { return }
        s.bind(1, ids.lowerBound)
        s.bind(2, ids.upperBound)
        let files = AheadLog.Reader(dir: aheadDirectory)
        while s.step() == SQLITE_ROW {
            if !body(SQLiteSegmentStore.segment(s, files)) { break }
        }
    }

    /// Per event loop, how far the journal holds its write-ahead files (see `AheadLog`).
    func aheadThrough() -> [Int: AheadLog.Position] { SQLiteSegmentStore.aheadThrough(writer) }

    static func aheadThrough(_ db: SQLiteDatabase) -> [Int: AheadLog.Position] {
        var out: [Int: AheadLog.Position] = [:]
        guard let s = try? db.prepare("SELECT CAST(substr(key, 7) AS INTEGER), value FROM meta WHERE key LIKE 'ahead-%'") else {
            return out
        }
        while s.step() == SQLITE_ROW {
            guard s.int(0) >= 0, s.int(0) < 1 << 20, let p = AheadLog.Position(text: s.text(1)) else { continue }
            out[Int(s.int(0))] = p
        }
        return out
    }

    /// Per event loop, the oldest write-ahead file a stored segment is in.
    private func referencedFiles() -> [Int: UInt64] {
        var out: [Int: UInt64] = [:]
        guard
            let s = try? writer.prepare(
                "SELECT file_loop, min(file_serial) FROM segments WHERE file_loop IS NOT NULL GROUP BY file_loop")
        else { return out }
        while s.step() == SQLITE_ROW {
            out[Int(s.int(0))] = UInt64(bitPattern: s.int(1))
        }
        return out
    }

    /// Deletes the write-ahead files nothing needs any more (`AheadLog.unneeded`).
    func deleteUnneededFiles() {
        for p in AheadLog.unneeded(in: aheadDirectory, through: aheadThrough(), referenced: referencedFiles()) { unlink(p) }
    }

    /// Reads a journal file without a writer (the CLI's `export` and `report`), then what its
    /// write-ahead files hold that it does not (a strict run killed before its last commits; the
    /// files are left for the next run to store).
    static func read(path: String, sinceMs: Int64, _ body: (Segment) -> Bool) throws {
        let db = try SQLiteDatabase(path: path)
        let s: SQLiteDatabase.Statement
        do {
            // A journal from before the location columns (read, not migrated: nothing writes here).
            let columns =
                (try? db.prepare("SELECT file_loop FROM segments LIMIT 0")) == nil
                ? "id, first_ms, last_ms, requests, tracking, data, NULL, NULL, NULL, NULL" : columns
            s = try db.prepare("SELECT \(columns) FROM segments WHERE last_ms >= ? ORDER BY id")
        } catch {
            throw SQLiteDatabase.SQLiteError(description: "the journal at \(path): \(error)")
        }
        var last: Int64 = 0
        var going = true
        s.bind(1, sinceMs)
        let dir = AheadLog.directory(journal: path)
        let files = AheadLog.Reader(dir: dir)
        while going && s.step() == SQLITE_ROW {
            let seg = segment(s, files)
            last = seg.id
            going = body(seg)
        }
        guard going else { return }
        for r in AheadLog.pending(in: dir, through: aheadThrough(db)) where r.mark.newestMs >= sinceMs {
            last += 1
            let seg = Segment(
                id: last, firstMs: r.mark.oldestMs, lastMs: r.mark.newestMs, requests: r.mark.requests, tracking: r.mark.tracking,
                data: r.bytes)
            if !body(seg) { return }
        }
    }

    /// A row of `columns`: its bytes from the row, or from its write-ahead file.
    private static func segment(_ s: SQLiteDatabase.Statement, _ files: AheadLog.Reader) -> Segment {
        var data = s.blob(5)
        if !s.isNull(6) {
            let l = AheadLog.Location(
                loop: Int(clamping: s.int(6)), serial: UInt64(bitPattern: s.int(7)), start: Int(clamping: s.int(8)),
                end: Int(clamping: s.int(9)))
            data = files.read(l)
        }
        return Segment(id: s.int(0), firstMs: s.int(1), lastMs: s.int(2), requests: Int(s.int(3)), tracking: Int(s.int(4)), data: data)
    }

    func prune(beforeMs: Int64, keepRecords: Int) throws -> (records: Int, through: Int64) {
        let (r, t) = total.withLock { $0 }
        var excess = r + t - keepRecords
        var cutID: Int64 = 0
        var deleted = (requests: 0, tracking: 0)
        // Oldest first: whole segments, while they end before the age limit or exceed the row limit.
        let s = try writer.prepare("SELECT id, last_ms, requests, tracking FROM segments ORDER BY id")
        while s.step() == SQLITE_ROW {
            let n = Int(s.int(2) + s.int(3))
            guard s.int(1) < beforeMs || excess >= n else { break }
            cutID = s.int(0)
            excess -= n
            deleted.requests += Int(s.int(2))
            deleted.tracking += Int(s.int(3))
        }
        s.reset()
        guard cutID > 0 else { return (0, 0) }
        try writer.exec("DELETE FROM segments WHERE id <= \(cutID)")
        total.withLock {
            $0.requests -= deleted.requests
            $0.tracking -= deleted.tracking
        }
        deleteUnneededFiles()
        return (deleted.requests + deleted.tracking, cutID)
    }

    func removeAll() throws {
        try writer.exec("DELETE FROM segments; DELETE FROM segment_blocks")
        total.withLock { $0 = (0, 0) }
        deleteUnneededFiles()
    }

    func totals() -> (requests: Int, tracking: Int) { total.withLock { $0 } }

    func span() -> ClosedRange<Int64>? {
        guard let s = try? writer.prepare("SELECT min(id), max(id), count(*) FROM segments"), s.step() == SQLITE_ROW, s.int(2) > 0
        else { return nil }
        return s.int(0)...s.int(1)
    }

    func records(from id: Int64) -> Int {
        guard let s = try? writer.prepare("SELECT coalesce(sum(requests + tracking), 0) FROM segments WHERE id >= ?") else { return 0 }
        s.bind(1, id)
        return s.step() == SQLITE_ROW ? Int(s.int(0)) : 0
    }

    func appendBlock(_ b: BlockSummary) throws {
        let s = try writer.prepare(
            "INSERT OR REPLACE INTO segment_blocks (first_segment, last_segment, min_ms, max_ms, requests, tracking, keys, text_indexed, counts, bloom, digest) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
        )
        s.bind(1, b.firstSegment)
        s.bind(2, b.lastSegment)
        s.bind(3, b.minMs)
        s.bind(4, b.maxMs)
        s.bind(5, Int64(b.requests))
        s.bind(6, Int64(b.tracking))
        s.bind(7, Int64(b.keys))
        s.bind(8, b.textIndexed ? 1 : 0)
        let counts = b.countsBytes
        let bloom = b.bloomBytes
        let digest = b.digested ? b.digests.bytes : nil
        let rc = counts.withUnsafeBytes { c in
            bloom.withUnsafeBytes { f in
                s.bind(9, blob: c)
                s.bind(10, blob: f)
                if let digest {
                    return digest.withUnsafeBytes { d in
                        s.bind(11, blob: d)
                        return s.step()
                    }
                }
                return s.step()
            }
        }
        guard rc == SQLITE_DONE else { throw SQLiteDatabase.SQLiteError(description: "journal index write failed: \(writer.message)") }
    }

    /// The stored blocks in segment order; a malformed row is left out (its segments are then unindexed).
    func blocks() -> [BlockSummary] {
        guard
            let s = try? writer.prepare(
                "SELECT first_segment, last_segment, min_ms, max_ms, requests, tracking, keys, text_indexed, counts, bloom, digest FROM segment_blocks ORDER BY first_segment"
            )
        else { return [] }
        var out: [BlockSummary] = []
        while s.step() == SQLITE_ROW {
            var b = BlockSummary(firstSegment: s.int(0))
            b.lastSegment = s.int(1)
            b.minMs = s.int(2)
            b.maxMs = s.int(3)
            b.requests = Int(s.int(4))
            b.tracking = Int(s.int(5))
            b.keys = Int(s.int(6))
            b.textIndexed = s.int(7) != 0
            guard b.lastSegment >= b.firstSegment, b.readCounts(s.blob(8)), b.readBloom(s.blob(9)) else { continue }
            // No digest (an older block, one of too many campaigns) or a damaged one: the report reads its records.
            if !s.isNull(10), let d = CampaignDigests.read(s.blob(10)) {
                b.digests = d
            } else {
                b.digests.overflowed = true
            }
            out.append(b)
        }
        return out
    }

    func deleteBlocks(through id: Int64) throws {
        try writer.exec("DELETE FROM segment_blocks WHERE first_segment <= \(id)")
    }
}

/// Segments kept in memory (`--in-memory`): the same reads and limits, nothing on disk.
final class MemorySegmentStore: SegmentStore, Sendable {
    private let segments = FutexLock<(list: [Segment], next: Int64)>(([], 1))

    func append(_ encoded: [SegmentEncoder], locations: [AheadLog.Location?], aheadThrough: [Int: AheadLog.Position]) throws
        -> [Int64]
    {
        segments.withLock { s in
            var ids: [Int64] = []
            for e in encoded where !e.isEmpty {
                s.list.append(
                    Segment(
                        id: s.next, firstMs: e.oldestMs, lastMs: e.newestMs, requests: e.requests, tracking: e.tracking,
                        data: e.bytes))
                ids.append(s.next)
                s.next += 1
            }
            return ids
        }
    }

    func read(ids: ClosedRange<Int64>, newestFirst: Bool, _ body: (Segment) -> Bool) {
        let list = segments.withLock { $0.list }
        // Ids are consecutive from the first kept segment's.
        guard let first = list.first?.id else { return }
        let lo = max(0, Int(clamping: ids.lowerBound &- first))
        let hi = min(list.count - 1, Int(clamping: ids.upperBound &- first))
        guard lo <= hi else { return }
        if newestFirst {
            for seg in list[lo...hi].reversed() { if !body(seg) { return } }
        } else {
            for seg in list[lo...hi] { if !body(seg) { return } }
        }
    }

    func read(sinceMs: Int64, newestFirst: Bool, _ body: (Segment) -> Bool) {
        let list = segments.withLock { $0.list }
        if newestFirst {
            for seg in list.reversed() where seg.lastMs >= sinceMs { if !body(seg) { return } }
        } else {
            for seg in list where seg.lastMs >= sinceMs { if !body(seg) { return } }
        }
    }

    func prune(beforeMs: Int64, keepRecords: Int) throws -> (records: Int, through: Int64) {
        segments.withLock { s in
            var excess = s.list.reduce(0) { $0 + $1.requests + $1.tracking } - keepRecords
            var cut = 0
            var deleted = 0
            var through: Int64 = 0
            for seg in s.list {
                let n = seg.requests + seg.tracking
                guard seg.lastMs < beforeMs || excess >= n else { break }
                cut += 1
                excess -= n
                deleted += n
                through = seg.id
            }
            s.list.removeFirst(cut)
            return (deleted, through)
        }
    }

    func removeAll() throws { segments.withLock { $0.list.removeAll() } }

    func totals() -> (requests: Int, tracking: Int) {
        segments.withLock { s in s.list.reduce((0, 0)) { ($0.0 + $1.requests, $0.1 + $1.tracking) } }
    }

    func span() -> ClosedRange<Int64>? {
        segments.withLock { s in s.list.first.map { $0.id...s.list.last!.id } }
    }

    func records(from id: Int64) -> Int {
        segments.withLock { s in s.list.reduce(0) { $0 + ($1.id >= id ? $1.requests + $1.tracking : 0) } }
    }

    func appendBlock(_ block: BlockSummary) throws {}
    func blocks() -> [BlockSummary] { [] }
    func deleteBlocks(through id: Int64) throws {}
}
