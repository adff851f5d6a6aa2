import COpenSSL

/// The two content codings Web Push senders use.
public enum ContentCoding: String, Sendable {
    /// RFC 8188 with RFC 8291's key derivation: the salt, record size and sender key in the body.
    case aes128gcm
    /// draft-ietf-webpush-encryption-04 (legacy): salt in `Encryption`, sender key in `Crypto-Key`.
    case aesgcm
}

/// Why a browser could not read a message, in the words of http_ece (which most senders use).
public struct DecryptFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What a browser holds for a subscription: its key pair (`p256dh`) and its 16-byte auth secret.
public struct SubscriptionKeys: Sendable {
    public let key: P256Key
    public let auth: [UInt8]

    public init(key: P256Key, auth: [UInt8]) {
        self.key = key
        self.auth = auth
    }
}

/// RFC 8291 / RFC 8188 and the legacy `aesgcm` coding: what a browser does to read a push, and
/// what a sender does to write one (tests, the CLI). Single-block HKDF over HMAC-SHA256.
public enum ContentEncryption {
    /// The largest record size accepted (RFC 8188 allows up to 2^32 - 1; a push body is at most
    /// a few KiB, so anything larger is a one-record message anyway).
    static let maxRecordSize = 1 << 24

    /// SHA-256 and AES-128-GCM, fetched from OpenSSL's provider once for the process.
    static let algorithms = Algorithms()
    final class Algorithms: @unchecked Sendable { // never changed after init; OpenSSL's fetched objects are shareable
        let sha256 = pushemu_fetch_sha256()
        let aes128gcm = pushemu_fetch_aes128gcm()
    }

    /// HMAC-SHA256.
    static func hmac(_ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = pushemu_hmac_sha256_with(algorithms.sha256, key, key.count, data, data.count, &out)
        return out
    }

    /// HKDF-Expand of one block: the first `length` (at most 32) bytes of HMAC(prk, info || 1).
    static func expand(_ prk: [UInt8], _ info: [UInt8], _ length: Int) -> [UInt8] {
        Array(hmac(prk, info + [1]).prefix(length))
    }

    /// The record nonce: `base` with the record's sequence number XORed into its last 8 bytes.
    static func nonce(_ base: [UInt8], _ seq: Int) -> [UInt8] {
        var n = base
        for i in 0..<8 { n[11 - i] ^= UInt8(truncatingIfNeeded: UInt64(seq) >> (8 * UInt64(i))) }
        return n
    }

    /// The aes128gcm content key and nonce for a message to `ua` from `senderPublic`.
    static func aes128gcmKeys(secret: [UInt8], auth: [UInt8], ua: [UInt8], sender: [UInt8], salt: [UInt8]) -> (key: [UInt8], nonce: [UInt8])
    {
        let prkKey = hmac(auth, secret)
        let ikm = expand(prkKey, Array("WebPush: info\0".utf8) + ua + sender, 32)
        let prk = hmac(salt, ikm)
        return (expand(prk, Array("Content-Encoding: aes128gcm\0".utf8), 16), expand(prk, Array("Content-Encoding: nonce\0".utf8), 12))
    }

    /// The legacy aesgcm content key and nonce.
    static func aesgcmKeys(secret: [UInt8], auth: [UInt8], ua: [UInt8], sender: [UInt8], salt: [UInt8]) -> (key: [UInt8], nonce: [UInt8]) {
        let ikm = expand(hmac(auth, secret), Array("Content-Encoding: auth\0".utf8), 32)
        let context = Array("P-256\0".utf8) + [0, 65] + ua + [0, 65] + sender
        let prk = hmac(salt, ikm)
        return (
            expand(prk, Array("Content-Encoding: aesgcm\0".utf8) + context, 16),
            expand(prk, Array("Content-Encoding: nonce\0".utf8) + context, 12)
        )
    }

    static func gcm(decrypt record: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        guard record.count >= 16 else { return nil }
        var out = [UInt8](repeating: 0, count: max(1, record.count - 16))
        let ok = record.withUnsafeBufferPointer {
            pushemu_aes128gcm_with(algorithms.aes128gcm, 0, key, nonce, $0.baseAddress, $0.count, &out)
        }
        guard ok == 1 else { return nil }
        return Array(out.prefix(record.count - 16))
    }

    static func gcm(encrypt plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        _ = pushemu_aes128gcm_with(algorithms.aes128gcm, 1, key, nonce, plaintext, plaintext.count, &out)
        return out
    }

    /// Reads an `aes128gcm` body: `salt(16) || rs(4) || idlen(1) || keyid || records`.
    public static func decrypt(aes128gcm body: ArraySlice<UInt8>, keys: SubscriptionKeys) -> Result<[UInt8], DecryptFailure> {
        let b = Array(body)
        guard b.count >= 21 else { return .failure(DecryptFailure("Could not parse the content header")) }
        let salt = Array(b[0..<16])
        let rs = Int(b[16]) << 24 | Int(b[17]) << 16 | Int(b[18]) << 8 | Int(b[19])
        let idlen = Int(b[20])
        guard rs >= 18, b.count >= 21 + idlen else { return .failure(DecryptFailure("Could not parse the content header")) }
        let keyID = Array(b[21..<(21 + idlen)])
        guard let secret = keys.key.sharedSecret(withPoint: keyID) else {
            return .failure(DecryptFailure("the key id is not a P-256 public key (\(idlen) bytes)"))
        }
        let (key, base) = aes128gcmKeys(secret: secret, auth: keys.auth, ua: keys.key.publicKey, sender: keyID, salt: salt)
        return records(b[(21 + idlen)...], size: min(rs, maxRecordSize), key: key, base: base)
    }

    /// RFC 8188's records: each `rs` bytes (the last shorter), its plaintext ended by a
    /// delimiter (1, or 2 for the last) and zero padding.
    static func records(_ content: ArraySlice<UInt8>, size rs: Int, key: [UInt8], base: [UInt8]) -> Result<[UInt8], DecryptFailure> {
        guard !content.isEmpty else { return .failure(DecryptFailure("Message truncated")) }
        var out: [UInt8] = []
        var at = content.startIndex
        var seq = 0
        while at < content.endIndex {
            let end = min(at + rs, content.endIndex)
            let isLast = end == content.endIndex
            guard var plain = gcm(decrypt: content[at..<end], key: key, nonce: nonce(base, seq)) else {
                return .failure(DecryptFailure("Decryption error: the authentication tag does not match"))
            }
            while plain.last == 0 { plain.removeLast() }
            guard let delimiter = plain.popLast() else { return .failure(DecryptFailure("all zero record plaintext")) }
            if isLast {
                guard delimiter == 2 else {
                    return .failure(DecryptFailure(delimiter == 1 ? "Message truncated" : "last record delimiter != 2"))
                }
            } else {
                guard delimiter == 1 else { return .failure(DecryptFailure("record delimiter != 1")) }
            }
            out += plain
            at = end
            seq += 1
        }
        return .success(out)
    }

    /// Reads a legacy `aesgcm` body: the salt and record size from `Encryption`, the sender's key
    /// (`dh`) from `Crypto-Key`; records of `rs + 16` bytes, each plaintext led by a 2-byte pad length.
    public static func decrypt(
        aesgcm body: ArraySlice<UInt8>, salt: [UInt8], senderKey: [UInt8], recordSize: Int = 4096, keys: SubscriptionKeys
    ) -> Result<[UInt8], DecryptFailure> {
        guard salt.count == 16 else { return .failure(DecryptFailure("the salt is not 16 bytes")) }
        guard recordSize >= 3, recordSize <= maxRecordSize else { return .failure(DecryptFailure("bad record size \(recordSize)")) }
        guard let secret = keys.key.sharedSecret(withPoint: senderKey) else {
            return .failure(DecryptFailure("dh is not a P-256 public key"))
        }
        let (key, base) = aesgcmKeys(secret: secret, auth: keys.auth, ua: keys.key.publicKey, sender: senderKey, salt: salt)
        let chunk = recordSize + 16
        guard !body.isEmpty, body.count % chunk != 0 else { return .failure(DecryptFailure("Message truncated")) }
        var out: [UInt8] = []
        var at = body.startIndex
        var seq = 0
        while at < body.endIndex {
            let end = min(at + chunk, body.endIndex)
            guard let plain = gcm(decrypt: body[at..<end], key: key, nonce: nonce(base, seq)) else {
                return .failure(DecryptFailure("Decryption error: the authentication tag does not match"))
            }
            guard plain.count >= 2 else { return .failure(DecryptFailure("Bad padding")) }
            let pad = Int(plain[0]) << 8 | Int(plain[1])
            guard 2 + pad <= plain.count, plain[2..<(2 + pad)].allSatisfy({ $0 == 0 }) else {
                return .failure(DecryptFailure("Bad padding"))
            }
            out += plain[(2 + pad)...]
            at = end
            seq += 1
        }
        return .success(out)
    }

    /// Writes an `aes128gcm` message of one record to the subscription (`uaPublic`, `auth`), as a
    /// sender library does; `salt` and `sender` are random unless given (test vectors).
    public static func encrypt(
        _ plaintext: [UInt8], uaPublic: [UInt8], auth: [UInt8], salt: [UInt8]? = nil, sender: P256Key? = nil, recordSize: Int = 4096
    ) -> [UInt8]? {
        guard let ua = P256Key(publicKey: uaPublic), let sender = sender ?? P256Key.generate(),
            let secret = sender.sharedSecret(with: ua), plaintext.count + 17 <= recordSize
        else { return nil }
        let salt = salt ?? random(16)
        let (key, base) = aes128gcmKeys(secret: secret, auth: auth, ua: uaPublic, sender: sender.publicKey, salt: salt)
        let rs = UInt32(recordSize)
        let header =
            salt + [
                UInt8(rs >> 24), UInt8(truncatingIfNeeded: rs >> 16), UInt8(truncatingIfNeeded: rs >> 8), UInt8(truncatingIfNeeded: rs), 65,
            ] + sender.publicKey
        return header + gcm(encrypt: plaintext + [2], key: key, nonce: nonce(base, 0))
    }

    /// Writes a legacy `aesgcm` message (one record, no padding): the body, the salt and the
    /// sender's public key for the `Encryption` and `Crypto-Key` headers.
    public static func encryptAESGCM(_ plaintext: [UInt8], uaPublic: [UInt8], auth: [UInt8]) -> (body: [UInt8], salt: [UInt8], dh: [UInt8])?
    {
        guard let ua = P256Key(publicKey: uaPublic), let sender = P256Key.generate(), let secret = sender.sharedSecret(with: ua),
            plaintext.count + 2 < 4096
        else { return nil }
        let salt = random(16)
        let (key, base) = aesgcmKeys(secret: secret, auth: auth, ua: uaPublic, sender: sender.publicKey, salt: salt)
        return (gcm(encrypt: [0, 0] + plaintext, key: key, nonce: nonce(base, 0)), salt, sender.publicKey)
    }

    /// `n` bytes from OpenSSL's random generator.
    public static func random(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        _ = RAND_bytes(&out, Int32(n))
        return out
    }
}
