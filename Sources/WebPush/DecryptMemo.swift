import Synchronization

/// What the simulated browsers last read: the plaintext (or the failure) of the last few
/// messages, by subscription key, coding and body. A message is decrypted once however often a
/// sender repeats it (a load generator that sends one body); every message still reaches its
/// browser and is recorded. A reading is a pure function of the keys and the bytes, so a
/// remembered one is exactly what decrypting again would give.
///
/// Shared by the deferred-delivery worker's lanes, behind one lock (taken twice per message).
final class DecryptMemo: Sendable {
    static let entries = 16
    /// The largest body remembered (a bigger one is decrypted each time).
    static let maxBody = 8_192

    struct Entry {
        let key: P256Key
        let coding: ContentCoding
        let salt: [UInt8]
        let senderKey: [UInt8]
        let recordSize: Int
        let body: [UInt8]
        let result: Result<[UInt8], DecryptFailure>
    }

    private let ring = Mutex<(entries: [Entry], next: Int)>(([], 0))

    /// The browser's reading of `body` for `subscription`.
    func read(_ body: [UInt8], for subscription: WebPushSubscription, facts: WebPushAccepted) -> Result<[UInt8], DecryptFailure> {
        let coding = facts.coding ?? .aes128gcm
        let salt = facts.salt ?? []
        let sender = facts.senderKey ?? []
        let key = subscription.keyPair
        if body.count <= DecryptMemo.maxBody {
            let hit = ring.withLock { r -> Result<[UInt8], DecryptFailure>? in
                for e in r.entries
                where e.key === key && e.coding == coding && e.recordSize == facts.recordSize && e.body == body && e.salt == salt
                    && e.senderKey == sender
                {
                    return e.result
                }
                return nil
            }
            if let hit { return hit }
        }
        let result: Result<[UInt8], DecryptFailure>
        switch coding {
        case .aesgcm:
            result = ContentEncryption.decrypt(
                aesgcm: body[...], salt: salt, senderKey: sender, recordSize: facts.recordSize, keys: subscription.keys)
        case .aes128gcm:
            result = ContentEncryption.decrypt(aes128gcm: body[...], keys: subscription.keys)
        }
        if body.count <= DecryptMemo.maxBody {
            let entry = Entry(
                key: key, coding: coding, salt: salt, senderKey: sender, recordSize: facts.recordSize, body: body, result: result)
            ring.withLock { r in
                if r.entries.count < DecryptMemo.entries {
                    r.entries.append(entry)
                } else {
                    r.entries[r.next] = entry
                }
                r.next = (r.next + 1) % DecryptMemo.entries
            }
        }
        return result
    }
}
