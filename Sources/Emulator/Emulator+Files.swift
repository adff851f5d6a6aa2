import APNs
import FCM
import Glibc
import Transport
import WebPush

extension Emulator {
    /// The TLS credentials: the embedded development certificate unless `--cert`/`--key` name
    /// files; client certificates verified against `--client-ca` or the development CA.
    static func tlsConfiguration(_ configuration: EmulatorConfiguration) throws -> TLSConfiguration {
        let certificate: [UInt8]
        let key: [UInt8]
        switch (configuration.certificatePath, configuration.keyPath) {
        case (nil, nil):
            certificate = Array(DevelopmentCredentials.serverCertificate.utf8)
            key = Array(DevelopmentCredentials.serverKey.utf8)
        case (let certificatePath?, let keyPath?):
            certificate = try readFile(certificatePath, what: "certificate")
            key = try readFile(keyPath, what: "key")
        case (_?, nil):
            throw ConfigurationError("--cert needs --key")
        case (nil, _?):
            throw ConfigurationError("--key needs --cert")
        }
        let clientCA =
            try configuration.clientCAPath.map { try readFile($0, what: "client CA") }
            ?? Array(DevelopmentCredentials.certificateAuthority.utf8)
        // Apple's host names agree h2 alone in ALPN, as Apple's servers do (unless --apns-http1).
        return TLSConfiguration(
            certificateChainPEM: certificate, privateKeyPEM: key, clientCAPEM: clientCA,
            h2OnlyServerNames: configuration.apns.allowHTTP1 ? [] : Set(APNsEnvironment.hostNames))
    }

    /// The proxy: the APNs and FCM host names and `--intercept-host`'s, each tunnel's certificate
    /// signed by the development CA (the one `pushemu ca` writes and `pushemu env` trusts).
    static func interceptConfiguration(_ configuration: EmulatorConfiguration, clientCA: [UInt8]?) -> InterceptConfiguration {
        var intercept = InterceptConfiguration(
            hosts: Set(APNsEnvironment.hostNames + FCMGateway.hostNames + WebPushGateway.hostNames + configuration.interceptHosts),
            caCertificatePEM: Array(DevelopmentCredentials.certificateAuthority.utf8),
            caKeyPEM: Array(DevelopmentCredentials.certificateAuthorityKey.utf8), clientCAPEM: clientCA,
            refusalHint: "Add a host with --intercept-host HOST (repeatable).")
        if !configuration.apns.allowHTTP1 { intercept.h2OnlyHosts = Set(APNsEnvironment.hostNames) }
        return intercept
    }

    /// A whole file (at most `limit` bytes), or a `ConfigurationError` naming what it was for.
    package static func readFile(_ path: String, what: String, limit: Int = 16 * 1024 * 1024) throws -> [UInt8] {
        guard let file = fopen(path, "rb") else {
            throw ConfigurationError("cannot read \(what) file '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count > 0 { out.append(contentsOf: buffer[0..<count]) }
            if count < buffer.count { break }
            if out.count > limit { throw ConfigurationError("\(what) file '\(path)' is too large (more than \(limit >> 20) MiB)") }
        }
        if ferror(file) != 0 { throw ConfigurationError("cannot read \(what) file '\(path)'") }
        return out
    }

    /// `mkdir -p`.
    package static func makeDirectory(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part + "/"
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw ConfigurationError("cannot create data directory '\(path)': \(String(cString: strerror(errno)))")
            }
        }
    }
}
