/// A gateway's own record of device tokens (APNs's token registry, FCM's registration tokens
/// and topic subscriptions), as the device layer sees it: what it knows of a token, and the
/// lifecycle changes the device layer makes through it (register a rotated token, uninstall).
/// The device layer (`Fleet.DeviceLifecycle`) holds one per gateway and knows nothing else
/// about them.
///
/// Thread-safe: called from the event loops (fault effects) and the admin API.
public protocol GatewayDeviceRecords: Sendable {
    /// The platform whose tokens this gateway records.
    var platform: DevicePlatform { get }
    /// Whether `token` has this gateway's token shape (so an unknown token can be recorded as
    /// an uninstalled app of the right platform).
    func recognizes(token: String) -> Bool
    /// What the gateway knows of `token`, or nil.
    func registeredDevice(token: String) -> RegisteredDevice?
    /// Records a token (a rotated device's new one) with its app and environment or project.
    func register(token: String, app: String?, environment: String?, nowMs: Int64)
    /// Marks the token's app uninstalled; false when the gateway did not know it.
    @discardableResult
    func uninstall(token: String, atMs: Int64) -> Bool
}

/// A device as a gateway records it.
public struct RegisteredDevice: Sendable {
    public var platform: DevicePlatform
    public var token: String
    public var app: String?
    /// APNs environment or FCM project.
    public var environment: String?
    /// When the gateway first saw it (nil: it does not keep the time).
    public var createdAtMs: Int64?
    public var uninstalledAtMs: Int64?
    public var pushes: Int
    /// FCM topic subscriptions, sorted (nil for gateways without topics).
    public var topics: [String]?

    public init(
        platform: DevicePlatform, token: String, app: String?, environment: String?, createdAtMs: Int64?,
        uninstalledAtMs: Int64?, pushes: Int, topics: [String]?
    ) {
        self.platform = platform
        self.token = token
        self.app = app
        self.environment = environment
        self.createdAtMs = createdAtMs
        self.uninstalledAtMs = uninstalledAtMs
        self.pushes = pushes
        self.topics = topics
    }
}
