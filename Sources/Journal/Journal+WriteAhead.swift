import CSystem
import Glibc
import Synchronization
import Transport

/// One event-loop shard's flush barrier under write-ahead (`.strict` on disk): armed by the
/// first waiting answer of a loop iteration, run by the loop before that iteration's output
/// leaves. Loop-confined (`armed`, `spare`).
final class AheadBarrier: FlushBarrier {
    unowned let journal: Journal
    let shard: Int
    var armed = false
    /// The runs given last time, emptied: swapped with the shard's, so giving allocates nothing.
    var spare: [Journal.WaiterRun] = []

    init(journal: Journal, shard: Int) {
        self.journal = journal
        self.shard = shard
    }

    func beforeFlush() {
        armed = false
        journal.writeAheadAndGive(self)
    }
}

extension Journal {
    /// The barrier: writes the shard's new records ahead (one `write`), then gives every answer
    /// whose record was written (or failed to be: told not stored), on the loop, now.
    func writeAheadAndGive(_ b: AheadBarrier) {
        shards[b.shard].pending.withLock { p in
            writeAhead(&p, shard: b.shard)
            swap(&p.ahead.decided, &b.spare)
        }
        var withheld = 0
        for r in b.spare {
            r.waiter.committed(r.count, stored: r.stored)
            if !r.stored { withheld += r.count }
        }
        b.spare.removeAll(keepingCapacity: true)
        if withheld > 0 { stats.withLock { $0.withheldAnswers &+= UInt64(withheld) } }
    }

    /// Under the shard's lock: appends the encoder's bytes not yet in its file and decides the
    /// waiting runs (stored when written). A failed write (or SQLite refusing commits) drops the
    /// records not written: the segment is cut back to what its file holds and sealed for the
    /// writer, and the next record starts a new segment and file.
    func writeAhead(_ p: inout Pending, shard: Int) {
        guard let e = p.encoder else {
            decide(&p, stored: false) // nothing to write: runs can only be left by a cut
            return
        }
        var ok = !storeFailing.load(ordering: .relaxed)
        if ok && e.byteCount > p.ahead.written.byteCount {
            errno = 0
            if p.ahead.file == nil, let dir = aheadDirectory {
                p.ahead.file = AheadLog.create(in: dir, loop: shard, serial: nextSerial.wrappingAdd(1, ordering: .relaxed).oldValue)
            }
            let from = p.ahead.written.byteCount
            if p.ahead.file != nil {
                if from == 0 { p.ahead.segmentStart = p.ahead.file!.length }
                ok = e.withBytes { AheadLog.write(&p.ahead.file!, offset: from, UnsafeRawBufferPointer(rebasing: $0[from...])) }
            } else {
                ok = false
            }
            if ok {
                if aheadFailing.load(ordering: .relaxed) { aheadFailing.store(false, ordering: .relaxed) }
            } else {
                let code = errno
                let why =
                    p.ahead.file == nil
                    ? "cannot create a write-ahead file in \(aheadDirectory ?? "")\(code != 0 ? ": " + String(cString: strerror(code)) : "")"
                    : "write-ahead write to \(p.ahead.file!.path) failed: "
                        + (code != 0 ? String(cString: strerror(code)) : Journal.shortWriteReason(p.ahead.file!.fd))
                aheadWriteFailed(why, records: e.count - p.ahead.written.records)
            }
        }
        if ok {
            p.ahead.written = e.mark
        } else {
            cut(&p)
        }
        decide(&p, stored: ok)
    }

    /// Why a write came out short: the disk's free space says whether it is full.
    static func shortWriteReason(_ fd: Int32) -> String {
        var st = statvfs()
        if fstatvfs(fd, &st) == 0, st.f_bavail == 0 { return "No space left on device (a short write)" }
        return "a short write"
    }

    /// A write-ahead write the disk refused, reported as a refused commit is: counted in
    /// `failedCommits`, the journal failing until a write succeeds, and said on stderr at most
    /// once a second with what was not stored.
    func aheadWriteFailed(_ why: String, records: Int) {
        aheadFailing.store(true, ordering: .relaxed)
        stats.withLock {
            $0.failedCommits += 1
            $0.lastError = why
        }
        let now = csys_monotonic_ns()
        let say = aheadFailures.withLock { f -> (Int, Int)? in
            f.count += 1
            f.records += records
            guard f.reportedAt == 0 || now &- f.reportedAt >= 1_000_000_000 else { return nil }
            defer { f = (now, 0, 0) }
            return (f.count, f.records)
        }
        if let (count, lost) = say {
            csys_write_stderr(
                "pushemu: journal write-ahead failed: \(why) (\(count) failed write(s), \(lost) record(s) not stored since the last message; their requests were answered 503, not acknowledged)\n"
            )
        }
    }

    /// Moves the undecided runs to `decided`, merging a run into the last one of its waiter.
    private func decide(_ p: inout Pending, stored: Bool) {
        guard !p.runs.isEmpty else { return }
        for var r in p.runs {
            r.stored = stored
            if let last = p.ahead.decided.indices.last, p.ahead.decided[last].waiter === r.waiter, p.ahead.decided[last].stored == stored {
                p.ahead.decided[last].count += r.count
            } else {
                p.ahead.decided.append(r)
            }
        }
        p.runs.removeAll(keepingCapacity: true)
    }

    /// Cuts the shard's segment back to what its file holds (sealed for the writer) and starts
    /// over with no segment and no file (the file, closed, keeps what it holds).
    private func cut(_ p: inout Pending) {
        if var e = p.encoder, p.ahead.written.records > 0, let f = p.ahead.file {
            e.truncate(to: p.ahead.written)
            p.ahead.sealed.append(AheadSegment(encoder: e, location: location(p, f)))
        }
        if let f = p.ahead.file {
            if f.length == 0 { unlink(f.path) }
            close(f.fd)
        }
        p.encoder = nil
        p.ahead.file = nil
        p.ahead.written = SegmentEncoder.Mark()
    }

    private func location(_ p: Pending, _ f: AheadLog.File) -> AheadLog.Location {
        AheadLog.Location(loop: f.loop, serial: f.serial, start: p.ahead.segmentStart, end: f.length)
    }

    /// The writer's take from a write-ahead shard (under its lock): what is not written yet is
    /// written first (its answers are then decided, and the loop's barrier, armed for them,
    /// gives them), then the segment goes with where its file holds it. The file stays open for
    /// the loop's next segment, unless it has grown past `aheadRotateBytes`.
    func takeAhead(_ p: inout Pending, shard: Int, into out: inout [AheadSegment]) {
        writeAhead(&p, shard: shard)
        out.append(contentsOf: p.ahead.sealed)
        p.ahead.sealed.removeAll()
        if let e = p.encoder, !e.isEmpty {
            out.append(AheadSegment(encoder: e, location: p.ahead.file.map { location(p, $0) }))
            p.encoder = nil
            p.ahead.written = SegmentEncoder.Mark()
            if let f = p.ahead.file, f.length >= aheadRotateBytes {
                close(f.fd)
                p.ahead.file = nil
            }
        }
    }

    /// Closes every shard's write-ahead file (the writer has stopped; a later record opens a
    /// new one, which the next start stores).
    func closeAheadFiles() {
        for shard in shards.prefix(loopShards) {
            shard.pending.withLock { p in
                guard let f = p.ahead.file, p.encoder == nil else { return }
                close(f.fd)
                p.ahead.file = nil
            }
        }
    }

    /// Per loop, how far `locations` reach in their files, starting from `marks`.
    static func through(_ locations: some Sequence<AheadLog.Location>, from marks: [Int: AheadLog.Position] = [:])
        -> [Int: AheadLog.Position]
    {
        var out = marks
        for l in locations {
            let p = AheadLog.Position(serial: l.serial, end: l.end)
            if let q = out[l.loop], q >= p { continue }
            out[l.loop] = p
        }
        return out
    }

    /// One commit of what the writer took: the written-ahead segments whose last commit failed,
    /// then this round's, then the other shards'. Written-ahead segments were answered, so they
    /// are kept until a commit holds them; until then loops store nothing new. True when every
    /// segment of a waiting answer was stored (or there was none).
    func commitAll(_ segments: [SegmentEncoder], ahead: [AheadSegment]) -> Bool {
        let all = retry + ahead
        guard !all.isEmpty || !segments.isEmpty else { return true }
        let locations = all.map(\.location)
        let ok = commit(all.map(\.encoder) + segments, locations: locations, through: Journal.through(locations.lazy.compactMap { $0 }))
        if ok {
            if storeFailing.load(ordering: .relaxed) { storeFailing.store(false, ordering: .relaxed) }
            if !retry.isEmpty { stats.withLock { $0.awaitingStore = 0 } }
            retry = []
        } else {
            retry = all
            if !all.isEmpty { storeFailing.store(true, ordering: .relaxed) }
            let held = all.reduce(0) { $0 + $1.encoder.count }
            stats.withLock { $0.awaitingStore = held }
        }
        return ok
    }

    /// A reset: what was waiting for a retry goes with the rest (its files marked as held, so
    /// that a restart does not store it).
    func discardRetry() {
        if !retry.isEmpty { _ = try? store.append([], locations: [], aheadThrough: Journal.through(retry.lazy.compactMap(\.location))) }
        retry = []
        storeFailing.store(false, ordering: .relaxed)
        stats.withLock { $0.awaitingStore = 0 }
    }

    /// Stores what the write-ahead files in `dir` hold that the journal does not (a strict run
    /// that was killed; copied into SQLite, the files' earlier segments stay where they are),
    /// deletes the files nothing needs, and returns the largest serial seen (0: none).
    static func recoverAhead(_ dir: String, into store: SQLiteSegmentStore) throws -> UInt64 {
        let through = store.aheadThrough()
        var last = through.values.map(\.serial).max() ?? 0
        for f in AheadLog.files(in: dir) { last = max(last, f.serial) }
        let found = AheadLog.pending(in: dir, through: through)
        if !found.isEmpty {
            let marks = Journal.through(found.lazy.map(\.location), from: through)
            do {
                _ = try store.append(found.map { SegmentEncoder(stored: $0.bytes, $0.mark) }, locations: [], aheadThrough: marks)
            } catch {
                throw SQLiteDatabase.SQLiteError(description: "storing the write-ahead files of \(dir): \(error)")
            }
        }
        store.deleteUnneededFiles()
        return last
    }
}
