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
