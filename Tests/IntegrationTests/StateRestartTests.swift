import Foundation
import TestSupport
import XCTest

/// The state log through the real binary: state built the way users build it (the admin API,
/// the CLI, firebase-admin, curl over HTTP/2 with client certificates), then a restart (or a
/// kill -9), and every view read back whole, text for text.
final class StateRestartTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static let certs = root + "/Certs"
    static var python: String { root + "/.venv/bin/python" }
    static let manageHost = "api-manage-broadcast.sandbox.push.apple.com"

    var dir = ""
    var data: String { dir + "/data" }
    /// A provider token whose key `pushemu credentials apns` dropped into the data directory.
    var jwt = ""

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-state-it-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        jwt = try makeProviderToken(in: dir, keyStore: data)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func serve(_ extra: [String] = []) throws -> ServerProcess {
        try ServerProcess(["--in-memory=false", "--data-dir", data] + extra)
    }

    @discardableResult
    func admin(_ s: ServerProcess, _ method: String, _ path: String, _ body: String? = nil, expect: Int? = nil) throws -> String {
        let (code, text) = try adminRequest(s, method, path, body)
        if let expect { XCTAssertEqual(code, expect, "\(method) \(path): \(text)") }
        return text
    }

    func object(_ text: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], text)
    }

    /// curl over HTTP/2 and TLS with the development client certificate.
    func curlTLS(_ url: String, host: String, port: Int, _ extra: [String] = []) throws -> String {
        let r = try runCommand(
            "curl",
            [
                "-sS", "--http2", "--cacert", Self.certs + "/ca.pem", "--cert", Self.certs + "/apns-sandbox-client.pem",
                "--key", Self.certs + "/apns-sandbox-client-key.pem", "--resolve", "\(host):\(port):127.0.0.1",
            ] + extra + [url], timeout: 15)
        return r.stdout + r.stderr
    }

    func push(_ s: ServerProcess, token: String, payload: String = #"{"aps":{"alert":"hi"}}"#, topic: String = "com.example.app") throws
        -> String
    {
        try runCommand(
            "curl",
            [
                "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: \(topic)",
                "-H", "authorization: bearer \(jwt)", "-H",
                "apns-push-type: \(topic.hasSuffix(".liveactivity") ? "liveactivity" : "alert")",
                "-d", payload, "http://127.0.0.1:\(s.httpPort)/3/device/\(token)",
            ], timeout: 10
        ).stdout
    }

    /// Every view a user reads, as text (scenarios without their clock-driven fields).
    func views(_ s: ServerProcess, manage: Int, devices: [String]) throws -> [String: String] {
        var out: [String: String] = [:]
        // First: reading the channels is a request an APNs rule sees (and counts).
        out["channels"] = try curlTLS(
            "https://\(Self.manageHost):\(manage)/1/apps/com.example.app/all-channels", host: Self.manageHost, port: manage)
        for path in ["/emulator/v1/apns/keys", "/emulator/v1/fcm/service-accounts", "/emulator/v1/fleets", "/emulator/v1/faults"] {
            out[path] = try admin(s, "GET", path, expect: 200)
        }
        out["/emulator/v1/devices"] = try admin(s, "GET", "/emulator/v1/devices?limit=10000", expect: 200)
        for f in ["fleet-1", "fleet-2"] {
            out[f] = try admin(s, "GET", "/emulator/v1/fleets/\(f)", expect: 200)
            out[f + "/tokens"] = try admin(s, "GET", "/emulator/v1/fleets/\(f)/tokens?limit=20", expect: 200)
        }
        for t in devices {
            out[t] = try admin(s, "GET", "/emulator/v1/devices/\(t)", expect: 200)
            out[t + "/activities"] = try admin(s, "GET", "/emulator/v1/devices/\(t)/activities")
        }
        let scenarios = try admin(s, "GET", "/emulator/v1/scenarios", expect: 200)
        out["scenarios"] = scenarios.replacing(/"elapsedMs":\d+/, with: "").replacing(/"state":"\w+"/, with: "")
        return out
    }

    /// Every store, built through the admin API and real clients, reads back the same after a
    /// restart: keys, service accounts, the OAuth secret (an access token issued before still
    /// works), fleets with tracking and a paused registration, devices with every setting, a
    /// rotation, an uninstall, a notification held offline, Live Activities and push-to-start
    /// tokens, topic subscriptions made by firebase-admin, channels made over HTTP/2 with their
    /// stored broadcast, rules with their counts, a scenario.
    func testEveryStoreReadsBackTheSameAfterARestart() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.python), "run Scripts/install-deps to create .venv")
        let sink = try TrackingSink()
        defer { sink.stop() }
        let manage = try freeLocalPort()
        var manage2 = try freeLocalPort()
        while manage2 == manage { manage2 = try freeLocalPort() }
        let flags = ["--apns-manage-ports=\(manage),\(manage2)", "--state-snapshot-interval", "0"]
        var s = try serve(flags)

        // Credentials: an APNs key and an FCM service account (its key file for firebase-admin).
        try admin(s, "POST", "/emulator/v1/apns/keys", "{}", expect: 201)
        let account = try admin(s, "POST", "/emulator/v1/fcm/service-accounts", #"{"projectId":"state-test"}"#, expect: 201)
        let credentials = dir + "/sa.json"
        try account.write(toFile: credentials, atomically: true, encoding: .utf8)

        // Fleets: one with tracking, one registering in bulk (paused, so it reads back as it stood).
        try admin(
            s, "POST", "/emulator/v1/fleets",
            #"{"platform":"ios","app":"com.example.app","count":5000,"seed":7,"labels":["spring"],"openRate":0.5,"tracking":{"preset":"adobe-campaign","url":"\#(sink.url)"}}"#,
            expect: 201)
        try admin(
            s, "POST", "/emulator/v1/fleets",
            #"{"platform":"android","app":"com.example","project":"state-test","count":100000,"seed":8,"registerRate":2000,"registration":{"preset":"webhook","method":"GET","url":"\#(sink.url)/reg/{device.token}"}}"#,
            expect: 201)
        usleep(300_000)
        try admin(s, "POST", "/emulator/v1/fleets/fleet-2:pauseRegistration", expect: 200)

        // Devices with settings; one uninstalled, one rotated, one offline holding a push.
        func device(_ body: String) throws -> String {
            try XCTUnwrap(try object(try admin(s, "POST", "/emulator/v1/devices", body, expect: 201))["token"] as? String)
        }
        let ios = try device(
            #"{"platform":"ios","app":"com.example.app","labels":["vip","beta"],"permission":"provisional","appState":"foreground","nseInstalled":false,"urlSchemes":["shop"],"sounds":["ding.caf"],"behavior":{"openRate":0.25}}"#
        )
        let gone = try device(#"{"platform":"ios","app":"com.example.app"}"#)
        try admin(s, "DELETE", "/emulator/v1/devices/\(gone)", expect: 200)
        let rotating = try device(#"{"platform":"ios","app":"com.example.app","labels":["moving"]}"#)
        let rotated = try XCTUnwrap(
            try object(try admin(s, "POST", "/emulator/v1/devices/\(rotating):rotate", expect: 200))["token"] as? String)
        let offline = try device(#"{"platform":"ios","app":"com.example.app"}"#)
        try admin(s, "POST", "/emulator/v1/devices/\(offline):offline", expect: 200)
        XCTAssertEqual(try push(s, token: offline, payload: #"{"aps":{"alert":"while away"}}"#), "200")
        let android = try device(
            #"{"platform":"android","app":"com.example","project":"state-test","topics":["weather"],"privacyOptOut":true}"#)
        XCTAssertEqual(try push(s, token: ios), "200")

        // A Live Activity on a channel made over HTTP/2 with a client certificate, a push-to-start token.
        let created = try curlTLS(
            "https://\(Self.manageHost):\(manage)/1/apps/com.example.app/channels", host: Self.manageHost, port: manage,
            ["-i", "-X", "POST", "-d", #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#])
        let channel = try XCTUnwrap(
            created.split(separator: "\r\n").first { $0.lowercased().hasPrefix("apns-channel-id:") }.map {
                String($0.dropFirst("apns-channel-id:".count)).trimmingCharacters(in: .whitespaces)
            }, created)
        let activity = try object(
            try admin(
                s, "POST", "/emulator/v1/devices/\(ios)/activities",
                #"{"attributesType":"ScoreAttributes","contentState":{"score":0},"channel":"\#(channel)"}"#, expect: 201))
        let activityToken = try XCTUnwrap(activity["pushToken"] as? String)
        try admin(s, "POST", "/emulator/v1/devices/\(ios)/push-to-start", #"{"attributesType":"ScoreAttributes"}"#, expect: 201)
        let now = Int(Date().timeIntervalSince1970)
        let broadcast = try curlTLS(
            "https://api-broadcast.sandbox.push.apple.com:\(s.httpsPort)/4/broadcasts/apps/com.example.app",
            host: "api-broadcast.sandbox.push.apple.com", port: s.httpsPort,
            [
                "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-channel-id: \(channel)", "-H", "apns-push-type: liveactivity",
                "-d", #"{"aps":{"timestamp":\#(now),"event":"update","content-state":{"score":2}}}"#,
            ])
        XCTAssertEqual(broadcast, "200")

        // Topic subscriptions by firebase-admin, through the OAuth token it gets from pushemu.
        let fleetToken = try XCTUnwrap(
            (try object(try admin(s, "GET", "/emulator/v1/fleets/fleet-2/tokens?limit=3"))["tokens"] as? [String])?.last)
        let script = """
            import sys, firebase_admin
            from firebase_admin import credentials, messaging
            base, cred, project = sys.argv[1:4]
            app = firebase_admin.initialize_app(credentials.Certificate(cred))
            svc = messaging._get_messaging_service(app)
            svc._fcm_topic_url = base + "/v1/projects/" + project + "/registrations"
            messaging._MessagingService.IID_URL = base
            r = messaging.subscribe_to_topic(["\(android)", "\(fleetToken)"], "news")
            l = messaging.subscribe_to_topic_legacy(["\(fleetToken)"], "sports")
            print(r.success_count, l.success_count, app.credential.get_access_token().access_token)
            """
        let py = try runCommand(
            Self.python, ["-c", script, "http://127.0.0.1:\(s.httpPort)", credentials, "state-test"], timeout: 60,
            environment: ["PYTHONWARNINGS": "ignore"])
        XCTAssertEqual(py.status, 0, py.stderr)
        let words = py.stdout.split(separator: " ")
        XCTAssertEqual(words.prefix(2), ["2", "1"], py.stdout)
        let accessToken = String(words.last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)

        // Rules (one fired twice of its first 3), and a scenario.
        try admin(
            s, "POST", "/emulator/v1/faults",
            #"{"match":{"provider":"apns","tokens":["\#(ios)"],"first":3},"effect":{"status":503,"reason":"ServiceUnavailable"}}"#,
            expect: 201)
        XCTAssertEqual(try push(s, token: ios), "503")
        XCTAssertEqual(try push(s, token: ios), "503")
        try admin(
            s, "POST", "/emulator/v1/faults",
            #"[{"match":{"provider":"fcm","percent":12.5},"effect":{"errorCode":"UNAVAILABLE","retryAfter":2},"seed":99},{"match":{"label":"vip"},"effect":{"delay":{"dist":"uniform","min":5,"max":10}}}]"#,
            expect: 201)
        try admin(
            s, "POST", "/emulator/v1/scenarios",
            #"{"name":"outage","steps":[{"at":"3600s","for":"10m","match":{"provider":"apns","topic":"com.other.app"},"effect":{"status":500,"reason":"InternalServerError"}}]}"#,
            expect: 201)

        let tokens = [ios, gone, rotating, rotated, offline, android, fleetToken]
        let before = try views(s, manage: manage, devices: tokens)
        XCTAssertTrue(before[offline]?.contains(#""pending":1"#) == true, before[offline] ?? "")
        XCTAssertTrue(before[android]?.contains(#""topics":["news","weather"]"#) == true, before[android] ?? "")
        XCTAssertTrue(before[fleetToken]?.contains(#""topics":["news","sports"]"#) == true, before[fleetToken] ?? "")
        XCTAssertTrue(before["/emulator/v1/faults"]?.contains(#""seen":2,"fired":2"#) == true, before["/emulator/v1/faults"] ?? "")
        XCTAssertTrue(before["channels"]?.contains(channel) == true, before["channels"] ?? "")
        XCTAssertEqual(s.stop(), 0)

        s = try serve(flags)
        defer { s.stop() }
        let after = try views(s, manage: manage, devices: tokens)
        for key in before.keys.sorted() { XCTAssertEqual(after[key], before[key], key) }
        XCTAssertFalse(s.stderr.contains("no saved state"), s.stderr)

        // What the restored state does: the access token issued before still sends; the activity's
        // token still updates it; the held notification is delivered when the device comes back;
        // the rule fires its third and last time.
        let send = try runCommand(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "authorization: Bearer \(accessToken)",
                "-H", "content-type: application/json", "-d", #"{"message":{"topic":"news","data":{"k":"v"}}}"#,
                "http://127.0.0.1:\(s.httpPort)/v1/projects/state-test/messages:send",
            ], timeout: 10)
        XCTAssertEqual(send.stdout, "200", send.stderr)
        XCTAssertEqual(
            try push(
                s, token: activityToken, payload: #"{"aps":{"timestamp":\#(now + 1),"event":"update","content-state":{"score":5}}}"#,
                topic: "com.example.app.push-type.liveactivity"), "200")
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/devices/\(ios)/activities").contains(#""contentState":{"score":5}"#))
        try admin(s, "POST", "/emulator/v1/devices/\(offline):online", expect: 200)
        XCTAssertTrue(try admin(s, "GET", "/emulator/v1/devices/\(offline)").contains(#""received":1"#))
        XCTAssertEqual(try push(s, token: ios), "503")
        XCTAssertEqual(try push(s, token: ios), "200", "first 3 held across the restart")
        XCTAssertEqual(try push(s, token: gone), "410")
        XCTAssertEqual(try push(s, token: rotating), "410")
    }

    /// kill -9 right after acknowledged admin writes, three times in a row on one data
    /// directory: every acknowledged change is there after each restart.
    func testKillNineAfterAcknowledgedWritesThreeTimes() throws {
        var made: [String] = []
        for round in 1...3 {
            let s = try serve()
            for prior in made {
                XCTAssertEqual(try adminRequest(s, "GET", "/emulator/v1/devices/\(prior)").0, 200, "round \(round): \(prior)")
            }
            XCTAssertEqual(try object(try admin(s, "GET", "/emulator/v1/fleets"))["fleets"].map { ($0 as? [Any])?.count }, round - 1)
            XCTAssertEqual((try object(try admin(s, "GET", "/emulator/v1/faults"))["faults"] as? [Any])?.count, round - 1)
            let d = try object(try admin(s, "POST", "/emulator/v1/devices", #"{"platform":"ios","app":"com.k\#(round)"}"#, expect: 201))
            made.append(try XCTUnwrap(d["token"] as? String))
            try admin(s, "PATCH", "/emulator/v1/devices/\(made.last!)", #"{"labels":["round-\#(round)"]}"#, expect: 200)
            try admin(
                s, "POST", "/emulator/v1/fleets", #"{"platform":"android","app":"com.k","count":10,"seed":\#(round)}"#, expect: 201)
            try admin(s, "POST", "/emulator/v1/faults", #"{"match":{"provider":"fcm"},"effect":{"status":500}}"#, expect: 201)
            s.stop(signal: SIGKILL, timeout: 5)
            XCTAssertEqual(s.process.terminationReason, .uncaughtSignal)
        }
        let s = try serve()
        defer { s.stop() }
        for (i, t) in made.enumerated() {
            XCTAssertTrue(try admin(s, "GET", "/emulator/v1/devices/\(t)", expect: 200).contains(#""labels":["round-\#(i + 1)"]"#))
        }
        XCTAssertEqual((try object(try admin(s, "GET", "/emulator/v1/fleets"))["fleets"] as? [Any])?.count, 3)
    }

    /// A fleet's tokens come from its seed, platform, app and count alone; after a restart its
    /// tokens, tracking and registration progress are the same, the registration goes on from
    /// where it stood (no member registered twice), and a push to one of its tokens fires the
    /// same tracking call as before.
    func testAFleetTracksAndRegistersTheSameAfterARestart() throws {
        let sink = try TrackingSink()
        defer { sink.stop() }
        var s = try serve(["--state-snapshot-interval", "0"])
        let body =
            #"{"platform":"ios","app":"com.example.app","count":300,"seed":7,"tracking":{"preset":"adobe-campaign","url":"\#(sink.url)"},"registerRate":100,"registration":{"preset":"webhook","method":"GET","url":"\#(sink.url)/reg/{device.token}"}}"#
        try admin(s, "POST", "/emulator/v1/fleets", body, expect: 201)
        let tokens = try admin(s, "GET", "/emulator/v1/fleets/fleet-1/tokens?limit=1000", expect: 200)
        let member = try XCTUnwrap((try object(tokens)["tokens"] as? [String])?[250])
        func registrations() -> [String] { sink.requests.filter { $0.target.hasPrefix("/reg/") }.map(\.target) }
        let deadline = Date().addingTimeInterval(10)
        while registrations().count < 30 && Date() < deadline { usleep(20_000) }
        try admin(s, "POST", "/emulator/v1/fleets/fleet-1:pauseRegistration", expect: 200)
        let paused = try admin(s, "GET", "/emulator/v1/fleets/fleet-1", expect: 200)
        // Adobe's ids: a decimal broadlog id and delivery id (the SDK builds its tracking call from them).
        let payload = #"{"aps":{"alert":"Sale","mutable-content":1},"_mId":"12345","_dId":"67890"}"#
        func tracked() -> [TrackingSink.Received] { sink.requests.filter { !$0.target.hasPrefix("/reg/") } }
        XCTAssertEqual(try push(s, token: member, payload: payload), "200")
        let seen = Date().addingTimeInterval(10)
        while tracked().isEmpty && Date() < seen { usleep(20_000) }
        let first = try XCTUnwrap(tracked().last, "the push's receive tracking")
        XCTAssertEqual(s.stop(), 0)

        s = try serve(["--state-snapshot-interval", "0"])
        defer { s.stop() }
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/fleets/fleet-1/tokens?limit=1000", expect: 200), tokens)
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/fleets/fleet-1", expect: 200), paused, "paused where it stood")
        // The same push, the same call (its ids are the push's own, so compare their shape).
        XCTAssertEqual(try push(s, token: member, payload: payload), "200")
        let seen2 = Date().addingTimeInterval(10)
        while tracked().count < 2 && Date() < seen2 { usleep(20_000) }
        let again = try XCTUnwrap(tracked().dropFirst().first)
        XCTAssertEqual(again.method, first.method)
        XCTAssertEqual(again.target.split(separator: "?").first, first.target.split(separator: "?").first)
        XCTAssertEqual(again.headers["content-type"], first.headers["content-type"])
        // Resumed: it goes on from where it stood, to the end, each member once.
        try admin(s, "POST", "/emulator/v1/fleets/fleet-1:resumeRegistration", expect: 200)
        let done = Date().addingTimeInterval(20)
        while registrations().count < 300 && Date() < done { usleep(50_000) }
        XCTAssertEqual(registrations().count, 300)
        XCTAssertEqual(Set(registrations()).count, 300, "no member registered twice across the restart")
    }
    /// Fleet members pushed as their fleet made them are counts, not records: each reads back
    /// with its counts and its inbox (from the journal, the same JSON as a record's), and the
    /// same after a restart; a change makes one a record that keeps them.
    func testPushedFleetMembersReadBackFromCountsAndTheJournal() throws {
        var s = try serve(["--state-snapshot-interval", "0"])
        try admin(s, "POST", "/emulator/v1/fleets", #"{"platform":"ios","app":"com.example.app","count":100000,"seed":5}"#, expect: 201)
        let tokens = try XCTUnwrap(
            try object(try admin(s, "GET", "/emulator/v1/fleets/fleet-1/tokens?limit=3", expect: 200))["tokens"] as? [String])
        func send(_ token: String, id: String, collapse: String? = nil) throws {
            var args = [
                "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-H", "apns-topic: com.example.app",
                "-H", "authorization: bearer \(jwt)", "-H", "apns-id: \(id)", "-d", #"{"aps":{"alert":"hi"}}"#,
            ]
            if let collapse { args += ["-H", "apns-collapse-id: \(collapse)"] }
            XCTAssertEqual(try runCommand("curl", args + ["http://127.0.0.1:\(s.httpPort)/3/device/\(token)"], timeout: 10).stdout, "200")
        }
        let ids = (1...4).map { String(format: "00000000-0000-4000-8000-%012d", $0) }
        try send(tokens[0], id: ids[0], collapse: "score")
        try send(tokens[0], id: ids[1], collapse: "score")
        try send(tokens[0], id: ids[2])
        try send(tokens[1], id: ids[3])
        let stats = try object(try admin(s, "GET", "/emulator/v1/stats", expect: 200))
        let devices = try XCTUnwrap(stats["devices"] as? [String: Any])
        XCTAssertEqual(devices["records"] as? Int, 0, "\(devices)")
        XCTAssertEqual(devices["countedMembers"] as? Int, 2, "\(devices)")
        let device = try admin(s, "GET", "/emulator/v1/devices/\(tokens[0])", expect: 200)
        XCTAssertTrue(device.contains(#""received":3"#) && device.contains(#""inbox":2"#) && device.contains(#""collapsed":1"#), device)
        XCTAssertTrue(device.contains(#""fleet":"fleet-1""#), device)
        let inbox = try admin(s, "GET", "/emulator/v1/devices/\(tokens[0])/inbox", expect: 200)
        let entries = try XCTUnwrap(try object(inbox)["inbox"] as? [[String: Any]])
        XCTAssertEqual(entries.compactMap { $0["notificationId"] as? String }, [ids[1], ids[2]], inbox)
        XCTAssertEqual(entries.first?["collapseId"] as? String, "score", inbox)
        let other = try admin(s, "GET", "/emulator/v1/devices/\(tokens[1])", expect: 200)
        let untouched = try admin(s, "GET", "/emulator/v1/devices/\(tokens[2])", expect: 200)
        XCTAssertTrue(untouched.contains(#""received":0"#), untouched)
        XCTAssertEqual(s.stop(), 0)

        s = try serve(["--state-snapshot-interval", "0"])
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/devices/\(tokens[0])", expect: 200), device)
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/devices/\(tokens[0])/inbox", expect: 200), inbox)
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/devices/\(tokens[1])", expect: 200), other)
        // A change: the member becomes a record with what it received, kept across a kill.
        try admin(s, "PATCH", "/emulator/v1/devices/\(tokens[0])", #"{"appState":"foreground"}"#, expect: 200)
        s.stop(signal: SIGKILL, timeout: 5)
        s = try serve(["--state-snapshot-interval", "0"])
        defer { s.stop() }
        let changed = try admin(s, "GET", "/emulator/v1/devices/\(tokens[0])", expect: 200)
        XCTAssertTrue(changed.contains(#""appState":"foreground""#) && changed.contains(#""received":3"#), changed)
        XCTAssertEqual(try admin(s, "GET", "/emulator/v1/devices/\(tokens[0])/inbox", expect: 200), inbox)
        let after = try XCTUnwrap(try object(try admin(s, "GET", "/emulator/v1/stats", expect: 200))["devices"] as? [String: Any])
        XCTAssertEqual(after["records"] as? Int, 1, "\(after)")
        XCTAssertEqual(after["countedMembers"] as? Int, 1, "\(after)")
    }
}
