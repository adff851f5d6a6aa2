import CSystem
import Glibc
import Runtime

/// Tracking calls that wait on disk once a lane's queue holds its share of
/// `--tracking-queue-memory`: a campaign whose sink is slower than its pushes makes every call,
/// late, instead of dropping them or holding them in memory. One lane's, used only by its thread.
///
/// A file with no name (gone when the process ends), written at its end and read from its
/// start in order: each call a 4-byte length and its fields. The disk blocks of what was read
/// are given back as reading goes on, and the file is emptied whenever every call in it has been
/// read, so the disk held is about what still waits, at most `maxBytes`.
final class TrackingSpool {
    let directory: String
    let maxBytes: Int
    private var fd: Int32 = -1
    /// Calls appended and not yet written to the file.
    private var pending: [UInt8] = []
    /// Bytes written to the file (its end).
    private var fileEnd = 0
    /// Bytes of the file read into `buffer`.
    private var readAt = 0
    /// Bytes of the file whose blocks were given back.
    private var punched = 0
    private var buffer: [UInt8] = []
    private var head = 0
    /// Calls waiting in the spool.
    private(set) var count = 0
    /// Bytes they take (on disk and in the two buffers).
    private(set) var bytes = 0
    /// Why the spool could not be used (it then takes nothing more), for the log.
    private(set) var failure: String?

    static let chunk = 1 << 20

    init(directory: String, maxBytes: Int) {
        self.directory = directory
        self.maxBytes = maxBytes
    }

    deinit { if fd >= 0 { close(fd) } }

    var isEmpty: Bool { count == 0 }

    /// Writes `job` at the end; false when the spool is full or its file cannot be written.
    func append(_ job: TrackingJob) -> Bool {
        guard failure == nil else { return false }
        if fd < 0 {
            fd = csys_open_anonymous(directory)
            if fd < 0 {
                failure = "cannot make a spool file in \(directory): \(String(cString: strerror(errno)))"
                return false
            }
        }
        var w = SpoolWriter()
        w.encode(job)
        let record = w.bytes
        guard bytes + record.count + 4 <= maxBytes else { return false }
        var n = UInt32(record.count)
        for _ in 0..<4 {
            pending.append(UInt8(truncatingIfNeeded: n))
            n >>= 8
        }
        pending.append(contentsOf: record)
        bytes += record.count + 4
        count += 1
        if pending.count >= TrackingSpool.chunk { guard writePending() else { return false } }
        return true
    }

    /// The oldest waiting call, nil when none waits (or the file cannot be read: `failure`, and
    /// `count` still holds the calls that could not be read).
    func next() -> TrackingJob? {
        guard count > 0 else { return nil }
        if buffer.count - head < 4 || buffer.count - head < 4 + recordLength() {
            guard fill() else { return nil }
        }
        let n = recordLength()
        let start = head + 4
        let job = buffer.withUnsafeBytes { raw -> TrackingJob? in
            var r = SpoolReader(raw, from: start, to: start + n)
            return r.decode()
        }
        guard let job else {
            failure = "a spooled tracking call could not be read back"
            return nil
        }
        head = start + n
        count -= 1
        bytes -= n + 4
        if count == 0 { reset() }
        return job
    }

    /// Forgets every waiting call (the lane stops); they are counted by the caller.
    func removeAll() { reset() }

    private func recordLength() -> Int {
        var n = 0
        for i in (0..<4).reversed() { n = n << 8 | Int(buffer[head + i]) }
        return n
    }

    /// Reads the file's next bytes after what is left of the buffer (writing what is pending
    /// first when the file has been read to its end).
    private func fill() -> Bool {
        if readAt >= fileEnd { guard writePending() else { return false } }
        buffer.removeFirst(head)
        head = 0
        // A record is read whole: at least its length, at least a chunk.
        var want = TrackingSpool.chunk
        if buffer.count >= 4 { want = max(want, 4 + recordLength() - buffer.count) }
        want = min(want, fileEnd - readAt)
        guard want > 0 else {
            failure = "the tracking spool ended inside a call"
            return false
        }
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: want))
        var got = 0
        while got < want {
            let r = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + old + got, want - got, off_t(readAt + got)) }
            if r < 0 && errno == EINTR { continue }
            guard r > 0 else {
                failure = "cannot read the tracking spool: \(String(cString: strerror(errno)))"
                return false
            }
            got += r
        }
        readAt += want
        // Give back the blocks already read, a few megabytes at a time.
        let done = readAt & ~(TrackingSpool.chunk * 4 - 1)
        if done > punched {
            _ = csys_punch_hole(fd, Int64(punched), Int64(done - punched))
            punched = done
        }
        return buffer.count - head >= 4 && buffer.count - head >= 4 + recordLength()
    }

    private func writePending() -> Bool {
        var off = 0
        while off < pending.count {
            let r = pending.withUnsafeBytes { pwrite(fd, $0.baseAddress! + off, pending.count - off, off_t(fileEnd + off)) }
            if r < 0 && errno == EINTR { continue }
            guard r > 0 else {
                failure = "cannot write the tracking spool: \(String(cString: strerror(errno)))"
                return false
            }
            off += r
        }
        fileEnd += pending.count
        pending.removeAll(keepingCapacity: true)
        return true
    }

    /// Empty: the file back to no length, the buffers dropped.
    private func reset() {
        if fd >= 0 && fileEnd > 0 { _ = ftruncate(fd, 0) }
        fileEnd = 0
        readAt = 0
        punched = 0
        buffer = []
        head = 0
        pending = []
        count = 0
        bytes = 0
    }
}

/// A spooled call's fields, each a varint or a length and its bytes, in a fixed order.
private struct SpoolWriter {
    var bytes: [UInt8] = []

    mutating func uint(_ v: UInt64) { Varint.append(v, to: &bytes) }

    mutating func int(_ v: Int64) { uint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }

    mutating func raw(_ b: [UInt8]) {
        uint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    mutating func string(_ s: String) {
        uint(UInt64(s.utf8.count))
        bytes.append(contentsOf: s.utf8)
    }

    mutating func encode(_ j: TrackingJob) {
        bytes.reserveCapacity(128 + j.request.url.utf8.count + j.request.body.count)
        uint(UInt64(TrackingEvent.allCases.firstIndex(of: j.event) ?? 0))
        string(j.request.method)
        string(j.request.url)
        uint(UInt64(j.request.headers.count))
        for (k, v) in j.request.headers {
            string(k)
            string(v)
        }
        raw(j.request.body)
        string(j.preset)
        string(j.token)
        string(j.notificationID)
        string(j.platform)
        if let c = j.campaign {
            uint(1)
            string(c)
        } else {
            uint(0)
        }
        int(j.notBeforeMs)
        uint(UInt64(max(0, j.attempt)))
        uint(UInt64(max(0, j.events)))
        if let b = j.batch {
            uint(UInt64(b.kind.rawValue))
            string(b.key)
            raw(b.item)
            int(b.flushAfterMs)
            uint(UInt64(max(0, b.maxItems)))
            uint(UInt64(b.fields.count))
            for f in b.fields { string(f) }
        } else {
            uint(0)
        }
    }
}

/// Reads what `SpoolWriter` wrote; nil for anything malformed.
private struct SpoolReader {
    let base: UnsafeRawBufferPointer
    var at: Int
    let end: Int

    init(_ base: UnsafeRawBufferPointer, from: Int, to: Int) {
        self.base = base
        at = from
        end = to
    }

    mutating func uint() -> UInt64? { Varint.read(base, at: &at, end: end) }

    mutating func int() -> Int64? {
        guard let z = uint() else { return nil }
        return Int64(bitPattern: z >> 1) ^ -Int64(bitPattern: z & 1)
    }

    mutating func small() -> Int? {
        guard let v = uint(), v <= UInt64(Int32.max) else { return nil }
        return Int(v)
    }

    mutating func raw() -> [UInt8]? {
        guard let n = small(), n <= end - at else { return nil }
        defer { at += n }
        return Array(base[at..<at + n])
    }

    mutating func string() -> String? {
        guard let n = small(), n <= end - at else { return nil }
        defer { at += n }
        return String(decoding: UnsafeRawBufferPointer(rebasing: base[at..<at + n]), as: UTF8.self)
    }

    mutating func decode() -> TrackingJob? {
        guard let e = small(), e < TrackingEvent.allCases.count, let method = string(), let url = string(),
            let headerCount = small(), headerCount <= end - at
        else { return nil }
        var headers: [(String, String)] = []
        for _ in 0..<headerCount {
            guard let k = string(), let v = string() else { return nil }
            headers.append((k, v))
        }
        guard let body = raw(), let preset = string(), let token = string(), let id = string(), let platform = string(),
            let hasCampaign = uint()
        else { return nil }
        var campaign: String? = nil
        if hasCampaign == 1 {
            guard let c = string() else { return nil }
            campaign = c
        }
        guard let notBefore = int(), let attempt = small(), let events = small(), let kindRaw = uint() else { return nil }
        var batch: TrackingBatch? = nil
        if kindRaw != 0 {
            guard let kind = TrackingBatch.Kind(rawValue: UInt8(truncatingIfNeeded: kindRaw)), kindRaw <= 255, let key = string(),
                let item = raw(), let flush = int(), let maxItems = small(), let fieldCount = small(), fieldCount <= end - at
            else { return nil }
            var fields: [String] = []
            for _ in 0..<fieldCount {
                guard let f = string() else { return nil }
                fields.append(f)
            }
            batch = TrackingBatch(key: key, item: item, flushAfterMs: flush, maxItems: maxItems, kind: kind, fields: fields)
        }
        guard at == end else { return nil }
        let job = TrackingJob(
            request: TrackingRequest(method: method, url: url, headers: headers, body: body), event: TrackingEvent.allCases[e],
            preset: preset, token: token, notificationID: id, notBeforeMs: notBefore, batch: batch, platform: platform,
            campaign: campaign)
        job.attempt = attempt
        job.events = events
        return job
    }
}
