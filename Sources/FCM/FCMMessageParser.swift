import APNs
import Glibc
import PushCore

/// Where an accepted message goes.
public enum FCMTarget: Sendable, Equatable {
    case token(Range<Int>)
    case topic(Range<Int>)
    case condition(FCMCondition, text: String)
    case fid(Range<Int>)
}

/// What the validator learned from a valid send request. Ranges index the request body.
public struct FCMParsedMessage: Sendable, Equatable {
    public var validateOnly = false
    /// The raw `message` object.
    public var messageRange: Range<Int> = 0..<0
    public var target: FCMTarget = .token(0..<0)
    /// The payload size as counted for the 4096/2048-byte limit (see `FCMSizeMode`).
    public var size = 0
    public var warnings: [String] = []
    /// The message carries `data` (its own or the android override's).
    public var hasData = false
    /// The message has `notification` (its own or the android override's): a notification message.
    public var hasNotification = false
    /// `android.collapse_key`, and the TTL in seconds (FCM's default: 4 weeks).
    public var collapseKey: String?
    public var ttlSeconds: Int64 = 2_419_200
    public init() {}
}

/// How the message size for FCM's limit is counted (Google does not publish it).
public enum FCMSizeMode: String, Sendable, CaseIterable {
    /// The UTF-8 bytes of every key and string value in `data` and `notification` (the
    /// message's and the android override's): "both keys and values count".
    case fields
    /// The length of the whole `message` object as sent.
    case message
}

/// Reusable per-connection scratch space for the validator (nothing allocated per request).
public final class FCMScratch {
    /// The tokens of the last body parsed in full.
    public let tokens = JSONTokenBuffer(capacity: 128)
    /// Whether `tokens` are the last parsed body's (false when the memo recalled it, or its
    /// parse failed).
    public internal(set) var tokensAreLastBody = false
    var roles = [Int32](repeating: -1, count: FieldRole.allCases.count)
    /// The `apns.payload` lint, remembered per connection (`APNsPayloadScanner`).
    let apnsScanner = APNsPayloadScanner()
    /// The last accepted message, so one that differs only in its token is not parsed again.
    public let memo = FCMMessageMemo()
    public init() {}
}

/// One segment of a field path, kept on the stack while walking; rendered only for errors.
struct PathNode {
    var name: StaticString
    var parent: UnsafePointer<PathNode>?

    static func render(_ p: UnsafePointer<PathNode>?) -> String {
        var parts: [String] = []
        var n = p
        while let c = n {
            parts.append(c.pointee.name.description)
            n = c.pointee.parent
        }
        return parts.reversed().joined(separator: ".")
    }
}

/// Parses and validates an FCM v1 `messages:send` body as ESF and FCM do: proto3 JSON first
/// (field names in snake_case or lowerCamelCase, enum names in any case, the oneof target, type
/// errors with Google's wording), then FCM's own rules (recipient, token and topic syntax,
/// condition grammar, reserved data keys, TTL, colour, links, labels, APNs headers and payload),
/// then the size limit.
public struct FCMMessageParser {
    public var sizeMode: FCMSizeMode = .fields
    public var strictAPNsPayload = false
    public init() {}

    public func parse(_ body: [UInt8], scratch: FCMScratch) -> Result<FCMParsedMessage, FCMError> {
        body.withUnsafeBytes { raw in parse(raw, scratch: scratch) }
    }

    /// Parses `raw`, or recalls the connection's last accepted message when `raw` differs from
    /// it only in its registration token (`FCMMessageMemo`): the same result either way.
    public func parse(_ raw: UnsafeRawBufferPointer, scratch: FCMScratch) -> Result<FCMParsedMessage, FCMError> {
        var message = FCMParsedMessage()
        if let e = parse(raw, scratch: scratch, into: &message) { return .failure(e) }
        return .success(message)
    }

    /// `parse`, the message written into the caller's (the request path's decision: a result
    /// returned was copied into it and destroyed, about 180 instructions a send); nil when it
    /// parsed, else why not.
    public func parse(_ raw: UnsafeRawBufferPointer, scratch: FCMScratch, into message: inout FCMParsedMessage) -> FCMError? {
        scratch.tokensAreLastBody = false
        if scratch.memo.recall(raw, sizeMode: sizeMode, strictAPNsPayload: strictAPNsPayload, into: &message) { return nil }
        switch parseInFull(raw, scratch: scratch) {
        case .failure(let e):
            return e
        case .success(let m):
            scratch.memo.remember(raw, m, sizeMode: sizeMode, strictAPNsPayload: strictAPNsPayload)
            scratch.tokensAreLastBody = true
            message = m
            return nil
        }
    }

    /// Parses `raw` with no memo: proto3 JSON, FCM's rules, the size limit.
    func parseInFull(_ raw: UnsafeRawBufferPointer, scratch: FCMScratch) -> Result<FCMParsedMessage, FCMError> {
        if let e = JSONParser.parse(raw, into: scratch.tokens) {
            return .failure(.parse([FieldViolation("", "Invalid JSON payload received. \(Self.syntaxMessage(e)).")]))
        }
        let v = JSONView(bytes: raw, buffer: scratch.tokens)
        guard v.tokens[0].kind == .object else {
            return .failure(
                .parse([
                    FieldViolation("", "Invalid JSON payload received. Expected an object at the top level, found \(Self.render(v, 0)).")
                ]))
        }
        // Move the roles buffer into the walker and back (no copy-on-write copy).
        var roles: [Int32] = []
        swap(&roles, &scratch.roles)
        for i in roles.indices { roles[i] = -1 }
        var w = Walker(v: v, roles: roles)
        roles = []
        w.walk(0, FCMSchema.sendRequest, nil)
        defer { swap(&w.roles, &scratch.roles) }
        if !w.violations.isEmpty { return .failure(.parse(w.violations)) }
        return check(v, roles: w.roles, scratch: scratch)
    }

    static func syntaxMessage(_ e: JSONError) -> String {
        e.message.prefix(1).uppercased() + e.message.dropFirst() + " at byte \(e.offset)"
    }

    static func render(_ v: JSONView, _ i: Int) -> String {
        let r =
            v.tokens[i].kind == .string
            ? UnsafeRawBufferPointer(rebasing: v.bytes[Int(v.tokens[i].start) - 1..<Int(v.tokens[i].end) + 1])
            : v.raw(i)
        let s = String(decoding: r.prefix(200), as: UTF8.self)
        return r.count > 200 ? s + "..." : s
    }

    /// The proto3-JSON type walk.
    struct Walker {
        let v: JSONView
        var roles: [Int32]
        var violations: [FieldViolation] = []
        var targetSet: StaticString?

        mutating func add(_ field: String, _ description: String) {
            if violations.count < 32 { violations.append(FieldViolation(field, description)) }
        }

        /// The field of `type` that member name `key` names (its proto or its JSON name).
        func find(_ type: ProtoMessage, _ key: Int) -> ProtoField? {
            let t = v.tokens[key]
            return type.fields.withUnsafeBufferPointer { fields -> ProtoField? in
                if t.escaped {
                    let s = v.string(key)
                    return fields.first { $0.name.description == s || $0.jsonName.description == s }
                }
                let n = Int(t.end - t.start)
                guard n > 0 else { return nil }
                let p = v.bytes.baseAddress! + Int(t.start)
                let first = p.load(as: UInt8.self)
                for i in fields.indices {
                    let name = fields[i].name
                    if name.utf8CodeUnitCount == n && name.utf8Start[0] == first && memcmp(p, name.utf8Start, n) == 0 { return fields[i] }
                    let json = fields[i].jsonName
                    if json.utf8CodeUnitCount == n && json.utf8Start[0] == first && memcmp(p, json.utf8Start, n) == 0 { return fields[i] }
                }
                return nil
            }
        }

        mutating func walk(_ obj: Int, _ type: ProtoMessage, _ path: UnsafePointer<PathNode>?) {
            var i = obj + 1
            let end = Int(v.tokens[obj].next)
            while i < end {
                let key = i
                let value = i + 1
                i = Int(v.tokens[value].next)
                guard let f = find(type, key) else {
                    let at = path == nil ? "" : " at '\(PathNode.render(path))'"
                    add(
                        PathNode.render(path),
                        "Invalid JSON payload received. Unknown name \(JSONWriter.quote(v.string(key)))\(at): Cannot find field.")
                    continue
                }
                if v.tokens[value].kind == .null { continue } // proto3: null is the default value
                if f.role.isTarget, type === FCMSchema.message {
                    if targetSet != nil {
                        add(
                            PathNode.render(path),
                            "Invalid value at '\(PathNode.render(path))' (oneof), oneof field 'target' is already set. Cannot set '\(f.name)'"
                        )
                        continue
                    }
                    targetSet = f.name
                }
                if f.role != .none { roles[f.role.rawValue] = Int32(value) }
                var node = PathNode(name: f.name, parent: path)
                withUnsafePointer(to: &node) { self.value(valueIndex: value, f, $0) }
            }
        }

        mutating func invalid(_ i: Int, _ kind: ProtoKind, _ path: UnsafePointer<PathNode>) {
            let p = PathNode.render(path)
            let t = v.tokens[i].kind
            if t == .array {
                let parent = PathNode.render(path.pointee.parent)
                add(
                    parent,
                    "Invalid JSON payload received. Unknown name \"\(path.pointee.name)\" at '\(parent)': Proto field is not repeating, cannot start list."
                )
            } else if t == .object {
                add(p, "Invalid value at '\(p)' (\(kind.typeName)), Starting an object on a scalar field")
            } else {
                add(p, "Invalid value at '\(p)' (\(kind.typeName)), \(FCMMessageParser.render(v, i))")
            }
        }

        mutating func value(valueIndex i: Int, _ f: ProtoField, _ path: UnsafePointer<PathNode>) {
            let t = v.tokens[i]
            switch f.kind {
            case .string:
                if t.kind != .string { invalid(i, f.kind, path) }
            case .bool:
                if t.kind != .true && t.kind != .false { invalid(i, f.kind, path) }
            case .int32:
                if !isInt32(i) { invalid(i, f.kind, path) }
            case .float:
                if !isFloat(i) { invalid(i, f.kind, path) }
            case .duration:
                if t.kind != .string || FCMFormats.durationSeconds(v.raw(i)) == nil { invalid(i, f.kind, path) }
            case .timestamp:
                if t.kind != .string || !FCMFormats.isTimestamp(v.raw(i)) { invalid(i, f.kind, path) }
            case .enumerationRef(let e):
                if !isEnum(i, e.object) { invalid(i, f.kind, path) }
            case .messageRef(let m):
                if t.kind == .object { walk(i, m.object, path) } else { invalid(i, f.kind, path) }
            case .structObject:
                if t.kind != .object { invalid(i, f.kind, path) }
            case .stringMap:
                guard t.kind == .object else { return invalid(i, f.kind, path) }
                var n = 0
                v.forEachMember(i) { _, val in
                    if v.tokens[val].kind != .string {
                        let p = PathNode.render(path) + "[\(n)].value"
                        add(p, "Invalid value at '\(p)' (TYPE_STRING), \(FCMMessageParser.render(v, val))")
                    }
                    n += 1
                }
            case .repeatedString, .repeatedDuration:
                guard t.kind == .array else { return invalid(i, f.kind, path) }
                var n = 0
                let isDuration: Bool = if case .repeatedDuration = f.kind { true } else { false }
                v.forEachElement(i) { e in
                    let ok = v.tokens[e].kind == .string && (!isDuration || FCMFormats.durationSeconds(v.raw(e)) != nil)
                    if !ok {
                        let p = PathNode.render(path) + "[\(n)]"
                        add(p, "Invalid value at '\(p)' (\(f.kind.typeName)), \(FCMMessageParser.render(v, e))")
                    }
                    n += 1
                }
            }
        }

        func isInt32(_ i: Int) -> Bool {
            let t = v.tokens[i]
            let text: Substring
            switch t.kind {
            case .number: text = Substring(String(decoding: v.raw(i), as: UTF8.self))
            case .string: text = Substring(v.string(i))
            default: return false
            }
            if let n = Int64(text) { return n >= Int64(Int32.min) && n <= Int64(Int32.max) }
            // 1.0 and 1e2 are integers in proto3 JSON.
            if t.kind == .number, let d = Double(text), d == d.rounded(), abs(d) <= Double(Int32.max) { return true }
            return false
        }

        func isFloat(_ i: Int) -> Bool {
            switch v.tokens[i].kind {
            case .number: return true
            case .string:
                let s = v.string(i)
                return s == "NaN" || s == "Infinity" || s == "-Infinity" || Double(s) != nil
            default: return false
            }
        }

        func isEnum(_ i: Int, _ e: ProtoEnum) -> Bool {
            let t = v.tokens[i]
            if t.kind == .number, let n = v.integer(i) { return n >= 0 && n < e.values.count }
            guard t.kind == .string else { return false }
            let r = v.raw(i)
            return e.values.contains { name in
                name.utf8CodeUnitCount == r.count
                    && strncasecmp(
                        r.baseAddress!.assumingMemoryBound(to: CChar.self),
                        UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self), r.count) == 0
            }
        }
    }

    // MARK: FCM's rules

    func check(_ v: JSONView, roles: [Int32], scratch: FCMScratch) -> Result<FCMParsedMessage, FCMError> {
        func at(_ r: FieldRole) -> Int? { roles[r.rawValue] >= 0 ? Int(roles[r.rawValue]) : nil }
        func range(_ i: Int) -> Range<Int> { Int(v.tokens[i].start)..<Int(v.tokens[i].end) }
        var m = FCMParsedMessage()
        if let i = at(.validateOnly) { m.validateOnly = v.tokens[i].kind == .true }
        guard let msg = at(.message) else { return .failure(.noRecipient) }
        m.messageRange = range(msg)

        // The recipient.
        var isTopicMessage = false
        if let i = at(.token) {
            guard !v.tokens[i].escaped, FCMFormats.isRegistrationToken(v.raw(i)) else { return .failure(.invalidToken) }
            m.target = .token(range(i))
        } else if let i = at(.topic) {
            let r = range(i)
            guard !v.tokens[i].escaped, let name = FCMFormats.topicName(v.bytes[r]) else {
                return .failure(
                    .invalid("message.topic", "Invalid topic name: \(v.string(i)). A topic name must match [a-zA-Z0-9-_.~%]{1,900}."))
            }
            m.target = .topic(name.startIndex..<name.endIndex)
            isTopicMessage = true
        } else if let i = at(.condition) {
            let text = v.string(i)
            switch FCMCondition.parse(text) {
            case .success(let c): m.target = .condition(c, text: text)
            case .failure(.tooManyTopics(let n)):
                return .failure(
                    .invalid("message.condition", "Invalid condition: it names \(n) topics; at most \(FCMCondition.maxTopics) are allowed.")
                )
            case .failure(.invalidTopic(let t)):
                return .failure(.invalid("message.condition", "Invalid condition: invalid topic name '\(t)'."))
            case .failure(.syntax(let why)):
                return .failure(.invalid("message.condition", "Invalid condition expression provided: \(why)."))
            }
            isTopicMessage = true
        } else if let i = at(.fid) {
            guard !v.tokens[i].escaped, FCMFormats.isFID(v.raw(i)) else {
                return .failure(.fcm(.invalidArgument, "The Firebase installation ID is not valid.", field: "message.fid"))
            }
            m.target = .fid(range(i))
        } else {
            return .failure(.noRecipient)
        }

        // Data keys.
        for (role, name) in FCMMessageParser.dataMaps {
            guard let d = at(role) else { continue }
            var bad: String?
            v.forEachMember(d) { k, _ in
                if bad == nil, v.tokens[k].escaped ? FCMFormats.isReservedDataKey(v.string(k)) : FCMFormats.isReservedDataKey(v.raw(k)) {
                    bad = v.string(k)
                }
            }
            if let bad {
                return .failure(
                    .invalid(
                        name, "Invalid data payload key: \(bad). Keys must not be 'from' or 'message_type' or start with 'google' or 'gcm'."
                    ))
            }
        }
        // Android.
        let ttl = at(.androidTTL).flatMap { FCMFormats.durationSeconds(v.raw($0)) }
        if let i = at(.androidTTL), let s = ttl, s < 0 || s > 2_419_200 {
            return .failure(
                .invalid("message.android.ttl", "The message TTL must be between 0 and 2419200 seconds (4 weeks); got \(v.string(i))."))
        }
        if let i = at(.androidColor), !FCMFormats.isColor(v.raw(i)) {
            return .failure(
                .invalid("message.android.notification.color", "Invalid color: \(v.string(i)). The color must be in the form #rrggbb."))
        }
        // Web push.
        if let i = at(.webpushLink), !FCMFormats.isHTTPSURL(v.string(i)) {
            return .failure(.invalid("message.webpush.fcm_options.link", "The link must be an HTTPS URL; got \(v.string(i))."))
        }
        if let h = at(.webpushHeaders), let e = checkWebpushHeaders(v, h) { return .failure(e) }
        // Analytics labels.
        for (role, name) in FCMMessageParser.labels {
            if let i = at(role), v.tokens[i].escaped || !FCMFormats.isAnalyticsLabel(v.raw(i)) {
                return .failure(.invalid(name, "Invalid analytics label: \(v.string(i)). It must match [a-zA-Z0-9-_.~%]{1,50}."))
            }
        }
        // APNs.
        if let e = checkAPNs(
            v, headers: at(.apnsHeaders), payload: at(.apnsPayload), hasNotification: at(.notification) != nil,
            scratch: scratch, warnings: &m.warnings)
        {
            return .failure(e)
        }

        m.hasNotification = at(.notification) != nil || at(.androidNotification) != nil
        m.hasData = at(.data).map { v.tokens[$0].count > 0 } == true || at(.androidData).map { v.tokens[$0].count > 0 } == true
        if let secs = ttl { m.ttlSeconds = secs }
        if let i = at(.androidCollapseKey) { m.collapseKey = v.string(i) }

        // Size.
        m.size = size(v, msg: msg, roles: roles)
        if m.size > (isTopicMessage ? 2048 : 4096) { return .failure(.tooLarge) }
        return .success(m)
    }

    static let dataMaps: [(FieldRole, String)] = [(.data, "message.data"), (.androidData, "message.android.data")]
    static let labels: [(FieldRole, String)] = [
        (.messageLabel, "message.fcm_options.analytics_label"),
        (.androidLabel, "message.android.fcm_options.analytics_label"),
        (.apnsLabel, "message.apns.fcm_options.analytics_label"),
        (.webpushLabel, "message.webpush.fcm_options.analytics_label"),
    ]
    static let sizedObjects: [FieldRole] = [.data, .notification, .androidData, .androidNotification]

    func size(_ v: JSONView, msg: Int, roles: [Int32]) -> Int {
        if sizeMode == .message { return Int(v.tokens[msg].end - v.tokens[msg].start) }
        func strlen(_ i: Int) -> Int {
            let t = v.tokens[i]
            if t.kind != .string { return Int(t.end - t.start) }
            return t.escaped ? v.string(i).utf8.count : Int(t.end - t.start)
        }
        var total = 0
        for role in FCMMessageParser.sizedObjects {
            let i = Int(roles[role.rawValue])
            guard i >= 0 else { continue }
            v.forEachMember(i) { k, val in total += strlen(k) + strlen(val) }
        }
        return total
    }

    func checkWebpushHeaders(_ v: JSONView, _ h: Int) -> FCMError? {
        var e: FCMError?
        v.forEachMember(h) { k, val in
            guard e == nil else { return }
            let name = v.string(k).lowercased()
            let value = v.string(val)
            if name == "ttl", Int(value).map({ $0 < 0 }) ?? true {
                e = .invalid(
                    "message.webpush.headers", "Invalid Web Push TTL header: \(value). It must be a non-negative integer of seconds.")
            } else if name == "urgency", !["very-low", "low", "normal", "high"].contains(value) {
                e = .invalid(
                    "message.webpush.headers", "Invalid Web Push Urgency header: \(value). It must be very-low, low, normal or high.")
            }
        }
        return e
    }

    func checkAPNs(
        _ v: JSONView, headers: Int?, payload: Int?, hasNotification: Bool, scratch: FCMScratch,
        warnings: inout [String]
    ) -> FCMError? {
        var priority: String?
        var pushType: APNsPushType?
        if let h = headers {
            var e: FCMError?
            v.forEachMember(h) { k, val in
                guard e == nil else { return }
                let name = v.string(k).lowercased()
                let value = v.string(val)
                switch name {
                case "apns-priority":
                    priority = value
                    if !["1", "5", "10"].contains(value) {
                        e = .invalid("message.apns.headers", "Invalid apns-priority: \(value). It must be 10, 5 or 1.")
                    }
                case "apns-expiration":
                    if value.isEmpty || !value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) || value.count > 12 {
                        e = .invalid("message.apns.headers", "Invalid apns-expiration: \(value). It must be a UNIX time in seconds.")
                    }
                case "apns-push-type":
                    pushType = APNsPushType(bytes: Array(value.utf8)[...])
                    if pushType == nil { e = .invalid("message.apns.headers", "Invalid apns-push-type: \(value).") }
                case "apns-collapse-id":
                    if value.utf8.count > 64 { e = .invalid("message.apns.headers", "apns-collapse-id must be at most 64 bytes.") }
                default: break
                }
            }
            if let e { return e }
        }
        guard let p = payload else { return nil }
        let raw = v.raw(p)
        if raw.count > (pushType == .voip ? 5120 : 4096) { return .tooLarge }
        // The same linter as the APNs provider: warnings, or 400 with --strict-payload.
        var issues: [String] = []
        let summary = scratch.apnsScanner.inspect(raw, pushType: pushType ?? .alert, warnings: &issues)
        if !issues.isEmpty {
            if strictAPNsPayload { return .invalid("message.apns.payload", issues[0]) }
            warnings.append(contentsOf: issues.map { "apns.payload: " + $0 })
        }
        if summary.contentAvailable && summary.titleRange == nil && summary.bodyRange == nil && !hasNotification && priority == "10" {
            return .invalid("message.apns.headers", "A data-only (content-available) APNs message must use apns-priority 5.")
        }
        return nil
    }
}
