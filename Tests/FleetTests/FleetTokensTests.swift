import PushCore
import Tracking
import XCTest

@testable import Fleet

/// Fleet tokens: realistic shapes, O(1) recognition, no false positives, reproducible state.
final class FleetTokensTests: XCTestCase {
    func store() -> DeviceStore { DeviceStore(dispatcher: nil) }

    /// The same seed, platform, app and count give the same tokens in any process on any
    /// machine, whatever the fleet's number or the other fleets: these are pinned (a change here
    /// breaks every platform that imported a fleet's tokens).
    func testTokensFollowFromSeedPlatformAppAndCountAlone() throws {
        let a = store()
        _ = try a.createFleet(
            platform: .ios, app: "other", count: 5, environment: "sandbox", seed: 1, behavior: nil, tracking: nil, labels: [], nowMs: 1)
        let ios = try a.createFleet(
            platform: .ios, app: "com.example.app", count: 1_000_000, environment: "sandbox", seed: 7, behavior: nil, tracking: nil,
            labels: [], nowMs: 1)
        XCTAssertEqual(ios.number, 2)
        XCTAssertEqual(a.token(ios, index: 0), "21f5f8b8f949f90cc0a5a410c2b5b0cf802e1a517c9f7372add2a81e18e69207")
        XCTAssertEqual(a.token(ios, index: 1), "a6156a54876d57182a11140f9494572392f53914486f7de4d29f37a5ab9f338a")
        XCTAssertEqual(a.token(ios, index: 999_999), "acef80a267698315fc79656f4d3485303727ab8fd3418970cbb8010135e39985")
        let b = store()
        let android = try b.createFleet(
            platform: .android, app: "com.example", count: 1_000_000, environment: "p", seed: 7, behavior: nil, tracking: nil, labels: [],
            nowMs: 9)
        XCTAssertEqual(
            b.token(android, index: 0),
            "8vqSFFjYmpY4nXsage4F5v:APA91bbB2cso0TNx4bOZ2nk6d8WF5iFr2WxhhuGiQ3UygVXAMoIaEdYDBAIkXMVJtOk9Rsw4X4vQk3AYJW6bI8DiJJeFGliWzPtEdbwI5jQ6OKa9vTe9s7IZGY7a0nXMnJQwTD_wkA2R"
        )
        // The same in another store where it is the first fleet; another count, other tokens.
        let c = store()
        let again = try c.createFleet(
            platform: .ios, app: "com.example.app", count: 1_000_000, environment: "production", seed: 7, behavior: nil, tracking: nil,
            labels: [], nowMs: 5)
        XCTAssertEqual(c.token(again, index: 1), a.token(ios, index: 1))
        XCTAssertEqual(c.device(token: a.token(ios, index: 1))?.fleetIndex, 1)
        let fewer = try c.createFleet(
            platform: .ios, app: "com.example.app", count: 999_999, environment: "sandbox", seed: 7, behavior: nil, tracking: nil,
            labels: [], nowMs: 5)
        XCTAssertNotEqual(c.token(fewer, index: 1), c.token(again, index: 1))
        // The twin of a fleet (same four) would have its tokens: refused, naming it.
        XCTAssertThrowsError(
            try c.createFleet(
                platform: .ios, app: "com.example.app", count: 999_999, environment: "sandbox", seed: 7, behavior: nil, tracking: nil,
                labels: [], nowMs: 5)
        ) { XCTAssertTrue("\($0)".contains("fleet-2 has the same seed, platform, app and count"), "\($0)") }
        // Without a seed: a random one, below 2^53 (exact in JavaScript), shown and reproducible.
        let random = try c.createFleet(
            platform: .android, app: "r", count: 10, environment: nil, seed: nil, behavior: nil, tracking: nil, labels: [], nowMs: 5)
        XCTAssertLessThan(random.seed, 1 << 53)
        let replay = try store().createFleet(
            platform: .android, app: "r", count: 10, environment: nil, seed: random.seed, behavior: nil, tracking: nil, labels: [], nowMs: 5
        )
        XCTAssertEqual(store().token(replay, index: 3), c.token(random, index: 3))
    }

    func testTokensLookRealAndAreRecognised() throws {
        let s = store()
        let ios = try s.createFleet(
            platform: .ios, app: "com.example.app", count: 10_000_000, environment: "sandbox", seed: 7,
            behavior: nil, tracking: nil, labels: [], nowMs: 1)
        let android = try s.createFleet(
            platform: .android, app: "com.example.android", count: 1_000_000, environment: "proj-a",
            seed: 8, behavior: nil, tracking: nil, labels: [], nowMs: 1)
        for i in [0, 1, 2, 999_999, 9_999_999] {
            let t = s.token(ios, index: i)
            XCTAssertEqual(t.utf8.count, 64)
            XCTAssertTrue(t.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
            XCTAssertEqual(s.device(token: t)?.fleetIndex, i)
            XCTAssertEqual(s.status(token: Array(t.utf8)[...], platform: .ios), .installed(app: "com.example.app", environment: "sandbox"))
        }
        for i in [0, 5, 999_999] {
            let t = s.token(android, index: i)
            XCTAssertEqual(t.utf8.count, 163)
            let parts = t.split(separator: ":")
            XCTAssertEqual(parts.count, 2)
            XCTAssertEqual(parts[0].count, 22)
            XCTAssertTrue(parts[1].hasPrefix("APA91b"))
            XCTAssertEqual(s.device(token: t)?.fleetIndex, i)
            XCTAssertEqual(s.device(token: t)?.environment, "proj-a")
        }
        // Distinct tokens, and nothing else is taken for a member.
        XCTAssertEqual(Set(s.tokens(ios, offset: 0, limit: 10_000)).count, 10_000)
        var forged = Array(s.token(ios, index: 3).utf8)
        forged[63] = forged[63] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        XCTAssertNil(s.status(token: forged[...], platform: .ios))
        XCTAssertNil(s.status(token: Array(String(repeating: "ab", count: 32).utf8)[...], platform: .ios))
        XCTAssertNil(s.status(token: Array(s.token(ios, index: 3).utf8)[...], platform: .android))
        // Tokens past the fleet's count are not members.
        XCTAssertEqual(s.tokens(ios, offset: 9_999_998, limit: 10).count, 2)
    }

    func testUninstalledRateIsReproducible() throws {
        let s = store()
        var b = Behavior()
        b.uninstalledRate = 0.03
        let f = try s.createFleet(
            platform: .ios, app: "a.b", count: 100_000, environment: "sandbox", seed: 42, behavior: b,
            tracking: nil, labels: [], nowMs: 5)
        let n = (0..<100_000).filter { f.startsUninstalled($0) }.count
        XCTAssertGreaterThan(n, 2700) // 3% within about 5 standard deviations
        XCTAssertLessThan(n, 3300)
        let g = try store().createFleet(
            platform: .ios, app: "a.b", count: 100_000, environment: "sandbox", seed: 42, behavior: b,
            tracking: nil, labels: [], nowMs: 5)
        XCTAssertEqual((0..<1000).map { f.startsUninstalled($0) }, (0..<1000).map { g.startsUninstalled($0) })
        let i = try XCTUnwrap((0..<1000).first { f.startsUninstalled($0) })
        XCTAssertEqual(s.status(token: Array(s.token(f, index: i).utf8)[...], platform: .ios), .uninstalled(atMs: 5))
    }

    func testTenMillionDeviceFleetCostsNoMemory() throws {
        let s = store()
        let t0 = Date()
        let f = try s.createFleet(
            platform: .android, app: "x.y", count: 10_000_000, environment: nil, seed: nil, behavior: nil,
            tracking: nil, labels: [], nowMs: 0)
        XCTAssertLessThan(Date().timeIntervalSince(t0), 0.1)
        XCTAssertEqual(s.recordCount, 0)
        // A deviation (uninstall) materialises exactly one record.
        _ = s.uninstall(token: s.token(f, index: 123), atMs: 9)
        XCTAssertEqual(s.recordCount, 1)
        XCTAssertEqual(s.device(token: s.token(f, index: 123))?.uninstalledAtMs, 9)
    }

    /// The tokens built in place are the tokens the first (array-building) implementation made:
    /// a fleet's tokens never change between versions. The reference below is that implementation.
    func testTokensAreTheReferenceImplementations() {
        func tail(_ secret: UInt64, _ index: Int, _ n: Int) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: n)
            var ctr: UInt64 = 0
            var k = 0
            while k < n {
                var w = FleetTokens.mix(secret ^ FleetTokens.mix(UInt64(index) &+ ctr &* 0x632B_E59B_D9B4_E019))
                for _ in 0..<8 where k < n {
                    out[k] = UInt8(truncatingIfNeeded: w)
                    w >>= 8
                    k += 1
                }
                ctr += 1
            }
            return out
        }
        let hex = Array("0123456789abcdef".utf8)
        func apns(_ c: FleetTokens, _ fleet: Int, _ secret: UInt64, _ index: Int) -> String {
            var out = [UInt8](repeating: 0, count: 64)
            var h = c.header(fleet: fleet, index: index)
            var k = 0
            for _ in 0..<8 {
                let b = Int(h >> 56)
                out[k] = hex[b >> 4]
                out[k + 1] = hex[b & 15]
                k += 2
                h <<= 8
            }
            for b in tail(secret, index, 24) {
                out[k] = hex[Int(b >> 4)]
                out[k + 1] = hex[Int(b & 15)]
                k += 2
            }
            return String(decoding: out, as: UTF8.self)
        }
        func fcm(_ c: FleetTokens, _ fleet: Int, _ secret: UInt64, _ index: Int) -> String {
            let h = c.header(fleet: fleet, index: index)
            let t = tail(secret, index, 110)
            var bits: [UInt8] = []
            var acc: UInt64 = h
            for _ in 0..<10 {
                bits.append(UInt8(acc >> 58))
                acc <<= 6
            }
            bits.append(UInt8((h & 0xF) << 2) | (t[0] >> 6))
            for i in 0..<11 { bits.append(t[1 + i] & 63) }
            var s = bits.map { FleetTokens.b64[Int($0)] }
            s += Array(":APA91b".utf8)
            for i in 0..<134 { s.append(FleetTokens.b64[Int(t[12 + (i % 98)] >> 2 ^ UInt8(i & 63)) & 63]) }
            return String(decoding: s, as: UTF8.self)
        }
        var r = FastRandom(seed: 42)
        for _ in 0..<200 {
            let c = FleetTokens(secret: (r.next(), r.next()))
            let fleet = Int(r.next(below: 1 << 16))
            let secret = r.next()
            let index = Int(r.next(below: 1 << 40))
            let a = c.token(.ios, fleet: fleet, secret: secret, index: index)
            let f = c.token(.android, fleet: fleet, secret: secret, index: index)
            XCTAssertEqual(a, apns(c, fleet, secret, index))
            XCTAssertEqual(f, fcm(c, fleet, secret, index))
            XCTAssertTrue(c.matches(Array(a.utf8)[...], platform: .ios, fleet: fleet, secret: secret, index: index))
            XCTAssertTrue(c.matches(Array(f.utf8)[...], platform: .android, fleet: fleet, secret: secret, index: index))
            XCTAssertFalse(c.matches(Array(a.utf8)[...], platform: .ios, fleet: fleet, secret: secret, index: index + 1))
            XCTAssertFalse(c.matches(Array(a.utf8)[...], platform: .ios, fleet: fleet, secret: secret &+ 1, index: index))
            XCTAssertFalse(
                c.matches(Array(a.uppercased().utf8)[...], platform: .ios, fleet: fleet, secret: secret, index: index), "compared as sent")
            XCTAssertFalse(c.matches(Array(f.utf8.dropLast())[...], platform: .android, fleet: fleet, secret: secret, index: index))
        }
    }

    /// Fleets are bounded (a token's header has 24 bits for the fleet number): the one past the
    /// limit is refused, and the last one allowed still has recognisable tokens.
    func testFleetCountIsBounded() throws {
        let s = store()
        var last: FleetSpec?
        for _ in 0..<DeviceStore.maxFleets {
            last = try s.createFleet(
                platform: .ios, app: "a", count: 10, environment: "sandbox", seed: nil,
                behavior: nil, tracking: nil, labels: [], nowMs: 1)
        }
        XCTAssertThrowsError(
            try s.createFleet(
                platform: .ios, app: "a", count: 10, environment: "sandbox", seed: nil,
                behavior: nil, tracking: nil, labels: [], nowMs: 1))
        let f = try XCTUnwrap(last)
        XCTAssertEqual(s.device(token: s.token(f, index: 9))?.fleetIndex, 9)
        s.removeAll()
        XCTAssertNoThrow(
            try s.createFleet(
                platform: .ios, app: "a", count: 10, environment: "sandbox", seed: nil,
                behavior: nil, tracking: nil, labels: [], nowMs: 1))
    }
}

extension FleetTokensTests {
    /// An Android fleet member is found from its Firebase installation id (its token's first 22
    /// characters) without a record; a forged or other fleet's installation id is not.
    func testInstallationIDFindsItsFleetMember() throws {
        let s = store()
        let fleet = try s.createFleet(
            platform: .android, app: "com.example", count: 1000, environment: "demo", seed: 7, behavior: nil, tracking: nil,
            labels: [], nowMs: 0)
        for index in [0, 1, 499, 999] {
            let token = s.token(fleet, index: index)
            let fid = Array(token.utf8.prefix(22))[...]
            XCTAssertEqual(s.registrationToken(forInstallation: fid), token, "member \(index)")
        }
        var forged = Array(s.token(fleet, index: 5).utf8.prefix(22))
        forged[21] = forged[21] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertNil(s.registrationToken(forInstallation: forged[...]))
        XCTAssertNil(s.registrationToken(forInstallation: Array("short".utf8)[...]))
        XCTAssertNil(s.registrationToken(forInstallation: Array("cAAAAAAAAAAAAAAAAAAAAA".utf8)[...]))
    }
}
