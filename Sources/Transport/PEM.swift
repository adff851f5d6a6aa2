import COpenSSL

/// PEM encoding of OpenSSL keys (the signing keys of APNs and the service accounts of FCM).
public enum PEM {
    /// A public key ("BEGIN PUBLIC KEY") or private key (PKCS#8, PKCS#1, SEC1); the caller owns
    /// the returned EVP_PKEY.
    public static func readKey(_ pem: String, isPrivate: Bool) -> OpaquePointer? {
        var bytes = Array(pem.utf8)
        return bytes.withUnsafeMutableBytes { raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            let k = isPrivate ? PEM_read_bio_PrivateKey(bio, nil, nil, nil) : PEM_read_bio_PUBKEY(bio, nil, nil, nil)
            ERR_clear_error()
            return k
        }
    }

    public static func publicKey(_ pkey: OpaquePointer) -> String { write { PEM_write_bio_PUBKEY($0, pkey) } }

    /// PKCS#8 ("BEGIN PRIVATE KEY").
    public static func privateKey(_ pkey: OpaquePointer) -> String { write { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) } }

    private static func write(_ body: (OpaquePointer) -> Int32) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else { return "" }
        var p: UnsafeMutablePointer<CChar>?
        let n = pushemu_bio_mem_data(bio, &p)
        guard let p, n > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: n), as: UTF8.self)
    }
}

/// SHA-256 digital signatures over an EVP_PKEY (the algorithm is the key's: ECDSA, RSA).
public enum SHA256Signature {
    /// The signature in the algorithm's native encoding (DER for ECDSA, raw for RSA).
    public static func sign(_ pkey: OpaquePointer, message: [UInt8]) -> [UInt8]? {
        guard let ctx = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else {
            ERR_clear_error()
            return nil
        }
        var len = 0
        guard EVP_DigestSign(ctx, nil, &len, message, message.count) == 1 else {
            ERR_clear_error()
            return nil
        }
        var sig = [UInt8](repeating: 0, count: len)
        guard EVP_DigestSign(ctx, &sig, &len, message, message.count) == 1 else {
            ERR_clear_error()
            return nil
        }
        return Array(sig.prefix(len))
    }

    public static func verify(_ pkey: OpaquePointer, message: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> Bool {
        guard !signature.isEmpty, let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else {
            ERR_clear_error()
            return false
        }
        let ok = EVP_DigestVerify(
            ctx, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count,
            message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count)
        ERR_clear_error()
        return ok == 1
    }
}
