import PushCore

/// APNs's token registry as the device layer sees it (`Fleet.DeviceLifecycle`).
extension APNsDeviceRegistry: GatewayDeviceRecords {
    public var platform: DevicePlatform { .ios }

    /// 64 or more hex characters (either case), as APNs device tokens are.
    public func recognizes(token: String) -> Bool {
        token.utf8.count >= 64 && token.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }
    }

    public func registeredDevice(token: String) -> RegisteredDevice? {
        guard let known = device(token: token) else { return nil }
        return RegisteredDevice(
            platform: .ios, token: token, app: known.bundleID, environment: known.environment.rawValue,
            createdAtMs: nil, uninstalledAtMs: known.uninstalledAtMs, pushes: Int(known.pushes), topics: nil)
    }

    /// A rotated device's new token, in its environment (sandbox when it had none) and app.
    public func register(token: String, app: String?, environment: String?, nowMs: Int64) {
        guard let environment = APNsEnvironment(rawValue: environment ?? "sandbox") else { return }
        register(token: token, environment: environment, bundleID: app ?? "")
    }
}
