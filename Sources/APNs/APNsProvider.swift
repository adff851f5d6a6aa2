import PushCore
import Transport

/// What a connection looks like to APNs.
public struct APNsConnectionInfo: Sendable {
    /// The TLS SNI the client sent (nil: cleartext).
    public var serverName: String?
    /// The verified client certificate (certificate auth), if any.
    public var peerCertificate: PeerCertificate?
    /// The port the connection came in on (`--apns-manage-ports` name an environment each).
    public var localPort: Int
    /// What the gateway knows of a connection.
    public init(serverName: String?, peerCertificate: PeerCertificate?, localPort: Int = 0) {
        self.serverName = serverName
        self.peerCertificate = peerCertificate
        self.localPort = localPort
    }
}

/// The provider's verdict on one request: a pure value the composition root turns into a
/// response, a hand-off and connection actions.
public struct APNsDecision: Sendable {
    /// Why it was refused (nil: accepted).
    public var reason: APNsReason?
    /// The HTTP status Apple answers with for the reason.
    public var status: Int { reason?.status ?? 200 }
    /// 410 responses: when the token stopped being valid (ms).
    var timestampMs: Int64?
    /// Sandbox or production, from the host or the port.
    public var environment: APNsEnvironment
    /// Generated when the request carried no valid `apns-id`. For the broadcast APIs: the
    /// answer's `apns-request-id` (the sender's when valid, else generated).
    public var generatedID: UUIDValue?
    /// Accepted pushes.
    public var token: ArraySlice<UInt8> = []
    /// `TokenKey(token)`, once the device check has computed it.
    public var tokenKey: TokenKey?
    /// The `apns-topic` header (nil: none sent).
    public var topic: ArraySlice<UInt8>?
    /// The app's bundle id: the topic without its push type's suffix (once the topic passed).
    public var bundle: ArraySlice<UInt8>?
    /// `apns-collapse-id` and `apns-expiration` (seconds), when given.
    public var collapseID: ArraySlice<UInt8>?
    /// `apns-expiration` (seconds since the epoch; 0: deliver once or not at all).
    public var expiration: Int64?
    /// `apns-push-type` (alert when absent, as Apple assumes).
    public var pushType: APNsPushType = .alert
    /// What the payload scan found (alert, sound, badge, content-available...).
    public var summary = APNsPayloadSummary()
    /// Apple-compatible warnings about the payload (kept with the record).
    public var warnings: [String] = []
    /// The team whose credentials sent it (a provider token's issuer, a certificate's OU), once authenticated.
    public var team: TeamID?
    /// Raise SETTINGS_MAX_CONCURRENT_STREAMS to this (first valid token).
    public var raiseStreamsTo: UInt32?
    /// Send GOAWAY with `{"reason": goAwayReason}` after the response.
    public var goAwayReason: String?
    /// A Live Activity broadcast (`/4/broadcasts`): the channel it goes to, once accepted.
    public var broadcast: APNsBroadcastTarget?
    /// The request was for the broadcast API (its answers carry `apns-request-id`).
    public var isBroadcast = false

    /// Whether Apple would accept it.
    public var accepted: Bool { reason == nil }

    /// A blank decision for a push arriving in `environment`.
    public init(environment: APNsEnvironment) { self.environment = environment }
}

/// The APNs provider API (`POST /3/device/<token>`) as a pure function of request, connection
/// and time. Checks run in this order; the first failure decides (Apple documents no order;
/// this follows Pushy's MockApnsServer where it has the check):
///
///  1. DuplicateHeaders   (a repeated apns-* or authorization header)
///  2. BadMessageId       (apns-id not a lowercase canonical UUID)
///  3. MethodNotAllowed   (not POST)
///  4. BadPath, MissingDeviceToken, BadDeviceToken (path shape; token hex, configured length)
///  5. authentication     (certificate: BadCertificate, BadCertificateEnvironment;
///                         token: MissingProviderToken, InvalidProviderToken, TooManyProviderTokenUpdates,
///                         BadEnvironmentKeyIdInToken, UnrelatedKeyIdInToken, ExpiredProviderToken)
///  6. MissingTopic       (token auth, or a multi-topic certificate, without apns-topic)
///  7. BadCollapseId      (over 64 bytes)
///  8. BadPriority        (not 10, 5 or 1; 10 for a background push)
///  9. InvalidPushType
/// 10. BadExpirationDate  (not a non-negative integer)
/// 11. BadTopic, TopicDisallowed (suffix for the push type; certificate or key topics; token-only types)
/// 12. BadDeviceToken (other environment), Unregistered (410), DeviceTokenNotForTopic
/// 13. PayloadEmpty, PayloadTooLarge (4096, 5120 for voip), BadPayload (--strict-payload only)
///
/// A path under `/4/` is the broadcast API: from step 4 on, `decideBroadcast` decides it.
public struct APNsProvider: Sendable {
    /// The gateway's options (`--apns-*`).
    public let configuration: APNsConfiguration
    /// Signing keys, for token auth.
    public let keys: APNsKeyStore
    /// Device tokens seen, with their environment and topic.
    public let devices: APNsDeviceRegistry
    /// Live Activity broadcast channels (`APNsProvider+Broadcast.swift`).
    public let channels: APNsChannelRegistry

    /// Apple's rules over the key store and token registry.
    public init(
        configuration: APNsConfiguration, keys: APNsKeyStore, devices: APNsDeviceRegistry,
        channels: APNsChannelRegistry = APNsChannelRegistry()
    ) {
        self.configuration = configuration
        self.keys = keys
        self.devices = devices
        self.channels = channels
    }

    /// The environment a request addresses: `:authority`, else `host`, else SNI, else the default.
    public func environment(_ request: Request, _ conn: APNsConnectionInfo) -> APNsEnvironment {
        environment(request.headers, APNsHeaders(request.headers), conn)
    }

    func environment(_ h: HTTPFields, _ idx: APNsHeaders, _ conn: APNsConnectionInfo) -> APNsEnvironment {
        let host = idx.authority >= 0 ? idx.authority : idx.host
        if host >= 0, let e = h.withValue(at: Int(host), APNsEnvironment.forHost(raw:)) { return e }
        if let sni = conn.serverName, let e = APNsEnvironment.forHost(sni) { return e }
        if conn.localPort != 0, let e = configuration.managePorts[conn.localPort] { return e }
        return configuration.defaultEnvironment
    }

    /// Checks a push in Apple's order: path, method, headers, auth, topic, token, payload.
    public func decide(
        _ request: Request, connection conn: APNsConnectionInfo, state: APNsConnectionState,
        nowMs: Int64
    ) -> APNsDecision {
        var d = APNsDecision(environment: .sandbox)
        decide(request, connection: conn, state: state, nowMs: nowMs, into: &d)
        return d
    }

    /// `decide`, written into the caller's decision: returning the (large) decision from each of
    /// the many exits copied it, one retain per reference it holds. `d` comes blank (as the
    /// pipeline and `decide` make it): making it anew here destroyed the blank one, a release
    /// per reference.
    public func decide(
        _ request: Request, connection conn: APNsConnectionInfo, state: APNsConnectionState,
        nowMs: Int64, into d: inout APNsDecision
    ) {
        // The headers are read in place (`request.headers`): a local copy cost two retains a request.
        let idx = APNsHeaders(request.headers)
        let env = environment(request.headers, idx, conn)
        d.environment = env

        // The response echoes a single valid apns-id; any other case gets a fresh one. Header
        // values that are only checked are read in place (`withValue`): a slice of each
        // retained the field storage and released it.
        let sentID = idx.id >= 0
        let validID = sentID && request.headers.withValue(at: Int(idx.id)) { UUIDValue.parseCanonicalLowercase($0) != nil }
        if !validID || idx.duplicateID { d.generatedID = UUIDValue.random(&state.rng) }

        // 1. DuplicateHeaders
        if idx.duplicate {
            reject(&d, .duplicateHeaders, state)
            return
        }

        // 2. BadMessageId
        if sentID && !validID {
            reject(&d, .badMessageId, state)
            return
        }

        // 3. MethodNotAllowed (the broadcast API's paths are its own: `decideBroadcast`)
        guard request.method == .post else {
            if request.path.hasPrefix("/4/") { return decideBroadcast(request, connection: conn, state: state, nowMs: nowMs, into: &d) }
            reject(&d, .methodNotAllowed, state)
            return
        }

        // 4. Path and token shape
        let path = request.path
        let prefix: StaticString = "/3/device/"
        guard path.hasPrefix(prefix) else {
            // The broadcast API (`/4/broadcasts/apps/...`) has rules of its own.
            if path.count > 3, path[path.startIndex &+ 1] == UInt8(ascii: "4"), path[path.startIndex &+ 2] == UInt8(ascii: "/") {
                return decideBroadcast(request, connection: conn, state: state, nowMs: nowMs, into: &d)
            }
            reject(&d, path.equals("/3/device") ? .missingDeviceToken : .badPath, state)
            return
        }
        let token = path.dropFirst(prefix.utf8CodeUnitCount)
        if token.isEmpty {
            reject(&d, .missingDeviceToken, state)
            return
        }
        if token.contains(UInt8(ascii: "/")) {
            reject(&d, .badPath, state)
            return
        }
        guard configuration.tokenLength.contains(token.count), token.withUnsafeBytes(TokenCharacters.allHex) else {
            reject(&d, .badDeviceToken, state)
            return
        }
        d.token = token

        // 5. Authentication
        let topicHeader = APNsHeaders.value(request.headers, idx.topic)
        guard let credentials = authorize(request.headers, idx, conn, env: env, state: state, nowMs: nowMs, &d) else { return }
        let certInfo = credentials.certificate
        let keyTopics = credentials.keyTopics

        // 6. MissingTopic
        var topic: ArraySlice<UInt8>
        if let t = topicHeader, !t.isEmpty {
            topic = t
        } else if let info = certInfo, !info.multiTopic, let uid = info.topics.first {
            topic = ArraySlice(uid.utf8)
        } else {
            reject(&d, .missingTopic, state)
            return
        }

        // 7. BadCollapseId
        if let c = APNsHeaders.value(request.headers, idx.collapseID) {
            if c.count > 64 {
                reject(&d, .badCollapseId, state)
                return
            }
            d.collapseID = c
        }

        // 8-9. BadPriority, InvalidPushType
        var priority = 10
        let priorityHeader = idx.priority >= 0
        if priorityHeader {
            guard let value = request.headers.withValue(at: Int(idx.priority), APNsProvider.priority) else {
                reject(&d, .badPriority, state)
                return
            }
            priority = value
        }
        var pushType = APNsPushType.alert
        if idx.pushType >= 0 {
            guard let t = request.headers.withValue(at: Int(idx.pushType), { APNsPushType(raw: $0) }) else {
                reject(&d, .invalidPushType, state)
                return
            }
            pushType = t
        } else if topicHeader == nil, let info = certInfo, !info.multiTopic {
            pushType = .alert
        }
        if pushType == .background && priority == 10 && priorityHeader {
            reject(&d, .badPriority, state)
            return
        }
        d.pushType = pushType

        // 10. BadExpirationDate
        if idx.expiration >= 0 {
            guard let seconds = request.headers.withValue(at: Int(idx.expiration), APNsProvider.expiration) else {
                reject(&d, .badExpirationDate, state)
                return
            }
            d.expiration = seconds
        }

        // 11. Topic rules
        guard let bundleLength = pushType.bundleLength(ofTopic: topic),
            APNsProvider.isValidBundle(topic.prefix(bundleLength))
        else {
            reject(&d, .badTopic, state)
            return
        }
        let bundle = topic.prefix(bundleLength)
        if let info = certInfo {
            if pushType.requiresTokenAuth {
                reject(&d, .topicDisallowed, state)
                return
            }
            if !info.topics.contains(where: { topic.elementsEqual($0.utf8) }) && pushType != .mdm {
                reject(&d, .badTopic, state)
                return
            }
        } else if let allowed = keyTopics, !allowed.contains(where: { bundle.elementsEqual($0.utf8) }) {
            reject(&d, .topicDisallowed, state)
            return
        }
        d.topic = topic
        d.bundle = bundle

        // 12. Device state
        if !state.isLastBundle(bundle) {
            state.lastBundle = Array(bundle)
            state.lastBundleKey = TokenKey(bundle)
        }
        // The token's key, computed once: the device layer looks the token up by it too.
        let tokenKey = state.tokenKeys.key(of: token)
        d.tokenKey = tokenKey
        switch devices.check(token: token, environment: env, bundle: bundle, bundleKey: state.lastBundleKey, tokenKey: tokenKey) {
        case .ok: break
        case .wrongEnvironment, .unknown:
            reject(&d, .badDeviceToken, state)
            return
        case .notForTopic:
            reject(&d, .deviceTokenNotForTopic, state)
            return
        case .unregistered(let at):
            d.timestampMs = at
            reject(&d, .unregistered, state)
            return
        }

        // 13. Payload
        let body = request.body
        if body.isEmpty {
            reject(&d, .payloadEmpty, state)
            return
        }
        if body.count > pushType.maxPayloadSize {
            reject(&d, .payloadTooLarge, state)
            return
        }
        d.summary = state.scanner.inspect(body, pushType: pushType, warnings: &d.warnings)
        if configuration.strictPayload && !d.warnings.isEmpty {
            reject(&d, .badPayload, state)
            return
        }
        account(&d, state)
    }

    /// What a connection's credentials allow: the certificate's topics, or a topic-specific
    /// key's topics (nil: any of its team's).
    struct Credentials {
        var certificate: APNsConnectionState.CertificateInfo?
        var keyTopics: [String]?
    }

    /// Authentication, for every APNs API: the connection's certificate (BadCertificate,
    /// BadCertificateEnvironment, each ending the connection) or the request's provider token.
    /// nil when `d` was rejected.
    @inline(__always)
    func authorize(
        _ h: HTTPFields, _ idx: APNsHeaders, _ conn: APNsConnectionInfo, env: APNsEnvironment, state: APNsConnectionState,
        nowMs: Int64, _ d: inout APNsDecision
    ) -> Credentials? {
        if let cert = conn.peerCertificate {
            if !state.certificateChecked {
                state.certificate = APNsProvider.certificateInfo(cert)
                state.certificateChecked = true
            }
            guard let info = state.certificate, info.usable else {
                d.goAwayReason = APNsReason.badCertificate.rawValue
                reject(&d, .badCertificate, state)
                return nil
            }
            guard info.environments.contains(env) else {
                d.goAwayReason = APNsReason.badCertificateEnvironment.rawValue
                reject(&d, .badCertificateEnvironment, state)
                return nil
            }
            d.team = info.team
            return Credentials(certificate: info, keyTopics: nil)
        }
        // The token this connection last had accepted, read where it lies (no slice retained):
        // the rest of `authenticate` only when it is not.
        if idx.authorization >= 0,
            h.withValue(at: Int(idx.authorization), { fastAuthenticated($0, env: env, state: state, nowSeconds: nowMs / 1000) })
        {
            d.team = state.boundTeamID
            return Credentials(certificate: nil, keyTopics: state.fastTopics)
        }
        switch authenticate(APNsHeaders.value(h, idx.authorization), env: env, state: state, nowSeconds: nowMs / 1000) {
        case .failure(let r):
            reject(&d, r, state)
            return nil
        case .success(let topics):
            if !state.authenticated {
                state.authenticated = true
                d.raiseStreamsTo = configuration.streamsAfterAuth
            }
            d.team = state.boundTeamID
            return Credentials(certificate: nil, keyTopics: topics)
        }
    }

    @inline(__always)
    func reject(_ d: inout APNsDecision, _ r: APNsReason, _ state: APNsConnectionState) {
        d.reason = r
        account(&d, state)
    }

    /// Counts errors toward the connection's budget; past it, GOAWAY.
    func account(_ d: inout APNsDecision, _ state: APNsConnectionState) {
        if let r = d.reason {
            state.errorBudgetUsed += r.errorWeight
            if state.errorBudgetUsed >= configuration.maxConnectionErrors && d.goAwayReason == nil && !state.wentAway {
                d.goAwayReason = configuration.reasonString(r)
            }
        }
        if d.goAwayReason != nil { state.wentAway = true }
    }

    // MARK: token authentication

    /// Whether `header` (an `authorization` value) is `bearer ` and the very token this
    /// connection last had accepted, in the same environment and not expired: nothing to check
    /// again (`authenticate`'s fast path).
    @inline(__always)
    func fastAuthenticated(_ header: UnsafeRawBufferPointer, env: APNsEnvironment, state: APNsConnectionState, nowSeconds: Int64) -> Bool {
        guard state.fastValid, state.fastEnvironment == env, nowSeconds <= state.fastValidUntil, header.count > 7,
            UnsafeRawBufferPointer(rebasing: header[0..<7]).equalsIgnoringCase("bearer ")
        else { return false }
        let jwt = UnsafeRawBufferPointer(rebasing: header[7...])
        return state.tokenBytes.withUnsafeBytes { sameBytes($0, jwt) }
    }

    /// Checks the bearer token; success carries the key's topic list (topic-specific keys).
    func authenticate(
        _ header: ArraySlice<UInt8>?, env: APNsEnvironment, state: APNsConnectionState,
        nowSeconds: Int64
    ) -> Result<[String]?, APNsReason> {
        guard let header else { return .failure(.missingProviderToken) }
        guard header.count > 7, header.prefix(7).equalsIgnoringCase("bearer ") else { return .failure(.invalidProviderToken) }
        let jwt = header.dropFirst(7)

        if header.withUnsafeBytes({ fastAuthenticated($0, env: env, state: state, nowSeconds: nowSeconds) }) {
            return .success(state.fastTopics)
        }
        state.fastValid = false

        // Cached: same bytes as last time, nothing to verify again.
        if state.verdict == nil || !Bytes.equal(jwt, state.tokenBytes) {
            // A new token within 20 minutes of adopting the current one, while that one is still
            // good, is an update too many (replacing an expired token is always allowed).
            if !state.adoptedToken.isEmpty && !Bytes.equal(jwt, state.adoptedToken)
                && nowSeconds - state.adoptedAt < configuration.tokenUpdateInterval
                && nowSeconds - state.adoptedIssuedAt <= configuration.tokenMaxAge
            {
                return .failure(.tooManyProviderTokenUpdates)
            }
            state.tokenBytes = Array(jwt)
            state.verdict = verify(jwt, env: env, nowSeconds: nowSeconds)
        }
        guard let v = state.verdict else { return .failure(.invalidProviderToken) }
        if let r = v.reason { return .failure(r) }
        if let keyEnv = v.keyEnvironment, keyEnv != env { return .failure(.badEnvironmentKeyIdInToken) }
        // Connection bindings (first authenticated push).
        if let team = state.boundTeam, team != v.teamID { return .failure(.invalidProviderToken) }
        let topicKey = v.topics != nil
        if let bound = state.boundKeyID, bound != v.keyID {
            if state.boundTopicKey != topicKey || topicKey { return .failure(.unrelatedKeyIdInToken) }
            if state.boundKeyEnvironment != v.keyEnvironment { return .failure(.badEnvironmentKeyIdInToken) }
        }
        if nowSeconds - v.issuedAt > configuration.tokenMaxAge { return .failure(.expiredProviderToken) }
        if !Bytes.equal(jwt, state.adoptedToken) {
            state.adoptedToken = Array(jwt)
            state.adoptedAt = nowSeconds
            state.adoptedIssuedAt = v.issuedAt
        }
        if state.boundTeam == nil {
            state.boundTeam = v.teamID
            state.boundTeamID = TeamID(v.teamID)
            state.boundKeyID = v.keyID
            state.boundTopicKey = topicKey
            state.boundKeyEnvironment = v.keyEnvironment
        }
        state.fastValid = true
        state.fastEnvironment = env
        state.fastValidUntil = v.issuedAt + configuration.tokenMaxAge
        state.fastTopics = v.topics
        return .success(v.topics)
    }

    /// Parses and verifies a JWT (the expensive part, done once per distinct token per connection).
    func verify(_ jwt: ArraySlice<UInt8>, env: APNsEnvironment, nowSeconds: Int64) -> APNsConnectionState.TokenVerdict {
        let invalid = APNsConnectionState.TokenVerdict(reason: .invalidProviderToken)
        let token: ProviderToken
        switch ProviderToken.parse(jwt) {
        case .failure: return invalid
        case .success(let t): token = t
        }
        if token.issuedAt > nowSeconds + configuration.clockSkew { return invalid }
        var v = APNsConnectionState.TokenVerdict(reason: nil, teamID: token.teamID, keyID: token.keyID, issuedAt: token.issuedAt)
        guard let entry = keys.lookup(token.keyID) else {
            let strict = configuration.authMode == .strict
            keys.missing.say(token.keyID) {
                "a provider token names key id \(token.keyID) (team \(token.teamID)), which this emulator does not have; it looked "
                    + keys.searched
                    + (strict
                        ? ". Answered 403 InvalidProviderToken (--apns-auth strict)."
                        : ". Accepted unverified (--apns-auth lenient).")
                    + " Register the key with `pushemu credentials apns --server URL` or POST /emulator/v1/apns/keys."
            }
            return strict ? invalid : v
        }
        guard entry.teamID == token.teamID else { return invalid }
        let ok = token.signingInput.withUnsafeBytes { ES256.verify(entry.key, message: $0, signature: token.signature) }
        guard ok else { return invalid }
        v.keyEnvironment = entry.environment
        v.topics = entry.topics
        return v
    }

    // MARK: certificates and topics

    static let sandboxOID = "1.2.840.113635.100.6.3.1"
    static let productionOID = "1.2.840.113635.100.6.3.2"
    static let topicsOID = "1.2.840.113635.100.6.3.6"

    static func certificateInfo(_ cert: PeerCertificate) -> APNsConnectionState.CertificateInfo {
        var envs: Set<APNsEnvironment> = []
        if cert.hasExtension(sandboxOID) { envs.insert(.sandbox) }
        if cert.hasExtension(productionOID) { envs.insert(.production) }
        var topics: [String] = []
        let uid = cert.subjectValue("UID") ?? cert.subjectValue("0.9.2342.19200300.100.1.1")
        if let uid {
            topics = [uid, uid + ".voip", uid + ".complication"]
        }
        var extTopics: [String] = []
        if let ext = cert.extensionValue(topicsOID) { extTopics = DER.utf8Strings(ext) }
        // The extension alternates topic and kind: keep the topics (strings that look like bundle ids).
        let fromExt = extTopics.filter { $0.contains(".") }
        for t in fromExt where !topics.contains(t) { topics.append(t) }
        let apps = Set(
            topics.map { t -> String in
                for s in [".voip", ".complication"] where t.hasSuffix(s) { return String(t.dropLast(s.count)) }
                return t
            })
        return .init(
            environments: envs, topics: topics, multiTopic: apps.count > 1, usable: uid != nil && !envs.isEmpty,
            team: (cert.subjectValue("OU") ?? cert.subjectValue("2.5.4.11")).flatMap(TeamID.init))
    }

    /// `apns-priority`: 10, 5 or 1; nil for anything else (BadPriority).
    @inline(__always)
    static func priority(_ p: UnsafeRawBufferPointer) -> Int? {
        if p.equals("10") { return 10 }
        if p.equals("5") { return 5 }
        if p.equals("1") { return 1 }
        return nil
    }

    /// `apns-expiration`: a non-negative integer of at most 12 digits (seconds since 1970);
    /// nil otherwise (BadExpirationDate).
    @inline(__always)
    static func expiration(_ e: UnsafeRawBufferPointer) -> Int64? {
        guard !e.isEmpty, e.count <= 12, e.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return e.reduce(Int64(0)) { $0 * 10 + Int64($1 - 0x30) }
    }

    /// Bundle ids: letters, digits, '-' and '.', not empty.
    static func isValidBundle(_ b: borrowing ArraySlice<UInt8>) -> Bool {
        !b.isEmpty && ByteClass.all(b, ByteClass.bundle)
    }
}

/// Byte classes as 256-entry tables, checked over raw bytes.
enum ByteClass {
    static let bundle: [Bool] = (0..<256).map { (c: Int) -> Bool in
        let b = UInt8(c)
        return isAlphanumeric(b) || b == 0x2D || b == 0x2E || b == 0x5F // - . _
    }

    @inline(__always)
    static func all(_ bytes: ArraySlice<UInt8>, _ table: [Bool]) -> Bool {
        bytes.withUnsafeBufferPointer { b in
            table.withUnsafeBufferPointer { t in
                for c in b where !t[Int(c)] { return false }
                return true
            }
        }
    }
}

/// Just enough DER to read the UTF8String values of Apple's topics extension.
enum DER {
    static func utf8Strings(_ der: [UInt8]) -> [String] {
        var out: [String] = []
        var i = 0
        func length() -> Int? {
            guard i < der.count else { return nil }
            let first = der[i]
            i += 1
            if first < 0x80 { return Int(first) }
            let n = Int(first & 0x7F)
            guard n > 0, n <= 3, i + n <= der.count else { return nil }
            var v = 0
            for _ in 0..<n {
                v = v << 8 | Int(der[i])
                i += 1
            }
            return v
        }
        while i < der.count {
            let tag = der[i]
            i += 1
            guard let len = length() else { break }
            if tag == 0x30 || tag == 0x31 { continue } // descend into SEQUENCE / SET
            guard i + len <= der.count else { break }
            if tag == 0x0C { out.append(String(decoding: der[i..<(i + len)], as: UTF8.self)) }
            i += len
        }
        return out
    }
}
