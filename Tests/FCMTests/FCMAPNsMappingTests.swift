import FCM
import Foundation
import XCTest

/// What an iOS app's device receives for an FCM message: the APNs notification FCM makes of it.
final class FCMAPNsMappingTests: XCTestCase {
    func payload(_ mapping: FCMAPNsMapping) throws -> [String: Any] {
        try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(mapping.payload)) as? [String: Any],
            String(decoding: mapping.payload, as: UTF8.self))
    }

    func testNotificationDataAndImageBecomeAnAPNsPayload() throws {
        let message = #"""
            {"token":"x","notification":{"title":"Sale","body":"50% off","image":"https://example.com/a.png"},
             "data":{"_mId":"42","deep_link":"app://sale"},
             "apns":{"headers":{"apns-priority":"5","apns-collapse-id":"sale","apns-expiration":"1900000000"},
                     "payload":{"aps":{"badge":3,"sound":"default"},"campaign":{"id":7}}}}
            """#
        let m = FCMAPNsMapping.map(message: Array(message.utf8)[...], messageID: "0:1%abc")
        let p = try payload(m)
        let aps = try XCTUnwrap(p["aps"] as? [String: Any])
        XCTAssertEqual((aps["alert"] as? [String: String]), ["title": "Sale", "body": "50% off"])
        XCTAssertEqual(aps["mutable-content"] as? Int, 1)
        XCTAssertEqual(aps["badge"] as? Int, 3)
        XCTAssertEqual(aps["sound"] as? String, "default")
        XCTAssertEqual(p["_mId"] as? String, "42")
        XCTAssertEqual(p["deep_link"] as? String, "app://sale")
        XCTAssertEqual((p["campaign"] as? [String: Int])?["id"], 7)
        XCTAssertEqual((p["fcm_options"] as? [String: String])?["image"], "https://example.com/a.png")
        XCTAssertEqual(p["gcm.message_id"] as? String, "0:1%abc")
        XCTAssertTrue(m.mutableContent)
        XCTAssertFalse(m.contentAvailable)
        XCTAssertEqual(m.priority, 5)
        XCTAssertEqual(m.collapseID, "sale")
        XCTAssertEqual(m.expiration, 1_900_000_000)
        XCTAssertNil(m.liveActivityToken)
    }

    func testApnsOverridesWinAndLiveActivityTokenIsRead() throws {
        let message = #"""
            {"token":"x","notification":{"title":"Mapped"},
             "apns":{"fcmOptions":{"image":"https://example.com/b.png"},"liveActivityToken":"abcd",
                     "payload":{"aps":{"alert":{"title":"Override"},"content-available":1}}}}
            """#
        let m = FCMAPNsMapping.map(message: Array(message.utf8)[...], messageID: "0:2%def")
        let aps = try XCTUnwrap(try payload(m)["aps"] as? [String: Any])
        XCTAssertEqual(aps["alert"] as? [String: String], ["title": "Override"])
        XCTAssertEqual(aps["content-available"] as? Int, 1)
        XCTAssertTrue(m.contentAvailable)
        XCTAssertEqual(m.liveActivityToken, "abcd")
        XCTAssertEqual((try payload(m)["fcm_options"] as? [String: String])?["image"], "https://example.com/b.png")
    }

    func testDataOnlyMessageHasAnEmptyAps() throws {
        let m = FCMAPNsMapping.map(message: Array(#"{"topic":"t","data":{"k":"v"}}"#.utf8)[...], messageID: "0:3%0")
        let p = try payload(m)
        XCTAssertEqual((p["aps"] as? [String: Any])?.isEmpty, true)
        XCTAssertEqual(p["k"] as? String, "v")
        XCTAssertFalse(m.mutableContent)
        XCTAssertFalse(m.contentAvailable)
    }
}
