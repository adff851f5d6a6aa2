import PushCore
import Tracking

/// A device's app registering its token with the campaign platform, as its SDK does: when the
/// device is created (the app installed), when its token is refreshed (`:rotate`: the new token
/// registered, the hardware id kept), when it is uninstalled (Pushwoosh unregisters; Adobe's SDK
/// sends nothing), and when a push opens the app (Pushwoosh's `applicationOpen`). The calls go
/// through the tracking dispatcher (its lanes, retries, bounded queue, attempt log, journal and
/// metrics), logged under the events `register`, `unregister` and `appOpen`.
extension DeviceStore {
    /// The registration that applies to `device`: its own, else its fleet's, else the server's.
    func registrationConfig(_ device: SimDevice) -> RegistrationConfig? {
        if let own = device.registration { return own }
        if let n = device.fleet, let fleet = fleetRef(n)?.spec.registration { return fleet }
        return configuration.defaultRegistration
    }

    /// Sends the SDK's call for `event` for the device holding `token` (after a rotation, the
    /// new token, with `previousToken` the old one), unless the SDK would skip it. The device
    /// keeps the fingerprint of what it sent, so an unchanged Adobe registration is not sent twice.
    public func sendRegistration(token: String, event: TrackingEvent, previousToken: String? = nil, nowMs: Int64) {
        guard let dispatcher, let device = device(token: token), !device.privacyOptOut, let config = registrationConfig(device) else {
            return
        }
        let ctx = RegistrationContext(
            event: event, platform: device.platform.rawValue, token: token, previousToken: previousToken, app: device.app ?? "",
            hwid: device.hardwareID, atMs: nowMs)
        let last = event == .register ? device.registrationFingerprint : nil
        switch RegistrationPresets.job(config, ctx, lastFingerprint: last) {
        case .skip:
            counters.trackingSkipped.add(1, ordering: .relaxed)
        case .job(let job, let fingerprint):
            // A full queue counts the call as dropped; the fingerprint then stays as it was.
            guard dispatcher.submit(job) else { return }
            counters.trackingScheduled.add(1, ordering: .relaxed)
            if event != .appOpen { _ = update(token: token) { $0.registrationFingerprint = fingerprint } }
        }
    }

    /// A push opened the app: Pushwoosh's SDK reports `applicationOpen` (the other presets send
    /// nothing for it). Called with the delivering view, off the store's locks.
    func appOpened(_ dev: SDKView, fleet: FleetRef?, atMs: Int64) {
        // Asked on every open: nothing is copied when no registration applies.
        guard hasDefaultRegistration || dev.registration != nil || fleet?.spec.registration != nil, let dispatcher,
            let config = dev.registration ?? fleet?.spec.registration ?? configuration.defaultRegistration, config.preset == "pushwoosh"
        else { return }
        let ctx = RegistrationContext(
            event: .appOpen, platform: dev.platform.rawValue, token: dev.token, app: dev.app ?? "", hwid: dev.hardwareID, atMs: atMs)
        if case .job(let job, _) = RegistrationPresets.job(config, ctx, lastFingerprint: nil), dispatcher.submit(job) {
            counters.trackingScheduled.add(1, ordering: .relaxed)
        }
    }
}
