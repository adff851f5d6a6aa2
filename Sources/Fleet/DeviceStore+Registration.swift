import PushCore
import Tracking

/// A device's app registering its token with the campaign platform, as its SDK does: when the
/// device is created (the app installed), when its token is refreshed (`:rotate`: the new token
/// registered, the hardware id kept), when it is uninstalled (Pushwoosh unregisters; Adobe's SDK
/// sends nothing), and when a push opens the app (Pushwoosh's `applicationOpen`). The calls go
/// through the tracking dispatcher (its lanes, retries, bounded queue, attempt log, journal and
/// metrics), logged under the events `register`, `unregister` and `appOpen`.
extension DeviceStore {
    /// What happened to a registration.
    public enum RegistrationOutcome: Sendable, Equatable {
        case sent(preset: String)
        case skipped(String)
        /// The device has no registration (its own or the server's).
        case none
    }

    /// The registration that applies to `device`: its own, else its fleet's, else the server's.
    func registrationConfig(_ device: SimDevice) -> RegistrationConfig? {
        if let own = device.registration { return own }
        if let n = device.fleet, let fleet = fleetRef(n)?.spec.registration { return fleet }
        return configuration.defaultRegistration
    }

    /// Sends the SDK's call for `event` for the device holding `token` (after a rotation, the
    /// new token, with `previousToken` the old one: the device keeps its hardware id), unless
    /// the SDK would skip it. The device's
    /// fingerprint is kept so that an unchanged Adobe registration is not sent twice.
    @discardableResult
    public func sendRegistration(token: String, event: TrackingEvent, previousToken: String? = nil, nowMs: Int64) -> RegistrationOutcome {
        guard let device = device(token: token), let config = registrationConfig(device) else { return .none }
        guard let dispatcher else { return .skipped("tracking is off") }
        guard !device.privacyOptOut else { return .skipped("the device opted out of tracking") }
        // The hardware id stays the device's across a token refresh.
        let hwid = device.hardwareID
        let ctx = RegistrationContext(
            event: event, platform: device.platform.rawValue, token: token, previousToken: previousToken, app: device.app ?? "",
            hwid: hwid, atMs: nowMs)
        let last = event == .register ? device.registrationFingerprint : nil
        switch RegistrationPresets.job(config, ctx, lastFingerprint: last) {
        case .skip(let reason):
            counters.trackingSkipped.add(1, ordering: .relaxed)
            return .skipped(reason)
        case .job(let job, let fingerprint):
            guard dispatcher.submit(job) else { return .skipped("the tracking queue is full (counted as dropped)") }
            counters.trackingScheduled.add(1, ordering: .relaxed)
            if event != .appOpen { _ = update(token: token) { $0.registrationFingerprint = fingerprint } }
            return .sent(preset: config.preset)
        }
    }

    /// A push opened the app: Pushwoosh's SDK reports `applicationOpen` (the other presets send
    /// nothing for it). Called with the delivering view, off the store's locks.
    func appOpened(_ dev: SDKView, fleet: FleetRef?, atMs: Int64) {
        guard let dispatcher, let config = dev.overrides?.registration ?? fleet?.spec.registration ?? configuration.defaultRegistration,
            config.preset == "pushwoosh"
        else { return }
        let ctx = RegistrationContext(
            event: .appOpen, platform: dev.platform.rawValue, token: dev.token, app: dev.app ?? "",
            hwid: dev.overrides?.fields.hardwareID ?? TrackingContext.hardwareID(dev.token), atMs: atMs)
        if case .job(let job, _) = RegistrationPresets.job(config, ctx, lastFingerprint: nil), dispatcher.submit(job) {
            counters.trackingScheduled.add(1, ordering: .relaxed)
        }
    }
}
