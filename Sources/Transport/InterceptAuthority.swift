import COpenSSL
import Glibc
import Runtime
import Synchronization

/// Which host names the cleartext listener intercepts as an HTTP proxy (`CONNECT host:port`,
/// absolute-form `http://host/...`), and the CA that signs a certificate for each.
public struct InterceptConfiguration: Sendable {
    /// Lower-case host names (no port, no trailing dot).
    public var hosts: Set<String>
    /// The CA certificate and its private key (PEM) that sign each host's leaf certificate.
    public var caCertificatePEM: [UInt8]
    public var caKeyPEM: [UInt8]
    /// CAs for client certificates inside a tunnel, as on the TLS listener.
    public var clientCAPEM: [UInt8]?
    /// Appended to the 403 answer for a host that is not intercepted (how to add one).
    public var refusalHint: String
    /// Hosts whose tunnels agree h2 alone in ALPN (see `TLSConfiguration.h2OnlyServerNames`).
    public var h2OnlyHosts: Set<String> = []

    public init(hosts: Set<String>, caCertificatePEM: [UInt8], caKeyPEM: [UInt8], clientCAPEM: [UInt8]? = nil, refusalHint: String = "") {
        self.hosts = Set(hosts.map { InterceptAuthority.normalized($0) })
        self.caCertificatePEM = caCertificatePEM
        self.caKeyPEM = caKeyPEM
        self.clientCAPEM = clientCAPEM
        self.refusalHint = refusalHint
    }
}

/// The intercepting proxy's certificate authority: a TLS server context per intercepted host,
/// with a leaf certificate (ECDSA P-256, that one name in its subjectAltName) signed by the
/// configured CA, made the first time a client tunnels to the host and kept for the process.
///
/// Never an open proxy: `intercepts` is the only gate, and nothing is ever forwarded anywhere.
/// Contexts are made off the hot path (once per host) under a lock; a tunnel's TLS then runs
/// on its connection's loop as on the TLS listener.
final class InterceptAuthority: Sendable {
    let configuration: InterceptConfiguration
    private let contexts = FutexLock<[String: TLSContext]>([:])
    private let caCertificate: OpaquePointerBox
    private let caKey: OpaquePointerBox

    init(_ configuration: InterceptConfiguration) throws {
        self.configuration = configuration
        let certs = try TLSContext.readCertificates(configuration.caCertificatePEM, what: "intercept CA")
        for extra in certs.dropFirst() { X509_free(extra) }
        caCertificate = OpaquePointerBox(certs[0]) { X509_free($0) }
        caKey = OpaquePointerBox(try TLSContext.readPrivateKey(configuration.caKeyPEM, what: "intercept CA key")) { EVP_PKEY_free($0) }
        guard X509_check_private_key(caCertificate.pointer, caKey.pointer) == 1 else {
            throw TransportError.tls("intercept CA key does not match its certificate: \(tlsErrors())")
        }
    }

    /// `host` lower-cased, without a trailing dot.
    static func normalized<S: StringProtocol>(_ host: S) -> String {
        var h = host.lowercased()
        while h.hasSuffix(".") { h.removeLast() }
        return h
    }

    func intercepts(_ host: String) -> Bool { configuration.hosts.contains(InterceptAuthority.normalized(host)) }

    /// The server context for `host` (which `intercepts`), made on first use.
    func context(for host: String) throws -> TLSContext {
        let name = InterceptAuthority.normalized(host)
        if let existing = contexts.withLock({ $0[name] }) { return existing }
        let (certificatePEM, keyPEM) = try issue(for: name)
        let made = try TLSContext(
            TLSConfiguration(
                certificateChainPEM: certificatePEM, privateKeyPEM: keyPEM, clientCAPEM: configuration.clientCAPEM,
                h2OnlyServerNames: configuration.h2OnlyHosts.contains(name) ? [name] : []))
        return contexts.withLock { cache in
            if let raced = cache[name] { return raced }
            cache[name] = made
            return made
        }
    }

    /// A new P-256 key and a certificate for `name` signed by the CA, both as PEM.
    private func issue(for name: String) throws -> (certificate: [UInt8], key: [UInt8]) {
        guard let key = pushemu_ec_p256_generate() else { throw TransportError.tls("P-256 key generation failed: \(tlsErrors())") }
        defer { EVP_PKEY_free(key) }
        guard let cert = X509_new() else { throw TransportError.tls("X509_new") }
        defer { X509_free(cert) }
        _ = X509_set_version(cert, 2)
        var serial = [UInt8](repeating: 0, count: 16)
        _ = RAND_bytes(&serial, Int32(serial.count))
        serial[0] &= 0x7F
        if let bn = BN_bin2bn(serial, Int32(serial.count), nil) {
            _ = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert))
            BN_free(bn)
        }
        // Valid from an hour ago (clock skew) for 397 days: what browsers and TLS stacks accept.
        _ = X509_gmtime_adj(X509_getm_notBefore(cert), -3600)
        _ = X509_gmtime_adj(X509_getm_notAfter(cert), 397 * 86_400)
        guard let subject = X509_NAME_new() else { throw TransportError.tls("X509_NAME_new") }
        defer { X509_NAME_free(subject) }
        _ = X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, "pushemu", -1, -1, 0)
        _ = X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, name, -1, -1, 0)
        _ = X509_set_subject_name(cert, subject)
        _ = X509_set_issuer_name(cert, X509_get_subject_name(caCertificate.pointer))
        _ = X509_set_pubkey(cert, key)
        let extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth"),
            (NID_subject_alt_name, "DNS:\(name)"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid:always"),
        ]
        for (nid, value) in extensions where pushemu_x509_add_ext(cert, caCertificate.pointer, nid, value) != 1 {
            throw TransportError.tls("certificate extension \(value) for \(name): \(tlsErrors())")
        }
        guard X509_sign(cert, caKey.pointer, EVP_sha256()) > 0 else {
            throw TransportError.tls("signing the certificate for \(name): \(tlsErrors())")
        }
        return (try pem { PEM_write_bio_X509($0, cert) }, try pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) })
    }

    private func pem(_ write: (OpaquePointer) -> Int32) throws -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TransportError.tls("BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw TransportError.tls("PEM encoding: \(tlsErrors())") }
        var data: UnsafeMutablePointer<CChar>?
        let n = pushemu_bio_mem_data(bio, &data)
        guard let data, n > 0 else { throw TransportError.tls("PEM encoding: empty") }
        return data.withMemoryRebound(to: UInt8.self, capacity: n) { Array(UnsafeBufferPointer(start: $0, count: n)) }
    }
}

/// An OpenSSL object freed with its owner (immutable after init, so Sendable).
final class OpaquePointerBox: @unchecked Sendable {
    let pointer: OpaquePointer
    private let free: (OpaquePointer) -> Void
    init(_ pointer: OpaquePointer, free: @escaping (OpaquePointer) -> Void) {
        self.pointer = pointer
        self.free = free
    }
    deinit { free(pointer) }
}
