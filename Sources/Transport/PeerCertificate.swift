/// The verified client certificate of a TLS connection, decoded once at handshake.
public struct PeerCertificate: Sendable {
    public struct NameEntry: Sendable, Equatable {
        /// Short name where OpenSSL knows one ("CN", "UID", "OU"), else the dotted OID.
        public let name: String
        public let oid: String
        public let value: String

        public init(name: String, oid: String, value: String) {
            self.name = name
            self.oid = oid
            self.value = value
        }
    }

    public struct Extension: Sendable {
        public let oid: String
        public let critical: Bool
        /// The DER contents of the extension's extnValue OCTET STRING.
        public let value: [UInt8]

        public init(oid: String, critical: Bool, value: [UInt8]) {
            self.oid = oid
            self.critical = critical
            self.value = value
        }
    }

    public let subject: [NameEntry]
    public let issuer: [NameEntry]
    public let extensions: [Extension]
    /// Validity in seconds since the epoch.
    public let notBefore: Int64
    public let notAfter: Int64
    public let serialNumberHex: String

    public init(
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
    public func subjectValue(_ name: String) -> String? {
        subject.first { $0.name == name || $0.oid == name }?.value
    }

    public func hasExtension(_ oid: String) -> Bool {
        extensions.contains { $0.oid == oid }
    }

    public func extensionValue(_ oid: String) -> [UInt8]? {
        extensions.first { $0.oid == oid }?.value
    }

    /// The subject as an RFC 2253-like one-line string ("UID=..., CN=...").
    var subjectLine: String {
        subject.map { "\($0.name)=\($0.value)" }.joined(separator: ", ")
    }
}
