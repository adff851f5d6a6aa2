import COpenSSL
import Transport

/// ES256 (ECDSA P-256 with SHA-256) over OpenSSL, with JWT's raw r||s signature format.
public enum ES256 {
    /// An owned EVP_PKEY.
    public final class Key: @unchecked Sendable {
        let pkey: OpaquePointer
        init(_ p: OpaquePointer) { pkey = p }
        deinit { EVP_PKEY_free(pkey) }

        /// Reads a PEM public key ("BEGIN PUBLIC KEY") or private key (PKCS#8 .p8, SEC1).
        public static func fromPEM(_ pem: String, isPrivate: Bool) -> Key? {
            guard let k = PEM.readKey(pem, isPrivate: isPrivate) else { return nil }
            // Only P-256 keys are ES256 keys.
            guard EVP_PKEY_get_bits(k) == 256, EVP_PKEY_get_base_id(k) == EVP_PKEY_EC else {
                EVP_PKEY_free(k)
                return nil
            }
            return Key(k)
        }

        /// A fresh P-256 key pair.
        public static func generate() -> Key? {
            guard let k = pushemu_ec_p256_generate() else { return nil }
            return Key(k)
        }

        public var publicKeyPEM: String { PEM.publicKey(pkey) }
        /// PKCS#8, as Apple's .p8 files.
        public var privateKeyPEM: String { PEM.privateKey(pkey) }
    }

    /// Verifies a 64-byte r||s signature of `message`.
    public static func verify(_ key: Key, message: UnsafeRawBufferPointer, signature: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        return pushemu_es256_verify_raw(key.pkey, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count, signature) == 1
    }

    /// Signs `message`, returning the 64-byte r||s form.
    public static func sign(_ key: Key, message: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 64)
        return pushemu_es256_sign_raw(key.pkey, message, message.count, &out) == 1 ? out : nil
    }
}
