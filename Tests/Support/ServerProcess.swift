import Foundation

/// The `pushemu` binary started on free ports, as a user would run it.
public final class ServerProcess {
    public let process: Process
    public let httpPort: Int
    public let httpsPort: Int
    public let stdoutURL: URL
    public let stderrURL: URL

    /// Where the built `pushemu` is: $PUSHEMU_BIN, else beside the test bundle (.build/debug).
    public static var binaryPath: String {
        if let p = ProcessInfo.processInfo.environment["PUSHEMU_BIN"] { return p }
        let bundleDir = Bundle.main.bundleURL.deletingLastPathComponent().path
        for dir in [Bundle.main.bundleURL.path, bundleDir, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path]
        {
            let p = dir + "/pushemu"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return bundleDir + "/pushemu"
    }

    /// Repository root (for Certs/ and Scripts/).
    public static var repositoryRoot: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }

    /// Starts `pushemu serve` with `--http-port 0 --https-port 0 --in-memory` plus `arguments`
    /// and waits (up to `timeout`) for the listening line.
    public init(_ arguments: [String] = [], timeout: Double = 15) throws {
        let dir = FileManager.default.temporaryDirectory
        stdoutURL = dir.appendingPathComponent("pushemu-server-\(UUID().uuidString).out")
        stderrURL = dir.appendingPathComponent("pushemu-server-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: ServerProcess.binaryPath)
        process.arguments = ["serve", "--http-port", "0", "--https-port", "0", "--in-memory", "--threads", "2"] + arguments
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        var line = ""
        while Date() < deadline {
            line = (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? ""
            if line.contains("\n") || !process.isRunning { break }
            usleep(10_000)
        }
        guard let ports = ServerProcess.parseListeningLine(line) else {
            process.terminate()
            let err = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            throw TestSupportError("pushemu did not print its listening line: stdout=\(line) stderr=\(err)")
        }
        httpPort = ports.0
        httpsPort = ports.1
    }

    /// Parses `pushemu listening http=HOST:PORT https=HOST:PORT`.
    public static func parseListeningLine(_ s: String) -> (Int, Int)? {
        guard let line = s.split(separator: "\n").first, line.hasPrefix("pushemu listening ") else { return nil }
        var http: Int?
        var https: Int?
        for part in line.split(separator: " ") {
            if part.hasPrefix("http="), let p = part.split(separator: ":").last { http = Int(p) }
            if part.hasPrefix("https="), let p = part.split(separator: ":").last { https = Int(p) }
        }
        guard let http, let https else { return nil }
        return (http, https)
    }

    public var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits up to `timeout` for exit; returns the exit status, or nil if it hung.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Double = 15) -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: stdoutURL)
        try? FileManager.default.removeItem(at: stderrURL)
    }
}
