import Glibc
import PushCore
import Runtime

/// What `pushemu env` and `pushemu ca` hand a sender's process so that its unmodified code
/// reaches the emulator through the proxy: the proxy variables, and a CA bundle (the system's
/// trusted CAs plus the development CA) for the variables the common TLS stacks read.
package enum ProxyEnvironment {
    package enum Shell: String, CaseIterable { case sh, fish, powershell }

    /// The development CA, PEM (what each proxy tunnel's certificate is signed by).
    package static var developmentCA: String { DevelopmentCredentials.certificateAuthority + "\n" }

    /// Where Debian, Fedora/RHEL, Alpine, openSUSE and macOS keep the system's trusted CAs.
    static let systemBundles = [
        "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem",
    ]

    /// The system's trusted CAs followed by the development CA, and the file they came from
    /// (nil: none found, the bundle then holds the development CA alone).
    package static func bundle() -> (pem: String, systemFile: String?) {
        for path in systemBundles {
            if let bytes = try? Emulator.readFile(path, what: "system CA bundle"), !bytes.isEmpty {
                var text = String(decoding: bytes, as: UTF8.self)
                if !text.hasSuffix("\n") { text += "\n" }
                return (text + "\n# pushemu Development CA (FOR TESTING ONLY)\n" + developmentCA, path)
            }
        }
        return (developmentCA, nil)
    }

    /// Writes `pushemu-ca.pem` and `ca-bundle.pem` under `directory` (made if missing); returns
    /// their absolute paths and the system bundle used.
    package static func writeFiles(under directory: String) throws -> (ca: String, bundle: String, systemFile: String?) {
        let dir = absolute(directory)
        try Emulator.makeDirectory(dir)
        let (pem, system) = bundle()
        let caPath = dir + "/pushemu-ca.pem"
        let bundlePath = dir + "/ca-bundle.pem"
        do {
            try Files.writeAtomically(caPath, Array(developmentCA.utf8))
            try Files.writeAtomically(bundlePath, Array(pem.utf8))
        } catch {
            throw ConfigurationError("\(error)")
        }
        return (caPath, bundlePath, system)
    }

    /// The variables, in evaluation order: the proxy for HTTPS (and its lower-case spelling,
    /// which curl and Go read), hosts that bypass it, and the CA variables.
    package static func variables(proxy: String, noProxy: [String], ca: String, bundle: String) -> [(String, String)] {
        let bypass = (["localhost", "127.0.0.1", "::1"] + noProxy).joined(separator: ",")
        return [
            ("HTTPS_PROXY", proxy), ("https_proxy", proxy), ("NO_PROXY", bypass), ("no_proxy", bypass),
            ("SSL_CERT_FILE", bundle), ("REQUESTS_CA_BUNDLE", bundle), ("CURL_CA_BUNDLE", bundle), ("NODE_EXTRA_CA_CERTS", ca),
            ("PUSHEMU_CA", ca),
        ]
    }

    /// The variables as `shell` evaluates them.
    package static func script(_ variables: [(String, String)], shell: Shell, comment: String) -> String {
        var out = ""
        for line in comment.split(separator: "\n") { out += "# \(line)\n" }
        for (name, value) in variables {
            switch shell {
            case .sh: out += "export \(name)=\(quoteSingle(value))\n"
            case .fish: out += "set -gx \(name) \(quoteFish(value))\n"
            case .powershell: out += "$env:\(name) = \(quoteSingle(value, powershell: true))\n"
            }
        }
        return out
    }

    static func quoteSingle(_ s: String, powershell: Bool = false) -> String {
        "'" + s.replacing("'", with: powershell ? "''" : "'\\''") + "'"
    }

    static func quoteFish(_ s: String) -> String {
        "'" + s.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }

    /// `path` made absolute against the working directory (variables must not depend on where
    /// the sender's process runs).
    package static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var rest = Substring(path)
        while rest.hasPrefix("./") { rest = rest.dropFirst(2) }
        return rest.isEmpty || rest == "." ? cwd : (cwd == "/" ? "/" : cwd + "/") + rest
    }
}
