/// FCM settings (`--fcm-*` flags).
public struct FCMConfiguration: Sendable {
    public enum AuthMode: String, Sendable {
        /// Any bearer the emulator did not issue is accepted; its own are checked (expiry, project).
        case lenient
        /// Only access tokens the emulator issued are accepted.
        case strict
    }

    public var authMode: AuthMode = .lenient
    /// Lifetime of issued access tokens, seconds (`expires_in` is one less, as Google's 3599).
    public var tokenLifetime: Int = 3600
    /// Project quota, messages per minute (0: off).
    public var quotaPerMinute: Int = 600_000
    public var sizeMode: FCMSizeMode = .fields
    /// aps problems in `apns.payload` answer 400 instead of a warning.
    public var strictPayload = false
    /// SETTINGS_MAX_CONCURRENT_STREAMS on connections whose SNI names fcm.googleapis.com.
    public var streams: UInt32 = 100

    public init() {}

    public static let hosts: Set<String> = ["fcm.googleapis.com", "iid.googleapis.com", "oauth2.googleapis.com"]
}
