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
        cache: VAPIDCache? = nil, authority: ArraySlice<UInt8>? = nil
    ) -> Result<WebPushAccepted, WebPushRefusal> {
        guard let subscription else { return .failure(refusal(.unknownSubscription)) }
        // VAPID: required wherever the subscription was made with an applicationServerKey (all
        // but Firefox's keyless `/wpush/v1/`); checked when present anyway. A connection that
        // repeats the header it sent last skips its parse and signature check (`VAPIDCache`).
        var claims: VAPIDClaims?
        let known = cache?.lookup(authorization: headers.authorization, cryptoKey: headers.cryptoKey)
        var signer: [UInt8]?
        var unverified: VAPIDCredentials?
        if let known {
            signer = known.key
        } else {
            switch VAPID.credentials(authorization: headers.authorization, cryptoKey: headers.cryptoKey) {
            case .failure(let f): return .failure(refusal(vapid: f))
            case .success(nil):
                if subscription.applicationServerKey != nil { return .failure(refusal(vapid: .missing)) }
            case .success(let credentials?):
                signer = VAPID.decodeKey(credentials.key)
                unverified = credentials
            }
        }
        if known != nil || unverified != nil {
            if let bound = subscription.applicationServerKey, signer != bound { return .failure(refusal(vapid: .keyMismatch)) }
            if subscription.gone { return .failure(refusal(.gone)) }
            let verified: Result<VAPIDClaims, VAPIDFailure>
            if let known {
                // Verified before on this connection: only its clock can have run out since.
                if known.claims.expiresAt <= nowSeconds {
                    verified = .failure(.expired)
                } else if known.claims.expiresAt > nowSeconds + VAPID.maxLifetimeSeconds {
                    verified = .failure(.expiresTooLate)
                } else {
                    verified = .success(known.claims)
                }
            } else {
                verified = VAPID.verify(unverified!, nowSeconds: nowSeconds).map { c, _ in
                    cache?.remember(
                        authorization: headers.authorization, cryptoKey: headers.cryptoKey,
                        draft: unverified!.scheme != "vapid", key: signer ?? [], claims: c)
                    return c
                }
            }
            switch verified {
            case .failure(let f): return .failure(refusal(vapid: f))
            case .success(let c):
                guard audiences.contains(c.audience) || WebPushService.names(authority, c.audience) else {
                    return .failure(refusal(vapid: .audience))
                }
                if let why = cache?.subjectVerdict(self, c.subject, subjectRefusal) ?? subjectRefusal(c.subject) {
                    return .failure(refusal(vapid: .subject(why)))
                }
                claims = c
            }
        }
        if subscription.gone { return .failure(refusal(.gone)) }
        var accepted = WebPushAccepted(ttl: 0, urgency: "normal", topic: nil, coding: nil, claims: claims)
        // TTL (RFC 8030 §5.2): required, seconds, 0 allowed; lowered to the service's limit.
        guard let ttlText = headers.ttl else { return .failure(refusal(.missingTTL)) }
        guard let ttl = WebPushService.integer(ttlText) else { return .failure(refusal(.badTTL, detail: "TTL must be an integer")) }
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
        switch WebPushService.lowercasedCoding(coding) {
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

    /// Whether `audience` is `http://AUTHORITY` or `https://AUTHORITY`: the origin a sender
    /// derives from an endpoint under pushemu's own address. No allocation.
    static func names(_ authority: ArraySlice<UInt8>?, _ audience: String) -> Bool {
        guard let authority, !authority.isEmpty else { return false }
        var a = audience
        return a.withUTF8 { u in
            let rest: UnsafeBufferPointer<UInt8>.SubSequence
            if u.starts(with: "https://".utf8) {
                rest = u[8...]
            } else if u.starts(with: "http://".utf8) {
                rest = u[7...]
            } else {
                return false
            }
            return rest.elementsEqual(authority)
        }
    }

    /// A `TTL` value: optional spaces around at most 18 digits, an optional minus sign (nil:
    /// not an integer). Read in place.
    static func integer(_ text: ArraySlice<UInt8>) -> Int? {
        var digits = 0
        var value = 0
        var negative = false
        var seenSign = false
        for c in text {
            switch c {
            case UInt8(ascii: " "): continue
            case UInt8(ascii: "-") where digits == 0 && !seenSign:
                negative = true
                seenSign = true
            case UInt8(ascii: "+") where digits == 0 && !seenSign: seenSign = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                digits += 1
                guard digits <= 18 else { return nil }
                value = value * 10 + Int(c - UInt8(ascii: "0"))
            default: return nil
            }
        }
        guard digits > 0 else { return nil }
        return negative ? -value : value
    }

    /// The `Content-Encoding` as one of the codings' names when it is one (case-insensitive),
    /// else the value as sent: no allocation for the usual ones.
    static func lowercasedCoding(_ coding: ArraySlice<UInt8>) -> String {
        func isName(_ name: StaticString) -> Bool {
            guard coding.count == name.utf8CodeUnitCount else { return false }
            return zip(coding, UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)).allSatisfy { $0 | 0x20 == $1 }
        }
        if isName("aes128gcm") { return "aes128gcm" }
        if isName("aesgcm") { return "aesgcm" }
        return String(decoding: coding, as: UTF8.self).lowercased()
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
