import PushCore
import Runtime
import Transport
import XCTest

@testable import Journal

/// The journal on its own: records written in group commits, read back by export, bounded queue.
final class JournalTests: XCTestCase {
    func record(_ i: Int, status: Int = 200, reason: String = "") -> RequestRecord {
        RequestRecord(
            atMs: 1_000 + Int64(i), provider: i % 2 == 0 ? .apns : .fcm, connection: 7, environment: "sandbox",
            token: Array("tok\(i)".utf8)[...], topic: Array("com.example.app".utf8)[...], status: status, reason: reason, latencyUs: 12,
            headers: HTTPFields([("apns-topic", "com.example.app"), ("authorization", "bearer secret")]),
            payload: Array(#"{"aps":{},"_dId":"c\#(i % 3)"}"#.utf8)[...], warnings: i == 0 ? ["w"] : [],
            notificationID: UUIDValue(high: UInt64(i), low: 7))
    }

    func testWritesAndExports() throws {
        let dir = "/tmp/pushemu-journal-test-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        let j = try Journal(
            path: dir + "/j.sqlite", durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max),
            campaignOf: { _, payload in
                let s = String(decoding: payload, as: UTF8.self)
                return s.contains("\"c1\"") ? "c1" : nil
            })
        j.start()
        for i in 0..<500 {
            j.append(record(i, status: i % 10 == 0 ? 410 : 200, reason: i % 10 == 0 ? "Unregistered" : ""), loop: nil) { _ in }
        }
        j.append(
            TrackingRecord(
                atMs: 2_000, preset: "adobe-campaign", event: "receive", token: "tok1", notificationID: "n1",
                method: "GET", url: "http://sink/r/?id=h1,2,1", status: 200, outcome: "succeeded", attempt: 1,
                latencyMs: 1.5, error: nil))
        j.stop()
        XCTAssertEqual(j.counts().requests, 500)
        XCTAssertEqual(j.counts().tracking, 1)
        XCTAssertEqual(j.statistics.committed, 501)
        XCTAssertGreaterThanOrEqual(j.statistics.batches, 1)
        var lines: [String] = []
        try Journal.export(path: dir + "/j.sqlite", sinceMs: 1_100) { lines.append($0) }
        XCTAssertEqual(lines.count, 400 + 1) // at_ms >= 1100: records 100...499, and the tracking attempt
        let first = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        XCTAssertEqual(first["type"] as? String, "request")
        XCTAssertEqual(first["status"] as? Int, 410)
        XCTAssertEqual(first["reason"] as? String, "Unregistered")
        XCTAssertEqual((first["headers"] as? [String: String])?["apns-topic"], "com.example.app")
        XCTAssertNil((first["headers"] as? [String: String])?["authorization"], "never the credentials")
        let c1 = lines.filter { $0.contains(#""campaign":"c1""#) }.count
        XCTAssertEqual(c1, (100..<500).filter { $0 % 3 == 1 }.count)
        XCTAssertTrue(lines.last!.contains(#""type":"tracking""#))
    }
}

extension JournalTests {
    /// A strict journal on disk writes through the coalescing VFS: many commits, well past the
    /// 4 MiB WAL checkpoint (so the checkpoint's writes to the database go through it too, in
    /// runs longer than the 120 KiB a write may carry), each answered only once committed, while
    /// another thread reads with SQLite's default VFS. Every record reads back, in order, from the
    /// running journal and from the file alone (as the CLI reads it).
    func testStrictOnDiskThroughTheCoalescingVFS() throws {
        let dir = "/tmp/pushemu-journal-strict-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        let path = dir + "/j.sqlite"
        let j = try Journal(
            path: path, durability: .strict, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        j.start()
        final class Box: @unchecked Sendable {
            var answered = 0
            var readerSaw = 0
            var stop = false
            let lock = NSLock()
        }
        let box = Box()
        let reader = Thread {
            while true {
                box.lock.lock()
                let stop = box.stop
                box.lock.unlock()
                if stop { break }
                var n = 0
                var last: Int64 = 0
                var ordered = true
                j.scan { e in
                    if case .request(let r) = e {
                        n += 1
                        ordered = ordered && r.atMs >= last
                        last = r.atMs
                    }
                    return true
                }
                box.lock.lock()
                box.readerSaw = max(box.readerSaw, ordered ? n : -1_000_000)
                box.lock.unlock()
                usleep(20_000)
            }
        }
        reader.start()
        let total = 3_000
        var payload = Array(#"{"aps":{"alert":"x"},"pad":""#.utf8)
        for k in 0..<4_000 { payload.append(UInt8(ascii: "a") + UInt8(k % 26)) } // ~4 KB, each record different
        payload += Array(#""}"#.utf8)
        for i in 0..<total {
            var r = record(i)
            payload[40] = UInt8(ascii: "a") + UInt8(i % 26)
            payload[41] = UInt8(ascii: "a") + UInt8(i / 26 % 26)
            r.payload = payload[...]
            j.append(r, loop: nil) { _ in
                box.lock.lock()
                box.answered += 1
                box.lock.unlock()
            }
            if i % 100 == 99 { usleep(2_000) } // several commits
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            box.lock.lock()
            let a = box.answered
            box.lock.unlock()
            if a == total { break }
            usleep(5_000)
        }
        box.lock.lock()
        box.stop = true
        box.lock.unlock()
        while !reader.isFinished { usleep(5_000) }
        XCTAssertEqual(box.answered, total)
        XCTAssertGreaterThanOrEqual(box.readerSaw, 0, "a concurrent reader saw records out of order")
        XCTAssertGreaterThan(j.statistics.batches, 5)
        XCTAssertEqual(j.statistics.failedCommits, 0)
        j.stop()
        var ids: [Int64] = []
        try Journal.scan(path: path) { e in
            if case .request(let r) = e {
                ids.append(r.atMs)
                XCTAssertEqual(r.payloadSize, payload.count)
            }
            return true
        }
        XCTAssertEqual(ids, (0..<total).map { 1_000 + Int64($0) })
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertGreaterThan(st.st_size, 4 << 20, "the WAL was checkpointed into the database")
    }

    /// The group-commit window: none is asked for below 8 records (the writer's loop skips it),
    /// 1 ms from there, 2 ms once a commit held 64 or more (strict), 10 ms always (relaxed).
    func testGroupCommitWindowWidensWithTheBatch() {
        XCTAssertEqual(Journal.windowNs(strict: true, lastBatch: 8), 1_000_000)
        XCTAssertEqual(Journal.windowNs(strict: true, lastBatch: 63), 1_000_000)
        XCTAssertEqual(Journal.windowNs(strict: true, lastBatch: 64), 2_000_000)
        XCTAssertEqual(Journal.windowNs(strict: true, lastBatch: 100_000), 2_000_000)
        XCTAssertEqual(Journal.windowNs(strict: false, lastBatch: 1), 10_000_000)
        XCTAssertEqual(Journal.windowNs(strict: false, lastBatch: 500), 10_000_000)
    }

    func testStrictAnswersOnlyAfterCommit() throws {
        let dir = "/tmp/pushemu-journal-answers-\(getpid())"
        mkdir(dir, 0o755)
        defer {
            for f in Files.list(dir) { unlink(dir + "/" + f) }
            rmdir(dir)
        }
        let j = try Journal(
            path: dir + "/j.sqlite", durability: .strict, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        final class Box: @unchecked Sendable {
            var done = 0
            let lock = NSLock()
        }
        let box = Box()
        for i in 0..<50 {
            j.append(record(i), loop: nil) { _ in
                box.lock.lock()
                box.done += 1
                box.lock.unlock()
            }
        }
        usleep(50_000)
        XCTAssertEqual(box.done, 0, "not started: nothing committed, nothing answered")
        j.start()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            box.lock.lock()
            let d = box.done
            box.lock.unlock()
            if d == 50 { break }
            usleep(5_000)
        }
        XCTAssertEqual(box.done, 50)
        XCTAssertEqual(j.counts().requests, 50)
        j.stop()
    }

    /// In memory, strict answers leave at once, and a read made after an answer sees its record:
    /// every read first has the writer commit what is queued (cutting its 10 ms window short).
    func testInMemoryStrictAnswersAtOnceAndReadsSeeEveryAnsweredRecord() throws {
        let j = try Journal(path: nil, durability: .strict, retention: .init(maxRecords: .max, maxAgeMs: .max), campaignOf: { _, _ in nil })
        final class Box: @unchecked Sendable {
            var done = 0
            let lock = NSLock()
        }
        let box = Box()
        j.append(record(0), loop: nil) { _ in
            box.lock.lock()
            box.done += 1
            box.lock.unlock()
        }
        XCTAssertEqual(box.done, 1, "answered at once, before the writer even started")
        XCTAssertEqual(j.counts().requests, 0, "no writer yet: a read cannot flush, and returns at once")
        j.start()
        XCTAssertEqual(j.counts().requests, 1)
        // Bursts, each read at once after the last answer: never a record short, never a wait of a window.
        var answered = 1
        for round in 0..<20 {
            for i in 0..<(round * 7 + 1) {
                j.append(record(answered + i), loop: nil) { _ in
                    box.lock.lock()
                    box.done += 1
                    box.lock.unlock()
                }
            }
            answered += round * 7 + 1
            box.lock.lock()
            XCTAssertEqual(box.done, answered)
            box.lock.unlock()
            let t0 = Clock.monotonicNanoseconds()
            var n = 0
            j.scan { e in
                if case .request = e { n += 1 }
                return true
            }
            XCTAssertEqual(n, answered, "round \(round)")
            XCTAssertLessThan(Clock.monotonicNanoseconds() - t0, 500_000_000)
        }
        XCTAssertEqual(j.report().all.totals.sent, answered)
        j.append(
            TrackingRecord(
                atMs: 2_000, preset: "adobe-campaign", event: "receive", token: "tok1", notificationID: "n1",
                method: "GET", url: "http://sink/r/?id=h1,2,1", status: 200, outcome: "succeeded", attempt: 1,
                latencyMs: 1.5, error: nil))
        XCTAssertEqual(j.counts().tracking, 1)
        XCTAssertEqual(j.statistics.writerNice, 0, "no answer waits on the writer: it keeps the default priority")
        j.stop()
        // Stopped: reads return at once with what was stored.
        XCTAssertEqual(j.counts().requests, answered)
    }
}

extension JournalTests {
    /// The segment encoding: repeated values cost a byte and decode to the same value; absent
    /// and empty stay distinct; tracking attempts keep every field.
    func testSegmentRoundTripAndRepeatedValuesCostLittle() throws {
        var e = SegmentEncoder(baseMs: 0)
        func add(_ r: RequestRecord) { e.append(r, maxPayload: Journal.maxPayload, campaignOf: { _, _ in nil }) }
        for i in 0..<100 { add(record(i, status: i == 7 ? 400 : 200, reason: i == 7 ? "BadDeviceToken" : "")) }
        var r = record(100)
        r.topic = nil
        r.notificationID = nil
        r.warnings = ["a", "b"]
        add(r)
        e.append(
            TrackingRecord(
                atMs: 5_000, preset: "braze", event: "open", token: "t", notificationID: "n", method: "POST",
                url: "https://x/y", status: 503, outcome: "retrying", attempt: 2, latencyMs: 12.345, error: "timeout", events: 3))
        var d = SegmentDecoder(e.bytes)
        var entries: [JournalEntry] = []
        while let x = d.next() { entries.append(x) }
        XCTAssertEqual(entries.count, 102)
        guard case .request(let first) = entries[0], case .request(let seventh) = entries[7], case .request(let last) = entries[100],
            case .tracking(let t) = entries[101]
        else { return XCTFail("kinds") }
        XCTAssertEqual(first.token, "tok0")
        XCTAssertEqual(first.topic, "com.example.app")
        XCTAssertEqual(first.headers.map(\.name), ["apns-topic"], "never authorization")
        XCTAssertEqual(first.warnings, ["w"])
        XCTAssertEqual(first.notificationID, UUIDValue(high: 0, low: 7).description)
        XCTAssertEqual(seventh.reason, "BadDeviceToken")
        XCTAssertEqual(seventh.status, 400)
        XCTAssertEqual(seventh.atMs, 1_007)
        XCTAssertNil(last.topic)
        XCTAssertNil(last.notificationID)
        XCTAssertEqual(last.warnings, ["a", "b"])
        XCTAssertEqual(String(decoding: last.payload, as: UTF8.self), #"{"aps":{},"_dId":"c1"}"#)
        XCTAssertEqual(t.atMs, 5_000)
        XCTAssertEqual(t.events, 3)
        XCTAssertEqual(t.latencyMs, 12.345, accuracy: 0.001)
        XCTAssertEqual(t.error, "timeout")
        XCTAssertEqual(t.outcome, "retrying")
        // Three payloads alternate: records after the first few are mostly token and id.
        XCTAssertLessThan(e.bytes.count / 101, 90, "bytes per record")
    }

    /// Tokens: lowercase hex of even length is packed to bytes and reads back exactly; every
    /// other form (uppercase, odd length, FCM, a stray non-hex byte at each position) is kept as
    /// text. Kept headers: only apns-*, x-*, content-type, in order, repeated ones cost a byte,
    /// and a list too large for the fast path still round-trips. Format 1 segments still read.
    func testTokenFormsHeadersAndFormatOne() throws {
        let hex = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"
        var tokens = [
            hex, hex.uppercased(), String(hex.dropLast()), "ab", "a", "", "dGhpc2lz:APA91bHPRgk-_x",
            String(repeating: "0f", count: 100),
        ]
        for k in [0, 1, 31, 62, 63] { // one non-hex (or uppercase) byte at several positions
            var b = Array(hex.utf8)
            b[k] = k % 2 == 0 ? UInt8(ascii: "g") : UInt8(ascii: "A")
            tokens.append(String(decoding: b, as: UTF8.self))
        }
        // Bytes next to the hex ranges (and a control byte), each in another eight-digit group.
        for (n, c) in ":/@`pGz\u{7f}\u{09}".utf8.enumerated() {
            var b = Array(hex.utf8)
            b[(n * 9) % 64] = c
            tokens.append(String(decoding: b, as: UTF8.self))
        }
        var e = SegmentEncoder(baseMs: 0)
        var big = HTTPFields()
        for i in 0..<400 { big.add(name: "x-h\(i)", value: String(repeating: "v", count: 40)) }
        for (i, t) in tokens.enumerated() {
            var r = record(i)
            r.token = Array(t.utf8)[...]
            r.headers = HTTPFields([
                ("content-type", "application/json"), ("authorization", "bearer x"), ("apns-priority", "10"),
                ("content-length", "9"), ("x-trace", ""), ("apns-topic", i < 3 ? "a" : "b"), ("ap", "short"),
            ])
            if i == 5 { r.headers = HTTPFields() }
            if i == 6 { r.headers = big }
            e.append(r, maxPayload: Journal.maxPayload, campaignOf: { _, _ in nil })
            e.append(
                TrackingRecord(
                    atMs: Int64(i), preset: "adobe-campaign", event: "receive", token: t, notificationID: "n", method: "GET",
                    url: "http://x/r", status: 200, outcome: "succeeded", attempt: 1, latencyMs: 1, error: nil))
        }
        var d = SegmentDecoder(e.bytes)
        var requests: [StoredRequest] = []
        var tracked: [TrackingRecord] = []
        while let x = d.next() {
            switch x {
            case .request(let r): requests.append(r)
            case .tracking(let t): tracked.append(t)
            }
        }
        XCTAssertFalse(d.malformed)
        XCTAssertEqual(requests.map(\.token), tokens)
        XCTAssertEqual(tracked.map(\.token), tokens)
        let small = [("content-type", "application/json"), ("apns-priority", "10"), ("x-trace", "")]
        XCTAssertEqual(requests[0].headers.map { "\($0.name)=\($0.value)" }, (small + [("apns-topic", "a")]).map { "\($0.0)=\($0.1)" })
        XCTAssertEqual(requests[4].headers.map { "\($0.name)=\($0.value)" }, (small + [("apns-topic", "b")]).map { "\($0.0)=\($0.1)" })
        XCTAssertTrue(requests[5].headers.isEmpty)
        XCTAssertEqual(requests[6].headers.count, 400)
        XCTAssertEqual(requests[6].headers[399].name, "x-h399")
        XCTAssertEqual(requests[7].headers.count, 4)

        // The packed hex token takes 34 bytes, not 65: a record to a new 64-hex token with
        // everything else repeated takes 66 (98 with the token as text).
        var f = SegmentEncoder(baseMs: 0)
        for i in 0..<100 {
            var r = record(0)
            r.token = Array(String(format: "%064x", i).utf8)[...]
            f.append(r, maxPayload: Journal.maxPayload, campaignOf: { _, _ in nil })
        }
        XCTAssertLessThan(f.bytes.count / 100, 70)

        // A format-1 segment (tokens as plain literals) written by an earlier version.
        var v1: [UInt8] = [UInt8(ascii: "P"), UInt8(ascii: "J"), 1, 0]
        v1 += [1, 2, 0, 7, 200, 1, 12, 2] // request, +1 ms, apns, conn 7, status 200, 12 µs, payload 2 bytes
        v1 += [9] + Array("sandbox".utf8) // environment
        v1 += [1, 1, 2, 4] + Array("{}".utf8) // no topic, reason; empty headers; payload "{}"
        v1 += [1, 1] // no warnings, campaign
        v1 += [3] + Array("abc".utf8) + [0] // token "abc", no id
        var old = SegmentDecoder(v1)
        guard case .request(let r1)? = old.next() else { return XCTFail("format 1 request") }
        XCTAssertEqual(r1.token, "abc")
        XCTAssertEqual(r1.environment, "sandbox")
        XCTAssertEqual(r1.status, 200)
        XCTAssertEqual(String(decoding: r1.payload, as: UTF8.self), "{}")
        XCTAssertNil(old.next())
        XCTAssertFalse(old.malformed)
    }

    func testRetentionByRecordsAndAge() throws {
        let now = Clock.nowMs()
        let j = try Journal(
            path: nil, durability: .relaxed, retention: .init(maxRecords: 1_000, maxAgeMs: 3_600_000), campaignOf: { _, _ in nil })
        j.start()
        for i in 0..<10 { // ten commits of 300 records each, the oldest two hours old
            for k in 0..<300 {
                var r = record(k)
                r.atMs = i == 0 ? now - 7_200_000 : now
                j.append(r, loop: nil) { _ in }
            }
            usleep(30_000)
        }
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline && j.counts().requests > 1_300 { usleep(50_000) }
        j.stop()
        let kept = j.counts().requests
        XCTAssertGreaterThanOrEqual(kept, 1_000, "never below the limit")
        XCTAssertLessThan(kept, 3_000, "pruned down to the limit, by whole commits")
        var oldest = Int64.max
        j.scan { e in
            oldest = min(oldest, e.atMs)
            return true
        }
        XCTAssertGreaterThanOrEqual(oldest, now, "the two-hour-old records went first")
        XCTAssertGreaterThan(j.statistics.pruned, 0)
    }

    func testReportFromRecords() throws {
        let j = try Journal(
            path: nil, durability: .relaxed, retention: .init(maxRecords: .max, maxAgeMs: .max),
            campaignOf: { _, payload in
                let s = String(decoding: payload, as: UTF8.self)
                return s.contains("\"c1\"") ? "c1" : (s.contains("\"c2\"") ? "c2" : nil)
            })
        j.start()
        for i in 0..<30 {
            j.append(record(i, status: i % 5 == 0 ? 410 : 200, reason: i % 5 == 0 ? "Unregistered" : ""), loop: nil) { _ in }
        }
        j.append(
            TrackingRecord(
                atMs: 2_000, preset: "adobe-campaign", event: "receive", token: "tok1",
                notificationID: UUIDValue(high: 1, low: 7).description, method: "GET", url: "u", status: 200,
                outcome: "succeeded", attempt: 1, latencyMs: 1, error: nil))
        j.stop()
        let r = j.report()
        let c1 = try XCTUnwrap(r.campaigns.first { $0.campaign == "c1" })
        XCTAssertEqual(c1.totals.sent, 10)
        XCTAssertEqual(c1.rejected, ["Unregistered": 2]) // 10 and 25
        XCTAssertEqual(c1.tracking["receive"]?.succeeded, 1)
        XCTAssertEqual(c1.rate("receive"), 1.0 / 8.0)
        XCTAssertEqual(r.all.totals.sent, 30)
        XCTAssertEqual(r.all.totals.rejected, 6)
        XCTAssertEqual(j.report(campaign: "c2").campaigns.map(\.campaign), ["c2"])
        XCTAssertTrue(r.render(.html).contains("<svg"))
        XCTAssertTrue(r.render(.text).contains("Unregistered: 2"))
    }
}

extension JournalTests {
    /// A campaign's FCM message to many devices differs only in its token: its campaign is read
    /// once, not for every record; a message that differs elsewhere, another provider, a token
    /// too short to be one, an APNs payload or a payload cut at the size limit is read again.
    func testACampaignsMessageToManyTokensIsReadOnce() throws {
        var e = SegmentEncoder(baseMs: 0)
        let calls = Box()
        func add(token: String, payload: String, provider: PushProvider = .fcm, maxPayload: Int = Journal.maxPayload) {
            let r = RequestRecord(
                atMs: 1_000, provider: provider, connection: 1, environment: "demo", token: Array(token.utf8)[...], topic: nil,
                status: 200, reason: "", latencyUs: 5, headers: HTTPFields([]), payload: Array(payload.utf8)[...], warnings: [],
                notificationID: nil)
            e.append(r, maxPayload: maxPayload) { _, p in
                calls.n += 1
                return String(decoding: p, as: UTF8.self).contains("spring") ? "spring" : "winter"
            }
        }
        func message(_ token: String, _ campaign: String) -> String {
            #"{"token":"\#(token)","notification":{"title":"Sale"},"data":{"campaign_id":"\#(campaign)"}}"#
        }
        let tokens = (0..<6).map { "fcm\($0):APA91b" + String(repeating: "\($0)", count: 40) }
        for t in tokens { add(token: t, payload: message(t, "spring")) }
        XCTAssertEqual(calls.n, 1, "one message to six tokens")
        add(token: tokens[0], payload: message(tokens[0], "winter"))
        add(token: tokens[1], payload: message(tokens[1], "winter"))
        XCTAssertEqual(calls.n, 2, "the message changed once")
        add(token: tokens[2], payload: message(tokens[2], "winter"), provider: .apns)
        XCTAssertEqual(calls.n, 3, "another provider")
        add(token: "short", payload: message("short", "winter"))
        add(token: "tiny", payload: message("tiny", "winter"))
        XCTAssertEqual(calls.n, 5, "a token shorter than 32 bytes is not looked for")
        add(token: tokens[5], payload: message(tokens[5], "winter"), provider: .apns)
        add(token: tokens[0], payload: message(tokens[0], "winter"), provider: .apns)
        XCTAssertEqual(calls.n, 7, "an APNs payload never names its token (it is in the path): not looked for")
        add(token: tokens[3], payload: message(tokens[3], "spring"), maxPayload: 40)
        add(token: tokens[4], payload: message(tokens[4], "spring"), maxPayload: 40)
        XCTAssertEqual(calls.n, 9, "a payload cut at the limit is read whole each time")
        var d = SegmentDecoder(e.bytes)
        var campaigns: [String?] = []
        while let x = d.next() { if case .request(let r) = x { campaigns.append(r.campaign) } }
        XCTAssertEqual(campaigns, Array(repeating: "spring", count: 6) + Array(repeating: "winter", count: 7) + ["spring", "spring"])
    }

    final class Box: @unchecked Sendable { var n = 0 }
}
