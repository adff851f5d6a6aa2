import PushCore

/// A campaign platform's SDK as the simulated device carries it: its name in
/// `{"preset": NAME}`, the payload paths that carry its campaign id, whether it needs a tracking
/// URL, and the request it makes for an event (as `tracking.md` documents each one), or why it
/// stays silent (its gate is not met). One conformance per file; a preset is added there and
/// listed once in `TrackingPresets.all`.
///
/// `action` runs on the event loop that delivered the push (or a fleet's delivery thread); it
/// only builds values.
protocol TrackingPreset: Sendable {
    var name: String { get }
    /// Where an APNs payload carries this platform's campaign id (`CampaignID`).
    var campaignPathsAPNs: [String] { get }
    /// Where an FCM message carries it.
    var campaignPathsFCM: [String] { get }
    /// Whether a tracking configuration with these options needs a `url`.
    func needsURL(_ options: [String: String]) -> Bool
    /// The SDK's request for `ctx.event`, or why it sends none. `base` is the configured URL
    /// without a trailing slash.
    func action(for ctx: TrackingContext, config c: TrackingConfig, base: String) -> TrackingAction
}

extension TrackingPreset {
    func needsURL(_ options: [String: String]) -> Bool { true }
}

/// What a preset's SDK does for an event.
enum TrackingAction {
    /// Sends `request` (after `delayMs`; through `batch` when the SDK batches its events).
    case send(TrackingRequest, delayMs: Int64 = 0, batch: TrackingBatch? = nil)
    /// Sends nothing, for this reason.
    case skip(String)
}

/// The presets, and the tracking job a preset's SDK makes for one event.
public enum TrackingPresets {
    /// Every preset, in the order their campaign-id paths are tried.
    static let all: [any TrackingPreset] = [
        AdobeCampaignPreset(), MoEngagePreset(), PushwooshPreset(), BrazePreset(), OneSignalPreset(), WebhookPreset(),
    ]

    /// The preset names, for validation and error messages.
    public static let names = all.map(\.name)

    static func named(_ name: String) -> (any TrackingPreset)? { all.first { $0.name == name } }

    /// Whether a tracking configuration of `preset` with these options needs a `url`.
    public static func needsURL(preset: String, options: [String: String]) -> Bool {
        named(preset)?.needsURL(options) ?? true
    }

    /// The UTF-8 offset of `needle` in `s`.
    static func find(_ needle: String, in s: String) -> Int? {
        let h = Array(s.utf8)
        let n = Array(needle.utf8)
        guard !n.isEmpty, h.count >= n.count else { return nil }
        for i in 0...(h.count - n.count) where h[i..<(i + n.count)].elementsEqual(n) { return i }
        return nil
    }

    public enum Outcome: Sendable {
        case job(TrackingJob)
        case skip(String)
    }

    /// The job `config`'s SDK makes for `ctx.event`, or why it makes none.
    public static func job(_ config: TrackingConfig, _ ctx: TrackingContext) -> Outcome {
        guard config.events.contains(ctx.event) else { return .skip("\(config.preset) does not report \(ctx.event.rawValue)") }
        guard let preset = named(config.preset) else { return .skip("unknown preset \(config.preset)") }
        let base = config.url.utf8.last == UInt8(ascii: "/") ? String(config.url.dropLast()) : config.url
        switch preset.action(for: ctx, config: config, base: base) {
        case .skip(let reason):
            return .skip(reason)
        case .send(let request, let delayMs, let batch):
            return .job(
                TrackingJob(
                    request: request, event: ctx.event, preset: config.preset, token: ctx.token,
                    notificationID: ctx.notificationID, notBeforeMs: ctx.atMs + delayMs, batch: batch, platform: ctx.platform,
                    campaign: ctx.campaign))
        }
    }
}
