import APNs
import CSystem
import FCM
import Faults
import Fleet
import Journal
import PushCore
import Tracking

/// Everything `pushemu serve` can be told, by flag or config file. Defaults are what a CI user wants.
public struct EmulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var httpPort = 8080
    public var httpsPort = 8443
    public var threads = Int(csys_cpu_count())
    /// Where later layers persist keys, service accounts and the journal.
    public var dataDirectory = "./.pushemu"
    /// Write nothing to disk.
    public var inMemory = false
    /// PEM files overriding the embedded development credentials.
    public var certificatePath: String?
    public var keyPath: String?
    /// CA(s) that client certificates are verified against (default: the development CA).
    public var clientCAPath: String?
    /// Seconds to finish in-flight requests on SIGINT/SIGTERM.
    public var drainTimeout: Double = 10
    public var maxConnections = 10_000
    public var maxConcurrentStreams: UInt32 = 1000
    public var maxHeaderListSize = 16 * 1024
    public var idleTimeout: Double = 3600
    /// Accepted notifications kept for `GET /emulator/v1/notifications` (the newest).
    public var notificationLogSize = 10_000
    public var apns = APNsConfiguration()
    public var fcm = FCMConfiguration()
    /// The simulated-device layer: registry policy, default tracking and behaviour, inbox size.
    public var devices = DeviceStore.Configuration()
    public var tracking = TrackingDispatcher.Options()
    /// Fault rules loaded at start (`--faults FILE`) and a scenario started at start (`--scenario FILE`).
    public var faultsFile: String?
    public var scenarioFile: String?
    /// `x-pushemu-fault` request headers are obeyed.
    public var allowOverrideHeader = false
    /// Latency added to every answer, per provider (`--latency apns=20-40,fcm=30`).
    public var latency: [PushProvider: DelayDistribution] = [:]
    /// APNs pushes per minute per device token before 429 TooManyRequests (0: off).
    public var apnsTokenRate = 0
    public var apnsAdaptiveStreams = false
    /// Percent of FCM sends answered 503 UNAVAILABLE with Retry-After (an overloaded FCM).
    public var fcmOverloadPercent = 0.0
    /// The journal: `strict` (default) answers only once a request's record is committed;
    /// `relaxed` answers at once and commits behind; nil (`off`) keeps none.
    public var durability: Journal.Durability? = .strict
    /// Journal retention: records kept (nil: 10,000,000 on disk, 1,000,000 in memory) and age.
    public var journalMaxRecords: Int?
    public var journalMaxAgeMs: Int64 = 7 * 86_400_000
    /// Extra payload paths tried (first) for a notification's campaign id (`--campaign-key`).
    public var campaignKeys: [String] = []
    /// Tracking attempts kept for `GET /emulator/v1/tracking`.
    public var trackingLogSize = 100_000

    public init() {}
}
