import CSystem
import Glibc
import Synchronization

/// What pushes did to a fleet's members that have no record, in four bytes a member: the
/// notifications each received (20 bits) and opened (12 bits). Everything else about such a
/// member follows from its fleet's seed (its token, app state, permission), and its inbox from
/// the journal (`DeliveryHistory`), so a campaign's pushed devices cost bytes, not records.
///
/// Members are kept in pages of 16,384 (64 KiB), allocated when a member of the page first
/// receives; a directory of 4,096 pages covers 2^26 members, and a fleet has one directory slot
/// per 2^26 members. Pages and directories are published with a compare-and-swap and never
/// freed before the fleet is; words change by compare-and-swap, so loops count without a lock.
final class FleetMemberCounts: @unchecked Sendable { // raw memory, changed only atomically
    static let pageBits = 14
    static let pageSize = 1 << pageBits
    static let directoryBits = 12
    static let pageBytes = pageSize * MemoryLayout<UInt32>.size
    static let receivedBits: UInt32 = 20
    static let maxReceived: UInt32 = (1 << receivedBits) - 1
    static let maxOpened: UInt32 = (1 << (32 - receivedBits)) - 1

    /// A member's counts.
    struct Counts: Equatable {
        var received: UInt32
        var opened: UInt32
        var word: UInt32 { received | opened << FleetMemberCounts.receivedBits }
        init(received: UInt32, opened: UInt32) {
            self.received = received
            self.opened = opened
        }
        init(word: UInt32) {
            received = word & FleetMemberCounts.maxReceived
            opened = word >> FleetMemberCounts.receivedBits
        }
    }

    /// The fleet's member count.
    let count: Int
    private let directories: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let directoryCount: Int
    /// Pages allocated so far.
    private let pages = Atomic<Int>(0)
    /// Members whose count went from nothing to something (pushed at least once).
    private let pushed = Atomic<Int>(0)
    /// Told of each page allocated (the state memory's account).
    private let onPage: @Sendable (Int) -> Void

    init(count: Int, onPage: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.count = count
        self.onPage = onPage
        directoryCount = max(
            1,
            (count + (1 << (FleetMemberCounts.pageBits + FleetMemberCounts.directoryBits)) - 1)
                >> (FleetMemberCounts.pageBits + FleetMemberCounts.directoryBits))
        directories = .allocate(capacity: directoryCount)
        directories.initialize(repeating: nil, count: directoryCount)
    }

    deinit {
        for d in 0..<directoryCount {
            guard let dir = directories[d] else { continue }
            let slots = dir.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
            for p in 0..<(1 << FleetMemberCounts.directoryBits) { free(slots[p]) }
            free(dir)
        }
        directories.deallocate()
    }

    /// Bytes held (pages and directories).
    var bytes: Int { pages.load(ordering: .relaxed) * FleetMemberCounts.pageBytes }
    /// Members pushed at least once (and still without a record).
    var pushedMembers: Int { pushed.load(ordering: .relaxed) }

    /// The word of member `i`, its page made when `create` (nil: no page and not made).
    @inline(__always)
    private func word(_ i: Int, create: Bool) -> UnsafeMutablePointer<UInt32>? {
        guard i >= 0, i < count else { return nil }
        let d = i >> (FleetMemberCounts.pageBits + FleetMemberCounts.directoryBits)
        let p = (i >> FleetMemberCounts.pageBits) & ((1 << FleetMemberCounts.directoryBits) - 1)
        var dir = csys_load_ptr(directories + d)
        if dir == nil {
            guard create else { return nil }
            let bytes = (1 << FleetMemberCounts.directoryBits) * MemoryLayout<UnsafeMutableRawPointer?>.size
            let made = calloc(1, bytes)!
            if csys_cas_ptr(directories + d, nil, made) != 0 {
                dir = made
            } else {
                free(made)
                dir = csys_load_ptr(directories + d)
            }
        }
        let slot = dir!.assumingMemoryBound(to: UnsafeMutableRawPointer?.self) + p
        var page = csys_load_ptr(slot)
        if page == nil {
            guard create else { return nil }
            let made = calloc(1, FleetMemberCounts.pageBytes)!
            if csys_cas_ptr(slot, nil, made) != 0 {
                page = made
                pages.add(1, ordering: .relaxed)
                onPage(FleetMemberCounts.pageBytes)
            } else {
                free(made)
                page = csys_load_ptr(slot)
            }
        }
        return page!.assumingMemoryBound(to: UInt32.self) + (i & (FleetMemberCounts.pageSize - 1))
    }

    /// Member `i`'s counts (zero when it was never pushed).
    func counts(_ i: Int) -> Counts {
        guard let w = word(i, create: false) else { return Counts(word: 0) }
        return Counts(word: csys_load_u32(w))
    }

    /// Counts a notification member `i` received. False when its count is full: the member must
    /// then become a record (its counts are still here, unchanged).
    @inline(__always)
    func receive(_ i: Int) -> Bool {
        guard let w = word(i, create: true) else { return false }
        while true {
            let old = csys_load_u32(w)
            guard old & FleetMemberCounts.maxReceived < FleetMemberCounts.maxReceived else { return false }
            if csys_cas_u32(w, old, old &+ 1) != 0 {
                if old == 0 { pushed.add(1, ordering: .relaxed) }
                return true
            }
        }
    }

    /// Counts a notification member `i` opened (at most `maxOpened`; more are not counted).
    func open(_ i: Int) {
        guard let w = word(i, create: true) else { return }
        while true {
            let old = csys_load_u32(w)
            guard old >> FleetMemberCounts.receivedBits < FleetMemberCounts.maxOpened else { return }
            if csys_cas_u32(w, old, old &+ (1 << FleetMemberCounts.receivedBits)) != 0 { return }
        }
    }

    /// Sets member `i`'s counts (a snapshot applied; zero: the member became a record).
    func set(_ i: Int, _ c: Counts) {
        guard let w = c.word == 0 ? word(i, create: false) : word(i, create: true) else { return }
        while true {
            let old = csys_load_u32(w)
            if csys_cas_u32(w, old, c.word) != 0 {
                if old == 0 && c.word != 0 { pushed.add(1, ordering: .relaxed) }
                if old != 0 && c.word == 0 { pushed.subtract(1, ordering: .relaxed) }
                return
            }
        }
    }

    /// Each page's pushed members, in index order: `body(first index of the page, [(index, counts)])`.
    func forEachPage(_ body: (Int, [(Int, Counts)]) -> Void) {
        for d in 0..<directoryCount {
            guard let dir = csys_load_ptr(directories + d) else { continue }
            let slots = dir.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
            for p in 0..<(1 << FleetMemberCounts.directoryBits) {
                guard let page = csys_load_ptr(slots + p) else { continue }
                let words = page.assumingMemoryBound(to: UInt32.self)
                let first = (d << (FleetMemberCounts.pageBits + FleetMemberCounts.directoryBits)) | (p << FleetMemberCounts.pageBits)
                var found: [(Int, Counts)] = []
                for j in 0..<FleetMemberCounts.pageSize {
                    let w = csys_load_u32(words + j)
                    if w != 0 { found.append((first + j, Counts(word: w))) }
                }
                if !found.isEmpty { body(first, found) }
            }
        }
    }
}
