import CSystem
import Glibc
import Runtime
import State

/// What a node last did with the cluster's snapshot: wrote it (and trimmed the stream) or
/// loaded it (it started, or the stream had been trimmed past what it applied).
public struct SnapshotEvent: Sendable {
    public var wrote: Bool
    public var atMs: Int64
    /// The last stream entry the snapshot holds.
    public var through: String
    public var records: Int
    public var bytes: Int
    /// Stream entries trimmed after writing it.
    public var trimmed: Int
}

/// The cluster's snapshot in Redis: a header at `snapshot`
/// (`pushemu-snapshot 1 GENERATION CHUNKS THROUGH RECORDS BYTES`) and its records in chunks at
/// `snapshot:GENERATION:N`, each a run of `[length: u32 LE][ChangeRecord wire form]`, about
/// `chunkBytes` each (a Redis value stays far below its 512 MB limit and the reader's 64 MiB).
/// The header is written last, so a reader sees a whole snapshot or the one before.
struct SnapshotHeader: Equatable {
    static let chunkBytes = 8 << 20
    var generation: String
    var chunks: Int
    var through: String
    var records: Int
    var bytes: Int

    var text: String { "pushemu-snapshot 1 \(generation) \(chunks) \(through) \(records) \(bytes)" }

    init(generation: String, chunks: Int, through: String, records: Int, bytes: Int) {
        self.generation = generation
        self.chunks = chunks
        self.through = through
        self.records = records
        self.bytes = bytes
    }

    init?(_ text: String) {
        let f = text.split(separator: " ")
        guard f.count == 7, f[0] == "pushemu-snapshot", f[1] == "1", let chunks = Int(f[3]), (0...100_000).contains(chunks),
            let records = Int(f[5]), let bytes = Int(f[6])
        else { return nil }
        self.init(generation: String(f[2]), chunks: chunks, through: String(f[4]), records: records, bytes: bytes)
    }

    /// The records of one chunk, or nil when it is damaged.
    static func records(_ chunk: [UInt8]) -> [ChangeRecord]? {
        var out: [ChangeRecord] = []
        var at = 0
        while at < chunk.count {
            guard at + 4 <= chunk.count else { return nil }
            let n = Int(chunk[at]) | Int(chunk[at + 1]) << 8 | Int(chunk[at + 2]) << 16 | Int(chunk[at + 3]) << 24
            at += 4
            guard n <= chunk.count - at, let r = try? ChangeRecord(wire: Array(chunk[at..<(at + n)])) else { return nil }
            out.append(r)
            at += n
        }
        return out
    }

    static func append(_ record: ChangeRecord, to chunk: inout [UInt8]) {
        let wire = record.wire
        let n = UInt32(wire.count)
        chunk.append(contentsOf: [
            UInt8(truncatingIfNeeded: n), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n >> 16),
            UInt8(truncatingIfNeeded: n >> 24),
        ])
        chunk.append(contentsOf: wire)
    }
}

extension ClusterLink {
    /// The origin the records of a loaded snapshot carry (so they are not shipped again).
    static let snapshotOrigin = "cluster-snapshot"

    /// Writes the cluster's snapshot from this node's state (through the last entry it applied)
    /// and trims the stream to the oldest entry a healthy node still needs. One node at a time
    /// (`lock:snapshot`); on the caller's thread, never a loop's.
    func compact() {
        let c = RedisConnection(options.url, timeoutMs: 10_000)
        let lock = key + "lock:snapshot"
        let token = options.node + "-" + String(UInt64.random(in: 0...UInt64.max))
        do {
            guard case .simple = try c.call(["SET", lock, token, "NX", "PX", "300000"]) else { return }
            defer { if (try? c.call(["GET", lock]))?.text == token { _ = try? c.call(["DEL", lock]) } }
            // Another node may have compacted it a moment ago.
            guard case .integer(let length) = try c.call(["XLEN", key + "changes"]), length >= options.compactAfter else { return }
            let through = lastApplied.withLock { $0.id }
            guard through != "0-0" else { return }
            let generation = String(Clock.nowMs()) + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
            var chunk: [UInt8] = []
            chunk.reserveCapacity(SnapshotHeader.chunkBytes + 64 * 1024)
            var chunks = 0
            var records = 0
            var bytes = 0
            var failure: RedisError?
            func flush() {
                guard failure == nil, !chunk.isEmpty else { return }
                do {
                    let reply = try c.call(bytes: [Array("SET".utf8), Array((key + "snapshot:\(generation):\(chunks)").utf8), chunk])
                    if case .error(let e) = reply { failure = RedisError(description: e, fromRedis: true) }
                } catch {
                    failure = error
                }
                bytes += chunk.count
                chunks += 1
                chunk.removeAll(keepingCapacity: true)
            }
            state { r in
                guard failure == nil else { return }
                SnapshotHeader.append(r, to: &chunk)
                records += 1
                if chunk.count >= SnapshotHeader.chunkBytes { flush() }
            }
            flush()
            if let failure { throw failure }
            let header = SnapshotHeader(generation: generation, chunks: chunks, through: through, records: records, bytes: bytes)
            let old = try c.call(["GET", key + "snapshot"]).text.flatMap(SnapshotHeader.init)
            let set = try c.call(["SET", key + "snapshot", header.text])
            if case .error(let e) = set { throw RedisError(description: e, fromRedis: true) }
            if let old, old.generation != generation {
                for i in 0..<old.chunks { _ = try c.call(["DEL", key + "snapshot:\(old.generation):\(i)"]) }
            }
            // Trimmed to what every healthy node still needs (one that is not healthy loads the
            // snapshot when it is back).
            var keep = through
            for n in try nodes(c).nodes where n.healthy && !n.isSelf {
                if let a = n.appliedID, ClusterLink.streamID(a) < ClusterLink.streamID(keep) { keep = a }
            }
            var trimmed = 0
            if case .integer(let n) = try c.call(["XTRIM", key + "changes", "MINID", keep]) { trimmed = Int(n) }
            snapshotEvent.withLock {
                $0 = SnapshotEvent(wrote: true, atMs: Clock.nowMs(), through: through, records: records, bytes: bytes, trimmed: trimmed)
            }
            csys_write_stderr(
                "pushemu: cluster: compacted the stream: a snapshot of \(records) records (\(bytes) bytes) through \(through), \(trimmed) entries trimmed\n"
            )
        } catch {
            csys_write_stderr("pushemu: cluster: the stream was not compacted: \(error)\n")
        }
    }

    /// When the stream no longer holds every entry after the last this node applied (it starts,
    /// or it was away while the stream was compacted), replaces this node's kept state with the
    /// cluster's snapshot and continues from the entry the snapshot holds last.
    func loadSnapshotIfBehind(_ c: RedisConnection) throws(RedisError) {
        // A newer snapshot may replace the one being read (its chunks deleted): read it again.
        for attempt in 1...3 {
            do {
                return try loadSnapshotOnce(c)
            } catch let e where !e.fromRedis && e.description.contains("replaced") && attempt < 3 {
                usleep(100_000)
            }
        }
    }

    private func loadSnapshotOnce(_ c: RedisConnection) throws(RedisError) {
        guard let text = try c.call(["GET", key + "snapshot"]).text, let header = SnapshotHeader(text) else { return }
        let have = lastApplied.withLock { $0.id }
        guard ClusterLink.streamID(have) < ClusterLink.streamID(header.through) else { return }
        if have != "0-0", let first = try c.call(["XRANGE", key + "changes", "-", "+", "COUNT", "1"]).elements.first?.elements.first?.text,
            ClusterLink.streamID(first) <= ClusterLink.streamID(have)
        {
            return // the stream still holds what follows
        }
        var records: [ChangeRecord] = []
        records.reserveCapacity(header.records)
        for i in 0..<header.chunks {
            guard case .bulk(let chunk?) = try c.call(["GET", key + "snapshot:\(header.generation):\(i)"]) else {
                throw RedisError(description: "the cluster's snapshot was replaced while it was read", fromRedis: false)
            }
            guard let part = SnapshotHeader.records(chunk) else {
                throw RedisError(description: "the cluster's snapshot is damaged (chunk \(i))", fromRedis: false)
            }
            records += part
        }
        // Changes made here and not yet in the stream are made again after the load.
        let pending = queue.withLock { $0 }
        resetState(ClusterLink.snapshotOrigin)
        var failed = 0
        for var r in records {
            r.origin = ClusterLink.snapshotOrigin
            do { try apply(r) } catch { failed += 1 }
        }
        for r in pending { try? apply(r) }
        let ms = Int64(header.through.split(separator: "-").first ?? "0") ?? 0
        lastApplied.withLock { $0 = (header.through, ms) }
        snapshotEvent.withLock {
            $0 = SnapshotEvent(
                wrote: false, atMs: Clock.nowMs(), through: header.through, records: records.count, bytes: header.bytes, trimmed: 0)
        }
        csys_write_stderr(
            "pushemu: cluster: loaded the cluster's snapshot through \(header.through) (\(records.count) records"
                + (failed > 0 ? ", \(failed) did not apply" : "") + ")\n")
    }
}
