/// What the simulated-device layer tells the providers about a token they have no binding for.
public enum DeviceStatus: Sendable, Equatable {
    /// A known device: its app (bundle id / package), and for iOS its environment.
    case installed(app: String?, environment: String?)
    /// Its app was uninstalled at this time.
    case uninstalled(atMs: Int64)
}

public enum DevicePlatform: String, Sendable, CaseIterable {
    case ios, android, web
}

/// Implemented by the device layer (fleets and registered devices); consulted by the providers,
/// which know nothing else about it.
public protocol DeviceDirectory: Sendable {
    func status(token: ArraySlice<UInt8>, platform: DevicePlatform) -> DeviceStatus?
    /// `status(token:platform:)` with the token's key already computed (a send path that has
    /// hashed the token once).
    func status(token: ArraySlice<UInt8>, key: TokenKey, platform: DevicePlatform) -> DeviceStatus?
    /// The FCM registration token of the device layer's device with this Firebase installation
    /// id (the part of its token before the colon), or nil.
    func registrationToken(forInstallation fid: ArraySlice<UInt8>) -> String?
    /// The push tokens of the Live Activities subscribed to broadcast channel `channelID` (of
    /// app `bundleID` in `environment`), each once.
    func liveActivityTokens(subscribedTo channelID: String, bundleID: String, environment: String) -> [String]
}

extension DeviceDirectory {
    public func status(token: ArraySlice<UInt8>, key: TokenKey, platform: DevicePlatform) -> DeviceStatus? {
        status(token: token, platform: platform)
    }
    public func registrationToken(forInstallation fid: ArraySlice<UInt8>) -> String? { nil }
    public func liveActivityTokens(subscribedTo channelID: String, bundleID: String, environment: String) -> [String] { [] }
}
