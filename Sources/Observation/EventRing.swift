import PushCore
import Runtime
import Synchronization
import Transport

/// The last `capacity` events published, each as its whole `id:`/`event:`/`data:` block, back to
/// back in one byte ring, with the fields filters read (kind, provider, status, token, topic,
/// environment, reason) beside it in a second one. A publisher copies its event in once, with no
/// allocation; a reader copies out what its selector takes from its own position, one span for
/// a stream that takes everything (the frames lie back to back), in one array per read.
///
/// Everything is read and written under one short lock. An event is overwritten once
/// `capacity` newer ones were published, or once newer ones filled its bytes' ring; a reader
/// that falls behind learns how many it lost (`read`'s `overwritten`).
final class EventRing: @unchecked Sendable { // the buffers are touched under `positions`' lock only
    struct Entry {
        var seq = UInt64.max
        /// Absolute positions (ever written) of the frame in `frames` and of its fields in `keys`.
        var start: UInt64 = 0
        var length = 0
        var keyStart: UInt64 = 0
        var tokenLength = 0
        var topicLength = 0
        var environmentLength = 0
        var reasonLength = 0
        var teamLength = 0
        var kindBit: UInt8 = 0
        /// `PushProvider.storedByte`, or 0xFF for none.
        var provider: UInt8 = 0xFF
        var status = 0
    }

    private struct Positions {
        /// Events ever appended; the next goes at `head % capacity`.
        var head: UInt64 = 0
        var frames: UInt64 = 0
        var keys: UInt64 = 0
    }

    let capacity: Int
    let frameCapacity: Int
    let keyCapacity: Int
    private let frames: UnsafeMutablePointer<UInt8>
    private let keys: UnsafeMutablePointer<UInt8>
    private let entries: UnsafeMutablePointer<Entry>
    private let positions = FutexLock(Positions())

    /// `capacity` events, with room for 512 bytes of frame and 256 of fields each on average.
    init(capacity: Int) {
        self.capacity = capacity
        frameCapacity = max(1 << 16, capacity * 512)
        keyCapacity = max(1 << 15, capacity * 256)
        frames = .allocate(capacity: frameCapacity)
        keys = .allocate(capacity: keyCapacity)
        entries = .allocate(capacity: capacity)
        entries.initialize(repeating: Entry(), count: capacity)
    }

    deinit {
        frames.deallocate()
        keys.deallocate()
        entries.deinitialize(count: capacity)
        entries.deallocate()
    }

    var head: UInt64 { positions.withLock { $0.head } }

    /// Appends `event` with its data object; its id is its position plus one. An event larger
    /// than a quarter of a ring is not kept.
    func append(_ event: EmulatorEvent, data: UnsafeRawBufferPointer) {
        var token = event.token
        var topic = event.topic
        var environment = event.environment
        var reason = event.reason
        var team = event.team
        let name = EventRing.names[Int(event.kind.bit.trailingZeroBitCount)]
        let keyLength = token.utf8.count + topic.utf8.count + environment.utf8.count + reason.utf8.count + team.utf8.count
        let frameBound = 4 + 20 + 8 + name.count + 7 + data.count + 2
        guard frameBound <= frameCapacity / 4, keyLength <= keyCapacity / 4 else { return }
        positions.withLock { p in
            var e = Entry()
            e.seq = p.head
            e.kindBit = event.kind.bit
            e.provider = event.provider?.storedByte ?? 0xFF
            e.status = event.status
            // The fields lie contiguous: a block that would wrap starts at the ring's beginning.
            let offset = Int(p.keys % UInt64(keyCapacity))
            if offset + keyLength > keyCapacity { p.keys += UInt64(keyCapacity - offset) }
            e.keyStart = p.keys
            var at = keys + Int(p.keys % UInt64(keyCapacity))
            token.withUTF8 { at = EventRing.put($0, at, &e.tokenLength) }
            topic.withUTF8 { at = EventRing.put($0, at, &e.topicLength) }
            environment.withUTF8 { at = EventRing.put($0, at, &e.environmentLength) }
            reason.withUTF8 { at = EventRing.put($0, at, &e.reasonLength) }
            team.withUTF8 { at = EventRing.put($0, at, &e.teamLength) }
            p.keys += UInt64(keyLength)
            // The frame: id, event name, data, blank line.
            e.start = p.frames
            var prefix = (UInt64(0), UInt64(0), UInt64(0), UInt64(0)) // 32 bytes: "id: " and up to 20 digits
            let prefixLength = withUnsafeMutableBytes(of: &prefix) { b -> Int in
                var n = 0
                for c in "id: ".utf8 {
                    b[n] = c
                    n += 1
                }
                return n + EventRing.decimal(p.head + 1, into: b.baseAddress! + n)
            }
            withUnsafeBytes(of: &prefix) { write(UnsafeRawBufferPointer(rebasing: $0[0..<prefixLength]), &p.frames) }
            name.withUnsafeBytes { write($0, &p.frames) }
            write(data, &p.frames)
            EventRing.blankLine.withUnsafeBytes { write($0, &p.frames) }
            e.length = Int(p.frames - e.start)
            entries[Int(p.head % UInt64(capacity))] = e
            p.head += 1
        }
    }

    /// What a reader takes from `from`: the frames `selector` takes among up to `limit` events,
    /// handed to `emit` as they lie in the ring (back-to-back frames in one span, or two where
    /// the ring wraps) with the count of events overwritten before the reader reached them, as
    /// long as they fit in `room` bytes (the rest are `dropped`); how many events were read,
    /// how many were overwritten, and the position after them.
    func read(
        from: UInt64, limit: Int, room: Int, selector: EventSelector, emit: (UnsafeRawBufferPointer, _ overwritten: UInt64) -> Void
    ) -> (read: Int, overwritten: UInt64, dropped: UInt64, next: UInt64) {
        positions.withLock { p in
            var start = max(from, p.head > UInt64(capacity) ? p.head - UInt64(capacity) : 0)
            // Entries still held whose bytes newer frames already overwrote.
            while start < p.head, !held(entries[Int(start % UInt64(capacity))], p) { start += 1 }
            let end = min(p.head, start + UInt64(max(0, limit)))
            var dropped: UInt64 = 0
            var size = 0
            // A run of taken frames, emitted when it ends (they lie back to back).
            var runStart: UInt64 = 0
            var runLength = 0
            let overwritten = start - from
            let emitSpan: (UnsafeRawBufferPointer) -> Void = { emit($0, overwritten) }
            var seq = start
            while seq < end {
                let e = entries[Int(seq % UInt64(capacity))]
                seq += 1
                guard selector.takesEverything || matches(selector, e) else {
                    spans(from: runStart, count: runLength, emitSpan)
                    runLength = 0
                    continue
                }
                guard size + e.length <= room else {
                    dropped += 1
                    continue
                }
                if runLength == 0 { runStart = e.start }
                runLength += e.length
                size += e.length
            }
            spans(from: runStart, count: runLength, emitSpan)
            return (Int(end - start), overwritten, dropped, end)
        }
    }

    // MARK: inside the lock

    private func held(_ e: Entry, _ p: Positions) -> Bool {
        e.start + UInt64(frameCapacity) >= p.frames && e.keyStart + UInt64(keyCapacity) >= p.keys
    }

    private func matches(_ selector: EventSelector, _ e: Entry) -> Bool {
        let base = UnsafeRawPointer(keys + Int(e.keyStart % UInt64(keyCapacity)))
        let token = UnsafeRawBufferPointer(start: base, count: e.tokenLength)
        let topic = UnsafeRawBufferPointer(start: base + e.tokenLength, count: e.topicLength)
        let environment = UnsafeRawBufferPointer(start: base + e.tokenLength + e.topicLength, count: e.environmentLength)
        let reason = UnsafeRawBufferPointer(
            start: base + e.tokenLength + e.topicLength + e.environmentLength, count: e.reasonLength)
        let team = UnsafeRawBufferPointer(
            start: base + e.tokenLength + e.topicLength + e.environmentLength + e.reasonLength, count: e.teamLength)
        return selector.matches(
            kindBit: e.kindBit, provider: e.provider, status: e.status, token: token, topic: topic, environment: environment,
            reason: reason, team: team)
    }

    /// Copies `bytes` into the frame ring at `position` (wrapping), advancing it.
    private func write(_ bytes: UnsafeRawBufferPointer, _ position: inout UInt64) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        let offset = Int(position % UInt64(frameCapacity))
        let first = min(bytes.count, frameCapacity - offset)
        (frames + offset).update(from: src.assumingMemoryBound(to: UInt8.self), count: first)
        if first < bytes.count {
            frames.update(from: src.assumingMemoryBound(to: UInt8.self) + first, count: bytes.count - first)
        }
        position += UInt64(bytes.count)
    }

    /// Hands `count` bytes of the frame ring from `position` to `emit`: one span, or two where
    /// the ring wraps.
    private func spans(from position: UInt64, count: Int, _ emit: (UnsafeRawBufferPointer) -> Void) {
        guard count > 0 else { return }
        let offset = Int(position % UInt64(frameCapacity))
        let first = min(count, frameCapacity - offset)
        emit(UnsafeRawBufferPointer(start: frames + offset, count: first))
        if first < count { emit(UnsafeRawBufferPointer(start: frames, count: count - first)) }
    }

    private static func put(_ b: UnsafeBufferPointer<UInt8>, _ at: UnsafeMutablePointer<UInt8>, _ length: inout Int)
        -> UnsafeMutablePointer<UInt8>
    {
        length = b.count
        if let src = b.baseAddress, b.count > 0 { at.update(from: src, count: b.count) }
        return at + b.count
    }

    /// Writes `v` in decimal at `out`; returns the digits written.
    private static func decimal(_ v: UInt64, into out: UnsafeMutableRawPointer) -> Int {
        var digits = 1
        var t = v
        while t >= 10 {
            digits += 1
            t /= 10
        }
        var rest = v
        for i in stride(from: digits - 1, through: 0, by: -1) {
            out.storeBytes(of: UInt8(ascii: "0") + UInt8(rest % 10), toByteOffset: i, as: UInt8.self)
            rest /= 10
        }
        return digits
    }

    /// Each kind's "\nevent: NAME\ndata: ", by the kind's bit position.
    private static let names: [[UInt8]] = EmulatorEvent.Kind.allCases.sorted { $0.bit < $1.bit }.map {
        Array("\nevent: \($0.rawValue)\ndata: ".utf8)
    }
    private static let blankLine: [UInt8] = Array("\n\n".utf8)
}
