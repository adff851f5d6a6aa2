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
        guard signature.count == 64, let sig = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(sig) }
        let r = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else { return false }
        var der: UnsafeMutablePointer<UInt8>? = nil
        let derLen = i2d_ECDSA_SIG(sig, &der)
        guard derLen > 0, let der else { return false }
        defer { pushemu_openssl_free(der) }
        return SHA256Signature.verify(key.pkey, message: message, signature: UnsafeRawBufferPointer(start: der, count: Int(derLen)))
    }

    /// Signs `message`, returning the 64-byte r||s form.
    public static func sign(_ key: Key, message: [UInt8]) -> [UInt8]? {
        guard let der = SHA256Signature.sign(key.pkey, message: message) else { return nil }
        let len = der.count
        return der.withUnsafeBufferPointer { buf -> [UInt8]? in
            var p: UnsafePointer<UInt8>? = buf.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &p, len) else { return nil }
            defer { ECDSA_SIG_free(sig) }
            var out = [UInt8](repeating: 0, count: 64)
            guard BN_bn2binpad(ECDSA_SIG_get0_r(sig), &out, 32) == 32 else { return nil }
            let ok = out.withUnsafeMutableBufferPointer { BN_bn2binpad(ECDSA_SIG_get0_s(sig), $0.baseAddress! + 32, 32) }
            return ok == 32 ? out : nil
        }
    }
}
