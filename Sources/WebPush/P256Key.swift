import COpenSSL
import Transport

/// A P-256 key held as OpenSSL's, made from and exported to the raw forms Web Push uses: the
/// 65-byte uncompressed public point (a subscription's `p256dh`, a VAPID `k`, an
/// `aes128gcm` body's key id) and the 32-byte private scalar.
public final class P256Key: @unchecked Sendable { // the EVP_PKEY is never changed after init
    let pkey: OpaquePointer
    /// The uncompressed public point (0x04 || x || y).
    public let publicKey: [UInt8]
    /// The private scalar, when this is a key pair.
    public let privateKey: [UInt8]?

    private init(_ pkey: OpaquePointer, publicKey: [UInt8], privateKey: [UInt8]?) {
        self.pkey = pkey
        self.publicKey = publicKey
        self.privateKey = privateKey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// P-256's group, made once for the process (EC operations only read it).
    static let group = SharedGroup()
    final class SharedGroup: @unchecked Sendable { // never changed after init
        let pointer = pushemu_p256_group()
    }

    /// A public key from its 65-byte uncompressed point; nil when it is not a point on P-256.
    public convenience init?(publicKey raw: [UInt8]) {
        guard raw.count == 65, let k = raw.withUnsafeBufferPointer({ pushemu_p256_from_raw($0.baseAddress, 65, nil) }) else {
            return nil
        }
        self.init(k, publicKey: raw, privateKey: nil)
    }

    /// A key pair from its 32-byte private scalar; nil when the scalar is 0 or not below the
    /// curve's order.
    public convenience init?(privateKey raw: [UInt8]) {
        guard raw.count == 32 else { return nil }
        var pub = [UInt8](repeating: 0, count: 65)
        guard pushemu_p256_public_of(raw, &pub) == 1,
            let k = pub.withUnsafeBufferPointer({ p in
                raw.withUnsafeBufferPointer { pushemu_p256_from_raw(p.baseAddress, 65, $0.baseAddress) }
            })
        else { return nil }
        self.init(k, publicKey: pub, privateKey: raw)
    }

    /// A key pair from a PEM private key (PKCS#8, as `pushemu credentials vapid` and py_vapid
    /// write it, or SEC1); nil when it is not a P-256 private key.
    public static func fromPEM(privateKey pem: String) -> P256Key? {
        guard let k = PEM.readKey(pem, isPrivate: true) else { return nil }
        var pub = [UInt8](repeating: 0, count: 65)
        var priv = [UInt8](repeating: 0, count: 32)
        guard EVP_PKEY_get_bits(k) == 256, EVP_PKEY_get_base_id(k) == EVP_PKEY_EC, pushemu_p256_export(k, &pub, &priv) == 1 else {
            EVP_PKEY_free(k)
            return nil
        }
        return P256Key(k, publicKey: pub, privateKey: priv)
    }

    /// A key pair's private key as PKCS#8 PEM (what py_vapid and pywebpush read); nil for a public key.
    public var privateKeyPEM: String? { privateKey == nil ? nil : PEM.privateKey(pkey) }

    /// A fresh key pair from OpenSSL's generator.
    public static func generate() -> P256Key? {
        guard let k = pushemu_ec_p256_generate() else { return nil }
        var pub = [UInt8](repeating: 0, count: 65)
        var priv = [UInt8](repeating: 0, count: 32)
        guard pushemu_p256_export(k, &pub, &priv) == 1 else {
            EVP_PKEY_free(k)
            return nil
        }
        return P256Key(k, publicKey: pub, privateKey: priv)
    }

    /// The ECDH shared secret of this key pair and the uncompressed point `peer` (checked to be
    /// on the curve), without making a key of it: what a browser does for each push.
    public func sharedSecret(withPoint peer: [UInt8]) -> [UInt8]? {
        guard let privateKey, peer.count == 65 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        return pushemu_p256_ecdh_raw(P256Key.group.pointer, privateKey, peer, &out) == 1 ? out : nil
    }

    /// The ECDH shared secret (the x coordinate, 32 bytes) of this key pair and `peer`.
    public func sharedSecret(with peer: P256Key) -> [UInt8]? { sharedSecret(withPoint: peer.publicKey) }

    /// Whether `signature` (JWT's r || s, 64 bytes) signs `message` under this key (ES256).
    public func verify(signature: ArraySlice<UInt8>, of message: ArraySlice<UInt8>) -> Bool {
        guard signature.count == 64 else { return false }
        return signature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in pushemu_es256_verify_raw(pkey, m.baseAddress, m.count, s.baseAddress) == 1 }
        }
    }

    /// An ES256 signature of `message` in JWT's r || s form (a key pair only).
    public func sign(_ message: [UInt8]) -> [UInt8]? {
        guard privateKey != nil else { return nil }
        var sig = [UInt8](repeating: 0, count: 64)
        return pushemu_es256_sign_raw(pkey, message, message.count, &sig) == 1 ? sig : nil
    }
}
