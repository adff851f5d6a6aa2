import Foundation
import TestSupport
import XCTest

/// Web Push driven by pywebpush (PyPI, unchanged) against the real binary: a subscription per
/// browser made through the admin API, pushes each service accepts and the simulated browser
/// decrypts, and the errors each service answers in its own format.
final class WebPushClientTests: XCTestCase {
    static let root = ServerProcess.repositoryRoot
    static var python: String { root + "/.venv/bin/python" }

    func json(_ s: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(s.utf8)) as? [String: Any], s)
    }

    func testPyWebPushAgainstEveryService() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.python), "run Scripts/install-deps to create .venv")
        let s = try ServerProcess(["--webpush-endpoints", "local"])
        defer { s.stop() }
        let sink = try TrackingSink()
        defer { sink.stop() }
        // The site's VAPID key from the CLI, read by py_vapid.
        let pem = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-vapid-\(UUID().uuidString).pem").path
        defer { try? FileManager.default.removeItem(atPath: pem) }
        let made = try runCommand(ServerProcess.binaryPath, ["credentials", "vapid", "--out", pem], timeout: 20)
        XCTAssertEqual(made.status, 0, made.stderr)
        let vapid = try json(made.stdout)
        XCTAssertEqual((vapid["publicKey"] as? String)?.count, 87)
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/webpush_send.py", "http://127.0.0.1:\(s.httpPort)", pem, sink.url], timeout: 120,
            environment: ["PYTHONWARNINGS": "ignore"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "")
        let sent = try XCTUnwrap(out["sent"] as? [String: [String: Any]])
        let locations = [
            "chrome": "https://fcm.googleapis.com/0:", "firefox": "https://updates.push.services.mozilla.com/m/",
            "safari": "https://web.push.apple.com/m/", "edge": "https://wns2-par02p.notify.windows.com/m/",
        ]
        for (browser, prefix) in locations {
            let one = try XCTUnwrap(sent[browser], browser)
            XCTAssertEqual(one["status"] as? Int, 201, "\(browser): \(one)")
            let headers = try XCTUnwrap(one["headers"] as? [String: String])
            XCTAssertTrue(headers["location"]?.hasPrefix(prefix) == true, "\(browser): \(headers)")
            let subscription = try XCTUnwrap(one["subscription"] as? [String: Any])
            XCTAssertTrue(subscription.keys.sorted() == ["endpoint", "expirationTime", "keys"], "\(subscription)")
            XCTAssertTrue(subscription["expirationTime"] is NSNull)
            let keys = try XCTUnwrap(subscription["keys"] as? [String: String])
            XCTAssertEqual(keys["p256dh"]?.count, 87)
            XCTAssertEqual(keys["auth"]?.count, 22)
            // What the simulated browser decrypted is the notification's payload, and it was shown.
            let token = try XCTUnwrap(one["token"] as? String)
            let device = try json(try adminRequest(s, "GET", "/emulator/v1/devices/\(token)").1)
            // Firefox also got the legacy aesgcm push below.
            XCTAssertEqual(device["received"] as? Int, browser == "firefox" ? 2 : 1, "\(device)")
            let list = try json(
                try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?token=\(token)"], timeout: 10)
                    .stdout)
            let n = try XCTUnwrap(
                (list["notifications"] as? [[String: Any]])?.first {
                    ($0["payload"] as? [String: Any])?["title"] as? String == "Sale \(browser)"
                },
                "\(list)")
            XCTAssertEqual(n["provider"] as? String, "webpush")
            XCTAssertEqual((n["display"] as? [String: Any])?["outcome"] as? String, "shown")
        }
        // The CLI subscribes a browser too.
        let added = try runCommand(
            ServerProcess.binaryPath,
            [
                "devices", "add", "--server", "http://127.0.0.1:\(s.httpPort)", "--platform", "web", "--browser", "edge", "--app",
                "https://shop.example", "--application-server-key", try XCTUnwrap(vapid["publicKey"] as? String), "--json",
            ], timeout: 20)
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertTrue(added.stdout.contains("\"endpoint\":\"http://127.0.0.1:\(s.httpPort)/w/?token="), added.stdout)
        // Safari's site tracks by webhook: the receive and the open.
        XCTAssertEqual(sink.wait(for: 2), 2)
        // The decrypted titles are searchable; the report counts the 201s as accepted, on platform web.
        let found = try json(
            try runCommand(
                "curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?q=provider:webpush%20safari"], timeout: 10
            ).stdout)
        XCTAssertEqual((found["notifications"] as? [[String: Any]])?.count, 1, "\(found)")
        let report = try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/report?format=text"], timeout: 10).stdout
        XCTAssertTrue(report.contains("by platform: web"), report)
        XCTAssertEqual((out["aesgcm"] as? [String: Any])?["status"] as? Int, 201, "\(out["aesgcm"] ?? "")")
        let firefox = try XCTUnwrap(sent["firefox"]?["token"] as? String)
        let legacy = try json(
            try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?token=\(firefox)"], timeout: 10).stdout
        )
        XCTAssertTrue(
            (legacy["notifications"] as? [[String: Any]])?.contains { ($0["payload"] as? [String: Any])?["title"] as? String == "Legacy" }
                == true,
            "the aesgcm push decrypted: \(legacy)")

        let errors = try XCTUnwrap(out["errors"] as? [String: [String: Any]])
        func check(_ name: String, _ status: Int, _ body: String, header: (String, String)? = nil) {
            let e = errors[name] ?? [:]
            XCTAssertEqual(e["status"] as? Int, status, "\(name): \(e)")
            XCTAssertEqual(e["exception"] as? String, "WebPushException", name)
            if !body.isEmpty { XCTAssertTrue((e["body"] as? String)?.contains(body) == true, "\(name): \(e)") }
            if let (h, v) = header { XCTAssertEqual((e["headers"] as? [String: String])?[h], v, name) }
        }
        check(
            "chrome-other-key", 403,
            "the VAPID credentials in the authorization header do not correspond to the credentials used to create the subscriptions.\n")
        check("firefox-exp", 401, #""errno":109"#)
        check("firefox-exp", 401, "The VAPID token expiration is too long")
        check("safari-localhost", 403, #"{"reason":"BadJwtToken"}"#)
        check("edge-ttl0", 400, "", header: ("x-wns-error-description", "Ttl value conflicts with X-WNS-Cache-Policy."))
        check("chrome-large", 413, "")
        check("chrome-gone", 410, "push subscription has unsubscribed or expired.\n")

        // Offline: TTL 0 dropped, a Topic's newer message replaces the held one; all answered 201.
        let offline = try XCTUnwrap(out["offline"] as? [String: Any])
        XCTAssertEqual(offline["statuses"] as? [Int], [201, 201, 201], "\(offline)")
        XCTAssertEqual(offline["received"] as? Int, 1, "\(offline)")
        XCTAssertEqual(offline["dropped"] as? Int, 1, "\(offline)")
        XCTAssertEqual(offline["collapsed"] as? Int, 1, "\(offline)")
        // A fault rule's answer in autopush's format, with its Retry-After.
        let fault = try XCTUnwrap(out["fault"] as? [String: Any])
        XCTAssertEqual(fault["status"] as? Int, 429)
        XCTAssertEqual((fault["headers"] as? [String: String])?["retry-after"], "30")
        XCTAssertTrue((fault["body"] as? String)?.contains(#""errno":201"#) == true, "\(fault)")
    }

    /// django-push-notifications' WebPush path, through the proxy: its devices hold the real
    /// endpoints, `pushemu env` routes them to pushemu; a 410 deactivates the device.
    func testDjangoPushNotificationsThroughTheProxy() throws {
        let s = try ServerProcess()
        defer { s.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-django-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let made = try runCommand(ServerProcess.binaryPath, ["credentials", "vapid", "--out", dir + "/vapid.pem"], timeout: 20)
        XCTAssertEqual(made.status, 0, made.stderr)
        let publicKey = try XCTUnwrap(try json(made.stdout)["publicKey"] as? String)
        var subscriptions: [[String: Any]] = []
        for (browser, name) in [("chrome", "CHROME"), ("firefox", "FIREFOX"), ("safari", "SAFARI"), ("edge", "EDGE")] {
            let (code, text) = try adminRequest(
                s, "POST", "/emulator/v1/devices",
                #"{"platform":"web","browser":"\#(browser)","app":"https://shop.example","applicationServerKey":"\#(publicKey)"}"#)
            XCTAssertEqual(code, 201, text)
            let device = try json(text)
            let subscription = try XCTUnwrap(device["subscription"] as? [String: Any])
            XCTAssertTrue((subscription["endpoint"] as? String)?.hasPrefix("https://") == true, "\(subscription)")
            subscriptions.append(["browser": name, "subscription": subscription, "token": device["token"] ?? ""])
        }
        // The proxy's variables, as `eval "$(pushemu env)"` sets them.
        let env = try runCommand(ServerProcess.binaryPath, ["env", "--http-port", String(s.httpPort), "--data-dir", dir], timeout: 20)
        XCTAssertEqual(env.status, 0, env.stderr)
        var environment = ["PYTHONWARNINGS": "ignore"]
        for line in env.stdout.split(separator: "\n") where line.hasPrefix("export ") {
            let pair = line.dropFirst("export ".count).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { environment[String(pair[0])] = String(pair[1]).trimmingCharacters(in: CharacterSet(charactersIn: "'")) }
        }
        XCTAssertNotNil(environment["HTTPS_PROXY"], env.stdout)
        let list = String(decoding: try JSONSerialization.data(withJSONObject: subscriptions), as: UTF8.self)
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/webpush_django.py", dir + "/vapid.pem", list, "http://127.0.0.1:\(s.httpPort)"],
            timeout: 120, environment: environment)
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "")
        let sent = try XCTUnwrap(out["sent"] as? [[String: Any]])
        XCTAssertEqual(sent.count, 4)
        for one in sent { XCTAssertEqual((one["result"] as? [String: Any])?["success"] as? Int, 1, "\(one)") }
        let gone = try XCTUnwrap(out["gone"] as? [String: Any])
        XCTAssertEqual((gone["result"] as? [String: Any])?["failure"] as? Int, 1, "\(gone)")
        XCTAssertEqual(gone["active"] as? Bool, false, "\(gone)")
        // What each simulated browser decrypted.
        for one in subscriptions {
            let token = try XCTUnwrap(one["token"] as? String)
            let n = try json(
                try runCommand("curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?token=\(token)"], timeout: 10)
                    .stdout)
            let titles = (n["notifications"] as? [[String: Any]] ?? []).compactMap { ($0["payload"] as? [String: Any])?["body"] as? String }
            XCTAssertTrue(titles.contains(one["browser"] as? String ?? "?"), "\(n)")
        }
    }

    /// A subscription outlives a restart and a kill -9 (the state log): the same endpoint and
    /// keys, so a sender's stored subscription still delivers, and an unsubscribed one stays gone.
    func testSubscriptionsSurviveARestart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-webpush-state-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let flags = ["--in-memory=false", "--data-dir", dir + "/data", "--webpush-endpoints", "local"]
        var s = try ServerProcess(flags)
        let made = try runCommand(ServerProcess.binaryPath, ["credentials", "vapid", "--out", dir + "/vapid.pem"], timeout: 20)
        XCTAssertEqual(made.status, 0, made.stderr)
        let publicKey = try XCTUnwrap(try json(made.stdout)["publicKey"] as? String)
        func subscribe(_ browser: String) throws -> [String: Any] {
            let (code, text) = try adminRequest(
                s, "POST", "/emulator/v1/devices",
                #"{"platform":"web","browser":"\#(browser)","app":"https://shop.example","applicationServerKey":"\#(publicKey)"}"#)
            XCTAssertEqual(code, 201, text)
            return try json(text)
        }
        let kept = try subscribe("safari")
        let gone = try subscribe("chrome")
        XCTAssertEqual(try adminRequest(s, "DELETE", "/emulator/v1/devices/\(gone["token"] as? String ?? "")").0, 200)
        let before = try adminRequest(s, "GET", "/emulator/v1/devices/\(kept["token"] as? String ?? "")").1
        s.stop(signal: SIGKILL, timeout: 5)
        s = try ServerProcess(flags)
        defer { s.stop() }
        XCTAssertEqual(try adminRequest(s, "GET", "/emulator/v1/devices/\(kept["token"] as? String ?? "")").1, before)
        // The endpoint names the old port: post to the new one, same path.
        func send(_ device: [String: Any]) throws -> String {
            var sub = try XCTUnwrap(device["subscription"] as? [String: Any])
            let endpoint = try XCTUnwrap(sub["endpoint"] as? String)
            let path = endpoint.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }
            sub["endpoint"] = "http://127.0.0.1:\(s.httpPort)" + path
            let script = """
                import json, sys
                from py_vapid import Vapid02
                from pywebpush import webpush, WebPushException
                try:
                    r = webpush(json.loads(sys.argv[1]), data=json.dumps({"title": "after"}), vapid_private_key=Vapid02.from_file(sys.argv[2]),
                                vapid_claims={"sub": "mailto:ops@shop.example"}, ttl=60)
                    print(r.status_code)
                except WebPushException as e:
                    print(e.response.status_code)
                """
            let data = try JSONSerialization.data(withJSONObject: sub)
            let r = try runCommand(
                Self.python, ["-c", script, String(decoding: data, as: UTF8.self), dir + "/vapid.pem"], timeout: 60,
                environment: ["PYTHONWARNINGS": "ignore"])
            XCTAssertEqual(r.status, 0, r.stderr)
            return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        XCTAssertEqual(try send(kept), "201")
        XCTAssertEqual(try send(gone), "410")
        let n = try json(
            try runCommand(
                "curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?token=\(kept["token"] as? String ?? "")"],
                timeout: 10
            ).stdout)
        XCTAssertEqual(((n["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any])?["title"] as? String, "after")
        // Under strict the 201 waited for the record the delivery lane wrote (with the browser's
        // plaintext): a kill -9 right after keeps it.
        s.stop(signal: SIGKILL, timeout: 5)
        s = try ServerProcess(flags)
        let kept9 = try json(
            try runCommand(
                "curl", ["-sS", "http://127.0.0.1:\(s.httpPort)/emulator/v1/notifications?token=\(kept["token"] as? String ?? "")"],
                timeout: 10
            ).stdout)
        XCTAssertEqual(
            ((kept9["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any])?["title"] as? String, "after", "\(kept9)")
    }

    /// Fleets of web subscriptions, one per browser, ten million members each: members'
    /// subscriptions are read back a page at a time, pywebpush pushes to two of each, their
    /// browsers decrypt with keys derived from the fleet's secret, an uninstalled member is
    /// gone in its service's words, and a forged token is unknown. After a restart the fleet
    /// gives the same subscriptions.
    func testFleetsOfWebSubscriptions() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-webpush-fleet-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let flags = ["--in-memory=false", "--data-dir", dir + "/data"]
        var s = try ServerProcess(flags)
        let made = try runCommand(ServerProcess.binaryPath, ["credentials", "vapid", "--out", dir + "/vapid.pem"], timeout: 20)
        XCTAssertEqual(made.status, 0, made.stderr)
        let r = try runCommand(
            Self.python, [Self.root + "/Tests/Clients/webpush_fleet.py", "http://127.0.0.1:\(s.httpPort)", dir + "/vapid.pem"],
            timeout: 180, environment: ["PYTHONWARNINGS": "ignore"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = try json(r.stdout.split(separator: "\n").last.map(String.init) ?? "")
        let fleets = try XCTUnwrap(out["fleets"] as? [String: [String: Any]])
        let gone = ["chrome": 410, "firefox": 410, "safari": 410, "edge": 410]
        let unknown = ["chrome": 404, "firefox": 404, "safari": 410, "edge": 404]
        var firstPages: [String: [String: Any]] = [:]
        for (browser, one) in fleets {
            XCTAssertEqual(one["status"] as? Int, 201, "\(browser): \(one)")
            let fleet = try XCTUnwrap(one["fleet"] as? [String: Any])
            XCTAssertEqual(fleet["browser"] as? String, browser)
            let page = try XCTUnwrap(one["page"] as? [String: Any])
            firstPages[browser] = page
            let subs = try XCTUnwrap(page["subscriptions"] as? [[String: Any]])
            XCTAssertEqual(subs.count, 2)
            let tokens = try XCTUnwrap(one["tokens"] as? [String])
            for (sub, token) in zip(subs, tokens) {
                let endpoint = try XCTUnwrap(sub["endpoint"] as? String)
                XCTAssertTrue(endpoint.hasPrefix("http://127.0.0.1:\(s.httpPort)/") && endpoint.hasSuffix(token), endpoint)
                let keys = try XCTUnwrap(sub["keys"] as? [String: String])
                XCTAssertEqual(keys["p256dh"]?.count, 87)
                XCTAssertEqual(keys["auth"]?.count, 22)
            }
            XCTAssertNotEqual((subs[0]["keys"] as? [String: String])?["p256dh"], (subs[1]["keys"] as? [String: String])?["p256dh"])
            XCTAssertEqual(one["pushes"] as? [Int], [201, 201], "\(browser): \(one)")
            let latest = try XCTUnwrap(one["latest"] as? [String: Any])
            XCTAssertEqual((latest["payload"] as? [String: Any])?["title"] as? String, "Fleet \(browser) 0", "\(latest)")
            XCTAssertEqual((latest["display"] as? [String: Any])?["outcome"] as? String, "shown")
            let device = try XCTUnwrap(one["device"] as? [String: Any])
            XCTAssertEqual(device["fleet"] as? String, fleet["id"] as? String)
            XCTAssertEqual(device["received"] as? Int, 1)
            XCTAssertNotNil(device["subscription"] as? [String: Any])
            XCTAssertEqual(one["afterUninstall"] as? Int, gone[browser], browser)
            XCTAssertEqual(one["forged"] as? Int, unknown[browser], browser)
        }
        XCTAssertEqual(out["notWebStatus"] as? Int, 404)
        XCTAssertEqual((out["badBrowser"] as? [Any])?.first as? Int, 400)
        XCTAssertEqual((out["noKey"] as? [Any])?.first as? Int, 400)
        // A restart: the same fleets give the same subscriptions (keys from the fleet's secret).
        s.stop()
        s = try ServerProcess(flags)
        defer { s.stop() }
        for (browser, page) in firstPages {
            let id = try XCTUnwrap((fleets[browser]?["fleet"] as? [String: Any])?["id"] as? String)
            let (code, text) = try adminRequest(s, "GET", "/emulator/v1/fleets/\(id)/subscriptions?offset=9999998&limit=2")
            XCTAssertEqual(code, 200, text)
            let again = try XCTUnwrap(try json(text)["subscriptions"] as? [[String: Any]])
            let before = try XCTUnwrap(page["subscriptions"] as? [[String: Any]])
            XCTAssertEqual(again.map { ($0["keys"] as? [String: String]) ?? [:] }, before.map { ($0["keys"] as? [String: String]) ?? [:] })
        }
    }

    /// The web SDKs' tracking, as their service workers make it: OneSignal's receive receipt and
    /// open (by its DeliveryPlatformKind: 5 Chrome, 17 Safari, which sends no receipt), Pushwoosh's
    /// delivery event and push stat (platform code 12 for Firefox), Braze's on the web skipped
    /// (no public source); the campaign id read from the decrypted payload. Then Safari revokes a
    /// subscription whose pushes show nothing, at the third: later pushes are 410.
    func testWebSDKTrackingAndSafariRevocation() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pushemu-websdk-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try ServerProcess(["--webpush-endpoints", "local"])
        defer { s.stop() }
        let sink = try TrackingSink()
        defer { sink.stop() }
        let made = try runCommand(ServerProcess.binaryPath, ["credentials", "vapid", "--out", dir + "/vapid.pem"], timeout: 20)
        XCTAssertEqual(made.status, 0, made.stderr)
        let publicKey = try XCTUnwrap(try json(made.stdout)["publicKey"] as? String)
        func subscribe(_ browser: String, tracking: String) throws -> [String: Any] {
            let (code, text) = try adminRequest(
                s, "POST", "/emulator/v1/devices",
                #"{"platform":"web","browser":"\#(browser)","app":"https://shop.example","applicationServerKey":"\#(publicKey)","tracking":\#(tracking),"behavior":{"openRate":1}}"#
            )
            XCTAssertEqual(code, 201, text)
            return try json(text)
        }
        func send(_ device: [String: Any], _ payload: String, headers: [String: String] = [:]) throws -> Int {
            let sub = try XCTUnwrap(device["subscription"] as? [String: Any])
            let script = """
                import json, sys
                from py_vapid import Vapid02
                from pywebpush import webpush, WebPushException
                try:
                    r = webpush(json.loads(sys.argv[1]), data=sys.argv[3], vapid_private_key=Vapid02.from_file(sys.argv[2]),
                                vapid_claims={"sub": "mailto:ops@shop.example"}, ttl=60, headers=json.loads(sys.argv[4]))
                    print(r.status_code)
                except WebPushException as e:
                    print(e.response.status_code)
                """
            let args = [
                "-c", script, String(decoding: try JSONSerialization.data(withJSONObject: sub), as: UTF8.self), dir + "/vapid.pem", payload,
                String(decoding: try JSONSerialization.data(withJSONObject: headers), as: UTF8.self),
            ]
            let r = try runCommand(Self.python, args, timeout: 60, environment: ["PYTHONWARNINGS": "ignore"])
            XCTAssertEqual(r.status, 0, r.stderr)
            return Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        let onesignal = #"{"preset":"onesignal","url":"\#(sink.url)","appId":"os-app"}"#
        let chrome = try subscribe("chrome", tracking: onesignal)
        let safari = try subscribe("safari", tracking: onesignal)
        let firefox = try subscribe("firefox", tracking: #"{"preset":"pushwoosh","url":"\#(sink.url)","appCode":"ABCDE-12345"}"#)
        let edge = try subscribe("edge", tracking: #"{"preset":"braze","url":"\#(sink.url)","apiKey":"k"}"#)
        let campaign = "1a2b3c4d-0000-4000-8000-00000000c0de"
        let os = #"{"title":"Sale","alert":"50% off","custom":{"i":"\#(campaign)","u":"https://shop.example/sale"}}"#
        XCTAssertEqual(try send(chrome, os), 201)
        XCTAssertEqual(try send(safari, os), 201)
        XCTAssertEqual(try send(firefox, #"{"header":"Sale","body":"50% off","p":"pw-hash-1","l":"/sale"}"#), 201)
        XCTAssertEqual(
            try send(edge, #"{"title":"Sale","body":"50% off","cid":"braze-c"}"#, headers: ["X-WNS-Cache-Policy": "cache"]), 201)
        // Chrome: receipt and open; Safari: the open only; Firefox (Pushwoosh): delivery and stat.
        XCTAssertEqual(sink.wait(for: 5), 5)
        let calls = sink.requests.map { ($0.method, $0.target, $0.body) }
        func has(_ method: String, _ target: String, _ needle: String) -> Bool {
            calls.contains { $0.0 == method && $0.1 == target && $0.2.contains(needle) }
        }
        XCTAssertTrue(has("PUT", "/notifications/\(campaign)/report_received", #""device_type":5"#), "\(calls)")
        XCTAssertTrue(has("PUT", "/notifications/\(campaign)", #""opened":true,"device_type":5"#), "\(calls)")
        XCTAssertTrue(has("PUT", "/notifications/\(campaign)", #""opened":true,"device_type":17"#), "\(calls)")
        XCTAssertFalse(has("PUT", "/notifications/\(campaign)/report_received", #""device_type":17"#), "\(calls)")
        XCTAssertTrue(has("POST", "/json/1.3/messageDeliveryEvent", #""device_type":12"#), "\(calls)")
        XCTAssertTrue(has("POST", "/json/1.3/pushStat", #""hash":"pw-hash-1""#), "\(calls)")
        // Braze's web SDK: skipped, with the reason in the tracking log.
        let edgeToken = try XCTUnwrap(edge["token"] as? String)
        let tracked = try adminRequest(s, "GET", "/emulator/v1/tracking?token=\(edgeToken)").1
        XCTAssertTrue(tracked.contains("no public source") || !tracked.contains("/api/v3/data"), tracked)
        XCTAssertFalse(calls.contains { $0.1.contains("/api/v3/data") }, "\(calls)")
        // The campaign id is read from what the browser decrypted.
        let found = try json(try adminRequest(s, "GET", "/emulator/v1/notifications?campaign=\(campaign)").1)
        XCTAssertEqual((found["notifications"] as? [[String: Any]])?.count, 2, "\(found)")
        // A notification with the tag of one still shown replaces it (showNotification's tag).
        let tagged = try subscribe("chrome", tracking: "null")
        XCTAssertEqual(try send(tagged, #"{"title":"Sale","tag":"sale"}"#), 201)
        XCTAssertEqual(try send(tagged, #"{"title":"Sale, updated","tag":"sale"}"#), 201)
        let taggedToken = try XCTUnwrap(tagged["token"] as? String)
        var collapsed: [String: Any] = [:]
        for _ in 0..<50 {
            collapsed = try json(try adminRequest(s, "GET", "/emulator/v1/devices/\(taggedToken)").1)
            if collapsed["received"] as? Int == 2 { break }
            usleep(50_000)
        }
        XCTAssertEqual(collapsed["collapsed"] as? Int, 1, "\(collapsed)")
        XCTAssertEqual(collapsed["inbox"] as? Int, 1, "\(collapsed)")
        // Safari revokes a subscription after three pushes that show nothing.
        let quiet = try subscribe("safari", tracking: "null")
        for i in 1...3 { XCTAssertEqual(try send(quiet, #"{"refresh":\#(i)}"#), 201, "silent push \(i)") }
        let quietToken = try XCTUnwrap(quiet["token"] as? String)
        var status = 0
        for _ in 0..<5 {
            status = try send(quiet, #"{"title":"Back?"}"#)
            if status != 201 { break }
        }
        XCTAssertEqual(status, 410, "Safari revoked it")
        let device = try json(try adminRequest(s, "GET", "/emulator/v1/devices/\(quietToken)").1)
        XCTAssertEqual(device["installed"] as? Bool, false, "\(device)")
    }
}
