import PushCore
import Transport
import XCTest

final class NotificationLogTests: XCTestCase {
    func note(_ token: String, _ t: Int64, topic: String = "com.a") -> PushNotification {
        var rng = FastRandom(seed: UInt64(t))
        return PushNotification(id: UUIDValue.random(&rng), provider: .apns, receivedAtMs: t, environment: "sandbox",
                                token: ArraySlice(token.utf8), topic: ArraySlice(topic.utf8), headers: HTTPFields([("apns-topic", topic)]),
                                payload: Array("{\"aps\":{}}".utf8), payloadIsJSON: true, warnings: [])
    }

    func testShardedAppendQueryOrderAndEviction() {
        let log = NotificationLog(shards: 2, capacity: 4)
        log.append(note("a", 1), shard: 0)
        log.append(note("b", 2), shard: 1)
        log.append(note("a", 3), shard: 1)
        log.append(note("c", 4, topic: "com.b"), shard: 0)
        var f = NotificationLog.Filter()
        XCTAssertEqual(log.query(f).map(\.receivedAtMs), [1, 2, 3, 4])
        f.token = "a"
        XCTAssertEqual(log.query(f).map(\.receivedAtMs), [1, 3])
        f = NotificationLog.Filter()
        f.topic = "com.b"
        XCTAssertEqual(log.query(f).map(\.receivedAtMs), [4])
        f = NotificationLog.Filter()
        f.limit = 2
        XCTAssertEqual(log.query(f).map(\.receivedAtMs), [3, 4], "the newest, oldest first")
        log.append(note("d", 5), shard: 0)   // shard 0 holds 2: evicts t=1
        XCTAssertEqual(log.evicted, 1)
        XCTAssertEqual(log.query(NotificationLog.Filter()).map(\.receivedAtMs), [2, 3, 4, 5])
        log.removeAll()
        XCTAssertEqual(log.count, 0)
    }

    func testJSONShape() {
        let j = note("abc", 7).json
        XCTAssertTrue(j.hasPrefix("{\"id\":\""), j)
        XCTAssertTrue(j.contains("\"provider\":\"apns\",\"receivedAt\":7"), j)
        XCTAssertTrue(j.contains("\"headers\":{\"apns-topic\":\"com.a\"}"), j)
        XCTAssertTrue(j.contains("\"payload\":{\"aps\":{}}"), j)
    }
}
