import Emulator
import Glibc
import PushCore
import Runtime

/// `pushemu env` and `pushemu ca`: what a sender's process needs to reach the emulator through
/// its proxy with its code unchanged.
enum ProxyCommands {
    /// Writes the CA files under `<data-dir>/ca/` and prints the variables for `--shell`.
    static func env(_ f: [String: String]) throws -> String {
        let shellName = f["shell"] ?? "sh"
        guard let shell = ProxyEnvironment.Shell(rawValue: shellName) else {
            throw UsageError("--shell must be sh, fish or powershell, got '\(shellName)'")
        }
        // As `serve` reads them: the flag, its PUSHEMU_ variable (empty is unset), the config file.
        func setting(_ name: String, default value: String) throws -> String { try CommandSettings.setting(name, f) ?? value }
        let host = try setting("host", default: "127.0.0.1")
        let portText = try setting("http-port", default: "8080")
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw ConfigurationError("--http-port must be a port number (1-65535), got '\(portText)'")
        }
        let address = CommandSettings.reachable(host)
        let dataDir = try CommandSettings.dataDirectory(f)
        let files = try ProxyEnvironment.writeFiles(under: dataDir + "/ca")
        let noProxy = (f["no-proxy"] ?? "").split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
        let variables = ProxyEnvironment.variables(proxy: "http://\(address):\(port)", noProxy: noProxy, ca: files.ca, bundle: files.bundle)
        var comment = "pushemu's proxy: APNs, FCM and Web Push hosts are answered by the emulator; CONNECT to any other host is refused.\n"
        comment += "Evaluate in the shell that runs the sender (other HTTPS hosts need NO_PROXY: pushemu env --no-proxy a,b)."
        if files.systemFile == nil { comment += "\nNo system CA bundle was found: the bundle holds the development CA alone." }
        return ProxyEnvironment.script(variables, shell: shell, comment: comment)
    }

    /// The development CA, or the bundle, to `--out` or standard output.
    static func ca(_ f: [String: String]) throws -> String {
        let pem = f["bundle"] == "true" ? ProxyEnvironment.bundle().pem : ProxyEnvironment.developmentCA
        guard let path = f["out"] else { return pem }
        do {
            try Files.writeAtomically(path, Array(pem.utf8))
        } catch {
            throw ConfigurationError("\(error)")
        }
        return "{\"file\":" + JSONWriter.quote(path) + "}\n"
    }
}
