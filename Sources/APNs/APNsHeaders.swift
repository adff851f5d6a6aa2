import Glibc
import Transport

/// The APNs request headers, found in one pass over the field list (no per-name rescans),
/// with a flag for any of them appearing twice.
struct APNsHeaders {
    var id: Int32 = -1
    var expiration: Int32 = -1
    var priority: Int32 = -1
    var topic: Int32 = -1
    var pushType: Int32 = -1
    var collapseID: Int32 = -1
    var authorization: Int32 = -1
    var authority: Int32 = -1
    var host: Int32 = -1
    var duplicate = false
    var duplicateID = false

    init(_ fields: borrowing HTTPFields) {
        fields.withRawParts { storage, entries in
            let n = entries.count / 16
            for i in 0..<n {
                let nameStart = Int(entries.loadUnaligned(fromByteOffset: i * 16, as: Int32.self))
                let nameLength = Int(entries.loadUnaligned(fromByteOffset: i * 16 + 4, as: Int32.self))
                guard nameLength >= 4, nameLength <= 16 else { continue }
                let name = storage.baseAddress! + nameStart
                func named(_ s: StaticString) -> Bool {
                    nameLength == s.utf8CodeUnitCount && sameBytes(name, s.utf8Start, nameLength)
                }
                func note(_ slot: inout Int32) {
                    if slot >= 0 { duplicate = true }
                    slot = Int32(i)
                }
                switch nameLength {
                case 4: if host < 0 && named("host") { host = Int32(i) }
                case 7:
                    if named("apns-id") {
                        if id >= 0 { duplicateID = true }
                        note(&id)
                    }
                case 10:
                    if named("apns-topic") { note(&topic) } else if authority < 0 && named(":authority") { authority = Int32(i) }
                case 13:
                    if named("apns-priority") { note(&priority) } else if named("authorization") { note(&authorization) }
                case 14: if named("apns-push-type") { note(&pushType) }
                case 15: if named("apns-expiration") { note(&expiration) }
                case 16: if named("apns-collapse-id") { note(&collapseID) }
                default: break
                }
            }
        }
    }

    @inline(__always)
    static func value(_ fields: HTTPFields, _ index: Int32) -> ArraySlice<UInt8>? {
        index >= 0 ? fields.value(at: Int(index)) : nil
    }
}
