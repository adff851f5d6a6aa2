import PushCore

/// What later stages need from an APNs payload, extracted in the same pass that validates it.
public struct APNsPayloadSummary: Sendable, Equatable {
    public var isJSON = false
    public var contentAvailable = false
    public var mutableContent = false
    public var title: String?
    public var body: String?
    /// Top-level keys other than `aps` (where SDKs put `_mId`, `_dId`, ...).
    public var customKeys: [String] = []
}

/// Lints an APNs payload: JSON well-formedness and the `aps` dictionary's keys and types
/// (GEN), Live Activity keys for `liveactivity` pushes. Apple documents no rejection for these,
/// so the result is a list of warnings (turned into 400 BadPayload by `--strict-payload`).
public enum APNsPayload {
    static let alertKeys: Set<String> = ["title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args",
                                         "subtitle-loc-key", "subtitle-loc-args", "loc-key", "loc-args", "action-loc-key",
                                         "action", "summary-arg", "summary-arg-count"]
    static let liveActivityKeys: Set<String> = ["stale-date", "content-state", "timestamp", "event", "dismissal-date",
                                                "attributes-type", "attributes", "input-push-token", "input-push-channel"]
    static let apsKeys: Set<String> = ["alert", "badge", "sound", "thread-id", "category", "content-available",
                                       "mutable-content", "target-content-id", "interruption-level", "relevance-score",
                                       "filter-criteria"]

    /// Lints `payload` for `pushType`. `tokens` is scratch space reused between calls.
    public static func inspect(_ payload: [UInt8], pushType: APNsPushType, tokens: inout [JSONToken],
                               warnings: inout [String]) -> APNsPayloadSummary {
        var summary = APNsPayloadSummary()
        payload.withUnsafeBytes { raw in
            if let e = JSONParser.parse(raw, into: &tokens) {
                warnings.append("payload is not valid JSON: \(e)")
                return
            }
            summary.isJSON = true
            let v = JSONView(bytes: raw, tokens: tokens)
            guard tokens[0].kind == .object else {
                warnings.append("payload is not a JSON object")
                return
            }
            var aps: Int? = nil
            v.forEachMember(0) { k, val in
                if v.keyEquals(k, "aps") { aps = val } else { summary.customKeys.append(v.string(k)) }
            }
            guard let aps else {
                if pushType != .mdm { warnings.append("payload has no aps dictionary") }
                return
            }
            guard tokens[aps].kind == .object else {
                warnings.append("aps must be a dictionary")
                return
            }
            lintAps(v, aps, pushType, &summary, &warnings)
        }
        return summary
    }

    static func kindName(_ k: JSONToken.Kind) -> String {
        switch k {
        case .object: "a dictionary"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .true, .false: "a boolean"
        case .null: "null"
        }
    }

    static func lintAps(_ v: JSONView, _ aps: Int, _ pushType: APNsPushType, _ s: inout APNsPayloadSummary,
                        _ w: inout [String]) {
        func expect(_ i: Int, _ kinds: [JSONToken.Kind], _ name: String) -> Bool {
            if kinds.contains(v.tokens[i].kind) { return true }
            w.append("aps.\(name) must be \(kinds.map(kindName).joined(separator: " or ")), not \(kindName(v.tokens[i].kind))")
            return false
        }
        var hasAlert = false, hasSound = false, hasBadge = false
        var laKeys: Set<String> = []
        v.forEachMember(aps) { k, val in
            let key = v.string(k)
            switch key {
            case "alert":
                hasAlert = true
                guard expect(val, [.string, .object], key) else { return }
                if v.tokens[val].kind == .string {
                    s.body = v.string(val)
                } else {
                    v.forEachMember(val) { ak, av in
                        let akey = v.string(ak)
                        if !alertKeys.contains(akey) { w.append("aps.alert.\(akey) is not an alert key APNs knows"); return }
                        if akey.hasSuffix("-args") {
                            if v.tokens[av].kind != .array { w.append("aps.alert.\(akey) must be an array of strings") }
                            else { v.forEachElement(av) { if v.tokens[$0].kind != .string { w.append("aps.alert.\(akey) must be an array of strings") } } }
                        } else if akey != "summary-arg-count" && v.tokens[av].kind != .string {
                            w.append("aps.alert.\(akey) must be a string")
                        }
                        if akey == "title" && v.tokens[av].kind == .string { s.title = v.string(av) }
                        if akey == "body" && v.tokens[av].kind == .string { s.body = v.string(av) }
                    }
                }
            case "badge":
                hasBadge = true
                if expect(val, [.number], key), (v.integer(val) ?? -1) < 0 { w.append("aps.badge must be a non-negative integer") }
            case "sound":
                hasSound = true
                guard expect(val, [.string, .object], key) else { return }
                if v.tokens[val].kind == .object {
                    v.forEachMember(val) { sk, sv in
                        switch v.string(sk) {
                        case "critical": if v.tokens[sv].kind != .number { w.append("aps.sound.critical must be 0 or 1") }
                        case "name": if v.tokens[sv].kind != .string { w.append("aps.sound.name must be a string") }
                        case "volume":
                            if let d = v.number(sv), d >= 0, d <= 1 {} else { w.append("aps.sound.volume must be a number from 0 to 1") }
                        default: w.append("aps.sound.\(v.string(sk)) is not a sound key APNs knows")
                        }
                    }
                }
            case "thread-id", "category", "target-content-id", "filter-criteria":
                _ = expect(val, [.string], key)
            case "content-available":
                if expect(val, [.number], key) { s.contentAvailable = v.integer(val) == 1; if !s.contentAvailable { w.append("aps.content-available must be 1") } }
            case "mutable-content":
                if expect(val, [.number], key) { s.mutableContent = v.integer(val) == 1; if !s.mutableContent { w.append("aps.mutable-content must be 1") } }
            case "interruption-level":
                if expect(val, [.string], key), !["passive", "active", "time-sensitive", "critical"].contains(v.string(val)) {
                    w.append("aps.interruption-level must be passive, active, time-sensitive or critical")
                }
            case "relevance-score":
                if expect(val, [.number], key), let d = v.number(val), d < 0 || d > 1 { w.append("aps.relevance-score must be from 0 to 1") }
            default:
                if liveActivityKeys.contains(key) {
                    laKeys.insert(key)
                    switch key {
                    case "timestamp", "stale-date", "dismissal-date": _ = expect(val, [.number], key)
                    case "content-state", "attributes": _ = expect(val, [.object], key)
                    case "attributes-type": _ = expect(val, [.string], key)
                    case "event":
                        if expect(val, [.string], key), !["start", "update", "end"].contains(v.string(val)) {
                            w.append("aps.event must be start, update or end")
                        }
                    default: break
                    }
                } else {
                    w.append("aps.\(key) is not a key APNs knows (custom keys belong outside aps)")
                }
            }
        }
        switch pushType {
        case .liveactivity:
            if !laKeys.contains("timestamp") { w.append("a liveactivity push needs aps.timestamp") }
            if !laKeys.contains("event") { w.append("a liveactivity push needs aps.event") }
            if let e = v.member(aps, "event"), v.tokens[e].kind == .string {
                let event = v.string(e)
                if (event == "update" || event == "start") && !laKeys.contains("content-state") {
                    w.append("a liveactivity \(event) needs aps.content-state")
                }
                if event == "start" && (!laKeys.contains("attributes-type") || !laKeys.contains("attributes")) {
                    w.append("a liveactivity start needs aps.attributes-type and aps.attributes")
                }
            }
        case .background:
            if !s.contentAvailable { w.append("a background push needs aps.content-available: 1") }
            if hasAlert || hasSound || hasBadge { w.append("a background push must not carry alert, sound or badge") }
            fallthrough
        default:
            for k in laKeys.sorted() { w.append("aps.\(k) only applies to liveactivity pushes") }
        }
    }
}
