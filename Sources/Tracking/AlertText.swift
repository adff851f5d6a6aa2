import PushCore

/// The text a notification shows: its alert's title, subtitle and body, one per line (APNs
/// `aps.alert`; FCM `notification`, `android.notification`, and an `apns` override's alert).
/// Searches match their free words in it, and the journal's index keeps its trigrams.
public enum AlertText {
    static let apnsPaths = ["aps.alert.title", "aps.alert.subtitle", "aps.alert.body"]
    static let fcmPaths =
        [
            "notification.title", "notification.body", "android.notification.title", "android.notification.body",
            "apns.payload.aps.alert.title", "apns.payload.aps.alert.body",
        ] + apnsPaths
    /// A Web Push payload as a service worker reads it (the plaintext the browser decrypted).
    static let webPaths = [
        "title", "body", "header", "alert", "notification.title", "notification.body", "data.header", "data.body",
    ]

    public static func of(_ payload: PayloadReader, provider: PushProvider) -> String {
        var parts = (provider == .fcm ? fcmPaths : provider == .webpush ? webPaths : apnsPaths).compactMap { payload.value($0) }
        if let alert = payload.value("aps.alert"), alert.utf8.first != UInt8(ascii: "{") { parts.append(alert) }
        return parts.joined(separator: "\n")
    }

    /// What the journal's index keeps of a stored payload (an APNs payload, an FCM message, or a
    /// rejected FCM request's whole body): every campaign id it carries, and its alert text,
    /// lowercased as searches compare it.
    public static func indexTerms(provider: PushProvider, payload: UnsafeRawBufferPointer, campaignKeys: [String]) -> PayloadTerms {
        let reader = PayloadReader(Array(payload))
        var campaigns = CampaignID.candidates(reader, provider: provider, extra: campaignKeys)
        if provider == .fcm {
            campaigns += CampaignID.candidates(reader, provider: provider, extra: campaignKeys, under: "message.")
        }
        return PayloadTerms(campaigns: campaigns, alertText: of(reader, provider: provider).lowercased())
    }
}
