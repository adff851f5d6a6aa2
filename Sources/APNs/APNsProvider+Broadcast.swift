import PushCore
import Transport

/// Where an accepted broadcast goes: its channel, and the app and environment it belongs to.
/// A reference, so a device push's decision carries one nil word for it.
public final class APNsBroadcastTarget: Sendable {
    public let channelID: String
    public let bundleID: String
    public let policy: APNsChannelRegistry.StoragePolicy
    public let priority: Int

    init(channelID: String, bundleID: String, policy: APNsChannelRegistry.StoragePolicy, priority: Int) {
        self.channelID = channelID
        self.bundleID = bundleID
        self.policy = policy
        self.priority = priority
    }
}

/// The Live Activity broadcast API (`POST /4/broadcasts/apps/<bundleId>`, BCAST) and channel
/// management (`/1/apps/<bundleId>/channels` and `/all-channels`, CHAN), as pure functions of
/// the request, the connection and time, with the same authentication as device pushes (a
/// certificate, or a provider token on the same connection cache). Answers carry
/// `apns-request-id` (the client's, when it is a UUID, else a new one) instead of `apns-id`.
///
/// Checks run in this order; the first failure decides (Apple documents the reasons, ERRB, but
/// no order; this follows the device push's order where the checks correspond). A broadcast
/// first passes the device push's steps 1 and 2 (DuplicateHeaders, BadMessageId for `apns-id`),
/// which `APNsProvider.decide` runs before it reads the path.
///
///  1. BadPath            (no such path, or a bundle id with characters a bundle id cannot have)
///  2. MethodNotAllowed   (broadcast: not POST; channels: not POST, GET or DELETE; all-channels: not GET)
///  3. TopicDisallowed    (the bundle id carries a push type's suffix, `.push-type.liveactivity` say)
///  4. BadMessageId       (apns-request-id not a UUID)
///  5. authentication     (as for device pushes: BadCertificate, BadCertificateEnvironment, the token reasons)
///  6. TopicMismatch      (a certificate or topic-specific key not for this app; another team's key)
///  7. FeatureNotEnabled  (`--apns-broadcast-apps` does not list the app)
///  then for a broadcast:
///  8. MissingChannelId, BadChannelId (not base64 of 8 to 64 bytes), ChannelNotRegistered
///  9. MissingPushType, InvalidPushType (not liveactivity)
/// 10. BadPriority        (not 10, 5 or 1)
/// 11. BadExpirationDate  (not a non-negative integer; anything but 0 on a No Message Stored channel)
/// 12. PayloadEmpty, PayloadTooLarge (5120 bytes), BadRequestPayload (an `event` of `start`:
///     a broadcast cannot start an activity; any lint warning under `--strict-payload`)
///  and for channel management:
///  8. create: PayloadEmpty, BadRequestParams (not `{"message-storage-policy":0|1,"push-type":"LiveActivity"}`),
///     CannotCreateChannelConfig (the app has 10,000 channels in this environment)
///     read, delete: MissingChannelId, BadChannelId, ChannelNotRegistered
extension APNsProvider {
    static let broadcastPrefix: StaticString = "/4/broadcasts/apps/"
    static let maxBroadcastPayload = 5120

    /// The app a broadcast or channel path names, or the reason it is refused (steps 2 and 3).
    static func broadcastBundle(_ path: ArraySlice<UInt8>, prefix: StaticString) -> Result<ArraySlice<UInt8>, APNsReason> {
        guard path.hasPrefix(prefix) else { return .failure(.badPath) }
        let bundle = path.dropFirst(prefix.utf8CodeUnitCount)
        guard APNsProvider.isValidBundle(bundle) else { return .failure(.badPath) }
        for suffix in APNsPushType.suffixes where bundle.count > suffix.utf8CodeUnitCount && bundle.hasSuffix(suffix) {
            return .failure(.topicDisallowed)
        }
        return .success(bundle)
    }

    /// Steps 4 to 7, shared by the broadcast and channel APIs: the request id, the credentials
    /// and what they allow for `bundle`. False when `d` was rejected.
    func admitBroadcastRequest(
        _ request: Request, bundle: String, connection conn: APNsConnectionInfo, state: APNsConnectionState, nowMs: Int64,
        into d: inout APNsDecision
    ) -> Bool {
        let h = request.headers
        if let sent = h.first("apns-request-id"), APNsProvider.parseRequestID(sent) == nil {
            reject(&d, .badMessageId, state)
            return false
        }
        let idx = APNsHeaders(h)
        guard let credentials = authorize(h, idx, conn, env: d.environment, state: state, nowMs: nowMs, &d) else { return false }
        if let certificate = credentials.certificate {
            guard certificate.topics.contains(where: { $0 == bundle || $0 == bundle + ".push-type.liveactivity" }) else {
                reject(&d, .topicMismatch, state)
                return false
            }
        } else {
            if let topics = credentials.keyTopics, !topics.contains(bundle) {
                reject(&d, .topicMismatch, state)
                return false
            }
            guard channels.admits(team: state.boundTeam, bundle: bundle, environment: d.environment) else {
                reject(&d, .topicMismatch, state)
                return false
            }
        }
        if let apps = configuration.broadcastApps, !apps.contains(bundle) {
            reject(&d, .featureNotEnabled, state)
            return false
        }
        return true
    }

    /// `apns-request-id`: a UUID in either case.
    static func parseRequestID(_ bytes: ArraySlice<UInt8>) -> UUIDValue? {
        UUIDValue.parseCanonicalLowercase(bytes) ?? UUIDValue.parseCanonicalLowercase(ArraySlice(bytes.map { $0 | 0x20 }))
    }

    /// The channel an `apns-channel-id` header names, or why not (step 8).
    func namedChannel(_ request: Request, bundle: String, environment: APNsEnvironment) -> Result<APNsChannelRegistry.Channel, APNsReason> {
        guard let id = request.headers.first("apns-channel-id"), !id.isEmpty else { return .failure(.missingChannelId) }
        guard APNsChannelRegistry.isWellFormed(id) else { return .failure(.badChannelId) }
        guard let channel = channels.channel(String(decoding: id, as: UTF8.self), bundle: bundle, environment: environment) else {
            return .failure(.channelNotRegistered)
        }
        return .success(channel)
    }

    // MARK: broadcast send

    /// `POST /4/broadcasts/apps/<bundleId>`, decided into `d` (see the order above).
    func decideBroadcast(
        _ request: Request, connection conn: APNsConnectionInfo, state: APNsConnectionState, nowMs: Int64,
        into d: inout APNsDecision
    ) {
        d = APNsDecision(environment: environment(request, conn))
        d.isBroadcast = true
        // The answer's apns-request-id: the sender's valid one, else a new one.
        d.generatedID = request.headers.first("apns-request-id").flatMap(APNsProvider.parseRequestID) ?? UUIDValue.random(&state.rng)
        let named = APNsProvider.broadcastBundle(request.path, prefix: APNsProvider.broadcastPrefix)
        if case .failure(.badPath) = named { return reject(&d, .badPath, state) }
        guard request.method == .post else { return reject(&d, .methodNotAllowed, state) }
        let bundleBytes: ArraySlice<UInt8>
        switch named {
        case .failure(let reason): return reject(&d, reason, state)
        case .success(let b): bundleBytes = b
        }
        let bundle = String(decoding: bundleBytes, as: UTF8.self)
        guard admitBroadcastRequest(request, bundle: bundle, connection: conn, state: state, nowMs: nowMs, into: &d) else { return }
        let channel: APNsChannelRegistry.Channel
        switch namedChannel(request, bundle: bundle, environment: d.environment) {
        case .failure(let reason): return reject(&d, reason, state)
        case .success(let c): channel = c
        }
        let h = request.headers
        guard let pushType = h.first("apns-push-type"), !pushType.isEmpty else { return reject(&d, .missingPushType, state) }
        guard APNsPushType(bytes: pushType) == .liveactivity else { return reject(&d, .invalidPushType, state) }
        var priority = 10
        if let p = h.first("apns-priority") {
            guard let value = p.withUnsafeBytes(APNsProvider.priority) else { return reject(&d, .badPriority, state) }
            priority = value
        }
        if let e = h.first("apns-expiration") {
            guard let seconds = e.withUnsafeBytes(APNsProvider.expiration) else { return reject(&d, .badExpirationDate, state) }
            d.expiration = seconds
        }
        if channel.policy == .noMessageStored && d.expiration != 0 { return reject(&d, .badExpirationDate, state) }
        let body = request.body
        if body.isEmpty { return reject(&d, .payloadEmpty, state) }
        if body.count > APNsProvider.maxBroadcastPayload { return reject(&d, .payloadTooLarge, state) }
        d.summary = state.scanner.inspect(body, pushType: .liveactivity, warnings: &d.warnings)
        if APNsPayload.liveActivityEvent(body) == "start" {
            d.warnings.append("a broadcast cannot start a Live Activity: push-to-start goes to the device's token on /3/device")
            return reject(&d, .badRequestPayload, state)
        }
        if configuration.strictPayload && !d.warnings.isEmpty { return reject(&d, .badRequestPayload, state) }
        d.pushType = .liveactivity
        d.bundle = bundleBytes
        d.topic = ArraySlice(channel.id.utf8)
        d.broadcast = APNsBroadcastTarget(channelID: channel.id, bundleID: bundle, policy: channel.policy, priority: priority)
        account(&d, state)
    }

    /// The answer to a broadcast: 200 with `apns-request-id` and `apns-unique-id`, or the
    /// reason with `apns-request-id`.
    public func broadcastResponse(_ d: APNsDecision, id: UUIDValue, state: APNsConnectionState) -> Response {
        var h = HTTPFields()
        (d.generatedID ?? id).withBytes { h.add(name: "apns-request-id", value: $0) }
        guard let reason = d.reason else {
            UUIDValue.random(&state.rng).withBytes { h.add(name: "apns-unique-id", value: $0) }
            return Response(status: 200, headers: h)
        }
        h.add(name: "content-type", value: "application/json")
        return Response(status: reason.status, headers: h, body: Array("{\"reason\":\"\(configuration.reasonString(reason))\"}".utf8))
    }

    /// An error answer built from the request alone (an oversized body), with `apns-request-id`.
    static func broadcastError(_ reason: APNsReason, request: Request, configuration: APNsConfiguration) -> Response {
        var h = HTTPFields()
        var rng = FastRandom()
        (request.headers.first("apns-request-id").flatMap(parseRequestID) ?? UUIDValue.random(&rng)).withBytes {
            h.add(name: "apns-request-id", value: $0)
        }
        h.add(name: "content-type", value: "application/json")
        return Response(status: reason.status, headers: h, body: Array("{\"reason\":\"\(configuration.reasonString(reason))\"}".utf8))
    }

    // MARK: channel management

    /// What a channel-management request gets: the answer, and a GOAWAY reason when the
    /// connection ends after it (an unusable certificate, the error budget spent).
    public struct ChannelAnswer {
        public var response: Response
        public var goAwayReason: String?
        /// The first valid provider token on the connection: raise its stream limit to this.
        public var raiseStreamsTo: UInt32?
    }

    /// `POST`/`GET`/`DELETE /1/apps/<bundleId>/channels`, `GET /1/apps/<bundleId>/all-channels`.
    func manageChannels(
        _ request: Request, connection conn: APNsConnectionInfo, state: APNsConnectionState, nowMs: Int64
    ) -> ChannelAnswer {
        var d = APNsDecision(environment: environment(request, conn))
        d.isBroadcast = true
        // The answer's apns-request-id: the sender's valid one, else a new one.
        let requestID = request.headers.first("apns-request-id").flatMap(APNsProvider.parseRequestID) ?? UUIDValue.random(&state.rng)
        d.generatedID = requestID
        func answer(_ reason: APNsReason) -> ChannelAnswer {
            reject(&d, reason, state)
            return ChannelAnswer(
                response: broadcastResponse(d, id: requestID, state: state), goAwayReason: d.goAwayReason,
                raiseStreamsTo: d.raiseStreamsTo)
        }
        func success(_ status: Int, _ body: String?, channelID: String? = nil) -> ChannelAnswer {
            account(&d, state)
            var h = HTTPFields()
            (d.generatedID ?? requestID).withBytes { h.add(name: "apns-request-id", value: $0) }
            if let channelID { h.add(name: "apns-channel-id", value: channelID) }
            if body != nil { h.add(name: "content-type", value: "application/json") }
            return ChannelAnswer(
                response: Response(status: status, headers: h, body: body.map { Array($0.utf8) } ?? []), goAwayReason: d.goAwayReason,
                raiseStreamsTo: d.raiseStreamsTo)
        }
        // 1-3: the path names the operation, then the method must be one it takes.
        let path = request.path
        let listing: Bool
        let bundleBytes: ArraySlice<UInt8>
        if path.hasSuffix("/all-channels") {
            listing = true
            bundleBytes = path.dropLast("/all-channels".utf8.count)
        } else if path.hasSuffix("/channels") {
            listing = false
            bundleBytes = path.dropLast("/channels".utf8.count)
        } else {
            return answer(.badPath)
        }
        let allowed: [HTTPMethod] = listing ? [.get] : [.post, .get, .delete]
        guard allowed.contains(request.method) else { return answer(.methodNotAllowed) }
        let bundleBytesOnly: ArraySlice<UInt8>
        switch APNsProvider.broadcastBundle(bundleBytes, prefix: "/1/apps/") {
        case .failure(let reason): return answer(reason)
        case .success(let b): bundleBytesOnly = b
        }
        let bundle = String(decoding: bundleBytesOnly, as: UTF8.self)
        guard admitBroadcastRequest(request, bundle: bundle, connection: conn, state: state, nowMs: nowMs, into: &d) else {
            return ChannelAnswer(
                response: broadcastResponse(d, id: requestID, state: state), goAwayReason: d.goAwayReason,
                raiseStreamsTo: d.raiseStreamsTo)
        }
        let env = d.environment
        if listing {
            let ids = channels.list(bundle: bundle, environment: env)
            return success(200, "{\"channels\":[" + ids.map { JSONWriter.quote($0) }.joined(separator: ",") + "]}")
        }
        switch request.method {
        case .post:
            let policy: APNsChannelRegistry.StoragePolicy
            switch APNsProvider.channelSettings(request.body) {
            case .failure(let reason): return answer(reason)
            case .success(let p): policy = p
            }
            switch channels.create(bundle: bundle, environment: env, policy: policy, nowMs: nowMs) {
            case .failure(let reason): return answer(reason)
            case .success(let channel): return success(201, nil, channelID: channel.id)
            }
        case .get:
            switch namedChannel(request, bundle: bundle, environment: env) {
            case .failure(let reason): return answer(reason)
            case .success(let channel): return success(200, APNsProvider.settingsJSON(channel))
            }
        default:
            switch namedChannel(request, bundle: bundle, environment: env) {
            case .failure(let reason): return answer(reason)
            case .success(let channel):
                channels.delete(channel.id, bundle: bundle, environment: env)
                return success(204, nil)
            }
        }
    }

    /// `{"message-storage-policy":0|1,"push-type":"LiveActivity"}` (both required; nothing else;
    /// the push type in any case).
    static func channelSettings(_ body: [UInt8]) -> Result<APNsChannelRegistry.StoragePolicy, APNsReason> {
        if body.isEmpty { return .failure(.payloadEmpty) }
        return body.withUnsafeBytes { raw -> Result<APNsChannelRegistry.StoragePolicy, APNsReason> in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return .failure(.badRequestParams) }
            let v = JSONView(bytes: raw, tokens: tokens)
            var policy: APNsChannelRegistry.StoragePolicy?
            var pushType = false
            var unknown = false
            v.forEachMember(0) { k, val in
                switch v.string(k) {
                case "message-storage-policy":
                    if let n = v.integer(val), v.tokens[val].kind == .number { policy = APNsChannelRegistry.StoragePolicy(rawValue: n) }
                // Apple's spelling is LiveActivity; clients that lowercase it (as the header's value) work too.
                case "push-type": pushType = v.tokens[val].kind == .string && v.string(val).lowercased() == "liveactivity"
                default: unknown = true
                }
            }
            guard let policy, pushType, !unknown else { return .failure(.badRequestParams) }
            return .success(policy)
        }
    }

    /// A channel's settings as read back: the fields it was created with.
    static func settingsJSON(_ channel: APNsChannelRegistry.Channel) -> String {
        "{\"message-storage-policy\":\(channel.policy.rawValue),\"push-type\":\"LiveActivity\"}"
    }
}

extension APNsPayload {
    /// `aps.event` of a Live Activity payload, when it is a string.
    static func liveActivityEvent(_ payload: [UInt8]) -> String? {
        payload.withUnsafeBytes { raw -> String? in
            var tokens: [JSONToken] = []
            guard JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return nil }
            let v = JSONView(bytes: raw, tokens: tokens)
            guard let aps = v.member(0, "aps"), v.tokens[aps].kind == .object, let event = v.member(aps, "event"),
                v.tokens[event].kind == .string
            else { return nil }
            return v.string(event)
        }
    }
}
