import COpenSSL
import Glibc

/// Certificates and keys for the TLS listener, as PEM bytes.
public struct TLSConfiguration: Sendable {
    /// Server certificate first, then any intermediates.
    public var certificateChainPEM: [UInt8]
    public var privateKeyPEM: [UInt8]
    /// When set, a client certificate is requested (not required) and verified against these CAs.
    public var clientCAPEM: [UInt8]?
    /// Server names (SNI, lower case) for which ALPN offers h2 alone, as services that speak
    /// HTTP/2 only do: a client that offers only http/1.1 gets no protocol agreed.
    public var h2OnlyServerNames: Set<String>

    public init(certificateChainPEM: [UInt8], privateKeyPEM: [UInt8], clientCAPEM: [UInt8]? = nil, h2OnlyServerNames: Set<String> = []) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
        self.clientCAPEM = clientCAPEM
        self.h2OnlyServerNames = h2OnlyServerNames
    }
}

/// The server names ALPN offers h2 alone for, held for the context's life (the callback's arg).
private final class ALPNPolicy {
    let h2Only: Set<String>
    init(_ names: Set<String>) { h2Only = names }
}

/// An OpenSSL server context: TLS 1.2 and 1.3, ALPN h2 then http/1.1 (none is fine too).
final class TLSContext: @unchecked Sendable {
    let ctx: OpaquePointer
    private let policy: Unmanaged<ALPNPolicy>

    init(_ config: TLSConfiguration) throws {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw TransportError.tls("SSL_CTX_new: \(tlsErrors())") }
        self.ctx = ctx
        policy = Unmanaged.passRetained(ALPNPolicy(config.h2OnlyServerNames))
        _ = pushemu_ssl_ctx_set_min_proto_version(ctx, TLS1_2_VERSION)
        pushemu_ssl_ctx_set_server_options(ctx)
        _ = pushemu_ssl_ctx_set_mode(
            ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
        _ = pushemu_ssl_ctx_set_read_ahead(ctx, 1)
        _ = pushemu_ssl_ctx_set_session_cache_server(ctx)
        _ = pushemu_ssl_ctx_sess_set_cache_size(ctx, 256)
        // AES-128-GCM first (as h2o does): as safe for this use and cheaper per byte than AES-256.
        _ = SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256")
        _ = SSL_CTX_set_cipher_list(
            ctx,
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
        )
        let sid: [UInt8] = Array("pushemu".utf8)
        _ = SSL_CTX_set_session_id_context(ctx, sid, UInt32(sid.count))

        let certs = try TLSContext.readCertificates(config.certificateChainPEM, what: "certificate")
        defer { for certificate in certs { X509_free(certificate) } }
        guard SSL_CTX_use_certificate(ctx, certs[0]) == 1 else { throw TransportError.tls("certificate rejected: \(tlsErrors())") }
        for extra in certs.dropFirst() { _ = pushemu_ssl_ctx_add1_chain_cert(ctx, extra) }

        let key = try TLSContext.readPrivateKey(config.privateKeyPEM, what: "private key")
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_PrivateKey(ctx, key) == 1, SSL_CTX_check_private_key(ctx) == 1 else {
            throw TransportError.tls("private key does not match the certificate: \(tlsErrors())")
        }

        if let caPEM = config.clientCAPEM {
            let cas = try TLSContext.readCertificates(caPEM, what: "client CA")
            defer { for certificate in cas { X509_free(certificate) } }
            let store = SSL_CTX_get_cert_store(ctx)
            for ca in cas {
                _ = X509_STORE_add_cert(store, ca)
                _ = SSL_CTX_add_client_CA(ctx, ca)
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        }

        SSL_CTX_set_alpn_select_cb(
            ctx,
            { ssl, out, outlen, input, inlen, arg in
                guard let input, let out, let outlen else { return SSL_TLSEXT_ERR_NOACK }
                // h2 alone for the names that speak only HTTP/2 (APNs's).
                var h2Only = false
                if let arg, let ssl, let sni = pushemu_ssl_get_servername(ssl) {
                    let names = Unmanaged<ALPNPolicy>.fromOpaque(arg).takeUnretainedValue().h2Only
                    h2Only = !names.isEmpty && names.contains(String(cString: sni).lowercased())
                }
                // Prefer h2, then http/1.1; offer none otherwise (the client may still speak h2).
                var chosen: (Int, Int)? = nil
                var i = 0
                let n = Int(inlen)
                while i < n {
                    let len = Int(input[i])
                    let start = i + 1
                    guard start + len <= n else { break }
                    if len == 2 && input[start] == 0x68 && input[start + 1] == 0x32 {
                        chosen = (start, len)
                        break
                    }
                    if !h2Only, len == 8, chosen == nil, memcmp(input + start, "http/1.1", 8) == 0 { chosen = (start, len) }
                    i = start + len
                }
                guard let (s, l) = chosen else { return SSL_TLSEXT_ERR_NOACK }
                out.pointee = input + s
                outlen.pointee = UInt8(l)
                return SSL_TLSEXT_ERR_OK
            }, policy.toOpaque())
    }

    deinit {
        SSL_CTX_free(ctx)
        policy.release()
    }

    /// The private key in `pem` (the caller frees it with EVP_PKEY_free).
    static func readPrivateKey(_ pem: [UInt8], what: String) throws -> OpaquePointer {
        try pem.withUnsafeBytes { raw -> OpaquePointer in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { throw TransportError.tls("BIO_new_mem_buf") }
            defer { BIO_free(bio) }
            guard let k = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
                throw TransportError.tls("\(what) is not a readable PEM key: \(tlsErrors())")
            }
            return k
        }
    }

    static func readCertificates(_ pem: [UInt8], what: String) throws -> [OpaquePointer] {
        var out: [OpaquePointer] = []
        try pem.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { throw TransportError.tls("BIO_new_mem_buf") }
            defer { BIO_free(bio) }
            while let x = PEM_read_bio_X509(bio, nil, nil, nil) { out.append(x) }
            ERR_clear_error()
        }
        if out.isEmpty { throw TransportError.tls("\(what) is not a readable PEM certificate") }
        return out
    }
}

/// The queued OpenSSL errors as one line (and clears the queue).
func tlsErrors() -> String {
    var parts: [String] = []
    while true {
        let e = ERR_get_error()
        if e == 0 { break }
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(e, &buf, buf.count)
        parts.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }
    return parts.isEmpty ? "unknown error" : parts.joined(separator: "; ")
}

/// Decodes the subject, issuer and extensions of an X509 certificate.
func decodePeerCertificate(_ x509: OpaquePointer) -> PeerCertificate {
    func entries(_ name: OpaquePointer?) -> [PeerCertificate.NameEntry] {
        guard let name else { return [] }
        var out: [PeerCertificate.NameEntry] = []
        for i in 0..<X509_NAME_entry_count(name) {
            guard let entry = X509_NAME_get_entry(name, i),
                let obj = X509_NAME_ENTRY_get_object(entry),
                let data = X509_NAME_ENTRY_get_data(entry)
            else { continue }
            let oid = objectText(obj, numeric: true)
            let nid = OBJ_obj2nid(obj)
            var short = oid
            if nid != NID_undef, let sn = OBJ_nid2sn(nid) { short = String(cString: sn) }
            if short == "userId" { short = "UID" }
            var utf8: UnsafeMutablePointer<UInt8>? = nil
            let len = ASN1_STRING_to_UTF8(&utf8, data)
            var value = ""
            if len >= 0, let utf8 {
                value = String(decoding: UnsafeBufferPointer(start: utf8, count: Int(len)), as: UTF8.self)
                pushemu_openssl_free(utf8)
            }
            out.append(.init(name: short, oid: oid, value: value))
        }
        return out
    }
    var exts: [PeerCertificate.Extension] = []
    for i in 0..<X509_get_ext_count(x509) {
        guard let ext = X509_get_ext(x509, i), let obj = X509_EXTENSION_get_object(ext) else { continue }
        var bytes: [UInt8] = []
        if let data = X509_EXTENSION_get_data(ext), let p = ASN1_STRING_get0_data(data) {
            bytes = Array(UnsafeBufferPointer(start: p, count: Int(ASN1_STRING_length(data))))
        }
        exts.append(.init(oid: objectText(obj, numeric: true), critical: X509_EXTENSION_get_critical(ext) != 0, value: bytes))
    }
    func seconds(_ t: UnsafePointer<ASN1_TIME>?) -> Int64 {
        guard let t else { return 0 }
        var tm = Glibc.tm()
        guard ASN1_TIME_to_tm(t, &tm) == 1 else { return 0 }
        return Int64(timegm(&tm))
    }
    var serial = ""
    if let s = X509_get_serialNumber(x509), let bn = ASN1_INTEGER_to_BN(s, nil) {
        if let hex = BN_bn2hex(bn) {
            serial = String(cString: hex)
            pushemu_openssl_free(hex)
        }
        BN_free(bn)
    }
    return PeerCertificate(
        subject: entries(X509_get_subject_name(x509)), issuer: entries(X509_get_issuer_name(x509)),
        extensions: exts, notBefore: seconds(X509_get0_notBefore(x509)),
        notAfter: seconds(X509_get0_notAfter(x509)), serialNumberHex: serial)
}

private func objectText(_ obj: OpaquePointer, numeric: Bool) -> String {
    var buf = [CChar](repeating: 0, count: 128)
    let n = OBJ_obj2txt(&buf, Int32(buf.count), obj, numeric ? 1 : 0)
    return n > 0 ? buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : ""
}
