import Emulator

/// What a command needs to find the emulator, by `serve`'s own rule: the command's flag, then
/// the `PUSHEMU_*` variable, then the config file `PUSHEMU_CONFIG` names, then the default. So
/// `pushemu credentials` writes where `pushemu serve` reads, and `pushemu devices list` asks the
/// server that `PUSHEMU_HTTP_PORT` started.
enum CommandSettings {
    static let environment = ServeOptions.processEnvironment()

    static func setting(_ name: String, _ f: [String: String]) throws -> String? {
        do {
            return try ServeOptions.commandSetting(name, flag: f[name], environment: environment)?.value
        } catch {
            throw ConfigurationError("\(error)")
        }
    }

    /// `--data-dir`, `PUSHEMU_DATA_DIR`, the config file's `data-dir`, or `./.pushemu`.
    static func dataDirectory(_ f: [String: String]) throws -> String {
        try setting("data-dir", f) ?? "./.pushemu"
    }

    /// `--server`, else the URL of the server `PUSHEMU_HOST` and `PUSHEMU_HTTP_PORT` (or the
    /// config file's `host` and `http-port`) start: `http://127.0.0.1:8080` by default.
    static func server(_ f: [String: String]) throws -> String {
        if var s = f["server"] {
            guard s.hasPrefix("http://") || s.hasPrefix("https://") else {
                throw UsageError("--server takes a URL such as http://127.0.0.1:8080, got '\(s)'")
            }
            while s.hasSuffix("/") { s.removeLast() }
            return s
        }
        let host = try setting("host", [:]) ?? "127.0.0.1"
        let port = try setting("http-port", [:]) ?? "8080"
        guard let n = Int(port), (1...65535).contains(n) else {
            throw UsageError("no --server given, and the http port set for serve is '\(port)': give --server URL")
        }
        return "http://\(reachable(host)):\(n)"
    }

    /// How a client reaches a server bound to `host`: a wildcard on loopback, IPv6 in brackets.
    static func reachable(_ host: String) -> String {
        switch host {
        case "0.0.0.0": "127.0.0.1"
        case "::": "[::1]"
        default: host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        }
    }
}
