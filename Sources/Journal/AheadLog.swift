import Glibc

/// The strict journal's write-ahead files: where an event loop puts its records before their
/// answers leave, so that a push answered 200 survives the process being killed at any instant
/// (`kill -9`, a crash) without the answer waiting for the journal's writer thread.
///
/// One file per segment, `<journal>-ahead/L<loop>-<serial>.seg`, written only by the loop that
/// owns the segment (or by the writer thread when it takes a segment with records not yet
/// written), both under the shard's lock. The file is a run of chunks, each the segment's next
/// bytes (whole records): a 16-byte header (`"PJA1"`, the chunk's offset in the segment, its
/// length, a checksum of its bytes, all little-endian UInt32) then the bytes. Once the writer
/// has committed the segment into SQLite it deletes the file; the SQLite commit also records,
/// per loop, the last serial it holds (`meta` key `ahead-<loop>`), so a file that outlived its
/// commit (a kill between the two) is recognised and not stored twice.
///
/// What a file promises is what the kernel's page cache does: the process dying loses nothing
/// written, a power cut or kernel crash may (`--durability sync` fsyncs every commit instead).
/// Reading a file back keeps the longest run of whole, checksummed, contiguous chunks.
enum AheadLog {
    static let magic: UInt32 = 0x3141_4A50 // "PJA1"
    static let headerSize = 16
    /// A file larger than this is not read back (no segment is near it: the writer takes each
    /// loop's segment every commit, about 10 ms of records).
    static let maxFileBytes = 256 << 20

    /// One segment's file, open for appending.
    struct File {
        let fd: Int32
        let path: String
        let loop: Int
        let serial: UInt64
    }

    /// A segment read back from its file.
    struct Recovered {
        let loop: Int
        let serial: UInt64
        let path: String
        let bytes: [UInt8]
        let mark: SegmentEncoder.Mark
    }

    static func directory(journal path: String) -> String { path + "-ahead" }

    /// Creates the directory (0700) if it is missing; false when it cannot be made.
    static func makeDirectory(_ dir: String) -> Bool {
        mkdir(dir, 0o700) == 0 || errno == EEXIST
    }

    static func create(in dir: String, loop: Int, serial: UInt64) -> File? {
        let path = "\(dir)/L\(loop)-\(serial).seg"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        return File(fd: fd, path: path, loop: loop, serial: serial)
    }

    /// Appends one chunk: `bytes`, at `offset` in its segment. False when the write failed or
    /// was short (a full disk, a file-size limit): the file then ends in a torn chunk, which
    /// reading back leaves out, and it must not be written again.
    static func write(_ f: File, offset: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > 0, offset >= 0, offset <= Int(UInt32.max), bytes.count <= Int(UInt32.max) else { return bytes.isEmpty }
        var header: (UInt32, UInt32, UInt32, UInt32) = (
            magic.littleEndian, UInt32(offset).littleEndian, UInt32(bytes.count).littleEndian, checksum(bytes).littleEndian
        )
        let total = headerSize + bytes.count
        let n = withUnsafeMutableBytes(of: &header) { h -> Int in
            var io = [
                iovec(iov_base: h.baseAddress, iov_len: headerSize),
                iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count),
            ]
            while true {
                let n = writev(f.fd, &io, 2)
                if n < 0 && errno == EINTR { continue }
                return n
            }
        }
        return n == total
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

    /// A file's segment: the longest prefix of whole, checksummed, contiguous chunks that decodes
    /// as records (nil: nothing usable).
    static func read(_ path: String, loop: Int, serial: UInt64) -> Recovered? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0, st.st_size <= maxFileBytes else { return nil }
        var raw = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < raw.count {
            let n = raw.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(got)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            got += n
        }
        var bytes: [UInt8] = []
        raw.withUnsafeBytes { b in
            var at = 0
            while at + headerSize <= got {
                let m = UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at, as: UInt32.self))
                let offset = Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)))
                let length = Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at + 8, as: UInt32.self)))
                let sum = UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at + 12, as: UInt32.self))
                guard m == magic, offset == bytes.count, length > 0, length <= got - at - headerSize else { break }
                let chunk = UnsafeRawBufferPointer(rebasing: b[(at + headerSize)..<(at + headerSize + length)])
                guard checksum(chunk) == sum else { break }
                bytes.append(contentsOf: chunk)
                at += headerSize + length
            }
        }
        guard let mark = wholeRecords(bytes) else { return nil }
        bytes.removeSubrange(mark.byteCount...)
        return Recovered(loop: loop, serial: serial, path: path, bytes: bytes, mark: mark)
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

    /// The segments in `dir` that SQLite does not hold yet (`through`: per loop, the last serial
    /// it holds), oldest first; `stale` gets the files it already holds.
    static func pending(in dir: String, through: [Int: UInt64], stale: (String) -> Void = { _ in }) -> [Recovered] {
        var out: [Recovered] = []
        for f in files(in: dir) {
            if let t = through[f.loop], f.serial <= t {
                stale(f.path)
                continue
            }
            if let r = read(f.path, loop: f.loop, serial: f.serial) { out.append(r) } else { stale(f.path) }
        }
        return out
    }
}
