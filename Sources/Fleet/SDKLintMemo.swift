import PushCore
import Tracking

/// One event loop's memory of the last payload its devices' SDK read: the `LintInput` (the
/// payload's reader and the keys the SDK reads up front) and the lint's findings.
///
/// A campaign sends one payload to every device, and a test loops over devices with one
/// payload: reading it (a copy of the bytes and of the provider's tokens, the SDK's keys looked
/// up) and linting it took about a sixth of a tracked push's device-layer time on the loop.
/// Both are pure functions of the payload's bytes, the preset, the platform, the
/// `mutable-content` and `content-available` flags and the app's profile; a push whose five are
/// equal to the remembered one's gets the remembered input and findings. What depends on the
/// device (display, behaviour, the tracking calls) is decided for each push as before.
///
/// Bounded: one payload of at most `maxRemembered` bytes. Touched only by its loop (the
/// pipeline keeps one per loop); callers on other threads pass none.
public final class SDKLintMemo: @unchecked Sendable {
    struct Key: Equatable {
        var preset: String
        var ios: Bool
        var mutableContent: Bool
        var contentAvailable: Bool
        var profile: AppProfile?
    }

    private var key: Key?
    private var input: LintInput?
    private var findings: [LintFinding] = []

    /// Larger than any payload APNs (5 KiB for VoIP) or FCM (4 KiB) accepts.
    static let maxRemembered = 8192

    /// How many pushes were answered from memory (read by tests).
    public private(set) var recalled = 0

    public init() {}

    /// The SDK's reading of `d.payload` and its lint: from `memo` when the payload and the rest
    /// of the key are the last ones' it saw, else made (and remembered there).
    static func lint(
        _ memo: SDKLintMemo?, _ d: Delivery, preset: String, ios: Bool, profile: AppProfile?, parsedPayload: JSONTokenBuffer?
    ) -> (input: LintInput, findings: [LintFinding]) {
        let key = Key(
            preset: preset, ios: ios, mutableContent: d.mutableContent, contentAvailable: d.contentAvailable, profile: profile)
        guard let memo else { return make(d, key: key, parsedPayload: parsedPayload) }
        if let input = memo.input, key == memo.key, Bytes.equal(d.payload, input.payload.bytes) {
            memo.recalled &+= 1
            return (input, memo.findings)
        }
        let made = make(d, key: key, parsedPayload: parsedPayload)
        if d.payload.count <= maxRemembered {
            memo.key = key
            memo.input = made.input
            memo.findings = made.findings
        }
        return made
    }

    private static func make(_ d: Delivery, key: Key, parsedPayload: JSONTokenBuffer?) -> (input: LintInput, findings: [LintFinding]) {
        let payload = parsedPayload.map { PayloadReader(Array(d.payload), parsed: $0) } ?? PayloadReader(Array(d.payload))
        let input = LintInput(
            preset: key.preset, ios: key.ios, payload: payload, size: d.payload.count, mutableContent: key.mutableContent,
            contentAvailable: key.contentAvailable, profile: key.profile)
        return (input, SDKLint.check(input))
    }
}
