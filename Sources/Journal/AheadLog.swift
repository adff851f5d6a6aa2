import Glibc

/// The strict journal's segment files: where an event loop puts its records before their
/// answers leave, so that a push answered 200 survives the process being killed at any instant
/// (`kill -9`, a crash) without the answer waiting for the journal's writer thread; and where
/// those records then stay. SQLite holds each segment's row (times, counts, where its bytes
/// are) and the index; the bytes are written once, here, not again into SQLite's WAL and from
/// there into the database (measured: that was most of the writer's CPU under strict).
///
/// Files are `<journal>-ahead/L<loop>-<serial>.seg`, each written only by the loop that owns it
/// (or by the writer thread when it takes a segment with records not yet written), both under
/// the shard's lock. A file is a run of chunks, each a segment's next bytes (whole records): a
/// 16-byte header (`"PJA1"`, the chunk's offset in its segment, its length, a checksum of its
/// bytes, all little-endian UInt32) then the bytes. A chunk at offset 0 starts the file's next
/// segment. A loop keeps its file open across segments and starts a new one past
/// `rotateBytes`. Each SQLite commit records, per loop, how far it holds (`meta` key
/// `ahead-<loop>`, `"<serial>:<end>"`): a restart after a kill stores, once, what lies beyond.
/// A file no stored segment refers to, and wholly behind its loop's mark, is deleted
/// (retention, a reset).
///
/// What a file promises is what the kernel's page cache does: the process dying loses nothing
/// written, a power cut or kernel crash may (`--durability sync` fsyncs every commit instead,
/// and keeps the bytes in SQLite). Reading back keeps the longest run of whole, checksummed,
/// contiguous chunks.
enum AheadLog {
    static let magic: UInt32 = 0x3141_4A50 // "PJA1"
    static let headerSize = 16
    /// A loop's file past this size is closed when the writer takes its segment; the next
    /// record starts a new file (a file is deleted only when none of its segments is kept).
    static let rotateBytes = 32 << 20
    /// What recovery reads of one file at most (a file is `rotateBytes` plus one segment).
    static let maxFileBytes = 256 << 20

    /// A loop's file, open for appending.
    struct File {
        let fd: Int32
        let path: String
        let loop: Int
        let serial: UInt64
        /// Bytes written (whole chunks).
        var length = 0
    }

    /// Where a stored segment's chunks are.
    struct Location: Equatable {
        let loop: Int
        let serial: UInt64
        let start: Int
        let end: Int
    }

    /// How far the journal holds one loop's files: those before `serial`, and `serial` up to
    /// `end` (`Int.max`: all of it).
    struct Position: Equatable, Comparable {
        let serial: UInt64
        let end: Int
        static func < (a: Position, b: Position) -> Bool { (a.serial, a.end) < (b.serial, b.end) }

        /// `"<serial>:<end>"`; a bare serial (an earlier version's) holds its whole file.
        init?(text: String) {
            let parts = text.split(separator: ":")
            guard parts.count <= 2, let s = parts.first.flatMap({ UInt64($0) }) else { return nil }
            serial = s
            if parts.count == 2 {
                guard let e = Int(parts[1]), e >= 0 else { return nil }
                end = e
            } else {
                end = .max
            }
        }

        init(serial: UInt64, end: Int) {
            self.serial = serial
            self.end = end
        }

        var text: String { "\(serial):\(end)" }
    }

    /// A segment read back from a file that the journal does not hold yet.
    struct Recovered {
        let location: Location
        let path: String
        let bytes: [UInt8]
        let mark: SegmentEncoder.Mark
        var loop: Int { location.loop }
        var serial: UInt64 { location.serial }
    }

    static func directory(journal path: String) -> String { path + "-ahead" }

    static func path(in dir: String, loop: Int, serial: UInt64) -> String { "\(dir)/L\(loop)-\(serial).seg" }

    /// Creates the directory (0700) if it is missing; false when it cannot be made.
    static func makeDirectory(_ dir: String) -> Bool {
        mkdir(dir, 0o700) == 0 || errno == EEXIST
    }

    static func create(in dir: String, loop: Int, serial: UInt64) -> File? {
        let path = path(in: dir, loop: loop, serial: serial)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        return File(fd: fd, path: path, loop: loop, serial: serial)
    }

    /// Appends one chunk: `bytes`, at `offset` in its segment. False when the write failed or
    /// was short (a full disk, a file-size limit): the file then ends in a torn chunk, which
    /// reading back leaves out, and it must not be written again.
    static func write(_ f: inout File, offset: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > 0, offset >= 0, offset <= Int(UInt32.max), bytes.count <= Int(UInt32.max) else { return bytes.isEmpty }
        var header: (UInt32, UInt32, UInt32, UInt32) = (
            magic.littleEndian, UInt32(offset).littleEndian, UInt32(bytes.count).littleEndian, checksum(bytes).littleEndian
        )
        let total = headerSize + bytes.count
        let fd = f.fd
        let n = withUnsafeMutableBytes(of: &header) { h -> Int in
            var io = [
                iovec(iov_base: h.baseAddress, iov_len: headerSize),
                iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count),
            ]
            while true {
                let n = writev(fd, &io, 2)
                if n < 0 && errno == EINTR { continue }
                return n
            }
        }
        guard n == total else { return false }
        f.length += total
        return true
    }

    /// A 32-bit checksum of `b`, eight bytes a step (it runs on the event loop for every chunk).
    static func checksum(_ b: UnsafeRawBufferPointer) -> UInt32 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(b.count)
        var i = 0
        let words = b.count / 8
        while i < words {
            h = (h ^ b.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self).littleEndian) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 32
            i += 1
        }
        var tail: UInt64 = 0
        var j = words * 8
        var shift: UInt64 = 0
        while j < b.count {
            tail |= UInt64(b[j]) << shift
            shift += 8
            j += 1
        }
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 29
        return UInt32(truncatingIfNeeded: h ^ h >> 32)
    }

    /// The files in `dir`, by loop and serial (names that are not ours are left alone).
    static func files(in dir: String) -> [(loop: Int, serial: UInt64, path: String)] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var out: [(loop: Int, serial: UInt64, path: String)] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix("L"), name.hasSuffix(".seg") else { continue }
            let parts = name.dropFirst().dropLast(4).split(separator: "-")
            guard parts.count == 2, let loop = Int(parts[0]), loop >= 0, let serial = UInt64(parts[1]) else { continue }
            out.append((loop, serial, dir + "/" + name))
        }
        return out.sorted { ($0.serial, $0.loop) < ($1.serial, $1.loop) }
    }

    /// The segments of the file at `path` from byte `start` (a segment boundary), oldest first:
    /// the longest run of whole, checksummed chunks, each chunk at offset 0 starting a segment
    /// and every other one continuing it; a segment is cut to its whole records, and nothing
    /// after a segment that had to be cut is read. Each one's location ends after its chunks.
    static func segments(_ path: String, loop: Int, serial: UInt64, from start: Int) -> [Recovered] {
        guard start >= 0, let raw = contents(path, from: start, limit: maxFileBytes) else { return [] }
        var out: [Recovered] = []
        var bytes: [UInt8] = []
        var segmentStart = 0
        var at = 0
        var stop = false
        func finish(_ end: Int) {
            guard !bytes.isEmpty else { return }
            defer { bytes = [] }
            guard let mark = wholeRecords(bytes) else {
                stop = true
                return
            }
            if mark.byteCount < bytes.count {
                bytes.removeSubrange(mark.byteCount...)
                stop = true
            }
            out.append(
                Recovered(
                    location: Location(loop: loop, serial: serial, start: start + segmentStart, end: start + end), path: path,
                    bytes: bytes, mark: mark))
        }
        raw.withUnsafeBytes { b in
            while !stop, let (offset, piece) = chunk(b, at: at) {
                if offset == 0 {
                    finish(at)
                    if stop { return }
                    segmentStart = at
                } else if offset != bytes.count || bytes.isEmpty {
                    break
                }
                bytes.append(contentsOf: piece)
                at += headerSize + piece.count
            }
        }
        if !stop { finish(at) }
        return out
    }

    /// The chunk whose header is at `at` in `b`: its offset in its segment and its bytes (nil:
    /// no whole chunk there, or one whose bytes fail its checksum).
    private static func chunk(_ b: UnsafeRawBufferPointer, at: Int) -> (Int, UnsafeRawBufferPointer)? {
        guard at >= 0, at + headerSize <= b.count else { return nil }
        let m = UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at, as: UInt32.self))
        let offset = Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)))
        let length = Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at + 8, as: UInt32.self)))
        let sum = UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at + 12, as: UInt32.self))
        guard m == magic, length > 0, length <= b.count - at - headerSize else { return nil }
        let chunk = UnsafeRawBufferPointer(rebasing: b[(at + headerSize)..<(at + headerSize + length)])
        guard checksum(chunk) == sum else { return nil }
        return (offset, chunk)
    }

    /// Up to `limit` bytes of the file at `path` from `start` (nil: it cannot be opened).
    private static func contents(_ path: String, from start: Int, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        let size = Int(st.st_size)
        guard size > start else { return [] }
        return pread(fd, from: start, count: min(limit, size - start))
    }

    /// `count` bytes at `start` of `fd`, fewer where the file ends first.
    static func pread(_ fd: Int32, from start: Int, count: Int) -> [UInt8] {
        var raw = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = raw.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress! + got, count - got, off_t(start + got)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            got += n
        }
        if got < count { raw.removeSubrange(got...) }
        return raw
    }

    /// Reads stored segments' bytes back, keeping the last file it opened open.
    final class Reader {
        let dir: String
        private var fd: Int32 = -1
        private var open: (loop: Int, serial: UInt64)?

        init(dir: String) { self.dir = dir }
        deinit { if fd >= 0 { close(fd) } }

        /// The segment at `l`: its chunks' bytes, as far as they are whole and contiguous
        /// (empty: its file is gone or unreadable).
        func read(_ l: Location) -> [UInt8] {
            guard l.start >= 0, l.end > l.start, l.end - l.start <= AheadLog.maxFileBytes else { return [] }
            if open.map({ $0.loop != l.loop || $0.serial != l.serial }) ?? true {
                if fd >= 0 { close(fd) }
                fd = Glibc.open(AheadLog.path(in: dir, loop: l.loop, serial: l.serial), O_RDONLY | O_CLOEXEC)
                open = (l.loop, l.serial)
            }
            guard fd >= 0 else { return [] }
            let raw = AheadLog.pread(fd, from: l.start, count: l.end - l.start)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(raw.count)
            raw.withUnsafeBytes { b in
                var at = 0
                while let (offset, piece) = AheadLog.chunk(b, at: at), offset == bytes.count {
                    bytes.append(contentsOf: piece)
                    at += AheadLog.headerSize + piece.count
                }
            }
            return bytes
        }
    }

    /// How far `bytes` decode as whole records, with their counts and times (nil: no record).
    static func wholeRecords(_ bytes: [UInt8]) -> SegmentEncoder.Mark? {
        bytes.withUnsafeBytes { b -> SegmentEncoder.Mark? in
            var c = SegmentCursor(b)
            guard !c.malformed else { return nil }
            var v = RecordView()
            var m = SegmentEncoder.Mark()
            var end = c.position
            while c.next(b, into: &v) {
                if v.isRequest { m.requests += 1 } else { m.tracking += 1 }
                if m.records == 1 {
                    m.oldestMs = v.atMs
                    m.newestMs = v.atMs
                } else {
                    m.oldestMs = min(m.oldestMs, v.atMs)
                    m.newestMs = max(m.newestMs, v.atMs)
                }
                end = c.position
            }
            guard m.records > 0 else { return nil }
            m.byteCount = end
            return m
        }
    }

    /// The segments in `dir` that SQLite does not hold yet (`through`: per loop, how far it
    /// holds), oldest first.
    static func pending(in dir: String, through: [Int: Position]) -> [Recovered] {
        var out: [Recovered] = []
        for f in files(in: dir) {
            var start = 0
            if let t = through[f.loop] {
                if f.serial < t.serial || (f.serial == t.serial && t.end == .max) { continue }
                if f.serial == t.serial { start = t.end }
            }
            out.append(contentsOf: segments(f.path, loop: f.loop, serial: f.serial, from: start))
        }
        return out
    }

    /// The files in `dir` that can go: wholly behind their loop's mark (`through`; a loop's
    /// file at its mark may still be open) and before the oldest file of that loop a stored
    /// segment refers to (`referenced`).
    static func unneeded(in dir: String, through: [Int: Position], referenced: [Int: UInt64]) -> [String] {
        files(in: dir).compactMap { f in
            guard let t = through[f.loop], f.serial < t.serial else { return nil }
            if let r = referenced[f.loop], f.serial >= r { return nil }
            return f.path
        }
    }
}
