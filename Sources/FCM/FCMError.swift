import PushCore
import Transport

/// `google.firebase.fcm.v1.FcmError.errorCode` values.
public enum FCMErrorCode: String, Sendable, CaseIterable {
    case invalidArgument = "INVALID_ARGUMENT"
    case unregistered = "UNREGISTERED"
    case senderIDMismatch = "SENDER_ID_MISMATCH"
    case quotaExceeded = "QUOTA_EXCEEDED"
    case unavailable = "UNAVAILABLE"
    case internalError = "INTERNAL"
    case thirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"

    /// The HTTP status and top-level `google.rpc.Code` name FCM answers with.
    public var status: (http: Int, name: String) {
        switch self {
        case .invalidArgument: (400, "INVALID_ARGUMENT")
        case .unregistered: (404, "NOT_FOUND")
        case .senderIDMismatch: (403, "PERMISSION_DENIED")
        case .quotaExceeded: (429, "RESOURCE_EXHAUSTED")
        case .unavailable: (503, "UNAVAILABLE")
        case .internalError: (500, "INTERNAL")
        case .thirdPartyAuthError: (401, "UNAUTHENTICATED")
        }
    }

    /// The top-level message FCM uses for this code when nothing more specific applies.
    var defaultMessage: String {
        switch self {
        case .invalidArgument: "Request contains an invalid argument."
        case .unregistered: "Requested entity was not found."
        case .senderIDMismatch: "SenderId mismatch"
        case .quotaExceeded:
            "Quota exceeded for quota metric 'Number of messages' and limit 'Number of messages per minute' of service 'fcm.googleapis.com'."
        case .unavailable: "The service is currently unavailable."
        case .internalError: "Internal error encountered."
        case .thirdPartyAuthError: "Auth error from APNS or Web Push Service"
        }
    }
}

/// One `google.rpc.BadRequest.FieldViolation`.
public struct FieldViolation: Sendable, Equatable {
    public var field: String
    public var description: String
    public init(_ field: String, _ description: String) {
        self.field = field
        self.description = description
    }
}

/// A failure in Google's `google.rpc.Status` envelope:
/// `{"error":{"code","message","status","details":[...]}}`.
public struct FCMError: Error, Sendable, Equatable {
    public var httpStatus: Int
    public var status: String
    public var message: String
    /// The FcmError detail, when FCM gives one.
    public var errorCode: FCMErrorCode?
    public var violations: [FieldViolation] = []
    /// `google.rpc.QuotaFailure` violations (subject, description).
    var quotaViolations: [FieldViolation] = []
    /// `google.rpc.ErrorInfo` (reason, domain), with metadata service/method.
    public var errorInfoReason: String?
    /// Extra response headers (`www-authenticate`, `retry-after`).
    public var headers: [(String, String)] = []

    public static func == (a: FCMError, b: FCMError) -> Bool {
        a.httpStatus == b.httpStatus && a.status == b.status && a.message == b.message && a.errorCode == b.errorCode
            && a.violations == b.violations
    }

    public init(
        httpStatus: Int, status: String, message: String, errorCode: FCMErrorCode? = nil,
        violations: [FieldViolation] = []
    ) {
        self.httpStatus = httpStatus
        self.status = status
        self.message = message
        self.errorCode = errorCode
        self.violations = violations
    }

    /// An FcmError with its standard status, optionally with one field violation.
    public static func fcm(_ code: FCMErrorCode, _ message: String? = nil, field: String? = nil) -> FCMError {
        let m = message ?? code.defaultMessage
        return FCMError(
            httpStatus: code.status.http, status: code.status.name, message: m, errorCode: code,
            violations: field.map { [FieldViolation($0, m)] } ?? [])
    }

    /// A semantic validation failure: 400 INVALID_ARGUMENT with the FcmError and a BadRequest
    /// violation naming the field.
    public static func invalid(_ field: String, _ description: String) -> FCMError {
        FCMError(
            httpStatus: 400, status: "INVALID_ARGUMENT", message: description, errorCode: .invalidArgument,
            violations: [FieldViolation(field, description)])
    }

    /// ESF's proto3-JSON parse failures: no FcmError, one BadRequest violation per problem.
    public static func parse(_ violations: [FieldViolation]) -> FCMError {
        FCMError(
            httpStatus: 400, status: "INVALID_ARGUMENT", message: violations.map(\.description).joined(separator: "\n"),
            violations: violations)
    }

    /// The oversized-message answer: bare, without details (as captured from the real service).
    public static let tooLarge = FCMError(
        httpStatus: 400, status: "INVALID_ARGUMENT",
        message: "Request contains an invalid argument.")

    static let invalidToken = FCMError.fcm(
        .invalidArgument, "The registration token is not a valid FCM registration token",
        field: "message.token")
    static let noRecipient = FCMError.fcm(.invalidArgument, "Recipient of the message is not set.", field: "message")

    static let authHelp =
        "Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."

    /// 401 for a request without credentials.
    static let credentialsMissing: FCMError = {
        var e = FCMError(
            httpStatus: 401, status: "UNAUTHENTICATED",
            message: "Request is missing required authentication credential. " + authHelp)
        e.errorInfoReason = "CREDENTIALS_MISSING"
        e.headers = [("www-authenticate", "Bearer realm=\"https://accounts.google.com/\"")]
        return e
    }()

    /// 401 for a bearer token that is not (or no longer) valid.
    static func invalidCredentials(expired: Bool) -> FCMError {
        var e = FCMError(
            httpStatus: 401, status: "UNAUTHENTICATED",
            message: "Request had invalid authentication credentials. " + authHelp)
        e.errorInfoReason = expired ? "ACCESS_TOKEN_EXPIRED" : "ACCESS_TOKEN_TYPE_UNSUPPORTED"
        e.headers = [("www-authenticate", "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\"")]
        return e
    }

    /// 403 for a token of another project.
    public static func permissionDenied(project: String) -> FCMError {
        var e = FCMError(
            httpStatus: 403, status: "PERMISSION_DENIED",
            message:
                "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist)."
        )
        e.errorInfoReason = "IAM_PERMISSION_DENIED"
        return e
    }

    /// 403 for a token whose scopes allow no FCM access.
    static let insufficientScopes: FCMError = {
        var e = FCMError(httpStatus: 403, status: "PERMISSION_DENIED", message: "Request had insufficient authentication scopes.")
        e.errorInfoReason = "ACCESS_TOKEN_SCOPE_INSUFFICIENT"
        e.headers = [
            (
                "www-authenticate",
                "Bearer realm=\"https://accounts.google.com/\", error=\"insufficient_scope\", scope=\"https://www.googleapis.com/auth/firebase.messaging https://www.googleapis.com/auth/cloud-platform\""
            )
        ]
        return e
    }()

    /// 429 with the QuotaFailure detail and Retry-After.
    public static func quota(project: String, retryAfterSeconds: Int) -> FCMError {
        var e = FCMError.fcm(.quotaExceeded)
        e.quotaViolations = [
            FieldViolation(
                "project_number:\(project)",
                "Quota exceeded for quota metric 'Number of messages' and limit 'Number of messages per minute' of service 'fcm.googleapis.com'."
            )
        ]
        e.headers = [("retry-after", String(retryAfterSeconds))]
        return e
    }

    /// The envelope's JSON text.
    public var json: String {
        var s = "{\"error\":{\"code\":\(httpStatus),\"message\":" + JSONWriter.quote(message) + ",\"status\":\"\(status)\""
        var details: [String] = []
        if let errorCode {
            details.append("{\"@type\":\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":\"\(errorCode.rawValue)\"}")
        }
        if !quotaViolations.isEmpty {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":["
                    + quotaViolations.map {
                        "{\"subject\":" + JSONWriter.quote($0.field) + ",\"description\":" + JSONWriter.quote($0.description) + "}"
                    }
                    .joined(separator: ",") + "]}")
        }
        if !violations.isEmpty {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":["
                    + violations.map {
                        ($0.field.isEmpty ? "{" : "{\"field\":" + JSONWriter.quote($0.field) + ",") + "\"description\":"
                            + JSONWriter.quote($0.description) + "}"
                    }
                    .joined(separator: ",") + "]}")
        }
        if let errorInfoReason {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"\(errorInfoReason)\",\"domain\":\"googleapis.com\",\"metadata\":{\"service\":\"fcm.googleapis.com\",\"method\":\"google.firebase.fcm.v1.FcmService.SendMessage\"}}"
            )
        }
        if !details.isEmpty { s += ",\"details\":[" + details.joined(separator: ",") + "]" }
        return s + "}}"
    }

    public var response: Response {
        var r = FCMResponses.json(httpStatus, Array(json.utf8))
        for (n, v) in headers { r.headers.add(name: n, value: v) }
        return r
    }
}

/// Google's response framing for FCM and OAuth answers.
public enum FCMResponses {
    public static func json(_ status: Int, _ body: [UInt8]) -> Response {
        Response(status: status, headers: headers, body: body)
    }

    /// Built once and shared (copy-on-write): a response costs no header allocation.
    static let headers: HTTPFields = {
        var h = HTTPFields()
        h.add(name: "content-type", value: "application/json; charset=UTF-8")
        h.add(name: "vary", value: "Origin, X-Origin, Referer")
        return h
    }()
}

/// A ready answer carried through a `Result` failure.
public struct Rejection: Error, Sendable {
    public let response: Response
    public init(_ response: Response) { self.response = response }
}
