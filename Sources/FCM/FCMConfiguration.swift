/// FCM settings (`--fcm-*` flags).
package struct FCMConfiguration: Sendable {
    package enum AuthMode: String, Sendable {
        /// Any bearer the emulator did not issue is accepted; its own are checked (expiry, project).
        case lenient
        /// Only access tokens the emulator issued are accepted.
        case strict
    }

    package var authMode: AuthMode = .lenient
    /// Lifetime of issued access tokens, seconds (`expires_in` is one less, as Google's 3599).
    package var tokenLifetime: Int = 3600
    /// Project quota, messages per minute (0: off).
    package var quotaPerMinute: Int = 600_000
    package var sizeMode: FCMSizeMode = .fields
    /// aps problems in `apns.payload` answer 400 instead of a warning.
    package var strictPayload = false
    /// SETTINGS_MAX_CONCURRENT_STREAMS on connections whose SNI names fcm.googleapis.com.
    package var streams: UInt32 = 100

    package init() {}

    package static let hosts: Set<String> = ["fcm.googleapis.com", "iid.googleapis.com", "oauth2.googleapis.com"]
}
