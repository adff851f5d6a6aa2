import Fleet
import PushCore
import Tracking
import XCTest

/// Each preset produces the request tracking.md documents, and stays silent when its SDK would.
final class TrackingPresetTests: XCTestCase {
    func ctx(_ event: TrackingEvent, _ platform: String, _ payload: String) -> TrackingContext {
        TrackingContext(
            event: event, platform: platform, token: "tok-1", app: "com.example.app", notificationID: "n-1",
            messageName: "m-1", receivedAtMs: 1_800_000_000_000, atMs: 1_800_000_000_123, payload: PayloadReader(Array(payload.utf8)))
    }

    func job(_ c: TrackingConfig, _ x: TrackingContext) -> TrackingJob? {
        if case .job(let j) = TrackingPresets.job(c, x) { return j }
        return nil
    }

    /// Dotted paths: members (escaped keys too), array indexes, JSON inside strings, empty
    /// segments, null and absent values.
    func testPayloadPaths() {
        let p = PayloadReader(
            Array(
                #"{"a":{"b":[10,{"c":"x"}],"k\u0065y":"esc","":{"":"empty"}},"s":"{\"i\":\"in\",\"n\":{\"m\":3}}","z":null,"t":true,"o":{"x":1}}"#
                    .utf8))
        XCTAssertEqual(p.value("a.b.0"), "10")
        XCTAssertEqual(p.value("a.b.1.c"), "x")
        XCTAssertNil(p.value("a.b.2"))
        XCTAssertNil(p.value("a.b.x"))
        XCTAssertEqual(p.value("a.key"), "esc")
        XCTAssertEqual(p.value("a.."), "empty")
        XCTAssertEqual(p.value("s.i"), "in")
        XCTAssertEqual(p.value("s.n.m"), "3")
        XCTAssertEqual(p.value("s.n"), #"{"m":3}"#)
        XCTAssertNil(p.value("z"))
        XCTAssertEqual(p.value("t"), "true")
        XCTAssertEqual(p.value("o"), #"{"x":1}"#)
        XCTAssertNil(p.value("a.missing"))
        XCTAssertNil(p.value("t.x"))
        XCTAssertNil(p.value("ab"))
        XCTAssertNil(PayloadReader(Array("not json".utf8)).value("a"))
    }

    /// The one-pass read of many keys: escaped member names decoded and compared byte for byte
    /// (a decomposed accent is not its composed form), the first of duplicate members, an empty
    /// key, and nil for keys absent or null; for ASCII keys, what `value` gives for each.
    func testOnePassKeyReadMatchesTheLookup() {
        let json =
            #"{"_m\u0049d":"m1","_dId":"d1","_dId":"d2","url":"https://x.example/","":"empty","z":null,"caf\u00e9":"composed","cafe\u0301":"decomposed","n":{"k":1}}"#
        let p = PayloadReader(Array(json.utf8))
        let keys = ["_mId", "_dId", "url", "", "z", "caf\u{e9}", "cafe\u{301}", "n", "missing", "_mI"]
        let values = p.values(of: keys, in: 0)
        XCTAssertEqual(values, ["m1", "d1", "https://x.example/", "empty", nil, "composed", "decomposed", #"{"k":1}"#, nil, nil])
        for (key, value) in zip(keys, values) where !key.contains(".") && !key.isEmpty && key.utf8.allSatisfy({ $0 < 0x80 }) {
            XCTAssertEqual(p.value(key), value, key)
        }
    }

    /// The campaign id each platform's payload carries, for APNs payloads and FCM messages,
    /// JSON strings inside the payload included; configured paths come first.
    func testCampaignKeys() {
        func apns(_ json: String, extra: [String] = []) -> String? {
            CampaignID.first(PayloadReader(Array(json.utf8)), provider: .apns, extra: extra)
        }
        func fcm(_ json: String) -> String? { CampaignID.first(request: PayloadReader(Array(json.utf8)), provider: .fcm) }
        XCTAssertEqual(apns(#"{"aps":{},"_mId":"1","_dId":"adobe-7"}"#), "adobe-7")
        XCTAssertEqual(apns(#"{"aps":{},"moengage":{"cid":"moe-c_L_0","moe_campaign_id":"moe-1"}}"#), "moe-1")
        XCTAssertEqual(apns(#"{"aps":{},"moengage":{"cid":"moe-c_L_0"}}"#), "moe-c_L_0")
        XCTAssertEqual(apns(#"{"aps":{},"moe_campaign_id":"moe-2"}"#), "moe-2")
        XCTAssertEqual(apns(#"{"aps":{},"pw_msg":"1","p":"pw-hash"}"#), "pw-hash")
        XCTAssertEqual(apns(#"{"aps":{},"ab":{"c":"braze-c"}}"#), "braze-c")
        XCTAssertEqual(apns(#"{"aps":{},"custom":{"i":"os-uuid"}}"#), "os-uuid")
        XCTAssertEqual(apns(#"{"aps":{},"_dId":"adobe-7","meta":{"camp":"mine"}}"#, extra: ["meta.camp"]), "mine")
        XCTAssertNil(apns(#"{"aps":{"alert":"x"}}"#))
        XCTAssertEqual(fcm(#"{"message":{"token":"t","data":{"_dId":"adobe-8"}}}"#), "adobe-8")
        XCTAssertEqual(fcm(#"{"message":{"data":{"gcm_campaign_id":"000063766282_L_0"}}}"#), "000063766282_L_0")
        XCTAssertEqual(fcm(#"{"message":{"data":{"moe_cid_attr":"{\"moe_campaign_id\":\"moe-3\"}"}}}"#), "moe-3")
        XCTAssertEqual(fcm(#"{"message":{"topic":"news","data":{"moe_campaign_id":"moe-4"}}}"#), "moe-4")
        XCTAssertEqual(fcm(#"{"message":{"data":{"pw_msg":"1","p":"pw-2"}}}"#), "pw-2")
        XCTAssertEqual(fcm(#"{"message":{"data":{"_ab":"true","cid":"braze-2"}}}"#), "braze-2")
        XCTAssertEqual(fcm(#"{"message":{"data":{"custom":"{\"i\":\"os-2\"}"}}}"#), "os-2")
        XCTAssertEqual(fcm(#"{"message":{"notification":{"title":"x"},"fcm_options":{"analytics_label":"lbl"}}}"#), "lbl")
        XCTAssertEqual(fcm(#"{"message":{"android":{"fcm_options":{"analytics_label":"lbl-a"}}}}"#), "lbl-a")
        XCTAssertEqual(fcm(#"{"topic":"news","data":{"moe_campaign_id":"moe-5"}}"#), "moe-5", "the message itself")
        XCTAssertNil(fcm(#"{"message":{"token":"t"}}"#))
    }

    /// The campaign read from a gateway's tokens in place (`first(parsed:)`) equals the one read
    /// from a copy of them, for whole payloads and for a member of a larger document (FCM's
    /// `message`): escaped names, JSON inside strings, arrays, misses and configured paths.
    func testCampaignFromParsedTokensEqualsTheCopy() {
        let values = [
            #"{"aps":{},"_mId":"1","_dId":"adobe-7"}"#,
            #"{"aps":{},"moengage":{"cid":"moe-c_L_0"}}"#,
            #"{"aps":{},"_d\u0049d":"escaped-name"}"#,
            #"{"aps":{},"custom":"{\"i\":\"os-in-string\"}"}"#,
            #"{"aps":{},"meta":{"camp":["a","mine"]}}"#,
            #"{"aps":{"alert":"x"}}"#,
            #"{"token":"t","data":{"_dId":"adobe-8"}}"#,
            #"{"data":{"moe_cid_attr":"{\"moe_campaign_id\":\"moe-3\"}"}}"#,
            #"{"android":{"fcm_options":{"analytics_label":"lbl-a"}}}"#,
            #"{"message":{"data":{"p":"nested-message"}}}"#,
            #"{"message":"{\"data\":{\"cid\":\"braze-in-string\"}}"}"#,
            #"{"message":7}"#,
            #"{"token":"t"}"#,
            #"[{"_dId":"in-array"}]"#,
        ]
        var hits = 0
        for value in values {
            for prefix in ["", #"{"validate_only":false,"message":"#] {
                let document = Array((prefix + value + (prefix.isEmpty ? "" : "}")).utf8)
                let tokens = JSONTokenBuffer(capacity: 8)
                XCTAssertNil(document.withUnsafeBytes { JSONParser.parse($0, into: tokens) }, value)
                let start = prefix.utf8.count
                let parsed = ParsedJSON(bytes: document[start..<(start + value.utf8.count)], tokens: tokens)
                XCTAssertNotNil(parsed.root, value)
                for provider in [PushProvider.apns, .fcm, .webpush] {
                    for extra in [[], ["meta.camp.1"]] {
                        let copied = CampaignID.first(request: PayloadReader(parsed)!, provider: provider, extra: extra)
                        XCTAssertEqual(
                            CampaignID.first(parsed: parsed, provider: provider, extra: extra), copied, "\(provider) \(extra) \(value)")
                        if copied != nil { hits += 1 }
                        // The campaign read before, given back: the same answer, and a different
                        // one never stands in for it.
                        for last in [copied, "other", "", nil] {
                            XCTAssertEqual(
                                CampaignID.first(parsed: parsed, provider: provider, extra: extra, reusing: last), copied,
                                "\(provider) \(extra) \(value) reusing \(last ?? "nil")")
                        }
                    }
                }
            }
        }
        XCTAssertGreaterThan(hits, 40, "most documents carry a campaign for some provider")
        // The same campaign as the last request's: that String itself comes back, none is made.
        let campaign = "dev-fedcba9876543210fedcba9876543210"
        let payload = Array(#"{"aps":{"alert":"Hi Ann"},"_dId":"dev-fedcba9876543210fedcba9876543210"}"#.utf8)
        let buffer = JSONTokenBuffer(capacity: 8)
        XCTAssertNil(payload.withUnsafeBytes { JSONParser.parse($0, into: buffer) })
        let read = CampaignID.first(parsed: ParsedJSON(bytes: payload[...], tokens: buffer), provider: .apns, reusing: campaign)
        func storage(_ s: String?) -> UnsafePointer<UInt8>? { s?.utf8.withContiguousStorageIfAvailable { $0.baseAddress } ?? nil }
        XCTAssertEqual(read, campaign)
        XCTAssertEqual(storage(read), storage(campaign))
        let fresh = CampaignID.first(parsed: ParsedJSON(bytes: payload[...], tokens: buffer), provider: .apns)
        XCTAssertEqual(fresh, campaign)
        XCTAssertNotEqual(storage(fresh), storage(campaign))
        // A slice whose value has no container token (a string holding a document): read by
        // parsing the slice again, as before.
        let document = Array(#"{"a":"{\"_dId\":\"in-string\"}"}"#.utf8)
        let tokens = JSONTokenBuffer(capacity: 8)
        XCTAssertNil(document.withUnsafeBytes { JSONParser.parse($0, into: tokens) })
        let parsed = ParsedJSON(bytes: document[5..<(document.count - 1)], tokens: tokens)
        XCTAssertNil(parsed.root)
        XCTAssertEqual(CampaignID.first(parsed: parsed, provider: .apns), "in-string")
    }

    func testAdobeTestVectors() {
        XCTAssertEqual(AdobeIDs.hex("12345"), "3039")
        XCTAssertEqual(AdobeIDs.hex("-1"), "ffffffff")
        for n: Int64 in [
            0, 1, 9, 10, 15, 16, 255, 4095, 4096, 0xFFFF_FFFF, 0x1_0000_0000, Int64.max, -2_147_483_648, -2_147_483_649, Int64.min,
        ] {
            let expected =
                n >= 0
                ? String(n, radix: 16)
                : n >= Int64(Int32.min) ? String(UInt32(bitPattern: Int32(n)), radix: 16) : String(UInt64(bitPattern: n), radix: 16)
            XCTAssertEqual(AdobeIDs.hex(String(n)), expected, "\(n)")
        }
        XCTAssertEqual(AdobeIDs.hex("255"), "ff")
        XCTAssertEqual(AdobeIDs.hex("2147483647"), "7fffffff")
        XCTAssertEqual(AdobeIDs.hex("-2"), "fffffffe")
        XCTAssertEqual(AdobeIDs.hex("4294967296"), "100000000")
        XCTAssertEqual(AdobeIDs.hex("0b6c2b2e-4c1a-4f8e-9b1a-0123456789ab"), "0b6c2b2e-4c1a-4f8e-9b1a-0123456789ab")
        XCTAssertNil(AdobeIDs.hex("abc"))

        let c = TrackingConfig(preset: "adobe-campaign", url: "http://trk.example.com")
        let ios = #"{"aps":{"alert":"x","mutable-content":1},"_mId":"12345","_dId":"67890"}"#
        XCTAssertEqual(
            job(c, ctx(.receive, "ios", ios))?.request, TrackingRequest(method: "GET", url: "http://trk.example.com/r/?id=h3039,67890,1"))
        XCTAssertEqual(job(c, ctx(.open, "ios", ios))?.request.url, "http://trk.example.com/r/?id=h3039,67890,2")
        let fcm = #"{"token":"t","data":{"_mId":"-1","_dId":"d"}}"#
        XCTAssertEqual(job(c, ctx(.receive, "android", fcm))?.request.url, "http://trk.example.com/r/?id=hffffffff,d,1")
        XCTAssertNil(job(c, ctx(.receive, "ios", #"{"aps":{},"_mId":"1"}"#)), "needs _dId")
    }

    func testPushwoosh() throws {
        var c = TrackingConfig(preset: "pushwoosh", url: "http://pw.local")
        c.options = ["appCode": "ABCDE-12345", "apiToken": "secret"]
        let j = try XCTUnwrap(job(c, ctx(.receive, "android", #"{"data":{"pw_msg":"1","p":"hash1","md":"meta"}}"#)))
        XCTAssertEqual(j.request.method, "POST")
        XCTAssertEqual(j.request.url, "http://pw.local/json/1.3/messageDeliveryEvent")
        XCTAssertTrue(j.request.headers.contains { $0 == ("Authorization", "Token secret") })
        let body = PayloadReader(j.request.body)
        XCTAssertEqual(body.value("request.application"), "ABCDE-12345")
        XCTAssertEqual(body.value("request.hash"), "hash1")
        XCTAssertEqual(body.value("request.metaData"), "meta")
        XCTAssertEqual(body.value("request.device_type"), "3")
        XCTAssertEqual(job(c, ctx(.open, "ios", #"{"aps":{},"pw_msg":"1","p":"h"}"#))?.request.url, "http://pw.local/json/1.3/pushStat")
        XCTAssertNil(job(c, ctx(.receive, "android", #"{"data":{"p":"h"}}"#)), "needs pw_msg")
    }

    func testOneSignalReadsTheNestedCustomJSON() throws {
        var c = TrackingConfig(preset: "onesignal", url: "http://os.local")
        c.options = ["appId": "app-1"]
        let payload = #"{"data":{"custom":"{\"i\":\"0b6c2b2e-aaaa\",\"a\":{}}"}}"#
        let r = try XCTUnwrap(job(c, ctx(.receive, "android", payload))).request
        XCTAssertEqual(r.method, "PUT")
        XCTAssertEqual(r.url, "http://os.local/notifications/0b6c2b2e-aaaa/report_received")
        XCTAssertEqual(PayloadReader(r.body).value("app_id"), "app-1")
        let o = try XCTUnwrap(job(c, ctx(.open, "ios", #"{"aps":{},"custom":{"i":"n2"}}"#))).request
        XCTAssertEqual(o.url, "http://os.local/notifications/n2")
        XCTAssertEqual(PayloadReader(o.body).value("opened"), "true")
    }

    func testMoEngageAndBrazeAreBatched() throws {
        var m = TrackingConfig(preset: "moengage", url: "http://moe.local")
        m.options = ["appId": "APPID"]
        let payload =
            #"{"data":{"push_from":"moengage","gcm_campaign_id":"00063766282_L_0DTSDK1","moe_cid_attr":"{\"moe_campaign_id\":\"c9\",\"moe_campaign_name\":\"Spring\"}"}}"#
        let j = try XCTUnwrap(job(m, ctx(.receive, "android", payload)))
        let batch = try XCTUnwrap(j.batch)
        let item = PayloadReader(batch.item)
        XCTAssertEqual(item.value("EVENT_ACTION"), "NOTIFICATION_RECEIVED_MOE")
        XCTAssertEqual(item.value("N_I_E"), "1")
        XCTAssertEqual(item.value("EVENT_ATTRS.gcm_campaign_id"), "00063766282_L_0")
        XCTAssertEqual(item.value("EVENT_ATTRS.moe_campaign_id"), "c9")
        let r = batch.build([batch.item, batch.item])
        XCTAssertEqual(r.url, "http://moe.local/v2/sdk/report/APPID")
        XCTAssertEqual(PayloadReader(r.body).value("viewsCount"), "2")
        XCTAssertNil(job(m, ctx(.receive, "android", #"{"data":{"gcm_campaign_id":"x"}}"#)))

        var b = TrackingConfig(preset: "braze", url: "http://braze.local")
        b.options = ["apiKey": "k"]
        let br = #"{"data":{"_ab":"true","cid":"camp-1","bz_p_e":"true"}}"#
        let bj = try XCTUnwrap(job(b, ctx(.receive, "android", br)))
        XCTAssertEqual(PayloadReader(bj.batch!.item).value("name"), "pd")
        XCTAssertEqual(PayloadReader(bj.batch!.item).value("data.cid"), "camp-1")
        XCTAssertEqual(bj.batch!.build([bj.batch!.item]).url, "http://braze.local/api/v3/data")
        XCTAssertNil(job(b, ctx(.receive, "android", #"{"data":{"_ab":"true","cid":"c"}}"#)), "pd needs bz_p_e")
        XCTAssertNil(job(b, ctx(.receive, "ios", #"{"aps":{},"ab":{"c":"c"}}"#)), "pd is Android only")
        XCTAssertEqual(
            PayloadReader(try XCTUnwrap(job(b, ctx(.open, "ios", #"{"aps":{},"ab":{"c":"c2"}}"#))).batch!.item).value("name"), "pc")
        // bz_p_fn / bz_p_fx: delivery reported minutes later.
        let delayed = try XCTUnwrap(
            job(b, ctx(.receive, "android", #"{"data":{"_ab":"true","cid":"c","bz_p_e":"1","bz_p_fn":"2","bz_p_fx":"3"}}"#)))
        XCTAssertGreaterThanOrEqual(delayed.notBeforeMs - 1_800_000_000_123, 120_000)
        XCTAssertLessThanOrEqual(delayed.notBeforeMs - 1_800_000_000_123, 180_000)
    }

    func testWebhookTemplates() throws {
        let json =
            #"{"preset":"webhook","method":"POST","url":"http://hook.local/e/{event}?m={payload.data._mId|dec2hex}&t={device.token|urlencode}","headers":{"X-Sig":"{payload.data._dId|sha256}"},"body":"{{\"id\":{payload.data.custom.i|json},\"b\":\"{device.app|base64}\",\"u\":\"{payload.data._dId|upper}\"}}","when":"payload.data._mId"}"#
        let c = try TrackingConfig.parse(Array(json.utf8))
        let payload = #"{"data":{"_mId":"255","_dId":"abc","custom":"{\"i\":\"n-7\"}"}}"#
        let r = try XCTUnwrap(job(c, ctx(.receive, "android", payload))).request
        XCTAssertEqual(r.method, "POST")
        XCTAssertEqual(r.url, "http://hook.local/e/receive?m=ff&t=tok-1")
        XCTAssertEqual(r.headers.first?.1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), #"{"id":"n-7","b":"Y29tLmV4YW1wbGUuYXBw","u":"ABC"}"#)
        XCTAssertNil(job(c, ctx(.receive, "android", #"{"data":{}}"#)), "when not met")
        XCTAssertThrowsError(try TrackingConfig.parse(Array(#"{"preset":"nope","url":"http://x"}"#.utf8)))
        XCTAssertThrowsError(try TrackingConfig.parse(Array(#"{"preset":"adobe-campaign"}"#.utf8)))
        XCTAssertEqual(Templates.moengageTime(0), "1:1:1970:0:0:0")
        XCTAssertEqual(Templates.iso8601(1_800_000_000_123), "2027-01-15T08:00:00.123Z")
    }
}
