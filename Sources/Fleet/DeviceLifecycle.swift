import PushCore

/// The device layer's lifecycle API: a device record for any token a gateway or fleet knows
/// (`ensure`), its app uninstalled (`uninstall`), its token rotated (`rotate`), and what is
/// known of it (`describe`); each change makes the SDK's registration call where it makes one.
/// The request pipeline (a fault's `uninstall` / `rotate` effect) and the admin API (`DELETE
/// /emulator/v1/devices/{token}`, `:rotate`) both go through it, so a device changes the same
/// way whoever asks, and nothing on the request path calls admin code.
///
/// It sees the gateways only through their `GatewayDeviceRecords`. Thread-safe (the store and
/// the records are); called from the event loops and the admin API.
public struct DeviceLifecycle: Sendable {
    public let store: DeviceStore
    /// One per gateway that records tokens (APNs, FCM).
    public let records: [any GatewayDeviceRecords]

    public init(store: DeviceStore, records: [any GatewayDeviceRecords]) {
        self.store = store
        self.records = records
    }

    /// Why a lifecycle change was refused.
    public enum Refusal: Error, Sendable {
        case unknownDevice(String)
        case uninstalled(String)
        case invalid(String)
    }

    /// What is known of a token.
    public enum Description: Sendable {
        /// A simulated device, with its fleet's id and what its gateway records of it.
        case simulated(SimDevice, fleetID: String?, recorded: RegisteredDevice?)
        /// Known only to a gateway (a token it saw, no device record yet).
        case recorded(RegisteredDevice)
    }

    /// A device record for a token a gateway or fleet knows, created from that knowledge.
    @discardableResult
    public func ensure(_ token: String, nowMs: Int64) -> SimDevice? {
        if let device = store.device(token: token) { return device }
        for gateway in records {
            guard let known = gateway.registeredDevice(token: token) else { continue }
            var device = SimDevice(
                token: token, platform: known.platform, app: known.app, environment: known.environment,
                createdAtMs: known.createdAtMs ?? nowMs, seed: TokenKey(token).a)
            device.uninstalledAtMs = known.uninstalledAtMs
            try? store.register(device)
            return device
        }
        return nil
    }

    /// Uninstalls the app everywhere the token is known; a well-formed token nobody knows is
    /// recorded as an uninstalled app (its next push gets 410 / 404 UNREGISTERED). An installed
    /// app's SDK unregisters first where it does (Pushwoosh).
    public func uninstall(_ token: String, nowMs: Int64) {
        if let device = store.device(token: token), device.uninstalledAtMs == nil {
            store.sendRegistration(token: token, event: .unregister, nowMs: nowMs)
        }
        markUninstalled(token, nowMs: nowMs)
    }

    /// The uninstall itself, with no SDK call (a rotated token's old one is not unregistered:
    /// the SDK registers the new one in its place).
    private func markUninstalled(_ token: String, nowMs: Int64) {
        for gateway in records { gateway.uninstall(token: token, atMs: nowMs) }
        if ensure(token, nowMs: nowMs) == nil, let platform = records.first(where: { $0.recognizes(token: token) })?.platform {
            try? store.register(
                SimDevice(
                    token: token, platform: platform, app: nil, environment: nil, createdAtMs: nowMs,
                    seed: TokenKey(token).a))
        }
        _ = store.uninstall(token: token, atMs: nowMs)
    }

    /// The app got a new token (as after a reinstall or an FCM token refresh): the device moves
    /// to a fresh token with its settings, and the old one answers as unregistered. Returns the
    /// device under its new token.
    public func rotate(_ token: String, nowMs: Int64) -> Result<SimDevice, Refusal> {
        guard let old = ensure(token, nowMs: nowMs) else { return .failure(.unknownDevice(token)) }
        guard old.uninstalledAtMs == nil else { return .failure(.uninstalled(token)) }
        // A browser gets a new endpoint only by subscribing again (pushManager.subscribe).
        guard old.platform != .web else {
            return .failure(
                .invalid("a web subscription does not rotate: unsubscribe it (DELETE) and subscribe a new one (POST /emulator/v1/devices)"))
        }
        var random = FastRandom()
        let fresh = DeviceLifecycle.randomToken(old.platform, &random)
        var device = old
        device.token = fresh
        device.hardwareID = old.hardwareID
        device.createdAtMs = nowMs
        // Out of its fleet, the app keeps registering as the fleet's did.
        if device.registration == nil, let n = old.fleet, let fleetRegistration = store.fleetRef(n)?.spec.registration {
            device.registration = fleetRegistration
        }
        device.fleet = nil
        device.fleetIndex = nil
        device.inbox = []
        device.pending = []
        device.seed = random.next()
        do { try store.register(device) } catch { return .failure(.invalid("\(error)")) }
        records.first { $0.platform == old.platform }?.register(token: fresh, app: old.app, environment: old.environment, nowMs: nowMs)
        markUninstalled(token, nowMs: nowMs)
        _ = store.update(token: token) { $0.rotatedTo = fresh }
        // The SDK registers the refreshed token (the platform sees the old one go).
        store.sendRegistration(token: fresh, event: .register, previousToken: token, nowMs: nowMs)
        return .success(store.device(token: fresh) ?? device)
    }

    /// What the device layer and the gateways know of `token`, or nil.
    public func describe(_ token: String) -> Description? {
        if let device = store.device(token: token) {
            let recorded = records.first { $0.platform == device.platform }?.registeredDevice(token: token)
            return .simulated(device, fleetID: store.fleetID(device), recorded: recorded)
        }
        for gateway in records {
            if let known = gateway.registeredDevice(token: token) { return .recorded(known) }
        }
        return nil
    }

    /// Carries out a fault's device effect on the device a push reached (after the push).
    public func apply(rotate: Bool, to token: ArraySlice<UInt8>, nowMs: Int64) {
        let text = String(decoding: token, as: UTF8.self)
        if rotate { _ = self.rotate(text, nowMs: nowMs) } else { uninstall(text, nowMs: nowMs) }
    }

    /// A token of the platform's shape: 64 lowercase hex characters (iOS), or an FCM
    /// registration token (22-character installation id, `:APA91b`, 134 more characters).
    public static func randomToken(_ platform: DevicePlatform, _ random: inout FastRandom) -> String {
        let hex = Array("0123456789abcdef".utf8)
        let base64URL = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        if platform == .ios { return String(decoding: (0..<64).map { _ in hex[Int(random.next(below: 16))] }, as: UTF8.self) }
        let head = (0..<22).map { _ in base64URL[Int(random.next(below: 64))] }
        let tail = (0..<134).map { _ in base64URL[Int(random.next(below: 64))] }
        return String(decoding: head + Array(":APA91b".utf8) + tail, as: UTF8.self)
    }

    /// (fleet id, labels) of a token's device, for fault rules that match on them.
    public func faultView(_ token: ArraySlice<UInt8>) -> (fleet: String?, labels: [String]) {
        guard let device = store.device(token: String(decoding: token, as: UTF8.self)) else { return (nil, []) }
        return (store.fleetID(device), device.labels)
    }
}
