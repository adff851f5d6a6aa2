// swift-tools-version: 6.0
import PackageDescription

// Release builds of the request-path modules skip dynamic exclusivity checks (measured: ~3% of
// server CPU); debug builds and tests keep them. They also keep large structs (a request, a
// delivery, a decision) in registers and copy them field by field: lowered to memory (the large
// loadable types pass) or through type layouts, each copy went through the runtime's value
// witnesses, about 110 instructions where a retain is 20 (callgrind: 700 a request).
let hotPath: [SwiftSetting] = [
    .unsafeFlags(
        [
            "-enforce-exclusivity=unchecked", "-cross-module-optimization", "-Xfrontend", "-disable-large-loadable-types-reg2mem",
            "-Xfrontend", "-disable-type-layout",
        ],
        .when(configuration: .release))
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

        // The runtime every module shares: locks, thread stripes, threads and background workers,
        // clocks, small file I/O, the heap reclaimer.
        .target(name: "Runtime", dependencies: ["CSystem"], swiftSettings: hotPath),
        // HTTP server core: knows nothing about push.
        .target(name: "Transport", dependencies: ["Runtime", "CH2Memory", "CNghttp2", "COpenSSL", "CSystem"], swiftSettings: hotPath),
        // Provider-neutral push values: the JSON scanner, ids, the accepted-notification record and log.
        .target(name: "PushCore", dependencies: ["Runtime", "Transport", "CSystem"], swiftSettings: hotPath),
        // What can be watched: the notification log the inspection API reads, the event bus and
        // its ring behind the event stream.
        .target(name: "Observation", dependencies: ["Runtime", "Transport", "PushCore"], swiftSettings: hotPath),
        // The emulator's state as a log of changes: typed, versioned records, the store registry,
        // snapshots, export and import, and the durability gate of the routes that change state.
        .target(name: "State", dependencies: ["Runtime", "Transport", "PushCore", "Observation", "CSystem"]),
        // Apple's provider API: validation, JWT and certificate auth, wire format. No sockets.
        .target(name: "APNs", dependencies: ["Runtime", "Transport", "PushCore", "State", "COpenSSL", "CSystem"], swiftSettings: hotPath),
        // FCM HTTP v1: proto3-JSON validation, OAuth (RS256), topics, quota, error envelopes. No sockets.
        .target(name: "FCM", dependencies: ["Runtime", "Transport", "PushCore", "State", "APNs", "COpenSSL"], swiftSettings: hotPath),
        // Web Push (RFC 8030/8291/8292) as the push services answer it: VAPID, the content
        // codings a browser decrypts, each service's answers. No sockets.
        .target(name: "WebPush", dependencies: ["Runtime", "Transport", "PushCore", "State", "COpenSSL"], swiftSettings: hotPath),
        // Campaign-platform SDK tracking: presets, webhook templates, the libcurl-multi dispatcher.
        .target(
            name: "Tracking",
            dependencies: ["Runtime", "Transport", "PushCore", "Observation", "CCurl", "CCurlMemory", "COpenSSL", "CSystem"],
            swiftSettings: hotPath
        ),
        // Simulated devices: the device model, fleets of keyed-hash tokens, delivery and behaviour.
        .target(
            name: "Fleet", dependencies: ["Runtime", "Transport", "PushCore", "Observation", "State", "Tracking", "CSystem"],
            swiftSettings: hotPath),
        // Fault injection and traffic shaping: rules, selectors, effects, scenarios.
        .target(name: "Faults", dependencies: ["Runtime", "Transport", "PushCore", "Observation", "State"], swiftSettings: hotPath),
        // The durable journal: SQLite (WAL) on a writer thread with group commit.
        .target(
            name: "Journal",
            dependencies: ["Runtime", "Transport", "PushCore", "Observation", "State", "CJournalVFS", "CSQLite", "CSystem"],
            swiftSettings: hotPath),
        // The one request path every gateway runs through (PushPipeline<G: PushGateway>) and its metrics.
        .target(
            name: "Pipeline",
            dependencies: ["Runtime", "Transport", "PushCore", "Observation", "State", "Fleet", "Faults", "Journal"],
            swiftSettings: hotPath),
        // Cluster mode: the change records through a Redis Stream, the nodes' heartbeats (its own threads; never on the push path).
        .target(name: "Cluster", dependencies: ["Runtime", "PushCore", "State", "Faults", "CSystem"]),
        // The admin API (/healthz, /metrics, /emulator/v1): HTTP parsing and JSON only.
        .target(
            name: "Admin",
            dependencies: [
                "Runtime", "Transport", "PushCore", "Observation", "State", "APNs", "FCM", "WebPush", "Tracking", "Fleet", "Faults",
                "Journal", "Pipeline", "Cluster", "CSystem",
            ],
            // The dashboard (Web/) is embedded at build time.
            plugins: ["EmbedWebAssets"]),
        // Composition root: configuration, the gateways in their pipelines, the services.
        .target(
            name: "Emulator",
            dependencies: [
                "Runtime", "Transport", "PushCore", "Observation", "State", "APNs", "FCM", "WebPush", "Tracking", "Fleet", "Faults",
                "Journal", "Pipeline", "Admin", "Cluster", "CSystem",
            ],
            swiftSettings: hotPath),
        // The CLI: main, the commands besides serve, and the admin client they use.
        .executableTarget(
            name: "pushemu",
            dependencies: [
                "Runtime", "Transport", "PushCore", "State", "APNs", "FCM", "WebPush", "Tracking", "Journal", "Emulator", "CCurl",
                "CSystem",
            ]),
        // The dashboard's files as Swift source, run by the EmbedWebAssets build plugin.
        .executableTarget(name: "embed-web"),
        .plugin(name: "EmbedWebAssets", capability: .buildTool(), dependencies: ["embed-web"]),
        // A trivial 200 responder over the same transport, used by Scripts/bench.
        .executableTarget(name: "TransportBench", dependencies: ["Transport", "CSystem"]),
        // An h2c load generator whose requests differ (personalised bodies), for Scripts/callgrind
        // and Scripts/bench: h2load sends one body.
        .executableTarget(name: "pushemu-load", dependencies: ["CNghttp2", "CSystem", "Runtime"]),
        // The parsers' fuzz targets: a corpus replayer here, libFuzzer with Scripts/fuzz.
        .executableTarget(name: "pushemu-fuzz", dependencies: ["Transport", "PushCore", "APNs", "FCM", "Faults"]),

        // An emulator in process on port 0 (or the spawned binary) with small h2c and HTTP/1.1
        // clients, for the tests of any module.
        .target(name: "EmulatorTesting", dependencies: ["Pipeline", "Emulator", "CNghttp2"]),
        // Helpers for the tests: running commands, raw sockets, starting the real binary.
        .target(name: "TestSupport", dependencies: ["Transport"], path: "Tests/Support"),
        .testTarget(name: "TransportTests", dependencies: ["Transport", "TestSupport", "CH2Memory", "CNghttp2", "CSystem"]),
        .testTarget(name: "RuntimeTests", dependencies: ["Runtime"]),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"]),
        .testTarget(name: "ObservationTests", dependencies: ["Transport", "PushCore", "Observation"]),
        .testTarget(name: "StateTests", dependencies: ["Runtime", "Transport", "PushCore", "State", "CSystem"]),
        .testTarget(name: "APNsTests", dependencies: ["Transport", "PushCore", "State", "APNs"]),
        .testTarget(name: "FCMTests", dependencies: ["Runtime", "Transport", "PushCore", "State", "FCM"]),
        .testTarget(name: "FleetTests", dependencies: ["Runtime", "PushCore", "State", "Tracking", "Fleet", "TestSupport"]),
        .testTarget(name: "FaultsTests", dependencies: ["Transport", "PushCore", "Faults"]),
        .testTarget(name: "WebPushTests", dependencies: ["Transport", "WebPush"]),
        .testTarget(name: "JournalTests", dependencies: ["Runtime", "Transport", "PushCore", "Journal", "CSQLite"]),
        .testTarget(name: "EmulatorTests", dependencies: ["APNs", "Emulator"]),
        .testTarget(name: "TrackingTests", dependencies: ["PushCore", "Tracking", "TestSupport", "CCurlMemory"]),
        .testTarget(name: "AdminTests", dependencies: ["Transport", "Emulator"]),
        .testTarget(
            name: "PipelineTests",
            dependencies: ["Runtime", "Transport", "PushCore", "APNs", "Fleet", "Journal", "Pipeline", "EmulatorTesting", "TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["TestSupport", "pushemu"]),
        .testTarget(name: "HardeningTests", dependencies: ["TestSupport", "pushemu"]),
    ],
    swiftLanguageModes: [.v6]
)
