import CSystem
import Glibc
import Runtime

/// Exits with `message` on stderr.
func fail(_ message: String, code: Int32 = 2) -> Never {
    csys_write_stderr("pushemu-load: \(message)\n")
    exit(code)
}

/// A body template: at most 16 MiB (each request's body is made from it).
func readFile(_ path: String) -> [UInt8] {
    guard let bytes = Files.read(path, limit: 16 << 20) else { fail("cannot read \(path), or it is over 16 MiB") }
    return bytes
}

func count(_ option: String, _ text: String, max: Int) -> Int {
    guard let n = Int(text), n >= 1, n <= max else { fail("\(option) takes a whole number from 1 to \(max), not \(text)") }
    return n
}

/// What the command line asked for.
struct Options {
    var total = 1, connections = 1, streams = 1, timeout = 300.0
    var body = BodyTemplate([])
    var path = BodyTemplate(Array("/".utf8))
    var headers: [([UInt8], [UInt8])] = []
    var host = "127.0.0.1"
    var port = 80
}

func parse(_ commandLine: [String]) -> Options {
    var options = Options()
    var url: String?
    var arguments = commandLine.dropFirst()
    func value(_ option: String) -> String {
        guard let v = arguments.popFirst() else { fail("\(option) needs a value") }
        return v
    }
    while let argument = arguments.popFirst() {
        switch argument {
        case "-n": options.total = count("-n", value("-n"), max: 1_000_000_000)
        case "-c": options.connections = count("-c", value("-c"), max: 10_000)
        case "-m": options.streams = count("-m", value("-m"), max: 1_000)
        case "-d": options.body = BodyTemplate(readFile(value("-d")))
        case "--timeout":
            guard let t = Double(value("--timeout")), t > 0, t <= 86_400 else { fail("--timeout takes seconds, at most a day") }
            options.timeout = t
        case "-H":
            let header = value("-H")
            guard let colon = header.dropFirst().firstIndex(of: ":") else { fail("-H takes 'name: value', not \(header)") }
            let name = header[..<colon].lowercased()
            let text = header[header.index(after: colon)...].drop { $0 == " " }
            options.headers.append((Array(name.utf8), Array(text.utf8)))
        case "-h", "--help":
            csys_write_stdout(
                """
                usage: pushemu-load -n N -c C -m M [-d FILE] [-H 'name: value']... [--timeout S] http://HOST:PORT/PATH
                Sends N POST requests over C h2c connections, M streams in flight on each. In FILE (the
                body) and PATH, {n} becomes the request's number, {hex} 32 hex digits drawn from it and
                {name} a first name: every request differs. Prints h2load's summary lines.

                """)
            exit(0)
        default:
            guard argument.hasPrefix("http://"), url == nil else { fail("unknown argument \(argument) (see --help)") }
            url = argument
        }
    }
    guard let url else { fail("no URL (http://HOST:PORT/PATH; only h2c)") }
    let rest = url.dropFirst("http://".count)
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let hostPort = rest[..<slash]
    options.path = BodyTemplate(Array((rest[slash...].isEmpty ? "/" : rest[slash...]).utf8))
    let portText: Substring
    if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") {
        options.host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
        portText = hostPort[close...].dropFirst(2)
    } else if let colon = hostPort.lastIndex(of: ":") {
        options.host = String(hostPort[..<colon])
        portText = hostPort[hostPort.index(after: colon)...]
    } else {
        options.host = String(hostPort)
        portText = "80"
    }
    options.port = count("the URL's port", String(portText), max: 65535)
    return options
}
