import Observation
import PushCore
import Transport
import XCTest

final class NotificationLogTests: XCTestCase {
    func note(_ token: String, _ t: Int64, topic: String = "com.a") -> PushNotification {
        var rng = FastRandom(seed: UInt64(t))
        return PushNotification(
            id: UUIDValue.random(&rng), provider: .apns, receivedAtMs: t, environment: "sandbox",
            token: ArraySlice(token.utf8), topic: ArraySlice(topic.utf8), headers: HTTPFields([("apns-topic", topic)]),
            payload: Array("{\"aps\":{}}".utf8), payloadIsJSON: true, warnings: [])
    }

    func testShardedAppendQueryOrderAndEviction() {
        let log = NotificationLog(shards: 2, capacity: 4)
        log.add(note("a", 1), shard: 0)
        log.add(note("b", 2), shard: 1)
        log.add(note("a", 3), shard: 1)
        log.add(note("c", 4, topic: "com.b"), shard: 0)
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
        log.add(note("d", 5), shard: 0) // shard 0 holds 2: evicts t=1
        XCTAssertEqual(log.evicted, 1)
        XCTAssertEqual(log.query(NotificationLog.Filter()).map(\.receivedAtMs), [2, 3, 4, 5])
        log.removeAll()
        XCTAssertEqual(log.count, 0)
    }

    /// Removed records are skipped by reads and leave the count, and when they age out of the
    /// ring (the removal kept beside each record's length, not in the record) the count stays
    /// right, through the ring's wrap and after records are removed twice over.
    func testRemovedRecordsAgeOutCounted() {
        let log = NotificationLog(shards: 1, capacity: 4)
        for t in 1...4 { log.add(note(t % 2 == 0 ? "even" : "odd", Int64(t)), shard: 0) }
        var f = NotificationLog.Filter()
        f.token = "even"
        XCTAssertEqual(log.remove(f), 2)
        XCTAssertEqual(log.remove(f), 0, "a removed record is not removed again")
        XCTAssertEqual(log.count, 2)
        XCTAssertEqual(log.query(NotificationLog.Filter()).map(\.receivedAtMs), [1, 3])
        for t in 5...6 { log.add(note("odd", Int64(t)), shard: 0) } // evicts t=1 (kept) and t=2 (removed)
        XCTAssertEqual(log.count, 3)
        XCTAssertEqual(log.query(NotificationLog.Filter()).map(\.receivedAtMs), [3, 5, 6])
        for t in 7...12 { log.add(note(t == 9 ? "even" : "odd", Int64(t)), shard: 0) }
        XCTAssertEqual(log.count, 4)
        XCTAssertEqual(log.remove(f), 1)
        XCTAssertEqual(log.count, 3)
        for t in 13...20 { log.add(note("odd", Int64(t)), shard: 0) }
        XCTAssertEqual(log.count, 4, "the removed t=9 aged out and is no longer subtracted")
        XCTAssertEqual(log.query(NotificationLog.Filter()).map(\.receivedAtMs), [17, 18, 19, 20])
    }

    /// `query` and `page` decode only what each shard can contribute (ranked by the records'
    /// headers); their answers equal filtering and ordering the whole log, for every filter,
    /// bound, direction and limit, with receive times out of order and tied across shards.
    func testLimitedReadsEqualReadingEverything() {
        let log = NotificationLog(shards: 3, capacity: 3_000)
        var rng = FastRandom(seed: 11)
        let tokens = ["t1", "t2", "t3"]
        let topics = ["com.a", "com.b"]
        for i in 0..<600 {
            let t = Int64(1_000 + Int(rng.next(below: 40)))
            var n = note(tokens[Int(rng.next(below: 3))], t, topic: topics[Int(rng.next(below: 2))])
            n.id = UUIDValue(high: rng.next(), low: UInt64(i))
            log.add(n, shard: Int(rng.next(below: 3)))
        }
        var gone = NotificationLog.Filter()
        gone.token = "t3"
        gone.matches = { $0.id.low % 5 == 0 }
        XCTAssertGreaterThan(log.remove(gone), 0)
        var everything = NotificationLog.Filter()
        everything.limit = .max
        let all = log.query(everything)
        XCTAssertEqual(all.count, log.count)
        XCTAssertTrue(all.allSatisfy { !($0.token.elementsEqual("t3".utf8) && $0.id.low % 5 == 0) })
        var filters: [NotificationLog.Filter] = [NotificationLog.Filter()]
        var f = NotificationLog.Filter()
        f.token = "t2"
        filters.append(f)
        f = NotificationLog.Filter()
        f.topic = "com.b"
        f.matches = { $0.id.high % 3 == 0 }
        filters.append(f)
        f = NotificationLog.Filter()
        f.id = all[17].id
        filters.append(f)
        f = NotificationLog.Filter()
        f.provider = .fcm
        filters.append(f)
        for var filter in filters {
            let admitted = all.filter { NotificationLog.admits(filter, $0) }
            for limit in [0, 1, 7, 50, 1_000] {
                filter.limit = limit
                XCTAssertEqual(log.query(filter).map(\.id), admitted.suffix(limit).map(\.id), "query limit \(limit)")
                let byKey = admitted.sorted { NotificationLog.PageKey($0) < NotificationLog.PageKey($1) }
                let bounds: [(NotificationLog.PageKey?, NotificationLog.PageKey?)] = [
                    (nil, nil), (NotificationLog.PageKey(atMs: 1_010, id: UUIDValue(high: 0, low: 0)), nil),
                    (nil, NotificationLog.PageKey(atMs: 1_030, id: UUIDValue(high: .max, low: .max))),
                    (
                        NotificationLog.PageKey(atMs: 1_005, id: UUIDValue(high: 1 << 63, low: 0)),
                        NotificationLog.PageKey(atMs: 1_020, id: UUIDValue(high: 0, low: 0))
                    ),
                ]
                for (after, before) in bounds {
                    let inRange = byKey.filter { n in
                        let k = NotificationLog.PageKey(n)
                        return (after.map { $0 < k } ?? true) && (before.map { k < $0 } ?? true)
                    }
                    XCTAssertEqual(
                        log.page(filter, after: after, before: before, newest: true).map(\.id), inRange.suffix(limit).map(\.id))
                    XCTAssertEqual(
                        log.page(filter, after: after, before: before, newest: false).map(\.id), inRange.prefix(limit).map(\.id))
                }
            }
        }
    }

    /// FCM's message id, `0:<µs>%<16 hex>`, against the format spelled out with the standard
    /// library: the receive time as microseconds plus the id's high half mod 1000, then the
    /// high half as 16 lowercase hex digits, for times from 0 to the largest that fits.
    func testFCMMessageIDFormat() {
        let ids = [
            UUIDValue(high: 0, low: 0), UUIDValue(high: 0x0123_4567_89ab_cdef, low: 1), UUIDValue(high: .max, low: .max),
            UUIDValue(high: 999, low: 7), UUIDValue(high: 7, low: 0), UUIDValue(high: 42, low: 0),
        ]
        // Every count of digits, odd and even (the digits are written two at a time).
        var times: [Int64] = [0, 1, 999, 1_764_000_000_123, -5, Int64.max / 1000]
        var power: Int64 = 1
        for _ in 0..<16 {
            times += [power - 1, power, power + 1]
            power *= 10
        }
        for id in ids {
            for t in times {
                let us = UInt64(max(0, t)) &* 1000 &+ id.high % 1000
                let hex = String(id.high, radix: 16)
                let expected = "0:\(us)%" + String(repeating: "0", count: 16 - hex.count) + hex
                XCTAssertEqual(PushNotification.fcmMessageID(id, receivedAtMs: t), expected, "id \(id.high) at \(t)")
                var out: [UInt8] = Array("projects/p/messages/".utf8)
                PushNotification.appendFCMMessageID(id, receivedAtMs: t, to: &out)
                XCTAssertEqual(String(decoding: out, as: UTF8.self), "projects/p/messages/" + expected)
            }
        }
    }

    func testJSONShape() {
        let j = note("abc", 7).json
        XCTAssertTrue(j.hasPrefix("{\"id\":\""), j)
        XCTAssertTrue(j.contains("\"provider\":\"apns\",\"receivedAt\":7"), j)
        XCTAssertTrue(j.contains("\"headers\":{\"apns-topic\":\"com.a\"}"), j)
        XCTAssertTrue(j.contains("\"payload\":{\"aps\":{}}"), j)
    }
}

extension NotificationLog {
    func add(_ n: PushNotification, shard: Int) {
        append(
            shard: shard, id: n.id, provider: n.provider, receivedAtMs: n.receivedAtMs, environment: n.environment,
            token: n.token, topic: n.topic, headers: n.headers, payload: n.payload[...], payloadIsJSON: n.payloadIsJSON,
            warnings: n.warnings)
    }
}

final class ArenaTests: XCTestCase {
    /// Thousands of records of random sizes through a small ring: what is kept is always the
    /// newest records, in order, intact; everything else is counted as evicted.
    func testRingKeepsNewestIntactRecords() {
        let log = NotificationLog(shards: 1, capacity: 40) // 40 records, 80 KiB
        var rng = FastRandom(seed: 3)
        var all: [(Int64, Int)] = []
        for t in 0..<3000 {
            let size = Int(rng.next(below: 5000))
            let payload = Array(repeating: UInt8(ascii: "a") + UInt8(t % 26), count: size)
            log.append(
                shard: 0, id: UUIDValue(high: UInt64(t), low: 1), provider: t % 2 == 0 ? .apns : .fcm,
                receivedAtMs: Int64(t), environment: "sandbox", token: ArraySlice("tok\(t)".utf8),
                topic: t % 3 == 0 ? nil : ArraySlice("com.t".utf8),
                headers: HTTPFields([("apns-topic", "x"), (":path", "/p"), ("authorization", "secret")]),
                payload: payload[...], payloadIsJSON: false, warnings: t % 5 == 0 ? ["w\(t)"] : [])
            all.append((Int64(t), size))
            var f = NotificationLog.Filter()
            f.limit = 1000
            let got = log.query(f)
            XCTAssertLessThanOrEqual(got.count, 40)
            XCTAssertEqual(got.map(\.receivedAtMs), Array(all.suffix(got.count).map(\.0)), "newest, in order (t=\(t))")
            guard let last = got.last else { return XCTFail("empty at \(t)") }
            XCTAssertEqual(last.payload.count, size)
            XCTAssertEqual(last.payload.first, size > 0 ? UInt8(ascii: "a") + UInt8(t % 26) : nil)
            XCTAssertEqual(last.id.high, UInt64(t))
            XCTAssertEqual(last.token.utf8String, "tok\(t)")
            XCTAssertEqual(last.topic == nil, t % 3 == 0)
            XCTAssertEqual(last.headers.pairs.map(\.0), ["apns-topic"], "pseudo-headers and authorization are not kept")
            XCTAssertEqual(last.warnings, t % 5 == 0 ? ["w\(t)"] : [])
            XCTAssertEqual(UInt64(got.count) + log.evicted, UInt64(t + 1))
        }
        var f = NotificationLog.Filter()
        f.provider = .fcm
        XCTAssertTrue(log.query(f).allSatisfy { $0.provider == .fcm })
    }
    /// A topic or header longer than a record's u16 lengths (HPACK allows a 65,536-byte field,
    /// and a raised header list limit lets one through) is kept cut to 65,535 bytes: no trap,
    /// and the record and the one after it read back whole.
    func testOverlongTopicAndHeaderAreCutNotTrapped() {
        let log = NotificationLog(shards: 1, capacity: 1000) // 1 MiB: room for the long record
        let long = String(repeating: "t", count: 70_000)
        let value = String(repeating: "v", count: 65_536)
        log.append(
            shard: 0, id: UUIDValue(high: 1, low: 1), provider: .apns, receivedAtMs: 1, environment: "sandbox",
            token: ArraySlice(String(repeating: "a", count: 66_000).utf8), topic: ArraySlice(long.utf8),
            headers: HTTPFields([("apns-topic", long), ("x-big", value), ("apns-priority", "5")]),
            payload: Array(#"{"aps":{}}"#.utf8)[...], payloadIsJSON: true, warnings: ["w"])
        log.append(
            shard: 0, id: UUIDValue(high: 2, low: 2), provider: .apns, receivedAtMs: 2, environment: "sandbox",
            token: ArraySlice("next".utf8), topic: nil, headers: HTTPFields(), payload: Array("{}".utf8)[...],
            payloadIsJSON: true, warnings: [])
        let got = log.query(NotificationLog.Filter())
        XCTAssertEqual(got.map(\.receivedAtMs), [1, 2])
        guard let first = got.first else { return XCTFail("nothing kept") }
        XCTAssertEqual(first.topic?.count, 65_535)
        XCTAssertEqual(first.token.count, 65_535)
        XCTAssertEqual(first.headers.pairs.map(\.0), ["apns-topic", "x-big", "apns-priority"])
        XCTAssertEqual(first.headers.pairs.map(\.1.utf8.count), [65_535, 65_535, 1])
        XCTAssertEqual(first.headers.pairs.last?.1, "5")
        XCTAssertEqual(first.payload, Array(#"{"aps":{}}"#.utf8))
        XCTAssertEqual(first.warnings, ["w"])
        XCTAssertEqual(got.last?.token.utf8String, "next")
    }
}
