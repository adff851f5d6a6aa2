import Transport

/// The Web Push headers of a request (RFC 8030 §5, RFC 8291/8292, WNS's cache policy), as
/// slices of the request's own header block.
public struct WebPushHeaders: Sendable {
    public var ttl: ArraySlice<UInt8>?
    public var urgency: ArraySlice<UInt8>?
    public var topic: ArraySlice<UInt8>?
    public var contentEncoding: ArraySlice<UInt8>?
    public var encryption: ArraySlice<UInt8>?
    public var cryptoKey: ArraySlice<UInt8>?
    public var authorization: ArraySlice<UInt8>?
    public var wnsCachePolicy: ArraySlice<UInt8>?

    public init(_ h: HTTPFields) {
        ttl = h.first("ttl")
        urgency = h.first("urgency")
        topic = h.first("topic")
        contentEncoding = h.first("content-encoding")
        encryption = h.first("encryption")
        cryptoKey = h.first("crypto-key")
        authorization = h.first("authorization")
        wnsCachePolicy = h.first("x-wns-cache-policy")
    }

    public init() {}
}

/// What a service knows of a subscription when a push arrives.
public struct WebPushSubscriptionFacts: Sendable {
    /// The `applicationServerKey` it was made with (nil: none, as Firefox allows on `/wpush/v1/`).
    public var applicationServerKey: [UInt8]?
    /// Unsubscribed or expired.
    public var gone: Bool

    public init(applicationServerKey: [UInt8]?, gone: Bool) {
        self.applicationServerKey = applicationServerKey
        self.gone = gone
    }
}

/// An accepted push's facts: what the service applied, and what the browser needs to read it.
public struct WebPushAccepted: Sendable, Equatable {
    /// The TTL applied (the sender's, lowered to the service's limit).
    public var ttl: Int
    /// `very-low`, `low`, `normal` or `high`.
    public var urgency: String
    /// The replacement topic, if any.
    public var topic: String?
    /// The body's coding (nil: no body).
    public var coding: ContentCoding?
    /// `aesgcm`: the salt (`Encryption: salt=`), the sender's key (`Crypto-Key: dh=`) and the record size.
    public var salt: [UInt8]?
    public var senderKey: [UInt8]?
    public var recordSize: Int = 4096
    /// The VAPID claims, when the sender signed.
    public var claims: VAPIDClaims?
}

extension WebPushService {
    /// The service's verdict on a push of `bodyCount` bytes with `headers` to `subscription`
    /// (nil: a token it never issued). `audiences`: the origins `aud` may name (the service's,
    /// and the local one a subscription's endpoint may be under).
    public func check(
        _ headers: WebPushHeaders, bodyCount: Int, subscription: WebPushSubscriptionFacts?, audiences: [String], nowSeconds: Int64,
        cache: VAPIDCache? = nil
    ) -> Result<WebPushAccepted, WebPushRefusal> {
        guard let subscription else { return .failure(refusal(.unknownSubscription)) }
        // VAPID: required wherever the subscription was made with an applicationServerKey (all
        // but Firefox's keyless `/wpush/v1/`); checked when present anyway.
        var claims: VAPIDClaims?
        switch VAPID.credentials(authorization: headers.authorization, cryptoKey: headers.cryptoKey) {
        case .failure(let f): return .failure(refusal(vapid: f))
        case .success(nil):
            if subscription.applicationServerKey != nil { return .failure(refusal(vapid: .missing)) }
        case .success(let credentials?):
            if let bound = subscription.applicationServerKey, VAPID.decodeKey(credentials.key) != bound {
                return .failure(refusal(vapid: .keyMismatch))
            }
            if subscription.gone { return .failure(refusal(.gone)) }
            let verified: Result<VAPIDClaims, VAPIDFailure>
            if let known = cache?.claims(for: credentials) {
                // Verified before on this connection: only its clock can have run out since.
                if known.expiresAt <= nowSeconds {
                    verified = .failure(.expired)
                } else if known.expiresAt > nowSeconds + VAPID.maxLifetimeSeconds {
                    verified = .failure(.expiresTooLate)
                } else {
                    verified = .success(known)
                }
            } else {
                verified = VAPID.verify(credentials, nowSeconds: nowSeconds).map { claims, _ in
                    cache?.remember(credentials, claims)
                    return claims
                }
            }
            switch verified {
            case .failure(let f): return .failure(refusal(vapid: f))
            case .success(let c):
                guard audiences.contains(c.audience) else { return .failure(refusal(vapid: .audience)) }
                if let why = subjectRefusal(c.subject) { return .failure(refusal(vapid: .subject(why))) }
                claims = c
            }
        }
        if subscription.gone { return .failure(refusal(.gone)) }
        var accepted = WebPushAccepted(ttl: 0, urgency: "normal", topic: nil, coding: nil, claims: claims)
        // TTL (RFC 8030 §5.2): required, seconds, 0 allowed; lowered to the service's limit.
        guard let ttlText = headers.ttl else { return .failure(refusal(.missingTTL)) }
        let trimmed = ttlText.filter { $0 != UInt8(ascii: " ") }
        guard !trimmed.isEmpty, trimmed.count <= 18,
            let ttl = Int(String(decoding: trimmed, as: UTF8.self))
        else { return .failure(refusal(.badTTL, detail: "TTL must be an integer")) }
        guard ttl >= 0 else { return .failure(refusal(.badTTL)) }
        accepted.ttl = min(ttl, maxTTL)
        if self == .wns {
            let policy = headers.wnsCachePolicy.map { String(decoding: $0, as: UTF8.self).lowercased() }
            if (ttl == 0 && policy != "no-cache") || (ttl > 0 && policy == "no-cache") {
                return .failure(refusal(.badTTL, detail: "Ttl value conflicts with X-WNS-Cache-Policy."))
            }
        }
        if let u = headers.urgency {
            let value = String(decoding: u, as: UTF8.self)
            guard ["very-low", "low", "normal", "high"].contains(value) else { return .failure(refusal(.badUrgency)) }
            accepted.urgency = value
        }
        if let t = headers.topic {
            if let why = topicRefusal(t) { return .failure(refusal(.badTopic, detail: why)) }
            accepted.topic = String(decoding: t, as: UTF8.self)
        }
        guard bodyCount <= WebPushService.maxBody else { return .failure(refusal(.tooLarge)) }
        guard bodyCount > 0 else { return .success(accepted) } // no body: the encryption headers are ignored
        guard let coding = headers.contentEncoding else { return .failure(refusal(.badEncoding)) }
        switch String(decoding: coding, as: UTF8.self).lowercased() {
        case "aes128gcm":
            if VAPID.cryptoKeyParameter("salt", in: headers.encryption) != nil {
                return .failure(refusal(.badEncoding, detail: "Do not include 'salt' header in aes128gcm Encryption header"))
            }
            if VAPID.cryptoKeyParameter("dh", in: headers.cryptoKey) != nil {
                return .failure(refusal(.badEncoding, detail: "Do not include 'dh' header in aes128gcm Crypto-Key header"))
            }
            accepted.coding = .aes128gcm
        case "aesgcm":
            guard let saltText = VAPID.cryptoKeyParameter("salt", in: headers.encryption), let salt = VAPID.decodeKey(saltText),
                salt.count == 16
            else { return .failure(refusal(.badEncoding, detail: "Missing salt in Encryption header")) }
            guard let dhText = VAPID.cryptoKeyParameter("dh", in: headers.cryptoKey), let dh = VAPID.decodeKey(dhText) else {
                return .failure(refusal(.badEncoding, detail: "Missing dh in Crypto-Key header"))
            }
            if let rsText = VAPID.cryptoKeyParameter("rs", in: headers.encryption) {
                guard let rs = Int(String(decoding: rsText, as: UTF8.self)), rs >= 3, rs <= 1 << 24 else {
                    return .failure(refusal(.badEncoding, detail: "Invalid rs in Encryption header"))
                }
                accepted.recordSize = rs
            }
            accepted.coding = .aesgcm
            accepted.salt = salt
            accepted.senderKey = dh
        default:
            return .failure(refusal(.badEncoding, detail: "Unknown Content-Encoding header"))
        }
        return .success(accepted)
    }

    /// The service's rule for `sub`: Apple refuses what is not a reachable `mailto:` or `https:`
    /// contact; autopush wants one of those schemes; FCM and WNS do not look.
    func subjectRefusal(_ sub: String?) -> String? {
        switch self {
        case .apple: return VAPID.subjectRefusal(sub)
        case .mozilla:
            guard let sub else { return nil }
            if sub.isEmpty { return "Empty sub string" }
            return sub.hasPrefix("mailto:") || sub.hasPrefix("https://") ? nil : "Improperly formatted sub string"
        case .fcm, .wns: return nil
        }
    }

    /// The `Topic` rule: at most 32 base64url characters (autopush's words); Apple also decodes
    /// it as base64url, so a length of 1 modulo 4 fails there.
    func topicRefusal(_ t: ArraySlice<UInt8>) -> String? {
        if t.count > 32 { return "Topic must be no greater than 32 characters" }
        var body = t
        while body.last == UInt8(ascii: "=") { body = body.dropLast() }
        let alphabet = body.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
        if t.isEmpty || !alphabet { return "Topic must be URL and Filename safe Base64 alphabet" }
        if self == .apple && body.count % 4 == 1 { return "Topic is not base64url" }
        return nil
    }
}
