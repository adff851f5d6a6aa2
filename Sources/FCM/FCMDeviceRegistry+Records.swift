import PushCore

/// FCM's registration tokens as the device layer sees it (`Fleet.DeviceLifecycle`).
extension FCMDeviceRegistry: GatewayDeviceRecords {
    public var platform: DevicePlatform { .android }

    public func recognizes(token: String) -> Bool { FCMFormats.isRegistrationToken(token.utf8) }

    public func registeredDevice(token: String) -> RegisteredDevice? {
        guard let known = device(token: token) else { return nil }
        return RegisteredDevice(
            platform: .android, token: known.token, app: known.app, environment: known.project,
            createdAtMs: known.createdAtMs, uninstalledAtMs: known.uninstalledAtMs, pushes: Int(known.pushes),
            topics: known.topics.keys.sorted())
    }

    /// A rotated device's new token, in its project and app.
    public func register(token: String, app: String?, environment: String?, nowMs: Int64) {
        register(token: token, project: environment, app: app, nowMs: nowMs)
    }
}
