import COpenSSL
import Transport

/// RS256 (RSASSA-PKCS1-v1_5 with SHA-256) over OpenSSL: service-account keys, the OAuth
/// assertion's signature, and the HMAC that seals the access tokens the emulator issues.
public enum RS256 {
    /// An owned RSA EVP_PKEY.
    public final class Key: @unchecked Sendable {
        let pkey: OpaquePointer
        init(_ p: OpaquePointer) { pkey = p }
        deinit { EVP_PKEY_free(pkey) }

        /// Reads a PEM public key ("BEGIN PUBLIC KEY") or private key (PKCS#8 or PKCS#1).
        public static func fromPEM(_ pem: String, isPrivate: Bool) -> Key? {
            guard let k = PEM.readKey(pem, isPrivate: isPrivate) else { return nil }
            guard EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA, EVP_PKEY_get_bits(k) >= 1024 else {
                EVP_PKEY_free(k)
                return nil
            }
            return Key(k)
        }

        /// A fresh RSA key pair (2048 bits, as Google's service-account keys).
        public static func generate(bits: UInt32 = 2048) -> Key? {
            guard let k = pushemu_rsa_generate(bits) else { return nil }
            return Key(k)
        }

        public var publicKeyPEM: String { PEM.publicKey(pkey) }
        /// PKCS#8 ("BEGIN PRIVATE KEY"), as in Google's service-account JSON.
        public var privateKeyPEM: String { PEM.privateKey(pkey) }
    }

    public static func verify(_ key: Key, message: [UInt8], signature: [UInt8]) -> Bool {
        message.withUnsafeBytes { m in signature.withUnsafeBytes { SHA256Signature.verify(key.pkey, message: m, signature: $0) } }
    }

    public static func sign(_ key: Key, message: [UInt8]) -> [UInt8]? { SHA256Signature.sign(key.pkey, message: message) }

    /// Signs a JWT with `header` and `claims` (JSON texts): `b64(header).b64(claims).b64(sig)`.
    public static func makeJWT(key: Key, header: String, claims: String) -> String? {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        guard let sig = sign(key, message: Array(input.utf8)) else { return nil }
        return input + "." + Base64URL.encode(sig)
    }

    /// HMAC-SHA256 of `message` under `key`.
    static func hmac(key: [UInt8], message: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 32
        _ = HMAC(
            EVP_sha256(), key, Int32(key.count), message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count,
            &out, &len)
        return out
    }

    /// Cryptographically random bytes.
    static func randomBytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        _ = RAND_bytes(&out, Int32(n))
        return out
    }
}
