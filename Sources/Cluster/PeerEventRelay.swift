import Glibc
import Runtime

/// The other nodes' events for one reader of a cluster's event stream. One thread per reader
/// holds a connection to every other healthy node's `/emulator/v1/events` (asked with
/// `x-pushemu-local: 1` and the reader's filters, so each node streams its own events, already
/// filtered and naming their node) and hands each whole frame to `put`, without its `id:` line
/// (ids are each node's own). The node list is read again every 2 s: a node that joins is
/// connected, one that drops is connected again once it is back. Nothing goes through Redis
/// but the node list. It stops when `put` says the reader has gone.
public enum PeerEventRelay {
    /// The most a peer's unread bytes may grow to before its connection is dropped (a frame that long is not an event).
    static let maxPending = 1 << 20

    /// Starts the relay: `target` is the reader's path and query; `put` takes one frame and
    /// returns false once the reader has gone.
    public static func start(link: ClusterLink, target: String, put: @escaping @Sendable ([UInt8]) -> Bool) {
        _ = Threads.spawn { run(link: link, target: target, put: put) }
    }

    final class Peer {
        let name: String
        let fd: Int32
        var bytes: [UInt8] = []
        var headRead = false
        init(name: String, fd: Int32) {
            self.name = name
            self.fd = fd
        }
        deinit { Glibc.close(fd) }
    }

    static func run(link: ClusterLink, target: String, put: @Sendable ([UInt8]) -> Bool) {
        var peers: [String: Peer] = [:]
        var nextRefresh: Int64 = 0
        var buf = [UInt8](repeating: 0, count: 65_536)
        while true {
            if monotonicMs() >= nextRefresh {
                nextRefresh = monotonicMs() + 2_000
                // An empty frame asks whether the reader is still there.
                guard put([]) else { return }
                if let nodes = try? link.nodes().nodes {
                    for n in nodes where n.healthy && !n.isSelf && peers[n.name] == nil {
                        if let fd = open(n.url, target) { peers[n.name] = Peer(name: n.name, fd: fd) }
                    }
                }
            }
            let list = Array(peers.values)
            guard !list.isEmpty else {
                usleep(200_000)
                continue
            }
            var fds = list.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), 200)
            guard ready > 0 else { continue }
            for (i, peer) in list.enumerated() where fds[i].revents != 0 {
                let n = buf.withUnsafeMutableBytes { recv(peer.fd, $0.baseAddress, $0.count, 0) }
                if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                guard n > 0, peer.bytes.count + n <= maxPending else {
                    peers[peer.name] = nil
                    continue
                }
                peer.bytes += buf[0..<n]
                guard frames(peer, put) else {
                    if peer.bytes.isEmpty && !peer.headRead {
                        peers[peer.name] = nil
                        continue
                    }
                    return
                }
            }
        }
    }

    /// Connects to a node's event stream; nil when it cannot be reached.
    static func open(_ base: String, _ target: String) -> Int32? {
        guard base.hasPrefix("http://"), let hostPort = base.dropFirst("http://".count).split(separator: "/").first,
            let url = RedisURL("redis://" + hostPort)
        else { return nil }
        let request = "GET \(target) HTTP/1.1\r\nHost: \(hostPort)\r\nx-pushemu-local: 1\r\nAccept: text/event-stream\r\n\r\n"
        return try? RedisConnection(url, timeoutMs: 1_000).openStream(Array(request.utf8))
    }

    /// Hands on every whole frame `peer` holds; false when the reader has gone, or (with the
    /// peer's bytes emptied and its head unread) when the node did not answer with a stream.
    static func frames(_ peer: Peer, _ put: ([UInt8]) -> Bool) -> Bool {
        var start = 0
        if !peer.headRead {
            guard let end = PeerHTTP.find(peer.bytes, [13, 10, 13, 10], from: 0) else { return true }
            guard peer.bytes.starts(with: Array("HTTP/1.1 200".utf8)) else {
                peer.bytes = []
                return false
            }
            peer.headRead = true
            start = end + 4
        }
        while let end = PeerHTTP.find(peer.bytes, [10, 10], from: start) {
            var frame: [UInt8] = []
            var event = false
            for line in peer.bytes[start..<end].split(separator: 10, omittingEmptySubsequences: true) {
                // Comments, the reconnection time and the node's own ids stay there.
                if line.first == UInt8(ascii: ":") || line.starts(with: Array("id:".utf8)) || line.starts(with: Array("retry:".utf8)) {
                    continue
                }
                if line.starts(with: Array("event:".utf8)) { event = true }
                frame += line
                frame.append(10)
            }
            start = end + 2
            if event {
                frame.append(10)
                guard put(frame) else { return false }
            }
        }
        peer.bytes.removeFirst(start)
        return true
    }
}
