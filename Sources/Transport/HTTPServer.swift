import CSystem
import Glibc

/// A bound listening address.
public struct BoundAddress: Sendable, CustomStringConvertible {
    public let host: String
    public let port: Int
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The HTTP server: listeners plus N event loops. Each loop accepts from the shared listening
/// sockets (EPOLLEXCLUSIVE) and keeps a connection while no other loop has fewer; otherwise it
/// hands it to the loop with the fewest (`Acceptor`), and that loop owns it from then on.
public final class HTTPServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    let core: ServerCore
    private var loops: [EventLoop] = []
    private var listeners: [(fd: Int32, tls: Bool, port: Int)] = []
    public private(set) var httpAddress: BoundAddress?
    public private(set) var httpsAddress: BoundAddress?
    /// The `extraTLSPorts` listeners, in that order, once started.
    private(set) var extraTLSAddresses: [BoundAddress] = []
    private var started = false

    /// Validates the configuration (TLS material included) without binding anything.
    public init(configuration: ServerConfiguration, router: Router) throws {
        self.configuration = configuration
        if (configuration.httpsPort != nil || !configuration.extraTLSPorts.isEmpty) && configuration.tls == nil {
            throw TransportError.tls("a TLS port was configured without a certificate")
        }
        core = try ServerCore(configuration: configuration, router: router)
    }

    /// Binds the listeners and starts the event loops. Throws on a port in use or a bad host.
    /// Ignores SIGPIPE for the process: TLS writes to a peer that reset its connection must fail
    /// with EPIPE, not kill an embedding process (a test running the server in process).
    public func start() throws {
        precondition(!started)
        signal(SIGPIPE, SIG_IGN)
        if let port = configuration.httpPort {
            let (fd, bound) = try HTTPServer.listen(host: configuration.host, port: port)
            listeners.append((fd, false, bound.port))
            httpAddress = bound
        }
        do {
            if let port = configuration.httpsPort {
                let (fd, bound) = try HTTPServer.listen(host: configuration.host, port: port)
                listeners.append((fd, true, bound.port))
                httpsAddress = bound
            }
            for port in configuration.extraTLSPorts {
                let (fd, bound) = try HTTPServer.listen(host: configuration.host, port: port)
                listeners.append((fd, true, bound.port))
                extraTLSAddresses.append(bound)
            }
        } catch {
            for listener in listeners { Glibc.close(listener.fd) }
            listeners = []
            throw error
        }
        let n = max(1, configuration.threads)
        for i in 0..<n {
            let loop = try EventLoop(index: i)
            loops.append(loop)
            core.loops.append(loop)
            for l in listeners {
                let acceptor = Acceptor(
                    fd: l.fd, loop: loop, core: core, tls: l.tls ? core.tls : nil,
                    localPort: l.port)
                _ = loop.register(fd: l.fd, handler: acceptor, events: CSYS_EPOLLIN, exclusive: true)
                loop.acceptors.append(acceptor)
            }
            let sweeper = Sweeper(loop: loop, budget: core.budget)
            loop.schedule(afterNanoseconds: 100_000_000, sweeper.tick)
        }
        // Started once every loop is in `core.loops`: an acceptor reads the list to balance.
        for loop in loops { loop.start() }
        started = true
    }

    /// Open connections on each loop, in loop order.
    public var connectionsPerLoop: [Int] { loops.map { $0.openConnections.load(ordering: .relaxed) } }

    /// Open connections over all loops.
    public var openConnections: Int {
        loops.reduce(0) { $0 + $1.openConnections.load(ordering: .relaxed) }
    }

    /// Open HTTP/2 streams over all loops.
    public var openStreams: Int {
        loops.reduce(0) { $0 + $1.openStreams.load(ordering: .relaxed) }
    }

    /// Stops accepting, sends GOAWAY / closes idle keep-alives, waits up to `drainTimeout`
    /// seconds for in-flight requests, then closes what is left and stops the loops.
    public func shutdown(drainTimeout: Double = 10) {
        guard started else { return }
        started = false
        for loop in loops {
            loop.execute {
                for a in loop.acceptors { a.stop() }
                for c in loop.connections { c.beginDrain() }
            }
        }
        let deadline = csys_monotonic_ns() + UInt64(max(0, drainTimeout) * 1e9)
        while openConnections > 0 && csys_monotonic_ns() < deadline {
            usleep(5_000)
        }
        for loop in loops {
            loop.execute {
                for c in loop.connections { c.close() }
            }
            loop.stop()
        }
        for loop in loops { loop.join() }
        for listener in listeners { Glibc.close(listener.fd) }
        listeners = []
        loops = []
    }

    static func listen(host: String, port: Int) throws -> (Int32, BoundAddress) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var res: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &res)
        guard rc == 0, let first = res else {
            throw TransportError.address("cannot resolve host '\(host)': \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(res) }
        let fd = csys_tcp_socket(first.pointee.ai_family)
        guard fd >= 0 else { throw TransportError.system("socket", errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if first.pointee.ai_family == AF_INET6 {
            // "::" means every address, IPv4 included; any other IPv6 address means just itself.
            var v6only: Int32 = host == "::" ? 0 : 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &v6only, socklen_t(MemoryLayout<Int32>.size))
        }
        if bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 {
            let e = errno
            Glibc.close(fd)
            throw TransportError.system("cannot listen on \(BoundAddress(host: host, port: port))", e)
        }
        if Glibc.listen(fd, 4096) != 0 {
            let e = errno
            Glibc.close(fd)
            throw TransportError.system("listen", e)
        }
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let boundPort: Int = withUnsafeMutablePointer(to: &ss) { p in
            _ = p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
            if p.pointee.ss_family == sa_family_t(AF_INET6) {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        return (fd, BoundAddress(host: host, port: boundPort))
    }
}

/// Accepts connections from one listening socket on one loop.
final class Acceptor: EventHandler {
    let fd: Int32
    unowned let loop: EventLoop
    let core: ServerCore
    let tls: TLSContext?
    let localPort: Int
    /// Clients admitted past the limit per loop, only to be told so. One more resets the
    /// oldest of them (a TCP RST): every newcomer is heard, and a probe of `/healthz` arriving
    /// in a flood is answered before 256 newer ones push it out.
    static let maxShedding = 256

    init(fd: Int32, loop: EventLoop, core: ServerCore, tls: TLSContext?, localPort: Int) {
        self.fd = fd
        self.loop = loop
        self.core = core
        self.tls = tls
        self.localPort = localPort
    }

    fileprivate var paused = false
    fileprivate var stopped = false

    /// Stops accepting (shutdown).
    func stop() {
        stopped = true
        if !paused { loop.unregister(fd: fd) }
    }

    func handle(events: UInt32) {
        for _ in 0..<64 {
            let cfd = csys_accept(fd)
            if cfd < 0 {
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    pauseAccepting()
                }
                break
            }
            if let other = lessLoadedLoop() {
                handOff(cfd, to: other)
            } else {
                admit(cfd)
            }
        }
    }

    /// The loop with the fewest connections (those it is about to adopt counted), when it has
    /// fewer than this one; nil keeps the connection here. Whichever loop epoll wakes accepts,
    /// and one wake-up takes a whole burst (a load generator opening its connections at once),
    /// so without this one loop could own most of them while the others idle.
    private func lessLoadedLoop() -> EventLoop? {
        let loops = core.loops
        guard loops.count > 1 else { return nil }
        var best = loop
        var least = loop.connectionLoad
        for l in loops where l !== loop {
            let n = l.connectionLoad
            if n < least {
                best = l
                least = n
            }
        }
        return best === loop ? nil : best
    }

    /// Gives an accepted socket to `other`'s acceptor for the same listener, on its thread.
    private func handOff(_ cfd: Int32, to other: EventLoop) {
        other.incomingConnections.add(1, ordering: .relaxed)
        let listener = fd
        other.execute {
            defer { other.incomingConnections.subtract(1, ordering: .relaxed) }
            guard let peer = other.acceptors.first(where: { $0.fd == listener }), !peer.stopped else {
                Glibc.close(cfd) // the server is stopping
                return
            }
            peer.admit(cfd)
        }
    }

    /// Takes an accepted socket on this loop: a connection slot (or one freed by closing an
    /// idle connection), else a brief stay to be told the server is full.
    func admit(_ cfd: Int32) {
        let cost = tls != nil ? ConnectionBudget.tlsCost : ConnectionBudget.cleartextCost
        var holdsSlot = core.budget.admitConnection(cost: cost)
        if !holdsSlot, loop.evictIdleConnection() { holdsSlot = core.budget.admitConnection(cost: cost) }
        if !holdsSlot {
            // None idle here: the busiest other loop closes its idlest, and this client
            // takes that slot when its first request arrives (else it is answered 503).
            if let other = core.loops.filter({ $0 !== loop }).max(by: {
                $0.openConnections.load(ordering: .relaxed) < $1.openConnections.load(ordering: .relaxed)
            }) {
                other.execute { _ = other.evictIdleConnection() }
            }
            if loop.sheddingConnections >= Acceptor.maxShedding { resetOldestShedding() }
            loop.sheddingConnections += 1
        }
        var one: Int32 = 1
        setsockopt(cfd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let conn = Connection(fd: cfd, loop: loop, core: core, tls: tls, localPort: localPort, holdsSlot: holdsSlot)
        if !holdsSlot { loop.sheddingQueue.append(conn) }
        _ = conn.start()
    }

    /// Resets the oldest connection still waiting past the limit (it took a slot meanwhile, or
    /// closed: skipped), and drops what the queue's head has passed once that is most of it.
    private func resetOldestShedding() {
        while loop.sheddingQueueHead < loop.sheddingQueue.count {
            let c = loop.sheddingQueue[loop.sheddingQueueHead]
            loop.sheddingQueueHead += 1
            if c.isWaitingPastLimit {
                c.reset()
                break
            }
        }
        if loop.sheddingQueueHead > 64 && loop.sheddingQueueHead * 2 > loop.sheddingQueue.count {
            loop.sheddingQueue.removeFirst(loop.sheddingQueueHead)
            loop.sheddingQueueHead = 0
        }
    }
}

extension Acceptor {
    /// Out of descriptors: the pending connection stays queued and level-triggered epoll would
    /// wake this loop forever, so stop listening for 100 ms.
    func pauseAccepting() {
        guard !paused, !stopped else { return }
        paused = true
        loop.unregister(fd: fd)
        loop.schedule(afterNanoseconds: 100_000_000) { [self] in
            paused = false
            guard !stopped else { return }
            _ = loop.register(fd: fd, handler: self, events: CSYS_EPOLLIN, exclusive: true)
        }
    }
}

/// Every 100 ms, measures this loop's buffers against the server's budget (closing the
/// largest holders while it is exceeded, and trimming the heap once an excess is gone); every
/// second, closes connections that overstayed their timeouts.
final class Sweeper {
    unowned let loop: EventLoop
    let budget: ConnectionBudget
    private var ticks = 0
    /// The most this loop held since the heap was last trimmed.

    init(loop: EventLoop, budget: ConnectionBudget) {
        self.loop = loop
        self.budget = budget
        loop.pressureThreshold = max(1 << 20, budget.perLoopShare / 8)
        loop.measureNow = { [unowned self] in self.measure(now: csys_monotonic_ns()) }
    }

    func tick() {
        let now = csys_monotonic_ns()
        ticks &+= 1
        if ticks % 10 == 0 {
            for c in loop.connections { c.checkTimeout(now: now) }
        }
        loop.compactSheddingQueue()
        measure(now: now)
        loop.schedule(afterNanoseconds: 100_000_000, tick)
    }

    private func measure(now: UInt64) {
        let connections = loop.connections // closed ones are unregistered, so not listed
        var held = 0
        for c in connections { held += c.bufferedBytes }
        let total = budget.publish(loop: loop.index, bytes: held)
        if total > budget.maxBufferedBytes && held > budget.perLoopShare {
            // Over budget: this loop sheds its largest holders until its share fits.
            for c in connections.sorted(by: { $0.bufferedBytes > $1.bufferedBytes }) where held > budget.perLoopShare {
                held -= c.bufferedBytes
                c.close()
            }
            _ = budget.publish(loop: loop.index, bytes: held)
        }
    }
}
