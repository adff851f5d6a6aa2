// swift-tools-version: 6.0
import PackageDescription

// Release builds of the request-path modules skip dynamic exclusivity checks (measured: ~3% of
// server CPU); debug builds and tests keep them.
let hotPath: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))
]

let package = Package(
    name: "pushemu",
    products: [
        .executable(name: "pushemu", targets: ["pushemu"])
    ],
    targets: [
        // C libraries from Debian, with static inline shims for the macros Swift cannot import.
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // The tiny C target: what Glibc does not expose cleanly (epoll, accept4, eventfd, stderr).
        .target(name: "CSystem"),
        // The size classes and block layout both allocators below share (a header of inline helpers).
        .target(name: "CSizeClasses"),
        // Size-class free lists in front of malloc for each nghttp2 session.
        .target(name: "CH2Memory", dependencies: ["CNghttp2", "CSizeClasses"]),
        // Per-thread size-class free lists in front of malloc for libcurl (the tracking lanes).
        .target(name: "CCurlMemory", dependencies: ["CCurl", "CSizeClasses"]),
        // A SQLite VFS shim that turns a journal commit's many small writes into one.
        .target(name: "CJournalVFS", dependencies: ["CSQLite"]),

        // HTTP server core: knows nothing about push.
        .target(name: "Transport", dependencies: ["CNghttp2", "CH2Memory", "COpenSSL", "CSystem"], swiftSettings: hotPath),
        // Provider-neutral push values: the JSON scanner, ids, the accepted-notification record and log.
        .target(name: "PushCore", dependencies: ["Transport", "CSystem"], swiftSettings: hotPath),
        // The emulator's state as a log of changes: typed, versioned records, the store registry,
        // snapshots, export and import, and the durability gate of the routes that change state.
        .target(name: "State", dependencies: ["PushCore", "Transport", "CSystem"]),
        // Apple's provider API: validation, JWT and certificate auth, wire format. No sockets.
        .target(name: "APNs", dependencies: ["PushCore", "Transport", "State", "COpenSSL", "CSystem"], swiftSettings: hotPath),
        // FCM HTTP v1: proto3-JSON validation, OAuth (RS256), topics, quota, error envelopes. No sockets.
        .target(name: "FCM", dependencies: ["PushCore", "Transport", "State", "APNs", "COpenSSL"], swiftSettings: hotPath),
        // Campaign-platform SDK tracking: presets, webhook templates, the libcurl-multi dispatcher.
        .target(
            name: "Tracking", dependencies: ["PushCore", "Transport", "CCurl", "CCurlMemory", "COpenSSL", "CSystem"], swiftSettings: hotPath
        ),
        // Simulated devices: the device model, fleets of keyed-hash tokens, delivery and behaviour.
        .target(name: "Fleet", dependencies: ["PushCore", "Transport", "State", "Tracking", "CSystem"], swiftSettings: hotPath),
        // Fault injection and traffic shaping: rules, selectors, effects, scenarios.
        .target(name: "Faults", dependencies: ["PushCore", "Transport", "State"], swiftSettings: hotPath),
        // The durable journal: SQLite (WAL) on a writer thread with group commit.
        .target(
            name: "Journal", dependencies: ["PushCore", "Transport", "State", "CSQLite", "CJournalVFS", "CSystem"], swiftSettings: hotPath),
        // The one request path every gateway runs through (PushPipeline<G: PushGateway>) and its metrics.
        .target(
            name: "Pipeline", dependencies: ["PushCore", "Transport", "State", "Faults", "Fleet", "Journal", "Tracking", "CSystem"],
            swiftSettings: hotPath),
        // The admin API (/healthz, /metrics, /emulator/v1): HTTP parsing and JSON only.
        .target(
            name: "Admin",
            dependencies: ["PushCore", "Transport", "State", "APNs", "FCM", "Faults", "Fleet", "Journal", "Pipeline", "Tracking"]),
        // Composition root: configuration, the gateways in their pipelines, the services.
        .target(
            name: "Emulator",
            dependencies: ["Transport", "PushCore", "State", "APNs", "FCM", "Fleet", "Tracking", "Faults", "Journal", "Pipeline", "Admin"],
            swiftSettings: hotPath),
        // The CLI: main, the commands besides serve, and the admin client they use.
        .executableTarget(
            name: "pushemu",
            dependencies: ["Emulator", "State", "APNs", "FCM", "Journal", "PushCore", "Tracking", "Transport", "CCurl", "CSystem"]),
        // A trivial 200 responder over the same transport, used by Scripts/bench.
        .executableTarget(name: "TransportBench", dependencies: ["Transport", "CSystem"]),
        // The parsers' fuzz targets: a corpus replayer here, libFuzzer with Scripts/fuzz.
        .executableTarget(name: "pushemu-fuzz", dependencies: ["APNs", "FCM", "Faults", "PushCore", "Transport"]),

        // An emulator in process on port 0 (or the spawned binary) with small h2c and HTTP/1.1
        // clients, for the tests of any module.
        .target(name: "EmulatorTesting", dependencies: ["Emulator", "Pipeline", "CNghttp2"]),
        // Helpers for the tests: running commands, raw sockets, starting the real binary.
        .target(name: "TestSupport", dependencies: ["Transport"], path: "Tests/Support"),
        .testTarget(name: "TransportTests", dependencies: ["Transport", "CH2Memory", "TestSupport"]),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"]),
        .testTarget(name: "StateTests", dependencies: ["State", "PushCore", "Transport", "CSystem"]),
        .testTarget(name: "APNsTests", dependencies: ["APNs", "PushCore", "Transport"]),
        .testTarget(name: "FCMTests", dependencies: ["FCM", "PushCore", "Transport"]),
        .testTarget(name: "FleetTests", dependencies: ["Fleet", "Tracking", "CCurlMemory", "PushCore", "TestSupport"]),
        .testTarget(name: "FaultsTests", dependencies: ["Faults", "PushCore", "Transport"]),
        .testTarget(name: "JournalTests", dependencies: ["Journal", "PushCore", "Transport"]),
        .testTarget(name: "EmulatorTests", dependencies: ["Emulator", "Transport", "APNs", "FCM"]),
        .testTarget(
            name: "PipelineTests",
            dependencies: ["EmulatorTesting", "Pipeline", "PushCore", "Transport", "APNs", "Fleet", "Journal", "TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["pushemu", "TestSupport", "Transport"]),
        .testTarget(name: "HardeningTests", dependencies: ["pushemu", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
