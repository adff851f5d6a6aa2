import PushCore
import State

/// Fleet members without a record: a push to one is counted in its fleet's `FleetMemberCounts`
/// (four bytes a member) instead of making a record; reading one builds its record from its
/// fleet (token, states), those counts and, for its inbox, the journal (`DeliveryHistory`).
/// A member becomes a record when it deviates (an admin change, going offline, an uninstall, a
/// Live Activity) or its count is full; the record then carries its counts.
extension DeviceStore {
    /// Delivers `d` to fleet member `index` of `f` without a record when the member is as its
    /// fleet made it (installed, online) and the push leaves nothing to hold: `dev` is the
    /// member's computed record, `onRecord` the delivery's effect on it. nil: it needs a record.
    @inline(__always)
    func deliverToMember<Outcome>(
        _ dev: inout SimDevice, _ f: FleetRef, index: Int, _ d: Delivery, onRecord: (inout SimDevice) -> Outcome
    ) -> Outcome? {
        guard dev.uninstalledAtMs == nil, dev.appState != .offline, d.channelID == nil, f.members.receive(index) else { return nil }
        return onRecord(&dev)
    }

    /// A member about to become a record takes its counts (and its inbox, from the journal)
    /// from its fleet's, which forget them.
    func absorbCounts(_ dev: inout SimDevice, _ f: FleetRef, index: Int) {
        let c = f.members.counts(index)
        guard c.word != 0 else { return }
        dev.takeDeliveries(of: memberView(f, index: index, token: dev.token, counts: c))
        f.members.set(index, FleetMemberCounts.Counts(word: 0))
    }

    /// Member `index` of `f` as a record: its fleet's computed one with its counts and, when it
    /// received any, its inbox rebuilt from the notifications the journal holds for its token.
    func memberView(_ f: FleetRef, index: Int, token: String, counts: FleetMemberCounts.Counts? = nil) -> SimDevice {
        var d = materialize(f, index: index, token: token)
        let c = counts ?? f.members.counts(index)
        guard c.received > 0 else {
            d.opened = UInt64(c.opened)
            return d
        }
        let inboxSize = configuration.inboxSize
        let found = history.withLock { $0 }?.delivered(token: token, limit: min(Int(c.received), 2 * inboxSize)) ?? []
        for n in found {
            DeviceStore.addToInbox(
                &d, id: n.notificationID, receivedAtMs: n.receivedAtMs, collapseID: n.collapseID, channelID: nil, inboxSize: inboxSize)
        }
        // Those the journal no longer holds (pruned, or past the window read) were pushed out.
        if UInt64(c.received) > d.received { d.evicted += UInt64(c.received) - d.received }
        d.received = UInt64(c.received)
        d.opened = UInt64(c.opened)
        return d
    }

    /// Fleet members pushed at least once and held as counts, not records.
    public var countedMembers: Int { fleets.withLock { $0.list.reduce(0) { $0 + $1.members.pushedMembers } } }
    /// Bytes those counts take.
    public var countedMemberBytes: Int { fleets.withLock { $0.list.reduce(0) { $0 + $1.members.bytes } } }

    // MARK: state records

    /// A `members` record: fleet `fleet`'s counted members of one page, as (index delta, counts
    /// word) varint pairs from the page's first index.
    static func record(members: [(Int, FleetMemberCounts.Counts)], fleet: Int, first: Int) -> [UInt8] {
        var w = StateWriter(capacity: 32 + members.count * 3)
        w.uint(1, UInt64(fleet))
        w.uint(2, UInt64(first))
        var values: [UInt64] = []
        values.reserveCapacity(members.count * 2)
        var at = first
        for (i, c) in members {
            values.append(UInt64(i - at))
            values.append(UInt64(c.word))
            at = i + 1
        }
        w.packed(3, values)
        return w.bytes
    }

    /// Every fleet's counted members, a record a page.
    func snapshotMembers(_ emit: (ChangeRecord) -> Void) {
        for f in fleets.withLock({ $0.list }) {
            f.members.forEachPage { first, found in
                emit(
                    ChangeRecord(
                        store: stateName, kind: Kind.members, body: DeviceStore.record(members: found, fleet: f.spec.number, first: first)))
            }
        }
    }

    /// Applies a `members` record (a snapshot's): the counts of members without a record.
    func applyMembers(_ body: UnsafeRawBufferPointer) throws {
        var r = StateReader(body)
        var fleet = 0
        var first = 0
        var packed: [UInt64]?
        while let f = try r.next() {
            switch f {
            case 1: fleet = try r.int(in: 1...DeviceStore.maxFleets, unsigned: true)
            case 2: first = try r.int(in: 0...(1 << 40), unsigned: true)
            case 3: packed = try r.packed()
            default: try r.skip()
            }
        }
        guard let ref = fleetRef(fleet), let packed else { throw StateFormatError("a members record names no fleet that exists") }
        guard packed.count % 2 == 0 else { throw StateFormatError("a members record is cut short") }
        var at = first
        for k in stride(from: 0, to: packed.count, by: 2) {
            let (delta, word) = (packed[k], packed[k + 1])
            guard delta < 1 << 40, word <= UInt64(UInt32.max) else { throw StateFormatError("a members record holds an impossible count") }
            let index = at + Int(delta)
            guard index < ref.spec.count else { throw StateFormatError("a members record names a member past its fleet's count") }
            ref.members.set(index, FleetMemberCounts.Counts(word: UInt32(word)))
            at = index + 1
        }
    }
}
