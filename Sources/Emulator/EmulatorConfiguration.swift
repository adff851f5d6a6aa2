import APNs
import CSystem
import Cluster
import FCM
import Faults
import Fleet
import Journal
import PushCore
import Tracking

/// Everything `pushemu serve` can be told, by flag or config file. Defaults are what a CI user wants.
package struct EmulatorConfiguration: Sendable {
    /// The address both listeners bind (`--host`).
    package var host = "127.0.0.1"
    /// The cleartext listener's port: h2c, HTTP/1.1, the proxy (`--http-port`).
    package var httpPort = 8080
    /// The TLS listener's port (`--https-port`).
    package var httpsPort = 8443
    /// Event loops (`--threads`; default: the CPU count).
    package var threads = Int(csys_cpu_count())
    /// Threads that deliver Web Push messages after their answer, decrypting them (an ECDH each):
    /// one per 4 CPUs, 2 to 4.
    package var deferredLanes = max(2, min(4, Int(csys_cpu_count()) / 4))
    /// Where later layers persist keys, service accounts and the journal.
    package var dataDirectory = "./.pushemu"
    /// Write nothing to disk.
    package var inMemory = false
    /// PEM files overriding the embedded development credentials.
    package var certificatePath: String?
    /// The TLS key file (`--key`).
    package var keyPath: String?
    /// CA(s) that client certificates are verified against (default: the development CA).
    package var clientCAPath: String?
    /// Host names the cleartext listener intercepts as a proxy beyond the APNs and FCM ones
    /// (`--intercept-host`).
    package var interceptHosts: [String] = []
    /// Seconds to finish in-flight requests on SIGINT/SIGTERM.
    package var drainTimeout: Double = 10
    /// Connections open at once, all listeners together (`--max-connections`).
    package var maxConnections = 10_000
    /// HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` (`--max-concurrent-streams`).
    package var maxConcurrentStreams: UInt32 = 1000
    /// HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE` (`--max-header-list-size`).
    package var maxHeaderListSize = 16 * 1024
    /// Seconds a connection may sit idle (`--idle-timeout`).
    package var idleTimeout: Double = 3600
    /// Deadlines of a request head (from its first byte) and body (from the end of its head;
    /// also how long an answer may wait for a client that does not read it).
    package var headTimeout: Double = 30
    /// Seconds a request body may take (`--body-timeout`).
    package var bodyTimeout: Double = 60
    /// Admin requests a second over all loops (`--admin-rate`; 0: no limit).
    package var adminRate = 10_000
    /// Bytes all connections may hold in buffers (`--max-memory`).
    package var maxBufferedBytes = 512 << 20
    /// Bytes the stored state may take (`--max-state-memory`): device records, tokens,
    /// subscriptions, channels, by their measured costs.
    package var maxStateMemory = 2 << 30
    /// Accepted notifications kept for `GET /emulator/v1/notifications` (the newest).
    package var notificationLogSize = 10_000
    /// The APNs gateway's options (`--apns-*`).
    package var apns = APNsConfiguration()
    /// The FCM gateway's options (`--fcm-*`).
    package var fcm = FCMConfiguration()
    /// The simulated-device layer: registry policy, default tracking and behaviour, inbox size.
    package var devices = DeviceStore.Configuration()
    /// The tracking dispatcher's options (`--tracking-timeout`, retries, concurrency, queue).
    package var tracking = TrackingDispatcher.Options()
    /// Tracking dispatcher lanes (`--tracking-lanes`); nil: one per event loop, at most
    /// `maxDefaultTrackingLanes`. A lane's CPU per call is about a loop's per push (most of it
    /// the kernel's TCP exchange with the sink), so one lane a loop keeps tracking in step with
    /// what the loops accept; more lanes than loops only wake more often, each with less to do.
    package var trackingLanes: Int?
    /// Past 64 loops a lane each buys nothing a sink can take (64 lanes make over a million
    /// calls a second) and costs a thread, an epoll set and a connection pool each.
    package static let maxDefaultTrackingLanes = 64
    /// Fault rules loaded at start (`--faults FILE`) and a scenario started at start (`--scenario FILE`).
    package var faultsFile: String?
    /// The scenario started at start (`--scenario FILE`).
    package var scenarioFile: String?
    /// `x-pushemu-fault` request headers are obeyed.
    package var allowOverrideHeader = false
    /// Latency added to every answer, per provider (`--latency apns=20-40,fcm=30`).
    package var latency: [PushProvider: DelayDistribution] = [:]
    /// APNs pushes per minute per device token before 429 TooManyRequests (0: off).
    package var apnsTokenRate = 0
    /// Halve a connection's stream limit after an error, raise it after successes (`--apns-adaptive-streams`).
    package var apnsAdaptiveStreams = false
    /// Web Push subscriptions' endpoints under pushemu's own address (the admin request's host)
    /// instead of the push services' host names (reached through the proxy).
    package var webPushLocalEndpoints = false
    /// `--cluster`: this node's Redis (nil: a single node), `--cluster-name`, `--node-name`
    /// (default host:port) and `--advertise` (default http://HOST:PORT).
    package var cluster: RedisURL?
    package var clusterName = "pushemu"
    package var nodeName: String?
    package var advertise: String?
    /// Stream entries past which a node compacts the stream into a snapshot (`--cluster-compact-after`).
    package var clusterCompactAfter = 100_000
    /// Percent of FCM sends answered 503 UNAVAILABLE with Retry-After (an overloaded FCM).
    package var fcmOverloadPercent = 0.0
    /// The journal: `strict` (default) answers only once a request's record is committed;
    /// `relaxed` answers at once and commits behind; nil (`off`) keeps none.
    package var durability: Journal.Durability? = .strict
    /// Journal retention: records kept (nil: 10,000,000 on disk, 1,000,000 in memory) and age.
    package var journalMaxRecords: Int?
    /// Journal records older than this go (ms; `--journal-max-age`).
    package var journalMaxAgeMs: Int64 = 7 * 86_400_000
    /// Extra payload paths tried (first) for a notification's campaign id (`--campaign-key`).
    package var campaignKeys: [String] = []
    /// `--import-state FILE`: a state export read into the stores at start.
    package var importState: String?
    /// `--export-state-on-exit FILE`: the state exported there at a clean stop.
    package var exportStateOnExit: String?
    /// Snapshots of the state: at most this often when only pushes changed it (ms; 0: by count
    /// and at stop only), and once this many changes were logged.
    package var stateSnapshotIntervalMs: Int64 = 60_000
    /// Take a snapshot once this many changes were logged (`--state-snapshot-records`).
    package var stateSnapshotRecords = 100_000
    /// Tracking attempts kept for `GET /emulator/v1/tracking`.
    package var trackingLogSize = 100_000
    /// `--registration-preset` and `--registration-url`, resolved into `devices.defaultRegistration`.
    package var registrationPreset: String?
    /// `--registration-url`: where the registration preset's calls go.
    package var registrationURL: String?

    /// The serve defaults.
    package init() {}
}

extension EmulatorConfiguration {
    /// Descriptors kept for everything but client connections: the data files, each loop's
    /// epoll and wake-up descriptors, the listeners, tracking connections.
    package var reservedDescriptors: Int { 256 + 64 * max(1, threads) }

    /// Lowers `maxConnections` to what the open-file limit allows (`openFiles`, the soft limit
    /// after raising it to the hard one): each connection, and each client kept waiting past
    /// the limit, takes a descriptor, and `reservedDescriptors` stay free. Returns the warning
    /// to print when it was lowered.
    package mutating func fitOpenFileLimit(_ openFiles: Int) -> String? {
        guard openFiles > 0 else { return nil }
        // Clients kept waiting past the limit: 256 a loop, or a quarter of what is left when
        // that is less (more than that pauses accepting until a descriptor frees, not a spin).
        let waiting = min(256 * max(1, threads), max(0, openFiles - reservedDescriptors) / 4)
        let fits = openFiles - reservedDescriptors - waiting
        guard fits < maxConnections else { return nil }
        let lowered = max(16, fits)
        let message =
            "the open-file limit is \(openFiles) (ulimit -n), below what --max-connections \(maxConnections) needs "
            + "(\(maxConnections + waiting + reservedDescriptors) with \(waiting) for clients waiting past the limit and "
            + "\(reservedDescriptors) for files and tracking): at most \(lowered) connections are taken; raise the limit "
            + "(ulimit -n, LimitNOFILE=, docker --ulimit nofile=) for more"
        maxConnections = lowered
        return message
    }
}
