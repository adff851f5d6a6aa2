import PushCore
import Tracking

/// Adobe Campaign Classic's SDK (AEP Campaign Classic extension, tracking.md §1):
///
/// - `adobe.missing-ids` (error): `_mId` or `_dId` absent: receive and open tracking never fire (§1.2 preconditions).
/// - `adobe.malformed-mid` (error): `_mId` neither a v8 UUID nor a v7 decimal: the SDK cannot form `h{hex}` (§1.2).
/// - `adobe.malformed-did` (warning): `_dId` with characters a URL query cannot carry as they are;
///   the SDK inserts it into the tracking URL unconverted (§1.2).
/// - `adobe.payload-near-limit` (warning): over 90% of the 4096-byte limit: personalised copies will be rejected.
/// - `adobe.mutable-content-missing` (warning, iOS): media (`mediaUrl`) without `mutable-content`
///   (the extension never attaches it), or neither `mutable-content` nor `content-available`
///   (receive tracking cannot fire on iOS, §8).
/// - `adobe.missing-message` (warning, Android data message): no `_msg` / `adb_body`: the SDK has no text to show.
struct AdobeLint: SDKConventions {
    let preset = "adobe-campaign"
    let presentsInForeground = false

    func linkPaths(ios: Bool) -> [String] { AdobeLint.links }
    func appKeys(ios: Bool) -> [String] { AdobeLint.keys }
    static let links = ["adb_uri", "uri", "url"]
    static let keys = ["_mId", "_dId", "mediaUrl", "_msg", "adb_body", "title", "adb_title"] + links

    func lint(_ p: LintInput, _ out: inout [LintFinding]) {
        let mId = p.app("_mId")
        let dId = p.app("_dId")
        if mId == nil || dId == nil {
            let missing = [mId == nil ? "_mId" : nil, dId == nil ? "_dId" : nil].compactMap { $0 }
            out.append(
                LintFinding(
                    "adobe.missing-ids", .error,
                    "\(missing.joined(separator: " and ")) missing: the SDK fires receive and open tracking only with both _mId and _dId",
                    path: p.appPath(missing[0])))
        }
        if let m = mId, AdobeIDs.hex(m.value) == nil {
            out.append(
                LintFinding(
                    "adobe.malformed-mid", .error,
                    "_mId '\(m.value)' is neither a UUID (v8) nor a decimal broadlog id (v7): the SDK cannot build its tracking URL",
                    path: m.path))
        }
        if let d = dId, d.value.isEmpty || !AdobeLint.isQueryText(d.value) {
            out.append(
                LintFinding(
                    "adobe.malformed-did", .warning,
                    "_dId '\(d.value)' goes into the tracking URL exactly as received: it must be a non-empty id of letters, digits, - _ . ~",
                    path: d.path))
        }
        let limit = LintInput.payloadLimit
        if p.size > limit * 9 / 10 {
            out.append(
                LintFinding(
                    "adobe.payload-near-limit", .warning,
                    "the payload is \(p.size) of \(limit) bytes: a personalised copy a little longer is rejected as too large", path: ""))
        }
        if p.ios && !p.mutableContent {
            if let media = p.app("mediaUrl") {
                out.append(
                    LintFinding(
                        "adobe.mutable-content-missing", .warning,
                        "media without aps.mutable-content: the notification service extension never runs, so the media is not attached",
                        path: media.path))
            } else if !p.contentAvailable {
                out.append(
                    LintFinding(
                        "adobe.mutable-content-missing", .warning,
                        "neither aps.mutable-content nor aps.content-available: receive tracking cannot fire on iOS (it runs in the extension or the woken app)",
                        path: "aps"))
            }
        }
        if !p.ios, !p.payload.has("notification"), !p.payload.has("android.notification"),
            p.app("_msg") == nil, p.app("adb_body") == nil
        {
            out.append(
                LintFinding(
                    "adobe.missing-message", .warning, "a data message without _msg or adb_body: the SDK has no text to display",
                    path: p.appPath("_msg")))
        }
    }

    /// The extension's messaging service builds a notification from every Campaign push it
    /// handles: one with its ids or its text keys.
    func dataMessageDisplay(_ p: LintInput) -> Display.Reason? {
        for key in ["_mId", "_msg", "adb_body", "title", "adb_title"] where p.app(key) != nil { return .sdkRendered }
        return nil
    }

    /// RFC 3986 unreserved characters.
    /// Every byte of `s` is one a URL query carries as it is (`queryByte`), read from its UTF-8
    /// storage (the generic `allSatisfy` over a String's view cost tens of instructions a byte).
    static func isQueryText(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { bytes in
            for c in bytes where !queryByte(c) { return false }
            return true
        }
    }

    static func queryByte(_ c: UInt8) -> Bool {
        c.isASCIILetter || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F || c == 0x2E || c == 0x7E
    }
}
