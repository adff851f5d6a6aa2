import APNs
import FCM
import Fleet
import Observation
import PushCore
import Runtime
import Tracking
import WebPush

extension Emulator {
    /// What the emulator keeps, built from the configuration: the gateways' key stores,
    /// service accounts and token registries, the simulated devices with their tracking
    /// dispatcher, and the in-memory logs.
    package struct Stores: Sendable {
        package let apnsKeys: APNsKeyStore
        package let apnsDevices: APNsDeviceRegistry
        /// Live Activity broadcast channels, shared by the APNs gateway and the admin API.
        package let apnsChannels: APNsChannelRegistry
        /// The stored state's memory budget (`--max-state-memory`), shared by the stores.
        package let stateMemory: StateMemory
        package let fcmAccounts: FCMServiceAccounts
        package let fcmDevices: FCMDeviceRegistry
        /// FCM's rules with their stores (access tokens, quota), shared by its gateway and admin.
        package let fcmProvider: FCMProvider
        package let devices: DeviceStore
        package let trackingLog: TrackingLog
        package let dispatcher: TrackingDispatcher
        package let notifications: NotificationLog
        /// The Web Push services' subscriptions (each a simulated browser's keys and endpoint).
        package let webPushSubscriptions: WebPushSubscriptions

        init(_ configuration: EmulatorConfiguration) throws {
            if let tracking = configuration.devices.defaultTracking, tracking.url.isEmpty,
                TrackingPresets.needsURL(preset: tracking.preset, options: tracking.options)
            {
                throw ConfigurationError("--tracking-preset \(tracking.preset) needs --tracking-url")
            }
            let dataDirectory: String? = configuration.inMemory ? nil : configuration.dataDirectory
            stateMemory = StateMemory(limit: configuration.maxStateMemory)
            apnsChannels = APNsChannelRegistry(memory: stateMemory)
            apnsKeys = APNsKeyStore(directory: dataDirectory.map { $0 + "/apns/keys" })
            // One bus for the event stream: the device layer, its tracking and the pipelines publish to it.
            let events = EventBus()
            trackingLog = TrackingLog(capacity: configuration.trackingLogSize, events: events)
            var tracking = configuration.tracking
            tracking.threads = configuration.trackingLanes ?? min(configuration.threads, EmulatorConfiguration.maxDefaultTrackingLanes)
            tracking.spoolDirectory = dataDirectory ?? Files.temporaryDirectory
            dispatcher = TrackingDispatcher(options: tracking, log: trackingLog)
            devices = DeviceStore(configuration: configuration.devices, dispatcher: dispatcher, events: events, memory: stateMemory)
            webPushSubscriptions = WebPushSubscriptions(directory: devices)
            let strict = configuration.devices.policy == .strict
            apnsDevices = APNsDeviceRegistry(
                capacity: configuration.devices.maxDevices, directory: devices, strict: strict, memory: stateMemory)
            // One shard per event loop, and the last for the fan-out worker.
            notifications = NotificationLog(shards: configuration.threads + 1, capacity: configuration.notificationLogSize)
            let fcmDirectory = dataDirectory.map { $0 + "/fcm" }
            fcmAccounts = FCMServiceAccounts(directory: fcmDirectory.map { $0 + "/service-accounts" })
            fcmDevices = FCMDeviceRegistry(
                capacity: configuration.devices.maxDevices, directory: devices, strict: strict, memory: stateMemory)
            fcmProvider = FCMProvider(
                configuration: configuration.fcm, accounts: fcmAccounts,
                tokens: FCMAccessTokens.load(directory: fcmDirectory), devices: fcmDevices,
                quota: FCMQuota(perMinute: configuration.fcm.quotaPerMinute))
        }
    }
}
