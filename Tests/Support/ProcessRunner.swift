import Foundation

/// The result of running a command to completion.
public struct CommandResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    public let timedOut: Bool
}

/// Runs `executable` with `arguments`, killing it after `timeout` seconds.
/// Output goes through temporary files so a chatty command can never block on a full pipe.
public func runCommand(
    _ executable: String, _ arguments: [String], timeout: Double = 30,
    environment: [String: String]? = nil, stdin: Data? = nil, currentDirectory: String? = nil
) throws -> CommandResult {
    let dir = FileManager.default.temporaryDirectory
    let outURL = dir.appendingPathComponent("pushemu-test-\(UUID().uuidString).out")
    let errURL = dir.appendingPathComponent("pushemu-test-\(UUID().uuidString).err")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    defer {
        try? FileManager.default.removeItem(at: outURL)
        try? FileManager.default.removeItem(at: errURL)
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: try resolveExecutable(executable))
    p.arguments = arguments
    if let currentDirectory { p.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
    if let environment { p.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
    p.standardOutput = try FileHandle(forWritingTo: outURL)
    p.standardError = try FileHandle(forWritingTo: errURL)
    let inPipe = Pipe()
    p.standardInput = stdin == nil ? FileHandle.nullDevice : inPipe
    try p.run()
    if let stdin {
        inPipe.fileHandleForWriting.write(stdin)
        try? inPipe.fileHandleForWriting.close()
    }
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    while p.isRunning {
        if Date() > deadline {
            timedOut = true
            p.terminate()
            usleep(200_000)
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            break
        }
        usleep(5_000)
    }
    p.waitUntilExit()
    let out = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
    return CommandResult(status: p.terminationStatus, stdout: out, stderr: err, timedOut: timedOut)
}

/// The absolute path of `name`, searching PATH when it has no slash.
public func resolveExecutable(_ name: String) throws -> String {
    if name.contains("/") { return name }
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw TestSupportError("'\(name)' is not installed (run Scripts/install-deps)")
}

public func isInstalled(_ name: String) -> Bool { (try? resolveExecutable(name)) != nil }

public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
public func freeLocalPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw TestSupportError("bind failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}
