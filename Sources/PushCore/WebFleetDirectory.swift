/// A member of a fleet of web subscriptions, as its push service and its browser know it: no
/// record exists for it until it is pushed to, so the Web Push gateway asks the device layer
/// (`WebFleetDirectory`) about a token it never issued.
public struct WebFleetMember: Sendable {
    /// The push service it subscribed through: `fcm`, `mozilla`, `apple` or `wns`.
    public var service: String
    /// The site.
    public var app: String
    /// The site's VAPID public key (65 bytes).
    public var applicationServerKey: [UInt8]
    /// 32 bytes the browser's key pair is made from (by the Web Push module: a P-256 scalar).
    public var keySeed: [UInt8]
    /// The 16-byte auth secret.
    public var auth: [UInt8]
    public var createdAtMs: Int64
    /// When the browser unsubscribed (the member was uninstalled).
    public var goneAtMs: Int64?

    public init(
        service: String, app: String, applicationServerKey: [UInt8], keySeed: [UInt8], auth: [UInt8], createdAtMs: Int64,
        goneAtMs: Int64?
    ) {
        self.service = service
        self.app = app
        self.applicationServerKey = applicationServerKey
        self.keySeed = keySeed
        self.auth = auth
        self.createdAtMs = createdAtMs
        self.goneAtMs = goneAtMs
    }
}

/// Implemented by the device layer: the fleet member a web push token is, if any (O(1), no
/// memory per member).
public protocol WebFleetDirectory: Sendable {
    func webFleetMember(token: ArraySlice<UInt8>) -> WebFleetMember?
}
