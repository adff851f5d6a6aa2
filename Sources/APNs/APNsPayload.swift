import PushCore

/// What later stages need from an APNs payload, found in the same pass that validates it.
/// Strings stay bytes (ranges into the payload) until someone asks for them.
public struct APNsPayloadSummary: Sendable, Equatable {
    public var isJSON = false
    public var contentAvailable = false
    public var mutableContent = false
    /// Byte ranges of the alert title and body string contents (JSON-escaped) in the payload.
    public var titleRange: Range<Int>?
    public var bodyRange: Range<Int>?
    /// Top-level keys besides `aps` (where SDKs put `_mId`, `_dId`, ...).
    public var customKeyCount = 0
    /// What it shows: alert, sound, badge, a passive interruption level, a Live Activity.
    public var alerts: AlertFacts = []

    public func title(in payload: [UInt8]) -> String? { decode(titleRange, payload) }
    public func body(in payload: [UInt8]) -> String? { decode(bodyRange, payload) }

    private func decode(_ r: Range<Int>?, _ payload: [UInt8]) -> String? {
        guard let r, r.upperBound <= payload.count else { return nil }
        return payload.withUnsafeBytes { JSONParser.decodeString(UnsafeRawBufferPointer(rebasing: $0[r])) }
    }
}

/// Lints an APNs payload: JSON well-formedness and the `aps` dictionary's keys and types
/// (GEN), Live Activity keys for `liveactivity` pushes. Apple documents no rejection for these,
/// so the result is a list of warnings (turned into 400 BadPayload by `--strict-payload`).
/// Keys are matched as bytes; a String is made only for a warning.
public enum APNsPayload {
    enum Key {
        case alert, badge, sound, threadID, category, contentAvailable, mutableContent, targetContentID,
            interruptionLevel, relevanceScore, filterCriteria
        case timestamp, staleDate, dismissalDate, contentState, attributes, attributesType, event, inputPushToken, inputPushChannel
        case unknown

        var isLiveActivity: Bool {
            switch self {
            case .timestamp, .staleDate, .dismissalDate, .contentState, .attributes, .attributesType, .event,
                .inputPushToken, .inputPushChannel:
                true
            default: false
            }
        }
    }

    static let keys: [(StaticString, Key)] = [
        ("alert", .alert), ("badge", .badge), ("sound", .sound), ("thread-id", .threadID), ("category", .category),
        ("content-available", .contentAvailable), ("mutable-content", .mutableContent),
        ("target-content-id", .targetContentID), ("interruption-level", .interruptionLevel),
        ("relevance-score", .relevanceScore), ("filter-criteria", .filterCriteria),
        ("timestamp", .timestamp), ("stale-date", .staleDate), ("dismissal-date", .dismissalDate),
        ("content-state", .contentState), ("attributes", .attributes), ("attributes-type", .attributesType),
        ("event", .event), ("input-push-token", .inputPushToken), ("input-push-channel", .inputPushChannel),
    ]
    static let alertKeys: [StaticString] = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args",
        "subtitle-loc-key", "subtitle-loc-args", "loc-key", "loc-args", "action-loc-key",
        "action", "summary-arg", "summary-arg-count",
    ]

    static func key(_ v: JSONView, _ k: Int) -> Key {
        let t = v.tokens[k]
        if t.escaped {
            let s = v.string(k)
            return keys.first { $0.0.description == s }?.1 ?? .unknown
        }
        // The common keys by length first: one comparison instead of a table walk.
        switch t.end - t.start {
        case 5:
            if v.rawEquals(k, "alert") { return .alert }
            if v.rawEquals(k, "badge") { return .badge }
            if v.rawEquals(k, "sound") { return .sound }
            if v.rawEquals(k, "event") { return .event }
        case 15: if v.rawEquals(k, "mutable-content") { return .mutableContent }
        case 17: if v.rawEquals(k, "content-available") { return .contentAvailable }
        default: break
        }
        for (name, key) in keys where v.rawEquals(k, name) { return key }
        return .unknown
    }

    static func isAlertKey(_ v: JSONView, _ k: Int) -> Bool {
        if v.tokens[k].escaped {
            let s = v.string(k)
            return alertKeys.contains { $0.description == s }
        }
        if v.rawEquals(k, "title") || v.rawEquals(k, "body") { return true }
        return alertKeys.contains { v.rawEquals(k, $0) }
    }

    /// Lints `payload` for `pushType`. `tokens` is scratch space reused between calls.
    public static func inspect(
        _ payload: [UInt8], pushType: APNsPushType, tokens: JSONTokenBuffer,
        warnings: inout [String]
    ) -> APNsPayloadSummary {
        var summary = APNsPayloadSummary()
        payload.withUnsafeBytes { raw in
            if let e = JSONParser.parse(raw, into: tokens) {
                warnings.append("payload is not valid JSON: \(e)")
                return
            }
            summary.isJSON = true
            let v = JSONView(bytes: raw, buffer: tokens)
            guard v.tokens[0].kind == .object else {
                warnings.append("payload is not a JSON object")
                return
            }
            var aps: Int? = nil
            v.forEachMember(0) { k, val in
                if aps == nil && v.keyEquals(k, "aps") { aps = val } else { summary.customKeyCount += 1 }
            }
            guard let aps else {
                if pushType != .mdm { warnings.append("payload has no aps dictionary") }
                return
            }
            guard v.tokens[aps].kind == .object else {
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

    static func range(_ v: JSONView, _ i: Int) -> Range<Int> { Int(v.tokens[i].start)..<Int(v.tokens[i].end) }

    static func lintAps(
        _ v: JSONView, _ aps: Int, _ pushType: APNsPushType, _ s: inout APNsPayloadSummary,
        _ w: inout [String]
    ) {
        // The accepted kinds as arguments, not an array: an array literal per check allocated.
        func expect(_ i: Int, _ a: JSONToken.Kind, _ b: JSONToken.Kind? = nil, k: Int) -> Bool {
            let kind = v.tokens[i].kind
            if kind == a || kind == b { return true }
            let expected = b.map { kindName(a) + " or " + kindName($0) } ?? kindName(a)
            w.append("aps.\(v.string(k)) must be \(expected), not \(kindName(kind))")
            return false
        }
        var hasAlert = false
        var hasSound = false
        var hasBadge = false
        var la: [Key] = []
        var event: Int? = nil
        v.forEachMember(aps) { k, val in
            let key = key(v, k)
            switch key {
            case .alert:
                hasAlert = true
                guard expect(val, .string, .object, k: k) else { return }
                if v.tokens[val].kind == .string {
                    s.bodyRange = range(v, val)
                    return
                }
                v.forEachMember(val) { ak, av in
                    guard isAlertKey(v, ak) else {
                        w.append("aps.alert.\(v.string(ak)) is not an alert key APNs knows")
                        return
                    }
                    let kind = v.tokens[av].kind
                    if v.rawEquals(ak, "title") {
                        if kind == .string {
                            s.titleRange = range(v, av)
                            return
                        }
                    } else if v.rawEquals(ak, "body") {
                        if kind == .string {
                            s.bodyRange = range(v, av)
                            return
                        }
                    }
                    if v.rawEquals(ak, "summary-arg-count") {
                        if kind != .number { w.append("aps.alert.summary-arg-count must be a number") }
                    } else if v.raw(ak).count > 5 && UnsafeRawBufferPointer(rebasing: v.raw(ak).suffix(5)).equals("-args") {
                        if kind != .array {
                            w.append("aps.alert.\(v.string(ak)) must be an array of strings")
                        } else {
                            v.forEachElement(av) {
                                if v.tokens[$0].kind != .string { w.append("aps.alert.\(v.string(ak)) must be an array of strings") }
                            }
                        }
                    } else if kind != .string {
                        w.append("aps.alert.\(v.string(ak)) must be a string")
                    }
                }
            case .badge:
                hasBadge = true
                if expect(val, .number, k: k), (v.integer(val) ?? -1) < 0 { w.append("aps.badge must be a non-negative integer") }
            case .sound:
                hasSound = true
                guard expect(val, .string, .object, k: k) else { return }
                if v.tokens[val].kind == .object {
                    v.forEachMember(val) { sk, sv in
                        if v.rawEquals(sk, "critical") {
                            if v.tokens[sv].kind != .number { w.append("aps.sound.critical must be 0 or 1") }
                        } else if v.rawEquals(sk, "name") {
                            if v.tokens[sv].kind != .string { w.append("aps.sound.name must be a string") }
                        } else if v.rawEquals(sk, "volume") {
                            if let d = v.number(sv), d >= 0, d <= 1 {} else { w.append("aps.sound.volume must be a number from 0 to 1") }
                        } else {
                            w.append("aps.sound.\(v.string(sk)) is not a sound key APNs knows")
                        }
                    }
                }
            case .threadID, .category, .targetContentID, .filterCriteria:
                _ = expect(val, .string, k: k)
            case .contentAvailable:
                if expect(val, .number, k: k) {
                    s.contentAvailable = v.rawEquals(val, "1")
                    if !s.contentAvailable { w.append("aps.content-available must be 1") }
                }
            case .mutableContent:
                if expect(val, .number, k: k) {
                    s.mutableContent = v.rawEquals(val, "1")
                    if !s.mutableContent { w.append("aps.mutable-content must be 1") }
                }
            case .interruptionLevel:
                if v.tokens[val].kind == .string && v.rawEquals(val, "passive") { s.alerts.insert(.passive) }
                if expect(val, .string, k: k),
                    !(v.rawEquals(val, "passive") || v.rawEquals(val, "active") || v.rawEquals(val, "time-sensitive")
                        || v.rawEquals(val, "critical"))
                {
                    w.append("aps.interruption-level must be passive, active, time-sensitive or critical")
                }
            case .relevanceScore:
                if expect(val, .number, k: k), let d = v.number(val), d < 0 || d > 1 { w.append("aps.relevance-score must be from 0 to 1") }
            case .timestamp, .staleDate, .dismissalDate:
                la.append(key)
                _ = expect(val, .number, k: k)
            case .contentState, .attributes:
                la.append(key)
                _ = expect(val, .object, k: k)
            case .attributesType, .inputPushToken, .inputPushChannel:
                la.append(key)
                _ = (key == .attributesType ? expect(val, .string, k: k) : expect(val, .number, .string, k: k))
            case .event:
                la.append(key)
                if expect(val, .string, k: k) {
                    event = val
                    if !(v.rawEquals(val, "start") || v.rawEquals(val, "update") || v.rawEquals(val, "end")) {
                        w.append("aps.event must be start, update or end")
                    }
                }
            case .unknown:
                w.append("aps.\(v.string(k)) is not a key APNs knows (custom keys belong outside aps)")
            }
        }
        if hasAlert { s.alerts.insert(.alert) }
        if hasSound { s.alerts.insert(.sound) }
        if hasBadge { s.alerts.insert(.badge) }
        if pushType == .liveactivity { s.alerts.insert(.liveActivity) }
        switch pushType {
        case .liveactivity:
            if !la.contains(.timestamp) { w.append("a liveactivity push needs aps.timestamp") }
            if la.contains(.event) == false { w.append("a liveactivity push needs aps.event") }
            if let e = event {
                let isStart = v.rawEquals(e, "start")
                if (isStart || v.rawEquals(e, "update")) && !la.contains(.contentState) {
                    w.append("a liveactivity \(v.string(e)) needs aps.content-state")
                }
                if isStart && (!la.contains(.attributesType) || !la.contains(.attributes)) {
                    w.append("a liveactivity start needs aps.attributes-type and aps.attributes")
                }
            }
        default:
            if pushType == .background {
                if !s.contentAvailable { w.append("a background push needs aps.content-available: 1") }
                if hasAlert || hasSound || hasBadge { w.append("a background push must not carry alert, sound or badge") }
            }
            for (name, key) in keys where la.contains(key) { w.append("aps.\(name) only applies to liveactivity pushes") }
        }
    }
}
