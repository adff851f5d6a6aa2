import Journal
import PushCore
import Tracking

extension Emulator {
    /// The journal the configuration asks for (nil when `--durability off`), fed by the
    /// tracking log's records too.
    static func makeJournal(_ configuration: EmulatorConfiguration, tracking: TrackingLog) throws -> Journal? {
        guard let durability = configuration.durability else { return nil }
        let journal: Journal
        do {
            if !configuration.inMemory { try Emulator.makeDirectory(configuration.dataDirectory) }
            let keys = configuration.campaignKeys
            let retention = Journal.Retention(
                maxRecords: configuration.journalMaxRecords ?? (configuration.inMemory ? 1_000_000 : 10_000_000),
                maxAgeMs: configuration.journalMaxAgeMs)
            journal = try Journal(
                path: configuration.inMemory ? nil : configuration.dataDirectory + "/journal.sqlite", durability: durability,
                loops: configuration.threads, retention: retention,
                campaignOf: { provider, payload in CampaignID.first(request: PayloadReader(Array(payload)), provider: provider, extra: keys)
                },
                // The payload's tokens from its gateway's parse (an APNs payload, FCM's message):
                // no second parse.
                campaignOfParsed: { provider, parsed, last in
                    CampaignID.first(parsed: parsed, provider: provider, extra: keys, reusing: last)
                },
                payloadTerms: { provider, payload in AlertText.indexTerms(provider: provider, payload: payload, campaignKeys: keys) })
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("\(error)")
        }
        tracking.onRecord = { attempt in
            journal.appendTracking(
                atMs: attempt.atMs, preset: attempt.preset, event: attempt.event.rawValue, token: attempt.token,
                notificationID: attempt.notificationID, method: attempt.method, url: attempt.url,
                status: attempt.status, outcome: attempt.outcome, attempt: attempt.attempt,
                latencyMs: attempt.latencyMs, error: attempt.error, events: attempt.events, campaign: attempt.campaign)
        }
        return journal
    }
}
