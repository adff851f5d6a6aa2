/// Every reason APNs answers for device pushes (`/3/device`, RESP) and for broadcasts and channel
/// management (`/4/broadcasts`, `/1/apps`, ERRB), with its HTTP status.
public enum APNsReason: String, Sendable, CaseIterable, Error {
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case idleTimeout = "IdleTimeout"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    /// Emulator-only (`--strict-payload`): the payload is not valid JSON or its `aps` is malformed.
    case badPayload = "BadPayload"
    case badCertificate = "BadCertificate"
    case badCertificateEnvironment = "BadCertificateEnvironment"
    case expiredProviderToken = "ExpiredProviderToken"
    case forbidden = "Forbidden"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
    /// Spelled as configured (`--apns-bad-environment-reason`): APNs was seen answering `BadEnvironmentKeyInToken`.
    case badEnvironmentKeyIdInToken = "BadEnvironmentKeyIdInToken"
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    case expiredToken = "ExpiredToken"
    case unregistered = "Unregistered"
    case payloadTooLarge = "PayloadTooLarge"
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"
    // Broadcast and channel management only (ERRB).
    case featureNotEnabled = "FeatureNotEnabled"
    case missingChannelId = "MissingChannelId"
    case badChannelId = "BadChannelId"
    case channelNotRegistered = "ChannelNotRegistered"
    case badRequestParams = "BadRequestParams"
    case badRequestPayload = "BadRequestPayload"
    case missingPushType = "MissingPushType"
    case cannotCreateChannelConfig = "CannotCreateChannelConfig"
    case topicMismatch = "TopicMismatch"

    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .badPayload, .featureNotEnabled, .missingChannelId, .badChannelId,
            .channelNotRegistered, .badRequestParams, .badRequestPayload, .missingPushType, .cannotCreateChannelConfig:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .topicMismatch:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        }
    }

    /// Reasons that count toward the per-connection error budget (410s do not; BadDeviceToken weighs more).
    var errorWeight: Int {
        switch self {
        case .unregistered, .expiredToken: 0
        case .badDeviceToken: 5
        default: status >= 400 && status < 500 ? 1 : 0
        }
    }
}
