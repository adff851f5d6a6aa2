import Emulator

/// One command besides `serve`, as its `--help` shows it and its parser accepts it: the words
/// that name it, an operand, a one-line summary and its options. The usage line and the
/// options the parser allows come from the same list, so they cannot drift apart.
struct CommandSpec {
    struct Option {
        let name: String
        let value: String
        let help: String
        var required = false
        /// A switch that takes no value (`--bundle`).
        var isSwitch: Bool { value.isEmpty }
    }

    let words: [String]
    let operand: String?
    let summary: String
    /// Its options, `--json` last for a command that prints an admin API answer readably.
    let options: [Option]

    init(words: [String], operand: String?, summary: String, options: [Option], readable: Bool = false) {
        self.words = words
        self.operand = operand
        self.summary = summary
        self.options = readable ? options + [CommandSpec.json] : options
    }

    static let json = Option(name: "json", value: "", help: "print the admin API's answer, JSON, instead of a table (for scripts)")

    /// The option names the parser accepts.
    var allowed: Set<String> { Set(options.map(\.name)) }

    /// `pushemu credentials apns [--team-id T] ...`.
    var usageLine: String {
        var line = "pushemu " + words.joined(separator: " ")
        if let operand { line += " " + operand }
        for option in options {
            let text = option.isSwitch ? "--\(option.name)" : "--\(option.name) \(option.value)"
            line += option.required ? " " + text : " [\(text)]"
        }
        return line
    }

    /// What `pushemu <command> --help` prints.
    var help: String {
        var text = "usage: \(usageLine)\n\n\(summary)\n"
        if !options.isEmpty {
            text += "\nOptions:\n"
            for option in options {
                let left = option.isSwitch ? "  --\(option.name)" : "  --\(option.name) \(option.value)"
                text += left + String(repeating: " ", count: max(1, 30 - left.count)) + option.help + "\n"
            }
        }
        return text
    }

    static let timeHelp = "milliseconds since the epoch, 2026-11-29T10:00:00Z, or an age such as 30m, 12h, 7d"
    static let server = Option(
        name: "server", value: "URL",
        help: "the running emulator (default http://127.0.0.1:8080, or the PUSHEMU_HOST and PUSHEMU_HTTP_PORT serve uses)")
    /// What the notification commands search by (the admin API's parameters and `q`).
    static let searchOptions = [
        server,
        Option(name: "q", value: "TERMS", help: "search terms, e.g. \"campaign:spring display:not-shown sale\""),
        Option(name: "provider", value: "apns|fcm", help: "only this provider's"),
        Option(name: "token", value: "T", help: "only this device's"),
        Option(name: "campaign", value: "ID", help: "only this campaign's"),
    ]
    static let dataDirectory = Option(
        name: "data-dir", value: "DIR", help: "the emulator's data directory (default PUSHEMU_DATA_DIR, the config file's, or ./.pushemu)")

    /// Every command, in the order `pushemu --help` lists them.
    static let all: [CommandSpec] = [
        CommandSpec(
            words: ["credentials", "apns"], operand: nil,
            summary:
                "Writes a .p8 signing key and registers its public half with a running emulator (--server) or in the data directory.",
            options: [
                Option(name: "team-id", value: "T", help: "the 10-character team id (default: generated)"),
                Option(name: "key-id", value: "K", help: "the 10-character key id (default: generated)"),
                Option(name: "out", value: "DIR", help: "where AuthKey_<KEYID>.p8 is written (default .)"),
                Option(name: "server", value: "URL", help: "register it with this running emulator, over its admin API"),
                dataDirectory,
                Option(name: "environment", value: "sandbox|production", help: "limit the key to one environment"),
                Option(name: "topics", value: "a,b", help: "a topic-specific key for these bundle ids"),
            ]),
        CommandSpec(
            words: ["credentials", "fcm"], operand: nil,
            summary:
                "Writes a service-account JSON key file and registers it with a running emulator (--server) or in the data directory.",
            options: [
                Option(name: "project", value: "P", help: "the Firebase project id", required: true),
                Option(name: "out", value: "FILE", help: "where the key file is written (default: standard output)"),
                Option(
                    name: "token-uri", value: "URL|google",
                    help: "the file's token_uri (default: the emulator's /token; google: Google's own, for the proxy)"),
                Option(name: "server", value: "URL", help: "register it with this running emulator, over its admin API"),
                dataDirectory,
            ]),
        CommandSpec(
            words: ["credentials", "vapid"], operand: nil,
            summary:
                "Makes a VAPID key pair for Web Push senders: the private key as PEM (--out FILE, or printed) and both halves base64url (the public one is a subscription's applicationServerKey).",
            options: [
                Option(name: "out", value: "FILE", help: "where the private key's PEM is written (mode 0600; default: printed in the JSON)")
            ]),
        CommandSpec(
            words: ["env"], operand: nil,
            summary:
                "Prints the variables that point unmodified senders at the emulator's proxy: eval \"$(pushemu env)\" (writes the CA files first).",
            options: [
                Option(name: "shell", value: "sh|fish|powershell", help: "the syntax (default sh)"),
                Option(name: "host", value: "ADDR", help: "the emulator's address (default 127.0.0.1, or PUSHEMU_HOST)"),
                Option(name: "http-port", value: "PORT", help: "its cleartext port, the proxy (default 8080, or PUSHEMU_HTTP_PORT)"),
                Option(name: "no-proxy", value: "a,b", help: "more hosts that bypass the proxy (localhost and loopback always do)"),
                Option(
                    name: "data-dir", value: "DIR",
                    help: "where the CA files are written, under ca/ (default ./.pushemu, or PUSHEMU_DATA_DIR)"),
            ]),
        CommandSpec(
            words: ["ca"], operand: nil, summary: "Writes the development CA (or the system's CAs plus it, with --bundle) as PEM.",
            options: [
                Option(name: "out", value: "FILE", help: "where (default: standard output)"),
                Option(name: "bundle", value: "", help: "the system's trusted CAs followed by the development CA"),
            ]),
        CommandSpec(
            words: ["token", "apns"], operand: nil, summary: "Prints a provider token (JWT) signed with a .p8 key.",
            options: [
                Option(name: "key", value: "FILE", help: "the .p8 signing key", required: true),
                Option(name: "key-id", value: "K", help: "the key id", required: true),
                Option(name: "team-id", value: "T", help: "the team id", required: true),
                Option(name: "iat", value: "SECONDS", help: "the issue time (default now)"),
            ]),
        CommandSpec(
            words: ["token", "vapid"], operand: nil,
            summary: "Prints a Web Push sender's Authorization header (vapid t=JWT,k=KEY) signed with a VAPID key, for curl.",
            options: [
                Option(
                    name: "key", value: "FILE", help: "the VAPID private key as PEM (pushemu credentials vapid --out FILE)", required: true),
                Option(name: "aud", value: "ORIGIN", help: "the push service's origin, e.g. https://fcm.googleapis.com", required: true),
                Option(name: "sub", value: "SUBJECT", help: "a mailto: or https: contact (default mailto:ops@example.com)"),
                Option(name: "exp", value: "SECONDS", help: "the expiry, seconds since the epoch (default now + 12 hours)"),
            ]),
        CommandSpec(
            words: ["devices", "add"], operand: nil, summary: "Adds a simulated device to a running emulator and prints it.",
            options: [
                server,
                Option(name: "platform", value: "ios|android|web", help: "the device's platform", required: true),
                Option(name: "app", value: "APP", help: "bundle id or package name (web: the site's origin)", required: true),
                Option(name: "browser", value: "B", help: "web: chrome, firefox, safari or edge"),
                Option(name: "application-server-key", value: "KEY", help: "web: the site's VAPID public key (base64url)"),
                Option(name: "local-endpoint", value: "", help: "web: an endpoint under the emulator's own address"),
                Option(name: "token", value: "T", help: "its token (default: generated)"),
                Option(name: "environment", value: "E", help: "iOS: sandbox or production"),
                Option(name: "project", value: "P", help: "the Firebase project (Android, or iOS with --fcm-token)"),
                Option(name: "tracking", value: "JSON", help: "its SDK tracking, e.g. {\"preset\":\"braze\",\"url\":...}"),
                Option(
                    name: "registration", value: "JSON", help: "how its app registers, e.g. {\"preset\":\"adobe-campaign\",\"url\":...}"),
                Option(name: "behavior", value: "JSON", help: "its behaviour, e.g. {\"openRate\":0.1}"),
                Option(name: "permission", value: "P", help: "notification permission: authorized, provisional or denied"),
                Option(name: "app-state", value: "S", help: "foreground, background, killed or offline"),
                Option(name: "url-schemes", value: "a,b", help: "the URL schemes its app declares (links are linted against them)"),
                Option(name: "sounds", value: "a,b", help: "the sound files in its app bundle"),
                Option(name: "labels", value: "a,b", help: "labels fault rules and queries can select"),
                Option(name: "topics", value: "a,b", help: "FCM topic subscriptions (Android, or iOS with --fcm-token)"),
                Option(name: "fcm-token", value: "T|new", help: "iOS with the Firebase SDK: its FCM registration token (new: generated)"),
            ], readable: true),
        CommandSpec(
            words: ["devices", "list"], operand: nil, summary: "Lists the devices a running emulator holds as records.",
            options: [
                server, Option(name: "label", value: "L", help: "only devices with this label"),
                Option(name: "limit", value: "N", help: "at most N (1-10000, default 100)"),
                Option(name: "cursor", value: "C", help: "the page after this \"next\" (the table's last line gives it)"),
            ], readable: true),
        CommandSpec(words: ["devices", "show"], operand: "TOKEN", summary: "Prints one device.", options: [server], readable: true),
        CommandSpec(
            words: ["notifications", "list"], operand: nil,
            summary: "Prints the notifications a running emulator recorded (a page with --order or --cursor).",
            options: searchOptions + [
                Option(name: "limit", value: "N", help: "at most N (1-10000, default 100)"),
                Option(name: "order", value: "asc|desc", help: "a page in (receive time, id) order, with its \"next\" cursor"),
                Option(name: "cursor", value: "C", help: "the page after this \"next\""),
            ], readable: true),
        CommandSpec(
            words: ["notifications", "latest"], operand: nil,
            summary: "Prints the newest matching notification, whole; fails when none matches (a one-line CI assertion).",
            options: searchOptions + [Option(name: "wait", value: "SECONDS", help: "wait up to this long for one (0-300)")], readable: true),
        CommandSpec(
            words: ["notifications", "show"], operand: "ID", summary: "Prints one notification, whole (device, tracking calls).",
            options: [server], readable: true),
        CommandSpec(
            words: ["notifications", "delete"], operand: nil, summary: "Forgets the matching notifications (all, without filters).",
            options: searchOptions, readable: true),
        CommandSpec(
            words: ["devices", "uninstall"], operand: "TOKEN", summary: "Uninstalls the device's app (its next push is unregistered).",
            options: [server], readable: true),
        CommandSpec(
            words: ["activity", "start"], operand: "TOKEN",
            summary: "Starts a Live Activity on an iOS device (as the app would) and prints it with its push token.",
            options: [
                server,
                Option(name: "type", value: "NAME", help: "its ActivityKit attributes type", required: true),
                Option(name: "attributes", value: "JSON", help: "its static attributes (default {})"),
                Option(name: "content-state", value: "JSON", help: "its first content state (default {})"),
                Option(name: "channel", value: "ID", help: "a broadcast channel it listens to"),
            ], readable: true),
        CommandSpec(
            words: ["activity", "subscribe"], operand: "TOKEN",
            summary: "Subscribes a device's Live Activity to a broadcast channel (it gets the channel's stored message).",
            options: [
                server, Option(name: "activity", value: "ID", help: "the activity's id", required: true),
                Option(name: "channel", value: "ID", help: "the channel id", required: true),
            ], readable: true),
        CommandSpec(
            words: ["activity", "end"], operand: "TOKEN", summary: "Ends a device's Live Activity (the user dismissed it).",
            options: [server, Option(name: "activity", value: "ID", help: "the activity's id", required: true)], readable: true),
        CommandSpec(
            words: ["activity", "list"], operand: "TOKEN", summary: "Prints a device's Live Activities.", options: [server], readable: true),
        CommandSpec(
            words: ["activity", "push-to-start"], operand: "TOKEN",
            summary: "Prints the device's push-to-start token for an attributes type (made on first request).",
            options: [server, Option(name: "type", value: "NAME", help: "the ActivityKit attributes type", required: true)], readable: true),
        CommandSpec(
            words: ["fleet", "create"], operand: nil, summary: "Creates a fleet of simulated devices in a running emulator.",
            options: [
                server,
                Option(name: "platform", value: "ios|android|web", help: "the devices' platform", required: true),
                Option(name: "app", value: "APP", help: "bundle id or package name (web: the site's origin)", required: true),
                Option(name: "count", value: "N", help: "how many devices", required: true),
                Option(name: "browser", value: "B", help: "web: chrome (default), firefox, safari or edge"),
                Option(name: "application-server-key", value: "KEY", help: "web: the site's VAPID public key (base64url)"),
                Option(name: "environment", value: "E", help: "iOS: sandbox or production"),
                Option(name: "project", value: "P", help: "Android: the Firebase project"),
                Option(name: "seed", value: "S", help: "the seed of its tokens and behaviour"),
                Option(name: "tracking", value: "JSON", help: "the devices' SDK tracking"),
                Option(name: "registration", value: "JSON", help: "how the devices' apps register (in bulk, at --register-rate)"),
                Option(name: "register-rate", value: "N", help: "registrations a second (default 10000)"),
                Option(name: "behavior", value: "JSON", help: "the devices' behaviour"),
                Option(name: "permission", value: "P|JSON", help: "one permission, or shares: {\"authorized\":0.8,\"denied\":0.2}"),
                Option(name: "app-state", value: "S|JSON", help: "one app state, or shares of foreground, background, killed, offline"),
                Option(name: "url-schemes", value: "a,b", help: "the URL schemes its app declares"),
                Option(name: "sounds", value: "a,b", help: "the sound files in its app bundle"),
                Option(name: "labels", value: "a,b", help: "labels of every device in the fleet"),
            ], readable: true),
        CommandSpec(
            words: ["fleet", "tokens"], operand: "ID", summary: "Prints a fleet's tokens, one per line (all of them by default).",
            options: [
                server, Option(name: "offset", value: "N", help: "the first token's index (default 0)"),
                Option(name: "limit", value: "N", help: "at most N tokens"),
            ]),
        CommandSpec(
            words: ["fleet", "subscriptions"], operand: "ID",
            summary: "Prints a web fleet's subscriptions (PushSubscription.toJSON()), one JSON object per line.",
            options: [
                server, Option(name: "offset", value: "N", help: "the first member's index (default 0)"),
                Option(name: "limit", value: "N", help: "at most N subscriptions (default: all)"),
                Option(name: "endpoints", value: "real|local", help: "endpoints under the services' hosts or the emulator's address"),
            ]),
        CommandSpec(words: ["fleet", "list"], operand: nil, summary: "Lists the fleets.", options: [server], readable: true),
        CommandSpec(
            words: ["fleet", "show"], operand: "ID", summary: "Prints one fleet (with its registration's progress).", options: [server],
            readable: true),
        CommandSpec(
            words: ["faults", "list"], operand: nil, summary: "Lists the fault rules, with how often each matched and fired.",
            options: [server], readable: true),
        CommandSpec(
            words: ["faults", "add"], operand: "RULE",
            summary: "Adds a fault rule: its JSON (docs/faults.md) inline, @FILE, or - for standard input.", options: [server],
            readable: true),
        CommandSpec(
            words: ["faults", "delete"], operand: "ID", summary: "Deletes a fault rule (all: every rule).", options: [server],
            readable: true),
        CommandSpec(
            words: ["reset"], operand: nil,
            summary:
                "Forgets what a running emulator holds: devices, fleets, subscriptions, rules, notifications, the journal (credentials stay).",
            options: [server, Option(name: "all", value: "", help: "credentials too")], readable: true),
        CommandSpec(
            words: ["stats"], operand: nil, summary: "Prints a running emulator's counts (devices, deliveries, tracking, journal).",
            options: [server], readable: true),
        CommandSpec(
            words: ["state", "export"], operand: nil,
            summary:
                "Prints the emulator's state (credentials, fleets, devices, subscriptions, channels, rules) as JSON lines, from a running emulator or a stopped one's --data-dir.",
            options: [
                Option(name: "out", value: "FILE", help: "write it there instead of standard output"),
                Option(name: "server", value: "URL", help: "a running emulator (the default, at http://127.0.0.1:8080)"),
                Option(name: "data-dir", value: "DIR", help: "a stopped emulator's data directory instead of --server"),
            ]),
        CommandSpec(
            words: ["state", "import"], operand: "FILE",
            summary: "Reads a state export into a running emulator, or into a stopped one's --data-dir (its next start has it).",
            options: [
                Option(name: "replace", value: "", help: "forget the state first (without it, the file's records go over what is there)"),
                Option(name: "server", value: "URL", help: "a running emulator (the default, at http://127.0.0.1:8080)"),
                Option(name: "data-dir", value: "DIR", help: "a stopped emulator's data directory instead of --server"),
            ], readable: true),
        CommandSpec(
            words: ["export"], operand: nil, summary: "Prints the journal, one JSON object per line (no server needed).",
            options: [
                Option(name: "since", value: "T", help: timeHelp), Option(name: "format", value: "ndjson", help: "the only format"),
                dataDirectory,
            ]),
        CommandSpec(
            words: ["report"], operand: nil,
            summary:
                "The campaign report (per campaign: outcomes, rejections, tracking, rates, timeline), from --data-dir or a running emulator.",
            options: [
                Option(name: "campaign", value: "ID", help: "one campaign only"), Option(name: "since", value: "T", help: timeHelp),
                Option(name: "format", value: "text|json|html", help: "default text"),
                Option(name: "out", value: "FILE", help: "write it there instead of standard output"), dataDirectory,
                Option(name: "server", value: "URL", help: "a running emulator's report instead of --data-dir"),
            ]),
        CommandSpec(
            words: ["campaigns"], operand: nil,
            summary: "Every campaign's totals (sent, accepted, rejections by reason) from a running emulator's journal index, at once.",
            options: [
                Option(name: "campaign", value: "ID", help: "one campaign only"), Option(name: "since", value: "T", help: timeHelp), server,
            ], readable: true),
    ]

    /// The spec named by the first words of `args`, and the arguments after them.
    static func find(_ args: [String]) -> (CommandSpec, [String])? {
        for spec in all where args.count >= spec.words.count && Array(args.prefix(spec.words.count)) == spec.words {
            return (spec, Array(args.dropFirst(spec.words.count)))
        }
        return nil
    }

    /// The commands of a group (`devices`, `fleet`, ...) for a `--help` or a bad subcommand.
    static func group(_ word: String) -> String {
        "usage:\n" + all.filter { $0.words.first == word }.map { "  " + $0.usageLine + "\n" }.joined()
            + "(pushemu \(word) <command> --help for one command's options)\n"
    }

    /// `pushemu --help`: every command, then serve's options.
    static var overview: String {
        var text = "pushemu \(ServeOptions.version): an emulator of the APNs provider API and the FCM HTTP v1 API.\n\nUsage:\n"
        text += "  pushemu [serve] [options]\n      start the emulator (the default command; its options below)\n"
        for spec in all { text += "  \(spec.usageLine)\n      \(spec.summary)\n" }
        text += "  pushemu --help | --version | <command> --help\n\n"
        return text + ServeOptions.optionsHelp
    }
}
