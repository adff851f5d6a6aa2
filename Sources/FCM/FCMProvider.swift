import PushCore
import Transport

/// The outcome of a `messages:send` request.
public struct FCMSendDecision: Sendable {
    /// Why the send is refused; nil: accepted. Setting it keeps `accepted` in step, so the
    /// request path tests a flag instead of copying the optional error (a multi-field struct
    /// whose copy went through the runtime's generic value witnesses, four times a request).
    public var error: FCMError? { didSet { accepted = error == nil } }
    /// The project id the request was for.
    public var project: String = ""
    public var message = FCMParsedMessage()
    /// A token send that is delivered: where the recipient's token is in the request body.
    public var tokenRange: Range<Int>?
    /// An `fid` send that is delivered: the registration token of that installation's device.
    public var resolvedToken: [UInt8]?
    /// The token or fid the request named (a range of the body), delivered or not: what a
    /// rejected send is journaled under.
    var namedRecipient: Range<Int>?
    /// The delivered recipient's `TokenKey` (hashed once, for the registry and the device layer).
    public var tokenKey: TokenKey?
    /// The recipient of a token or fid send is an iOS app (delivered through APNs).
    public var recipientIsIOS = false
    /// A topic or condition send that is delivered: whom it goes to, resolved after the answer
    /// (`FCMProvider.recipients(of:project:)`, on the fan-out worker). nil for a dry run.
    public var fanOut: FCMFanOut?
    /// The topic name or condition text for topic and condition sends.
    public var topicLabel: String?
    public private(set) var accepted = true

    public init() {}

    /// The recipient's token for a token or fid send that is delivered (a slice of `body`, or
    /// the installation's token), nil otherwise.
    @inlinable
    public func recipientToken(in body: [UInt8]) -> ArraySlice<UInt8>? {
        if let range = tokenRange { return body[range] }
        return resolvedToken.map { $0[...] }
    }
}

/// Whom a topic or condition send goes to. A reference, so a token send's decision carries one
/// nil word for it (an optional enum of a string or a condition tree cost a copy per request).
public final class FCMFanOut: Sendable {
    public enum Target: Sendable, Equatable {
        case topic(String)
        case condition(FCMCondition)
    }
    public let target: Target
    public init(_ target: Target) { self.target = target }
}

/// FCM's rules for the send API and its credentials, as pure functions of the request, the
/// connection's state and the shared registries. No sockets.
public struct FCMProvider: Sendable {
    public let configuration: FCMConfiguration
    public let accounts: FCMServiceAccounts
    public let tokens: FCMAccessTokens
    public let devices: FCMDeviceRegistry
    public let quota: FCMQuota

    public init(
        configuration: FCMConfiguration, accounts: FCMServiceAccounts, tokens: FCMAccessTokens,
        devices: FCMDeviceRegistry, quota: FCMQuota
    ) {
        self.configuration = configuration
        self.accounts = accounts
        self.tokens = tokens
        self.devices = devices
        self.quota = quota
    }

    var parser: FCMMessageParser {
        var p = FCMMessageParser()
        p.sizeMode = configuration.sizeMode
        p.strictAPNsPayload = configuration.strictPayload
        return p
    }

    // MARK: authorization

    /// Checks `Authorization: Bearer` for `project`. nil when allowed.
    public func authorize(_ request: Request, project: String, state: FCMConnectionState, nowMs: Int64) -> FCMError? {
        // The header this connection was last allowed with, for this project, still in time.
        if nowMs < state.bearerGoodUntilMs && state.bearerProject == project
            && state.authorization.withUnsafeBytes({ request.headers.firstValue("authorization", equals: $0) })
        {
            return nil
        }
        guard let h = request.headers.first("authorization") else { return .credentialsMissing }
        guard h.count > 7, h.withUnsafeBytes({ UnsafeRawBufferPointer(rebasing: $0.prefix(7)).equalsIgnoringCase("bearer ") })
        else { return .invalidCredentials(expired: false) }
        var token = h.dropFirst(7)
        while token.first == 0x20 { token = token.dropFirst() }
        if token.isEmpty { return .invalidCredentials(expired: false) }
        let verdict: FCMAccessTokens.Verdict
        if Bytes.equal(token, state.bearer) {
            verdict = state.bearerVerdict
        } else {
            verdict = tokens.verify(token, nowSeconds: nowMs / 1000)
            state.bearer = Array(token)
            state.bearerVerdict = verdict
            state.bearerGoodUntilMs = 0
        }
        switch verdict {
        case .foreign:
            guard configuration.authMode == .lenient else { return .invalidCredentials(expired: false) }
            state.allow(h, project: project, untilMs: Int64.max)
            return nil
        case .forged:
            return .invalidCredentials(expired: false)
        case .expired:
            return .invalidCredentials(expired: true)
        case .valid(let c):
            // A seal verified means this emulator issued it; its expiry is still range-checked.
            let (product, overflow) = c.expiresAtSeconds.multipliedReportingOverflow(by: 1000)
            let untilMs = overflow ? (c.expiresAtSeconds < 0 ? Int64.min : Int64.max) : product
            if untilMs <= nowMs {
                state.bearerVerdict = .expired(c)
                return .invalidCredentials(expired: true)
            }
            if c.project != project { return .permissionDenied(project: project) }
            if !c.messagingScope { return .insufficientScopes }
            state.allow(h, project: project, untilMs: untilMs)
            return nil
        }
    }

    /// The project the caller's credentials belong to, when they are the emulator's own.
    func credentialProject(_ request: Request, nowMs: Int64) -> String? {
        guard let h = request.headers.first("authorization"), h.count > 7 else { return nil }
        if case .valid(let c) = tokens.verify(h.dropFirst(7), nowSeconds: nowMs / 1000) { return c.project }
        return nil
    }

    // MARK: send

    /// `POST /v1/projects/{project}/messages:send`, in FCM's order: credentials, quota, the
    /// body (proto3 JSON, then FCM's rules, then size), then the recipient.
    public func send(_ request: Request, projectSegment: ArraySlice<UInt8>, state: FCMConnectionState, nowMs: Int64) -> FCMSendDecision {
        var d = FCMSendDecision()
        send(request, projectSegment: projectSegment, state: state, nowMs: nowMs, into: &d)
        return d
    }

    /// `send`, written into the caller's (blank) decision: returning the decision copied it
    /// once more and destroyed it twice, a retain and a release per reference it holds.
    public func send(
        _ request: Request, projectSegment: ArraySlice<UInt8>, state: FCMConnectionState, nowMs: Int64, into d: inout FCMSendDecision
    ) {
        d.project = project(named: projectSegment, state: state)
        if let e = authorize(request, project: d.project, state: state, nowMs: nowMs) {
            d.error = e
            return
        }
        if let wait = quota.take(state.quotaLease, project: d.project, nowMs: nowMs) {
            d.error = .quota(project: accounts.projectNumber(for: d.project) ?? d.project, retryAfterSeconds: wait)
            return
        }
        let parser = self.parser
        if let e = request.body.withUnsafeBytes({ parser.parse($0, scratch: state.scratch, into: &d.message) }) {
            d.error = e
            return
        }
        switch d.message.target {
        case .token(let r):
            d.namedRecipient = r
            let token = request.body[r]
            let key = state.tokenKeys.key(of: token)
            if FCMProvider.admit(devices.check(token: token, key: key, project: d.project, nowMs: nowMs), into: &d),
                !d.message.validateOnly
            {
                d.tokenRange = r
                d.tokenKey = key
            }
        case .fid(let r):
            d.namedRecipient = r
            // An installation id reaches its installation's device (the registration token it
            // prefixes), never a new one: with no such device the installation is unregistered.
            guard let token = devices.registrationToken(forInstallation: request.body[r]) else {
                d.error = .fcm(.unregistered)
                return
            }
            let bytes = Array(token.utf8)
            let key = TokenKey(bytes[...])
            if FCMProvider.admit(devices.check(token: bytes[...], key: key, project: d.project, nowMs: nowMs), into: &d),
                !d.message.validateOnly
            {
                d.resolvedToken = bytes
                d.tokenKey = key
            }
        case .topic(let r):
            let topic = String(decoding: request.body[r], as: UTF8.self)
            d.topicLabel = topic
            if !d.message.validateOnly { d.fanOut = FCMFanOut(.topic(topic)) }
        case .condition(let c, let text):
            d.topicLabel = text
            if !d.message.validateOnly { d.fanOut = FCMFanOut(.condition(c)) }
        }
    }

    /// The project a send path's segment names, from the connection's memory when it is the
    /// last segment it sent to (a project id: its String was made and checked per request).
    @inline(__always)
    func project(named segment: ArraySlice<UInt8>, state: FCMConnectionState) -> String {
        if !state.projectSegment.isEmpty && Bytes.equal(segment, state.projectSegment) { return state.project }
        let text = String(decoding: segment, as: UTF8.self)
        let project = accounts.projectID(forPathSegment: text)
        if !segment.isEmpty && !FCMServiceAccounts.isProjectNumber(segment) {
            state.projectSegment.removeAll(keepingCapacity: true)
            state.projectSegment.append(contentsOf: segment)
            state.project = project
        }
        return project
    }

    /// A token check's verdict, written into `d`: true when the token is delivered to (an iOS
    /// app's through APNs), else `d.error` says why not.
    @inline(__always)
    static func admit(_ verdict: FCMDeviceRegistry.Verdict, into d: inout FCMSendDecision) -> Bool {
        switch verdict {
        case .ok: return true
        case .okIOS:
            d.recipientIsIOS = true
            return true
        case .unregistered: d.error = .fcm(.unregistered)
        case .senderMismatch: d.error = .fcm(.senderIDMismatch)
        case .unknown: d.error = .invalidToken
        }
        return false
    }

    /// The devices a topic or condition send reaches in `project` (and counts a push for each):
    /// the installed subscribers, sorted. Runs on the fan-out worker.
    public func recipients(of fanOut: FCMFanOut, project: String) -> [String] {
        var out: [String] = []
        forEachRecipient(of: fanOut, project: project) {
            out.append($0)
            return true
        }
        return out
    }

    /// The same, streamed: the registry's subscribers, then the fleet members subscribed.
    public func forEachRecipient(of fanOut: FCMFanOut, project: String, _ body: (String) -> Bool) {
        switch fanOut.target {
        case .topic(let topic): devices.forEachRecipient(topic: topic, project: project, body)
        case .condition(let condition): devices.forEachRecipient(condition: condition, project: project, body)
        }
    }

    /// FCM's message id: `0:<microseconds>%<16 hex>` (clients treat it as opaque).
    public static func messageID(_ id: UUIDValue, receivedAtMs: Int64) -> String {
        PushNotification.fcmMessageID(id, receivedAtMs: receivedAtMs)
    }

    /// The success body (`{"name": ...}`, formatted as Google does), or the error envelope.
    public func response(_ d: FCMSendDecision, id: UUIDValue, nowMs: Int64) -> Response {
        if !d.accepted, let e = d.error { return e.response }
        // The whole answer written into one array made at its size: the text around the name (36
        // bytes), the project and a message id (appended piece by piece, the array was grown
        // from empty and checked at each piece: 450 instructions an answer).
        var project = d.project
        let validateOnly = d.message.validateOnly
        let body = project.withUTF8 { name in
            [UInt8](unsafeUninitializedCapacity: 36 + name.count + PushNotification.fcmMessageIDCapacity) { out, count in
                let base = UnsafeMutableRawPointer(out.baseAddress!)
                var at = 0
                func put(_ s: StaticString) {
                    copyBytes(base + at, s.utf8Start, s.utf8CodeUnitCount)
                    at += s.utf8CodeUnitCount
                }
                put("{\n  \"name\": \"projects/")
                if name.count > 0 { copyBytes(base + at, name.baseAddress!, name.count) }
                at += name.count
                put("/messages/")
                if validateOnly {
                    put("fake_message_id")
                } else {
                    at += PushNotification.writeFCMMessageID(id, receivedAtMs: nowMs, to: base + at)
                }
                put("\"\n}\n")
                count = at
            }
        }
        return FCMResponses.json(200, body)
    }
}
