import CSystem
import Glibc

// pushemu-load: an h2c load generator whose requests differ, for the benchmarks of senders of
// personalised messages (h2load sends one body). Its options and output follow h2load's, so the
// scripts read both alike:
//
//   pushemu-load -n N -c C -m M [-d FILE] [-H 'name: value']... [--timeout S] http://HOST:PORT/PATH
//
// FILE (the body) and PATH may hold `{n}`, `{hex}` and `{name}` (see BodyTemplate): each
// request gets its own. One thread, C connections, M streams in flight on each.

/// The run's counts, shared by its connections (one thread).
final class Tally {
    var started = 0
    var done = 0
    var byClass = [0, 0, 0, 0, 0, 0]
}

/// `value` with `places` decimals, as h2load prints rates.
func fixed(_ value: Double, _ places: Int) -> String {
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    var text = String((value * scale).rounded() / scale)
    if let dot = text.firstIndex(of: ".") {
        let decimals = text.distance(from: dot, to: text.endIndex) - 1
        text += String(repeating: "0", count: max(0, places - decimals))
    }
    return text
}

/// Sends the run and prints h2load's summary lines; the exit status (0 when every request was
/// answered).
func run(_ options: Options) -> Int32 {
    let tally = Tally()
    let next: () -> LoadConnection.Request? = {
        guard tally.started < options.total else { return nil }
        let n = tally.started
        tally.started += 1
        return LoadConnection.Request(path: options.path.render(n), body: options.body.render(n))
    }
    let finished: (Int) -> Void = { status in
        tally.done += 1
        tally.byClass[(100...599).contains(status) ? status / 100 : 0] += 1
    }
    let start = csys_monotonic_ns()
    var live: [LoadConnection] = []
    do {
        for _ in 0..<options.connections {
            live.append(
                try LoadConnection(
                    host: options.host, port: options.port, streams: options.streams, headers: options.headers,
                    next: next, finished: finished))
        }
    } catch {
        fail("\(error)", code: 1)
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    var failures: [String] = []
    let deadline = start + UInt64(options.timeout * 1e9)
    while !live.isEmpty {
        for connection in live { connection.write() }
        var polls = live.map { pollfd(fd: $0.fd, events: Int16(POLLIN) | ($0.wantsWrite ? Int16(POLLOUT) : 0), revents: 0) }
        if poll(&polls, nfds_t(polls.count), 1000) < 0 && errno != EINTR { fail("poll: errno \(errno)", code: 1) }
        for (index, connection) in live.enumerated() where polls[index].revents != 0 {
            connection.read(into: &buffer)
        }
        for connection in live where connection.done {
            if let failure = connection.failure { failures.append(failure) }
        }
        live.removeAll { $0.done }
        if csys_monotonic_ns() > deadline {
            failures.append("timed out after \(options.timeout) s with \(tally.started - tally.done) requests in flight")
            break
        }
    }
    let seconds = Double(csys_monotonic_ns() - start) / 1e9
    let varies = options.body.varies || options.path.varies
    csys_write_stdout(
        """
        finished in \(fixed(seconds, 2))s, \(fixed(Double(tally.done) / max(seconds, 1e-9), 2)) req/s
        requests: \(options.total) total, \(tally.started) started, \(tally.done) done, \(tally.done) succeeded, \(options.total - tally.done) failed, 0 errored, 0 timeout
        status codes: \(tally.byClass[2]) 2xx, \(tally.byClass[3]) 3xx, \(tally.byClass[4]) 4xx, \(tally.byClass[5]) 5xx
        bodies: \(varies ? "each request its own" : "one for every request (no {n}, {hex} or {name})")

        """)
    for failure in Set(failures).sorted() { csys_write_stderr("pushemu-load: \(failure)\n") }
    return failures.isEmpty && tally.done == options.total ? 0 : 1
}

exit(run(parse(CommandLine.arguments)))
