import APNs
/// Parses `pushemu serve` flags (and `--config FILE`) into a configuration.
///
/// Every flag is a long `--kebab-case` name taking `--name VALUE` or `--name=VALUE`; boolean
/// flags take no value. A config file holds the same names, one `name = value` per line
/// (`#` starts a comment; booleans are `true`/`false`). Each option can also come from the
/// environment (`PUSHEMU_HTTP_PORT` for `--http-port`: `environmentName`); a flag wins over the
/// environment, which wins over the file.
import Cluster
import FCM
import Faults
import Fleet
import Glibc
import Journal
import PushCore
import Tracking

package enum ServeOptions {
    package static let version = "0.1.0"

    struct Option: Sendable {
        let name: String
        let valueName: String? // nil: boolean flag
        let help: String
        let apply: @Sendable (inout EmulatorConfiguration, String) throws -> Void
    }

    static let options: [Option] = [
        Option(name: "host", valueName: "ADDR", help: "address to bind (default 127.0.0.1; 0.0.0.0 or :: for all)") { c, v in c.host = v },
        Option(name: "http-port", valueName: "PORT", help: "cleartext port: HTTP/1.1, h2c, Upgrade: h2c (default 8080; 0 = any free)") {
            c, v in c.httpPort = try port(v, "http-port")
        },
        Option(name: "https-port", valueName: "PORT", help: "TLS port: HTTP/2 and HTTP/1.1 (default 8443; 0 = any free)") { c, v in
            c.httpsPort = try port(v, "https-port")
        },
        Option(name: "threads", valueName: "N", help: "event-loop threads (default: CPU count)") { c, v in
            c.threads = try int(v, "threads", 1...1024)
        },
        Option(name: "data-dir", valueName: "DIR", help: "where state is persisted (default ./.pushemu)") { c, v in c.dataDirectory = v },
        Option(name: "in-memory", valueName: nil, help: "write nothing to disk") { c, v in c.inMemory = try bool(v, "in-memory") },
        Option(name: "cert", valueName: "FILE", help: "TLS certificate chain, PEM (default: the embedded development certificate)") {
            c, v in c.certificatePath = v
        },
        Option(name: "key", valueName: "FILE", help: "TLS private key, PEM") { c, v in c.keyPath = v },
        Option(name: "client-ca", valueName: "FILE", help: "CA(s) for client certificates, PEM (default: the development CA)") { c, v in
            c.clientCAPath = v
        },
        Option(
            name: "intercept-host", valueName: "HOST",
            help: "another host name the cleartext port intercepts as a proxy (CONNECT), beyond the APNs and FCM ones (repeatable)"
        ) { c, v in
            let hosts = v.split(separator: ",").map { String($0.filter { $0 != " " }).lowercased() }
            guard !hosts.isEmpty, hosts.allSatisfy(ServeOptions.isHostName) else {
                throw ConfigurationError("--intercept-host takes DNS host names such as push.example.com, got '\(v)'")
            }
            c.interceptHosts += hosts
        },
        Option(name: "drain-timeout", valueName: "SECONDS", help: "time to finish in-flight requests on SIGINT/SIGTERM (default 10)") {
            c, v in c.drainTimeout = try double(v, "drain-timeout")
        },
        Option(name: "idle-timeout", valueName: "SECONDS", help: "close connections idle this long (default 3600)") { c, v in
            c.idleTimeout = try double(v, "idle-timeout")
        },
        Option(name: "head-timeout", valueName: "SECONDS", help: "time to send a request head, from its first byte (default 30)") {
            c, v in c.headTimeout = try double(v, "head-timeout")
        },
        Option(
            name: "body-timeout", valueName: "SECONDS",
            help: "time to send a request body, from the end of its head; and for a client to take an answer (default 60)"
        ) { c, v in c.bodyTimeout = try double(v, "body-timeout") },
        Option(name: "max-connections", valueName: "N", help: "open connections at most, process-wide (default 10000)") { c, v in
            c.maxConnections = try int(v, "max-connections", 1...1_000_000)
        },
        Option(
            name: "admin-rate", valueName: "N",
            help:
                "admin requests a second for the whole process before 429 (default 10000; 0: no limit; /healthz and /metrics are never limited)"
        ) { c, v in c.adminRate = try int(v, "admin-rate", 0...10_000_000) },
        Option(
            name: "max-memory", valueName: "SIZE",
            help:
                "bytes connections may hold (their TLS and HTTP/2 state, and buffers) before new ones and new requests get 503 (default 512MiB; k/m/g suffixes)"
        ) { c, v in c.maxBufferedBytes = try size(v, "max-memory", (16 << 20)...(1 << 40)) },
        Option(
            name: "max-state-memory", valueName: "SIZE",
            help:
                "bytes the stored state may take: device records (768 B each), FCM tokens (832 B) and subscriptions (208 B), APNs tokens (512 B), channels (512 B); new ones are refused past it (default 2GiB)"
        ) { c, v in c.maxStateMemory = try size(v, "max-state-memory", (16 << 20)...(1 << 40)) },
        Option(name: "max-concurrent-streams", valueName: "N", help: "HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)") { c, v in
            c.maxConcurrentStreams = UInt32(try int(v, "max-concurrent-streams", 1...1_000_000))
        },
        Option(name: "apns-environment", valueName: "ENV", help: "environment for hosts that name none: sandbox (default) or production") {
            c, v in
            guard let e = APNsEnvironment(rawValue: v) else {
                throw ConfigurationError("--apns-environment must be sandbox or production, got '\(v)'")
            }
            c.apns.defaultEnvironment = e
        },
        Option(name: "apns-auth", valueName: "MODE", help: "lenient (default: JWTs with unknown kid accepted) or strict") { c, v in
            guard let m = APNsConfiguration.AuthMode(rawValue: v) else {
                throw ConfigurationError("--apns-auth must be lenient or strict, got '\(v)'")
            }
            c.apns.authMode = m
        },
        Option(
            name: "strict-payload", valueName: nil,
            help: "payload problems answer 400 (APNs BadPayload, FCM INVALID_ARGUMENT) instead of a warning"
        ) { c, v in
            c.apns.strictPayload = try bool(v, "strict-payload")
            c.fcm.strictPayload = c.apns.strictPayload
        },
        Option(name: "apns-token-length", valueName: "MIN-MAX", help: "accepted device token lengths in hex characters (default 64-200)") {
            c, v in
            let parts = v.split(separator: "-").compactMap { Int($0) }
            guard parts.count == 2, parts[0] >= 1, parts[0] <= parts[1], parts[1] <= 4096 else {
                throw ConfigurationError("--apns-token-length must be MIN-MAX, e.g. 64-200, got '\(v)'")
            }
            c.apns.tokenLength = parts[0]...parts[1]
        },
        Option(
            name: "apns-streams", valueName: "N", help: "APNs concurrent streams once authenticated (default 1000; 1 before a valid token)"
        ) { c, v in c.apns.streamsAfterAuth = UInt32(try int(v, "apns-streams", 1...1_000_000)) },
        Option(
            name: "apns-max-errors", valueName: "N",
            help: "error budget per APNs connection before GOAWAY (default 500; BadDeviceToken counts 5)"
        ) { c, v in c.apns.maxConnectionErrors = try int(v, "apns-max-errors", 1...100_000_000) },
        Option(
            name: "apns-bad-environment-reason", valueName: "REASON",
            help: "spelling of the wrong-environment key reason (default BadEnvironmentKeyIdInToken)"
        ) { c, v in
            guard !v.isEmpty, v.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }) else {
                throw ConfigurationError("--apns-bad-environment-reason must be letters only, got '\(v)'")
            }
            c.apns.badEnvironmentReason = v
        },
        Option(
            name: "fcm-auth", valueName: "MODE", help: "lenient (default: bearer tokens the emulator did not issue are accepted) or strict"
        ) { c, v in
            guard let m = FCMConfiguration.AuthMode(rawValue: v) else {
                throw ConfigurationError("--fcm-auth must be lenient or strict, got '\(v)'")
            }
            c.fcm.authMode = m
        },
        Option(name: "fcm-quota", valueName: "N", help: "FCM messages per minute per project before 429 (default 600000; 0 = off)") {
            c, v in c.fcm.quotaPerMinute = try int(v, "fcm-quota", 0...1_000_000_000)
        },
        Option(name: "fcm-token-lifetime", valueName: "SECONDS", help: "lifetime of issued OAuth access tokens (default 3600)") { c, v in
            c.fcm.tokenLifetime = try int(v, "fcm-token-lifetime", 1...86_400)
        },
        Option(
            name: "fcm-size-mode", valueName: "MODE",
            help: "how the 4096-byte limit is counted: fields (default: data and notification keys and values) or message"
        ) { c, v in
            guard let m = FCMSizeMode(rawValue: v) else {
                throw ConfigurationError("--fcm-size-mode must be fields or message, got '\(v)'")
            }
            c.fcm.sizeMode = m
        },
        Option(name: "fcm-streams", valueName: "N", help: "concurrent streams on connections to fcm.googleapis.com (SNI) (default 100)") {
            c, v in c.fcm.streams = UInt32(try int(v, "fcm-streams", 1...1_000_000))
        },
        Option(
            name: "webpush-endpoints", valueName: "WHERE",
            help:
                "real (default: subscriptions' endpoints name the push services' hosts, reached through the proxy) or local (pushemu's own address)"
        ) { c, v in
            guard v == "real" || v == "local" else { throw ConfigurationError("--webpush-endpoints must be real or local, got '\(v)'") }
            c.webPushLocalEndpoints = v == "local"
        },
        Option(
            name: "cluster", valueName: "URL",
            help: "join a cluster: redis://HOST:PORT[/DB] holds its shared state (docs/cluster.md); needs a data directory"
        ) { c, v in
            guard let url = RedisURL(v) else {
                throw ConfigurationError("--cluster must be redis://[:PASSWORD@]HOST[:PORT][/DB] (DB 0 to 15), got '\(v)'")
            }
            c.cluster = url
        },
        Option(name: "cluster-name", valueName: "NAME", help: "the cluster's name: its keys in Redis (default pushemu)") { c, v in
            guard (1...64).contains(v.utf8.count), v.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "}") }) else {
                throw ConfigurationError("--cluster-name must be 1 to 64 printable characters without spaces or '}', got '\(v)'")
            }
            c.clusterName = v
        },
        Option(name: "node-name", valueName: "NAME", help: "this node's name in the cluster (default HOSTNAME:HTTP_PORT)") { c, v in
            guard (1...128).contains(v.utf8.count), v.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw ConfigurationError("--node-name must be 1 to 128 printable characters without spaces, got '\(v)'")
            }
            c.nodeName = v
        },
        Option(
            name: "cluster-compact-after", valueName: "N",
            help: "changes the cluster's stream holds before a node compacts it into a snapshot in Redis (default 100000)"
        ) { c, v in c.clusterCompactAfter = try int(v, "cluster-compact-after", 100...100_000_000) },
        Option(name: "advertise", valueName: "URL", help: "the URL the other nodes reach this one at (default http://HOST:HTTP_PORT)") {
            c, v in
            guard v.hasPrefix("http://") || v.hasPrefix("https://"), v.utf8.count <= 512 else {
                throw ConfigurationError("--advertise must be an http:// or https:// URL, got '\(v)'")
            }
            c.advertise = v
        },
        Option(
            name: "devices", valueName: "POLICY",
            help: "auto (default: an unknown well-formed token becomes a device) or strict (unknown tokens are refused)"
        ) { c, v in
            guard let p = DeviceStore.Policy(rawValue: v) else { throw ConfigurationError("--devices must be auto or strict, got '\(v)'") }
            c.devices.policy = p
        },
        Option(
            name: "tracking-preset", valueName: "NAME",
            help: "default SDK tracking: adobe-campaign, pushwoosh, onesignal, moengage, braze or webhook"
        ) { c, v in
            guard TrackingConfig.presets.contains(v) else {
                throw ConfigurationError("--tracking-preset must be one of \(TrackingConfig.presets.joined(separator: ", ")), got '\(v)'")
            }
            var t = c.devices.defaultTracking ?? TrackingConfig(preset: v, url: "")
            t.preset = v
            c.devices.defaultTracking = t
        },
        Option(name: "tracking-url", valueName: "URL", help: "the default tracking server's base URL (http://HOST:PORT)") { c, v in
            guard v.hasPrefix("http://") || v.hasPrefix("https://") else {
                throw ConfigurationError("--tracking-url must be an http(s) URL, got '\(v)'")
            }
            var t = c.devices.defaultTracking ?? TrackingConfig(preset: "adobe-campaign", url: v)
            t.url = v
            c.devices.defaultTracking = t
        },
        Option(
            name: "tracking", valueName: "JSON",
            help: "the default tracking as the admin API's object, e.g. {\"preset\":\"pushwoosh\",\"url\":...,\"appCode\":...}"
        ) { c, v in
            do { c.devices.defaultTracking = try TrackingConfig.parse(Array(v.utf8)) } catch {
                throw ConfigurationError("--tracking: \(error)")
            }
        },
        Option(
            name: "registration", valueName: "JSON",
            help: "how devices' apps register their tokens, e.g. {\"preset\":\"adobe-campaign\",\"url\":...,\"integrationKey\":...}"
        ) { c, v in
            do { c.devices.defaultRegistration = try RegistrationConfig.parse(Array(v.utf8)) } catch {
                throw ConfigurationError("--registration: \(error)")
            }
        },
        Option(
            name: "registration-preset", valueName: "NAME",
            help: "the registration preset alone: adobe-campaign, pushwoosh (with --registration-url)"
        ) {
            c, v in c.registrationPreset = v
        },
        Option(name: "registration-url", valueName: "URL", help: "the platform's registration base URL (with --registration-preset)") {
            c, v in
            c.registrationURL = v
        },
        Option(name: "behavior", valueName: "JSON", help: "default device behaviour, e.g. {\"openRate\":0.1,\"receiveDelayMs\":[50,500]}") {
            c, v in
            let bytes = Array(v.utf8)
            do {
                c.devices.defaultBehavior = try bytes.withUnsafeBytes { raw in
                    var t: [JSONToken] = []
                    guard JSONParser.parse(raw, into: &t) == nil, !t.isEmpty else {
                        throw ConfigurationError("--behavior must be a JSON object")
                    }
                    return try Behavior.parse(JSONView(bytes: raw, tokens: t), 0)
                }
            } catch let e as ConfigurationError { throw e } catch { throw ConfigurationError("--behavior: \(error)") }
        },
        Option(name: "inbox-size", valueName: "N", help: "notifications kept per device inbox (default 100)") { c, v in
            c.devices.inboxSize = try int(v, "inbox-size", 1...100_000)
        },
        Option(
            name: "max-devices", valueName: "N",
            help: "device records kept at most; pushes beyond are delivered and tracked unkept (default 5000000)"
        ) { c, v in c.devices.maxDevices = try int(v, "max-devices", 64...1_000_000_000) },
        Option(name: "tracking-timeout", valueName: "SECONDS", help: "timeout of one tracking request (default 30, Adobe's)") { c, v in
            c.tracking.timeoutMs = Int(try double(v, "tracking-timeout") * 1000)
        },
        Option(
            name: "tracking-retries", valueName: "N", help: "retries after a 5xx or connection error, with exponential backoff (default 4)"
        ) { c, v in c.tracking.maxAttempts = try int(v, "tracking-retries", 0...20) + 1 },
        Option(
            name: "tracking-concurrency", valueName: "N",
            help: "tracking requests in flight per dispatcher lane (default 32; at most 32 connections per target per lane)"
        ) { c, v in c.tracking.maxInFlight = try int(v, "tracking-concurrency", 1...100_000) },
        Option(
            name: "tracking-lanes", valueName: "N",
            help: "tracking dispatcher lanes, each a thread with its own connections (default: one per event-loop thread, at most 64)"
        ) { c, v in c.trackingLanes = try int(v, "tracking-lanes", 1...1024) },
        Option(
            name: "tracking-queue", valueName: "N",
            help: "tracking calls waiting in memory at most; beyond, they wait on disk (default 2000000)"
        ) { c, v in c.tracking.queueCapacity = try int(v, "tracking-queue", 1...100_000_000) },
        Option(
            name: "tracking-queue-memory", valueName: "SIZE",
            help: "memory the waiting tracking calls may take (about 400 B each); beyond, they wait on disk (default 64MiB)"
        ) { c, v in c.tracking.queueBytes = try size(v, "tracking-queue-memory", (1 << 20)...(1 << 40)) },
        Option(
            name: "tracking-spool", valueName: "SIZE",
            help:
                "disk the tracking calls beyond --tracking-queue-memory may take while they wait (in the data directory, or TMPDIR with --in-memory); beyond, they are dropped and counted; 0: no spool (default 8GiB)"
        ) { c, v in c.tracking.spoolBytes = v == "0" ? 0 : try size(v, "tracking-spool", (1 << 20)...(1 << 50)) },
        Option(name: "tracking-ca", valueName: "FILE", help: "CA bundle for https tracking servers (default: the system's)") { c, v in
            c.tracking.caFile = v
        },
        Option(name: "tracking-log-size", valueName: "N", help: "tracking attempts kept for the admin API (default 100000)") { c, v in
            c.trackingLogSize = try int(v, "tracking-log-size", 1...10_000_000)
        },
        Option(name: "faults", valueName: "FILE", help: "fault rules to load at start: a JSON list of {\"match\",\"effect\",\"seed\"}") {
            c, v in c.faultsFile = v
        },
        Option(
            name: "scenario", valueName: "FILE",
            help: "a fault timeline to start at start: {\"steps\":[{\"at\":\"30s\",\"for\":\"10s\",\"effect\":{...}}]}"
        ) { c, v in c.scenarioFile = v },
        Option(
            name: "allow-override-header", valueName: nil, help: "obey x-pushemu-fault request headers (status=503;reason=...;delay=200ms)"
        ) { c, v in c.allowOverrideHeader = try bool(v, "allow-override-header") },
        Option(
            name: "latency", valueName: "PROFILE",
            help: "latency added to every answer, e.g. apns=20-40,fcm=30 (milliseconds; a range is uniform)"
        ) { c, v in
            for part in v.split(separator: ",") {
                let kv = part.split(separator: "=")
                guard kv.count == 2, let p = PushProvider.named(String(kv[0])) else {
                    throw ConfigurationError("--latency takes apns=MS[-MS],fcm=MS[-MS], got '\(v)'")
                }
                let r = kv[1].split(separator: "-").compactMap { Double($0) }
                guard r.count == 1 || r.count == 2, r.allSatisfy({ $0 >= 0 && $0 <= 60_000 }), r.count == 1 || r[0] <= r[1] else {
                    throw ConfigurationError("--latency takes apns=MS[-MS],fcm=MS[-MS], got '\(v)'")
                }
                c.latency[p] = r.count == 1 ? .fixed(r[0]) : .uniform(r[0], r[1])
            }
        },
        Option(
            name: "apns-token-rate", valueName: "N",
            help: "APNs pushes per minute per device token before 429 TooManyRequests (default 0: off)"
        ) { c, v in c.apnsTokenRate = try int(v, "apns-token-rate", 0...1_000_000) },
        Option(
            name: "fcm-overload", valueName: "PERCENT",
            help: "percent of FCM sends answered 503 UNAVAILABLE with Retry-After: 2 (default 0)"
        ) { c, v in
            guard let p = Double(v), p >= 0, p <= 100 else { throw ConfigurationError("--fcm-overload must be a percentage, got '\(v)'") }
            c.fcmOverloadPercent = p
        },
        Option(
            name: "apns-manage-ports", valueName: nil,
            help: "also serve APNs channel management on TLS ports 2195 (sandbox) and 2196 (production); =S,P for others"
        ) { c, v in
            switch v.lowercased() {
            case "true", "yes", "1", "on": c.apns.managePorts = [2195: .sandbox, 2196: .production]
            case "false", "no", "0", "off": c.apns.managePorts = [:]
            default:
                let parts = v.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
                guard parts.count == 2, let s = parts[0], let p = parts[1], (1...65535).contains(s), (1...65535).contains(p), s != p else {
                    throw ConfigurationError(
                        "--apns-manage-ports takes no value, or SANDBOX,PRODUCTION ports (1-65535, different), got '\(v)'")
                }
                c.apns.managePorts = [s: .sandbox, p: .production]
            }
        },
        Option(
            name: "apns-broadcast-apps", valueName: "LIST",
            help: "bundle ids with the Broadcast capability (default: every app); others get FeatureNotEnabled"
        ) { c, v in
            let apps = v.split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
            guard !apps.isEmpty else { throw ConfigurationError("--apns-broadcast-apps needs at least one bundle id") }
            c.apns.broadcastApps = Set(apps)
        },
        Option(
            name: "apns-http1", valueName: nil,
            help: "serve HTTP/1.1 requests to the APNs routes (for curl); by default they get Apple's answer, an HTTP/2 GOAWAY"
        ) { c, v in c.apns.allowHTTP1 = try bool(v, "apns-http1") },
        Option(
            name: "apns-adaptive-streams", valueName: nil,
            help: "halve a connection's stream limit after an error, raise it after successes"
        ) { c, v in c.apnsAdaptiveStreams = try bool(v, "apns-adaptive-streams") },
        Option(
            name: "journal-max-records", valueName: "N", help: "journal retention by records (default 10000000; 1000000 with --in-memory)"
        ) { c, v in
            c.journalMaxRecords = try int(v, "journal-max-records", 1_000...1_000_000_000)
        },
        Option(name: "journal-max-age", valueName: "AGE", help: "journal retention by age: 30m, 12h, 7d (default 7d)") { c, v in
            guard let ms = TimeArgument.durationMs(v), ms >= 60_000 else {
                throw ConfigurationError("--journal-max-age takes an age of at least a minute such as 30m, 12h or 7d, got '\(v)'")
            }
            c.journalMaxAgeMs = ms
        },
        Option(
            name: "campaign-key", valueName: "PATH",
            help: "payload path of the campaign id, tried before the presets' keys (e.g. data.campaign; repeatable, comma-separated)"
        ) { c, v in
            let keys = v.split(separator: ",").map { String($0.filter { $0 != " " }) }
            guard !keys.isEmpty, keys.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") && !$0.hasSuffix(".") && !$0.contains("..") }) else {
                throw ConfigurationError("--campaign-key takes dotted payload paths such as data.campaign, got '\(v)'")
            }
            c.campaignKeys += keys
            c.devices.campaignKeys += keys
        },
        Option(
            name: "durability", valueName: "MODE",
            help:
                "the journal: strict (default: on disk an answer leaves once its record is written to the journal's files, so killing pushemu loses no answered push; in memory reads see every answered request), sync (on disk an answer waits for its record's fsynced commit: a power cut loses none either), relaxed (answers at once, commits behind) or off"
        ) { c, v in
            if v == "off" {
                c.durability = nil
                return
            }
            guard let d = Journal.Durability(rawValue: v) else {
                throw ConfigurationError("--durability must be off, strict, sync or relaxed, got '\(v)'")
            }
            c.durability = d
        },
        Option(name: "import-state", valueName: "FILE", help: "read a state export (pushemu state export) into the emulator at start") {
            c, v in c.importState = v
        },
        Option(
            name: "export-state-on-exit", valueName: "FILE", help: "write the state as an export to FILE when pushemu stops cleanly"
        ) { c, v in c.exportStateOnExit = v },
        Option(
            name: "state-snapshot-interval", valueName: "AGE",
            help: "snapshot the state at most this often while pushes change it: 30s, 5m, 0 for only by count and at stop (default 60s)"
        ) { c, v in
            if v == "0" {
                c.stateSnapshotIntervalMs = 0
                return
            }
            guard let ms = TimeArgument.durationMs(v), ms >= 1000, ms <= 86_400_000 else {
                throw ConfigurationError("--state-snapshot-interval takes 0 or a duration from 1s to 24h such as 30s or 5m, got '\(v)'")
            }
            c.stateSnapshotIntervalMs = ms
        },
        Option(
            name: "state-snapshot-records", valueName: "N",
            help: "snapshot the state once this many changes were logged since the last (default 100000)"
        ) { c, v in c.stateSnapshotRecords = try int(v, "state-snapshot-records", 100...100_000_000) },
        Option(name: "notification-log-size", valueName: "N", help: "accepted notifications kept for the admin API (default 10000)") {
            c, v in c.notificationLogSize = try int(v, "notification-log-size", 1...10_000_000)
        },
        Option(name: "max-header-list-size", valueName: "BYTES", help: "largest request header list (default 16384)") { c, v in
            c.maxHeaderListSize = try int(v, "max-header-list-size", 1024...1_048_576)
        },
    ]

    /// `serve`'s options, as `pushemu --help` lists them.
    package static var optionsHelp: String {
        var s =
            "Options of serve (each also from the environment: --http-port is PUSHEMU_HTTP_PORT; flag > environment > config file > default):\n"
        s += "  --config FILE                        read options from FILE (name = value lines; or PUSHEMU_CONFIG)\n"
        s += "  --print-config                       print the configuration in effect, with each value's source, and exit\n"
        for o in options {
            let left = "  --\(o.name)" + (o.valueName.map { " \($0)" } ?? "")
            s += left + String(repeating: " ", count: max(1, 39 - left.count)) + o.help + "\n"
        }
        return s
    }

    /// Where a setting came from, highest precedence first.
    package enum Source: Equatable, Sendable {
        case flag
        case environment(String)
        case configFile(String)

        var description: String {
            switch self {
            case .flag: "flag"
            case .environment(let name): "environment \(name)"
            case .configFile(let path): "config file \(path)"
            }
        }
    }

    /// The environment variable of option `name`: `PUSHEMU_` and the name in upper case with
    /// `-` as `_` (`--http-port` is `PUSHEMU_HTTP_PORT`; `PUSHEMU_CONFIG` names a config file).
    package static func environmentName(_ name: String) -> String {
        "PUSHEMU_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
    }

    /// This process's environment.
    package static func processEnvironment() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let text = String(cString: entry)
            if let eq = text.firstIndex(of: "=") { out[String(text[..<eq])] = String(text[text.index(after: eq)...]) }
            p += 1
        }
        return out
    }

    /// Every setting given, each option from its highest-precedence source only: flag >
    /// environment > config file (an option given twice by the winning source, such as a
    /// repeatable one, keeps both values in order). `--print-config` is dropped.
    package static func settings(
        _ args: [String], environment: [String: String], readFile: (String) throws -> String = defaultReadFile
    ) throws -> [(name: String, value: String, source: Source)] {
        var flags: [(String, String)] = []
        var configFiles: [(String, Source)] = []
        var i = 0
        while i < args.count {
            let a = args[i]
            guard a.hasPrefix("--"), a.count > 2 else { throw ConfigurationError("unexpected argument '\(a)' (see pushemu --help)") }
            var name = String(a.dropFirst(2))
            var value: String? = nil
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if name == "print-config" {
                i += 1
                continue
            }
            let takesValue = name == "config" || option(name)?.valueName != nil
            if option(name) == nil && name != "config" { throw ConfigurationError(unknownOption(name)) }
            if takesValue && value == nil {
                guard i + 1 < args.count else { throw ConfigurationError("option '--\(name)' needs a value") }
                value = args[i + 1]
                i += 1
            }
            if name == "config" { configFiles.append((value!, .flag)) } else { flags.append((name, value ?? "true")) }
            i += 1
        }
        if configFiles.isEmpty, let path = environment[environmentName("config")], !path.isEmpty {
            configFiles.append((path, .environment(environmentName("config"))))
        }
        var fromFiles: [(String, String, Source)] = []
        for (path, _) in configFiles {
            for (n, v) in try parseConfigFile(try readFile(path), path: path) {
                guard option(n) != nil else {
                    let hint = NearestName.suggest(n, in: options.map(\.name)).map { " (did you mean \($0)?)" } ?? ""
                    throw ConfigurationError("unknown option '\(n)' in config file '\(path)'\(hint)")
                }
                fromFiles.append((n, v, .configFile(path)))
            }
        }
        let flagged = Set(flags.map(\.0))
        var out: [(name: String, value: String, source: Source)] = []
        var fromEnvironment = Set<String>()
        for o in options where !flagged.contains(o.name) {
            let variable = environmentName(o.name)
            guard let value = environment[variable], !value.isEmpty else { continue }
            fromEnvironment.insert(o.name)
            out.append((o.name, value, .environment(variable)))
        }
        let fileEntries = fromFiles.filter { !flagged.contains($0.0) && !fromEnvironment.contains($0.0) }
        return fileEntries.map { (name: $0.0, value: $0.1, source: $0.2) } + out + flags.map { (name: $0.0, value: $0.1, source: .flag) }
    }

    /// "unknown option '--http-prot' (did you mean --http-port?)".
    package static func unknownOption(_ name: String) -> String {
        let names = options.map(\.name) + ["config", "print-config", "help", "version"]
        if let near = NearestName.suggest(name, in: names) { return "unknown option '--\(name)' (did you mean --\(near)?)" }
        return "unknown option '--\(name)' (see pushemu --help)"
    }

    /// The `PUSHEMU_` variables pushemu reads besides its options' (`PUSHEMU_CONFIG`), writes
    /// for others (`pushemu env`'s `PUSHEMU_CA`), or its test helpers read (`PUSHEMU_BIN`).
    static let otherVariables: Set<String> = ["PUSHEMU_CONFIG", "PUSHEMU_CA", "PUSHEMU_BIN"]

    /// One warning per `PUSHEMU_` variable of `environment` that names no option (a misspelt
    /// one would be ignored silently otherwise), with the nearest variable that does.
    package static func unknownVariableWarnings(_ environment: [String: String]) -> [String] {
        let known = options.map { environmentName($0.name) }
        return environment.keys.filter { $0.hasPrefix("PUSHEMU_") && !otherVariables.contains($0) && !known.contains($0) }.sorted()
            .map { name in
                let hint = NearestName.suggest(name, in: known + otherVariables.sorted()).map { "did you mean \($0)? " } ?? ""
                return "environment variable \(name) names no option (\(hint)see pushemu serve --help); it is ignored"
            }
    }

    /// The value of serve option `name` for another command, by serve's rule: the command's own
    /// flag, then `PUSHEMU_<NAME>`, then the config file `PUSHEMU_CONFIG` names, else nil (the
    /// command's default). `pushemu credentials` then writes where `pushemu serve` reads.
    package static func commandSetting(
        _ name: String, flag: String?, environment: [String: String], readFile: (String) throws -> String = defaultReadFile
    ) throws -> (value: String, source: Source)? {
        if let flag { return (flag, .flag) }
        let variable = environmentName(name)
        if let value = environment[variable], !value.isEmpty { return (value, .environment(variable)) }
        guard let path = environment[environmentName("config")], !path.isEmpty else { return nil }
        let entries = try parseConfigFile(try readFile(path), path: path)
        return entries.last { $0.0 == name }.map { ($0.1, .configFile(path)) }
    }

    /// Parses arguments after the command name, with `PUSHEMU_*` variables and config files.
    package static func parse(
        _ args: [String], environment: [String: String] = [:], readFile: (String) throws -> String = defaultReadFile
    ) throws -> EmulatorConfiguration {
        try configuration(from: settings(args, environment: environment, readFile: readFile))
    }

    /// The configuration `settings` make.
    static func configuration(from settings: [(name: String, value: String, source: Source)]) throws -> EmulatorConfiguration {
        var config = EmulatorConfiguration()
        for setting in settings { try apply(setting.name, setting.value, to: &config, source: setting.source.description) }
        try resolveRegistration(&config)
        return config
    }

    /// `--registration-preset` and `--registration-url` over `--registration`'s object (or alone),
    /// validated once every setting is in.
    static func resolveRegistration(_ c: inout EmulatorConfiguration) throws {
        guard c.registrationPreset != nil || c.registrationURL != nil else { return }
        let base = c.devices.defaultRegistration
        guard let preset = c.registrationPreset ?? base?.preset else {
            throw ConfigurationError("--registration-url needs --registration-preset")
        }
        let url = c.registrationURL ?? base?.url ?? ""
        do {
            var merged = try RegistrationConfig.parse(
                Array(("{\"preset\":" + JSONWriter.quote(preset) + ",\"url\":" + JSONWriter.quote(url) + "}").utf8))
            if let base, base.preset == preset {
                merged.options = base.options
                merged.additionalParams = base.additionalParams
            }
            c.devices.defaultRegistration = merged
        } catch {
            throw ConfigurationError("--registration-preset \(preset): \(error)")
        }
    }

    /// `pushemu serve --print-config`: every option as a config file line with where its value
    /// came from, options left at their defaults commented out. The settings are validated first.
    package static func printConfig(
        _ args: [String], environment: [String: String], readFile: (String) throws -> String = defaultReadFile
    ) throws -> String {
        let given = try settings(args, environment: environment, readFile: readFile)
        _ = try configuration(from: given)
        var text = "# pushemu serve: the configuration in effect (flag > environment PUSHEMU_* > config file > default)\n"
        for o in options {
            let mine = given.filter { $0.name == o.name }
            if mine.isEmpty {
                text += "# \(o.name): default\(defaultText(o.help).map { " (\($0))" } ?? "")\n"
                continue
            }
            for setting in mine {
                let value = setting.value.contains(where: { $0 == "#" || $0 == " " }) ? "\"\(setting.value)\"" : setting.value
                text += "\(o.name) = \(value)    # \(setting.source.description)\n"
            }
        }
        return text
    }

    /// "default X" from an option's help text, for `--print-config`.
    static func defaultText(_ help: String) -> String? {
        guard let range = help.firstRange(of: "default") else { return nil }
        var rest = help[range.lowerBound...]
        if let end = rest.firstIndex(where: { $0 == ")" || $0 == ";" }) { rest = rest[..<end] }
        return String(rest)
    }

    static func option(_ name: String) -> Option? { options.first { $0.name == name } }

    static func apply(_ name: String, _ value: String, to config: inout EmulatorConfiguration, source: String) throws {
        guard let o = option(name) else { throw ConfigurationError("unknown option '\(name)' in \(source)") }
        do {
            try o.apply(&config, value)
        } catch let error as ConfigurationError where source != Source.flag.description {
            throw ConfigurationError("\(error.description) (from \(source))")
        }
    }

    static func parseConfigFile(_ text: String, path: String) throws -> [(String, String)] {
        var out: [(String, String)] = []
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(raw)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let trimmed = line.trimmingCharacters(in: " \t\r")
            if trimmed.isEmpty { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw ConfigurationError("\(path):\(n + 1): expected 'name = value'")
            }
            let name = String(trimmed[..<eq]).trimmingCharacters(in: " \t")
            var value = String(trimmed[trimmed.index(after: eq)...]).trimmingCharacters(in: " \t")
            if value.count >= 2 && value.hasPrefix("\"") && value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            out.append((name.hasPrefix("--") ? String(name.dropFirst(2)) : name, value))
        }
        return out
    }

    package static func defaultReadFile(_ path: String) throws -> String {
        String(decoding: try Emulator.readFile(path, what: "config"), as: UTF8.self)
    }

    /// A DNS name: dot-separated labels of letters, digits and hyphens (1-63 each, 253 in all).
    static func isHostName(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 253 else { return false }
        return s.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        }
    }

    static func port(_ v: String, _ name: String) throws -> Int { try int(v, name, 0...65535) }

    static func int(_ v: String, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
        guard let n = Int(v), range.contains(n) else {
            throw ConfigurationError("--\(name) must be an integer in \(range.lowerBound)...\(range.upperBound), got '\(v)'")
        }
        return n
    }

    /// `64MiB`, `512m`, `2g`, `1048576`: a byte count with an optional binary suffix.
    static func size(_ v: String, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
        let lower = v.lowercased()
        let digits = lower.prefix { $0.isNumber }
        let unit = lower.dropFirst(digits.count)
        let shift: Int? =
            switch unit {
            case "", "b": 0
            case "k", "kb", "kib": 10
            case "m", "mb", "mib": 20
            case "g", "gb", "gib": 30
            case "t", "tb", "tib": 40
            default: nil
            }
        // 2^40 at most before the shift: nothing here can overflow.
        guard let shift, digits.count <= 13, let n = Int(digits), n <= 1 << 40, range.contains(n << shift) else {
            throw ConfigurationError(
                "--\(name) must be a size from \(range.lowerBound >> 20)MiB to \(range.upperBound >> 30)GiB (such as 256MiB), got '\(v)'")
        }
        return n << shift
    }

    static func double(_ v: String, _ name: String) throws -> Double {
        guard let d = Double(v), d >= 0, d.isFinite else { throw ConfigurationError("--\(name) must be a non-negative number, got '\(v)'") }
        return d
    }

    /// `90s`, `30m`, `12h`, `7d` or plain seconds, in milliseconds.
    static func bool(_ v: String, _ name: String) throws -> Bool {
        switch v.lowercased() {
        case "true", "yes", "1", "on": return true
        case "false", "no", "0", "off": return false
        default: throw ConfigurationError("--\(name) must be true or false, got '\(v)'")
        }
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
