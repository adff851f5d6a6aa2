/// The verified client certificate of a TLS connection, decoded once at handshake.
package struct PeerCertificate: Sendable {
    package struct NameEntry: Sendable, Equatable {
        /// Short name where OpenSSL knows one ("CN", "UID", "OU"), else the dotted OID.
        package let name: String
        package let oid: String
        package let value: String

        package init(name: String, oid: String, value: String) {
            self.name = name
            self.oid = oid
            self.value = value
        }
    }

    package struct Extension: Sendable {
        package let oid: String
        package let critical: Bool
        /// The DER contents of the extension's extnValue OCTET STRING.
        package let value: [UInt8]

        package init(oid: String, critical: Bool, value: [UInt8]) {
            self.oid = oid
            self.critical = critical
            self.value = value
        }
    }

    package let subject: [NameEntry]
    package let issuer: [NameEntry]
    package let extensions: [Extension]
    /// Validity in seconds since the epoch.
    package let notBefore: Int64
    package let notAfter: Int64
    package let serialNumberHex: String

    package init(
        subject: [NameEntry], issuer: [NameEntry], extensions: [Extension],
        notBefore: Int64, notAfter: Int64, serialNumberHex: String
    ) {
        self.subject = subject
        self.issuer = issuer
        self.extensions = extensions
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.serialNumberHex = serialNumberHex
    }

    /// The first subject value for a short name or OID, e.g. `subjectValue("UID")`.
    package func subjectValue(_ name: String) -> String? {
        subject.first { $0.name == name || $0.oid == name }?.value
    }

    package func hasExtension(_ oid: String) -> Bool {
        extensions.contains { $0.oid == oid }
    }

    package func extensionValue(_ oid: String) -> [UInt8]? {
        extensions.first { $0.oid == oid }?.value
    }

    /// The subject as an RFC 2253-like one-line string ("UID=..., CN=...").
    package var subjectLine: String {
        subject.map { "\($0.name)=\($0.value)" }.joined(separator: ", ")
    }
}
