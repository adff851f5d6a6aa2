import FCM
import PushCore
import Runtime
import Transport
import XCTest

/// The send validator as a pure function: one table row per rule, each with the status, the
/// top-level message (or a part of it), the FcmError code and the field violation FCM answers with.
final class FCMValidationTests: XCTestCase {
    static let token = "e" + String(repeating: "1", count: 21) + ":APA91b" + String(repeating: "Tok_-9", count: 23)

    struct Row {
        let name: String
        let body: String
        /// nil: accepted.
        let message: String?
        var errorCode: FCMErrorCode? = .invalidArgument
        var field: String? = nil
        var noDetails = false
    }

    static func msg(_ fields: String) -> String { #"{"message":{"token":"\#(token)"\#(fields.isEmpty ? "" : ",")\#(fields)}}"# }

    static let rows: [Row] = [
        // Accepted shapes.
        Row(name: "minimal token message", body: msg(""), message: nil),
        Row(
            name: "snake_case and camelCase names",
            body: msg(
                #""android":{"collapse_key":"a","restrictedPackageName":"com.x","directBootOk":true},"fcmOptions":{"analyticsLabel":"l1"}"#),
            message: nil),
        Row(
            name: "enums in any case",
            body: msg(
                #""android":{"priority":"high","notification":{"notificationPriority":"priority_max","visibility":"Public","proxy":"deny"}}"#
            ), message: nil),
        Row(name: "enum by number", body: msg(#""android":{"priority":1}"#), message: nil),
        Row(
            name: "durations and timestamps",
            body: msg(
                #""android":{"ttl":"3.5s","notification":{"event_time":"2026-11-29T10:00:00.123456Z","vibrate_timings":["0.5s","1s"],"light_settings":{"color":{"red":1,"green":0.5,"blue":"0","alpha":1},"light_on_duration":"1s","light_off_duration":"2.25s"}}}"#
            ), message: nil),
        Row(name: "validate_only and validateOnly", body: #"{"validateOnly":true,"message":{"topic":"news"}}"#, message: nil),
        Row(name: "null fields are defaults", body: msg(#""notification":null,"android":{"ttl":null}"#), message: nil),
        Row(name: "topic with /topics/ prefix", body: #"{"message":{"topic":"/topics/news-1_a.b~c%2"}}"#, message: nil),
        Row(name: "condition", body: #"{"message":{"condition":"'a' in topics && ('b' in topics || 'c' in topics)"}}"#, message: nil),
        Row(name: "fid target", body: #"{"message":{"fid":"cAbCdEfGhIjKlMnOpQrStU"}}"#, message: nil),
        Row(
            name: "webpush and apns configs",
            body: msg(
                #""webpush":{"headers":{"TTL":"60","Urgency":"high"},"notification":{"title":"t","actions":[]},"fcm_options":{"link":"https://example.com/x"}},"apns":{"headers":{"apns-priority":"5","apns-push-type":"background"},"payload":{"aps":{"content-available":1},"k":"v"},"live_activity_token":"abc"}"#
            ), message: nil),
        Row(name: "data at the 4096-byte limit", body: msg(#""data":{"k":"\#(String(repeating: "x", count: 4095))"}"#), message: nil),

        // ESF proto3-JSON errors: no FcmError, BadRequest violations.
        Row(
            name: "unknown field in message", body: msg(#""x":1"#),
            message: #"Invalid JSON payload received. Unknown name "x" at 'message': Cannot find field."#, errorCode: nil, field: "message"),
        Row(
            name: "unknown field nested", body: msg(#""android":{"prio":"high"}"#),
            message: #"Invalid JSON payload received. Unknown name "prio" at 'message.android': Cannot find field."#, errorCode: nil,
            field: "message.android"),
        Row(
            name: "unknown top-level field", body: #"{"msg":{}}"#,
            message: #"Invalid JSON payload received. Unknown name "msg": Cannot find field."#, errorCode: nil),
        Row(
            name: "data value not a string", body: msg(#""data":{"a":"1","b":12}"#),
            message: "Invalid value at 'message.data[1].value' (TYPE_STRING), 12", errorCode: nil, field: "message.data[1].value"),
        Row(
            name: "bool given a string", body: #"{"validate_only":"yes","message":{"topic":"a"}}"#,
            message: #"Invalid value at 'validate_only' (TYPE_BOOL), "yes""#, errorCode: nil, field: "validate_only"),
        Row(
            name: "bad enum value", body: msg(#""android":{"priority":"urgent"}"#),
            message:
                #"Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "urgent""#,
            errorCode: nil, field: "message.android.priority"),
        Row(
            name: "bad duration syntax", body: msg(#""android":{"ttl":"10m"}"#),
            message: #"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), "10m""#, errorCode: nil,
            field: "message.android.ttl"),
        Row(
            name: "bad timestamp", body: msg(#""android":{"notification":{"event_time":"yesterday"}}"#),
            message: "Invalid value at 'message.android.notification.event_time' (type.googleapis.com/google.protobuf.Timestamp)",
            errorCode: nil),
        Row(
            name: "int32 out of range", body: msg(#""android":{"notification":{"notification_count":4294967296}}"#),
            message: "Invalid value at 'message.android.notification.notification_count' (TYPE_INT32), 4294967296", errorCode: nil),
        Row(
            name: "object on a scalar", body: msg(#""notification":{"title":{"a":1}}"#),
            message: "Invalid value at 'message.notification.title' (TYPE_STRING), Starting an object on a scalar field", errorCode: nil),
        Row(
            name: "list on a scalar", body: msg(#""notification":{"body":["a"]}"#),
            message:
                #"Invalid JSON payload received. Unknown name "body" at 'message.notification': Proto field is not repeating, cannot start list."#,
            errorCode: nil),
        Row(
            name: "message field given a string", body: msg(#""android":"high""#),
            message: #"Invalid value at 'message.android' (type.googleapis.com/google.firebase.fcm.v1.AndroidConfig), "high""#,
            errorCode: nil),
        Row(
            name: "two targets (oneof)", body: #"{"message":{"topic":"a","condition":"'b' in topics"}}"#,
            message: "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set 'condition'", errorCode: nil,
            field: "message"),
        Row(name: "syntax error", body: #"{"message":{"topic":"a",}}"#, message: "Invalid JSON payload received.", errorCode: nil),
        Row(name: "not an object", body: #"["message"]"#, message: "Invalid JSON payload received. Expected an object", errorCode: nil),
        Row(
            name: "struct given an array", body: msg(#""apns":{"payload":[1]}"#),
            message: "Invalid JSON payload received. Unknown name \"payload\" at 'message.apns'", errorCode: nil),

        // FCM's own rules.
        Row(name: "no target", body: #"{"message":{"data":{"a":"b"}}}"#, message: "Recipient of the message is not set.", field: "message"),
        Row(name: "no message", body: #"{}"#, message: "Recipient of the message is not set.", field: "message"),
        Row(
            name: "malformed token", body: #"{"message":{"token":"not-a-token"}}"#,
            message: "The registration token is not a valid FCM registration token", field: "message.token"),
        Row(name: "bad topic", body: #"{"message":{"topic":"news!"}}"#, message: "Invalid topic name", field: "message.topic"),
        Row(
            name: "condition with six topics",
            body:
                #"{"message":{"condition":"'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics"}}"#,
            message: "at most 5", field: "message.condition"),
        Row(
            name: "condition syntax", body: #"{"message":{"condition":"'a' in topics &&"}}"#, message: "Invalid condition expression",
            field: "message.condition"),
        Row(
            name: "condition missing 'in topics'", body: #"{"message":{"condition":"'a' && 'b' in topics"}}"#,
            message: "Invalid condition expression", field: "message.condition"),
        Row(name: "bad fid", body: #"{"message":{"fid":"short"}}"#, message: "Firebase installation ID", field: "message.fid"),
        Row(
            name: "reserved data key from", body: msg(#""data":{"from":"x"}"#), message: "Invalid data payload key: from",
            field: "message.data"),
        Row(
            name: "reserved data key google.*", body: msg(#""data":{"google.c.a":"x"}"#), message: "Invalid data payload key",
            field: "message.data"),
        Row(
            name: "reserved key in android.data", body: msg(#""android":{"data":{"gcm.n.e":"1"}}"#), message: "Invalid data payload key",
            field: "message.android.data"),
        Row(name: "ttl above four weeks", body: msg(#""android":{"ttl":"2419201s"}"#), message: "TTL", field: "message.android.ttl"),
        Row(name: "negative ttl", body: msg(#""android":{"ttl":"-1s"}"#), message: "TTL", field: "message.android.ttl"),
        Row(
            name: "bad colour", body: msg(#""android":{"notification":{"color":"red"}}"#), message: "#rrggbb",
            field: "message.android.notification.color"),
        Row(
            name: "http link", body: msg(#""webpush":{"fcm_options":{"link":"http://example.com"}}"#), message: "HTTPS",
            field: "message.webpush.fcm_options.link"),
        Row(
            name: "bad webpush Urgency", body: msg(#""webpush":{"headers":{"Urgency":"asap"}}"#), message: "Urgency",
            field: "message.webpush.headers"),
        Row(
            name: "bad analytics label", body: msg(#""fcm_options":{"analytics_label":"has space"}"#), message: "analytics label",
            field: "message.fcm_options.analytics_label"),
        Row(
            name: "long analytics label",
            body: msg(#""android":{"fcm_options":{"analytics_label":"\#(String(repeating: "a", count: 51))"}}"#),
            message: "analytics label", field: "message.android.fcm_options.analytics_label"),
        Row(
            name: "bad apns-priority", body: msg(#""apns":{"headers":{"apns-priority":"7"}}"#), message: "apns-priority",
            field: "message.apns.headers"),
        Row(
            name: "bad apns-push-type", body: msg(#""apns":{"headers":{"apns-push-type":"loud"}}"#), message: "apns-push-type",
            field: "message.apns.headers"),
        Row(
            name: "bad apns-expiration", body: msg(#""apns":{"headers":{"apns-expiration":"soon"}}"#), message: "apns-expiration",
            field: "message.apns.headers"),
        Row(
            name: "long apns-collapse-id", body: msg(#""apns":{"headers":{"apns-collapse-id":"\#(String(repeating: "c", count: 65))"}}"#),
            message: "apns-collapse-id", field: "message.apns.headers"),
        Row(
            name: "data-only iOS push at priority 10",
            body: msg(#""apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"content-available":1}}}"#), message: "apns-priority 5",
            field: "message.apns.headers"),
        // Size: bare 400 without details, as captured from the real service.
        Row(
            name: "data over 4096 bytes", body: msg(#""data":{"k":"\#(String(repeating: "x", count: 4096))"}"#),
            message: "Request contains an invalid argument.", errorCode: nil, noDetails: true),
        Row(
            name: "topic message over 2048 bytes",
            body: #"{"message":{"topic":"a","data":{"k":"\#(String(repeating: "x", count: 2048))"}}}"#,
            message: "Request contains an invalid argument.", errorCode: nil, noDetails: true),
        Row(
            name: "notification keys count too",
            body: msg(
                #""notification":{"title":"\#(String(repeating: "t", count: 2000))","body":"\#(String(repeating: "b", count: 2092))"}"#),
            message: "Request contains an invalid argument.", errorCode: nil, noDetails: true),
        Row(
            name: "apns payload over 4096 bytes",
            body: msg(#""apns":{"payload":{"aps":{"alert":"\#(String(repeating: "a", count: 4100))"}}}"#),
            message: "Request contains an invalid argument.", errorCode: nil, noDetails: true),
    ]

    func testEveryRule() {
        let scratch = FCMScratch()
        let parser = FCMMessageParser()
        for row in Self.rows {
            let result = parser.parse(Array(row.body.utf8), scratch: scratch)
            switch (result, row.message) {
            case (.success, nil): continue
            case (.success, let expected?):
                XCTFail("\(row.name): accepted, expected an error containing \(expected)")
            case (.failure(let e), nil):
                XCTFail("\(row.name): rejected with \(e.message)")
            case (.failure(let e), let expected?):
                XCTAssertEqual(e.httpStatus, 400, row.name)
                XCTAssertEqual(e.status, "INVALID_ARGUMENT", row.name)
                XCTAssertTrue(e.message.contains(expected), "\(row.name): \(e.message)")
                XCTAssertEqual(e.errorCode, row.errorCode, row.name)
                if let f = row.field { XCTAssertEqual(e.violations.first?.field, f, row.name) }
                if row.noDetails {
                    XCTAssertFalse(e.json.contains("details"), row.name)
                } else {
                    XCTAssertFalse(e.violations.isEmpty, "\(row.name): no BadRequest violation")
                }
                // The envelope parses as JSON.
                XCTAssertTrue(Array(e.json.utf8).withUnsafeBytes { JSONParser.isValid($0) }, row.name)
            }
        }
    }

    /// proto3 JSON durations: whole seconds, fractions truncated, every malformed form refused.
    func testDurationSyntax() {
        let cases: [(String, Int64?)] = [
            ("3600s", 3600), ("3.5s", 3), ("-1s", -1), ("0s", 0), ("-0.5s", 0), ("1.000000001s", 1),
            ("315576000000s", 315_576_000_000), ("s", nil), ("-s", nil), ("1.s", nil), (".5s", nil), ("1..5s", nil),
            ("10m", nil), ("1s1", nil), ("--1s", nil), ("1-s", nil), ("1.0000000001s", nil), ("1234567890123s", nil),
            ("315576000001s", nil), ("", nil), (" 1s", nil), ("999999999999s", nil), ("000000000001s", 1),
            ("0000000000001s", nil), ("1.123456789s", 1), ("-315576000000s", -315_576_000_000), ("1.5", nil), ("1.5ss", nil),
            ("1e3s", nil), ("+1s", nil), ("1 s", nil), ("-", nil), ("5s", 5), ("-.5s", nil),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(FCMFormats.durationSeconds(Array(text.utf8)), expected, text)
            XCTAssertEqual(FCMFormats.durationSeconds(Array(text.utf8)[...]), expected, text)
            XCTAssertEqual(Array(text.utf8).withUnsafeBytes { FCMFormats.durationSeconds($0) }, expected, text)
        }
    }

    func testParseResultDescribesTheMessage() throws {
        let body = Array(Self.msg(#""data":{"ab":"cd"},"notification":{"title":"xyz"}"#).utf8)
        let m = try FCMMessageParser().parse(body, scratch: FCMScratch()).get()
        XCTAssertFalse(m.validateOnly)
        guard case .token(let r) = m.target else { return XCTFail("not a token target") }
        XCTAssertEqual(String(decoding: body[r], as: UTF8.self), Self.token)
        XCTAssertEqual(m.size, 2 + 2 + 5 + 3) // keys and values of data and notification
        XCTAssertEqual(body[m.messageRange].first, UInt8(ascii: "{"))
        XCTAssertEqual(body[m.messageRange].last, UInt8(ascii: "}"))

        var p = FCMMessageParser()
        p.sizeMode = .message
        let m2 = try p.parse(body, scratch: FCMScratch()).get()
        XCTAssertEqual(m2.size, m.messageRange.count)
    }

    func testSeveralProblemsAreReportedTogether() {
        let body = Self.msg(#""x":1,"data":{"a":2},"android":{"priority":"no"}"#)
        guard case .failure(let e) = FCMMessageParser().parse(Array(body.utf8), scratch: FCMScratch()) else { return XCTFail() }
        XCTAssertEqual(e.violations.count, 3)
        XCTAssertEqual(e.message.split(separator: "\n").count, 3)
    }

    func testAPNsPayloadWarningsOrStrict() throws {
        let body = Array(Self.msg(#""apns":{"payload":{"aps":{"badge":"3"}}}"#).utf8)
        let m = try FCMMessageParser().parse(body, scratch: FCMScratch()).get()
        XCTAssertFalse(m.warnings.isEmpty)
        var strict = FCMMessageParser()
        strict.strictAPNsPayload = true
        guard case .failure(let e) = strict.parse(body, scratch: FCMScratch()) else { return XCTFail("strict accepted") }
        XCTAssertEqual(e.violations.first?.field, "message.apns.payload")
    }

    /// The JSON test suite's invalid documents all give ESF's parse error, never a crash.
    func testConformanceCorpusNeverCrashes() throws {
        // The vendored JSONTestSuite corpus, beside this target's folder.
        let tests = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/"))
        let dir = tests + "/Fixtures/JSONTestSuite/test_parsing"
        let names = Files.list(dir).filter { $0.hasSuffix(".json") }
        XCTAssertGreaterThan(names.count, 300, "the JSONTestSuite must be in \(dir)")
        let scratch = FCMScratch()
        for n in names {
            guard let bytes = Files.read(dir + "/" + n) else { return XCTFail("cannot read \(n)") }
            if case .success = FCMMessageParser().parse(bytes, scratch: scratch) {
                XCTAssertFalse(n.hasPrefix("n_"), "\(n) accepted")
            }
        }
    }
}
