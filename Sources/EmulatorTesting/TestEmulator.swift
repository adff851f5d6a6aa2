import Emulator
import Foundation
import Pipeline

/// A whole emulator for a test: in this process (the real router, gateways, pipelines,
/// journal and admin API on port 0, `--in-memory`, one event loop) or the real binary spawned
/// with the same arguments, so one test body can run against either (as Hummingbird's
/// `.router` and `.live`). Tests reach it only on 127.0.0.1 and stop it when done.
///
/// ```swift
/// for mode in TestEmulator.Mode.allCases {
///     let emulator = try TestEmulator(mode, arguments: ["--durability", "relaxed"])
///     defer { emulator.stop() }
///     let answer = try emulator.h2([TestRequest("POST", "/3/device/...", headers: ..., body: "{}")])
/// }
/// ```
package final class TestEmulator {
    package enum Mode: String, CaseIterable, Sendable {
        /// `Emulator` in this process.
        case inProcess
        /// The `pushemu` binary (`PUSHEMU_BIN`, or the debug build beside the package).
        case live
    }

    package let mode: Mode
    package let httpPort: Int
    package let httpsPort: Int
    private let emulator: Emulator?
    private let process: Process?
    private var stopped = false

    /// Starts an emulator with `serve`'s `arguments` on free ports, in memory unless the
    /// arguments name a data directory. `gateways` (a test's own) only work in process.
    package init(_ mode: Mode = .inProcess, arguments: [String] = [], gateways: [GatewayPlugin] = []) throws {
        self.mode = mode
        var full = ["--http-port", "0", "--https-port", "0", "--threads", "1"]
        if !arguments.contains("--data-dir") && !arguments.contains("--in-memory") { full.append("--in-memory") }
        full += arguments
        switch mode {
        case .inProcess:
            let emulator = try Emulator(configuration: try ServeOptions.parse(full), gateways: gateways)
            try emulator.start()
            self.emulator = emulator
            process = nil
            httpPort = emulator.httpAddress?.port ?? 0
            httpsPort = emulator.httpsAddress?.port ?? 0
        case .live:
            precondition(gateways.isEmpty, "a test's own gateways run only in process")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestEmulator.binary)
            process.arguments = ["serve"] + full
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            self.process = process
            emulator = nil
            // The listening line, flushed as soon as it is printed.
            var line = ""
            let deadline = Date().addingTimeInterval(20)
            while !line.contains("\n") && Date() < deadline {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                line += String(decoding: chunk, as: UTF8.self)
            }
            guard let ports = TestEmulator.ports(line) else {
                process.terminate()
                throw TestClientError("pushemu did not print its listening line: \(line)")
            }
            (httpPort, httpsPort) = ports
        }
    }

    deinit { stop() }

    /// The emulator itself, in process (nil for `.live`): its registries, for a test's set-up.
    package var inProcess: Emulator? { emulator }

    /// Stops the emulator (drains, as on SIGTERM).
    package func stop() {
        guard !stopped else { return }
        stopped = true
        emulator?.shutdown()
        if let process, process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// Requests on one new h2c connection, sent concurrently.
    package func h2(_ requests: [TestRequest], authority: String = "127.0.0.1") throws -> [TestResponse] {
        try H2Client(port: httpPort).send(requests, authority: authority)
    }

    /// One HTTP/1.1 request on a new connection (the admin API, say).
    package func http1(_ request: TestRequest) throws -> TestResponse { try HTTP1Client.send(request, port: httpPort) }

    /// A GET on the admin API, answered as text.
    package func get(_ path: String) throws -> TestResponse { try http1(TestRequest("GET", path)) }

    /// The binary `.live` runs: `PUSHEMU_BIN`, else `.build/debug/pushemu` of this package.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["PUSHEMU_BIN"], !path.isEmpty { return path }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/pushemu").path
    }

    /// The ports of `pushemu listening http=127.0.0.1:P https=127.0.0.1:Q`.
    static func ports(_ line: String) -> (Int, Int)? {
        func port(after key: String) -> Int? {
            guard let range = line.range(of: key) else { return nil }
            let rest = line[range.upperBound...].prefix { $0 != " " && $0 != "\n" }
            return rest.split(separator: ":").last.flatMap { Int($0) }
        }
        guard let http = port(after: "http="), let https = port(after: "https=") else { return nil }
        return (http, https)
    }
}
