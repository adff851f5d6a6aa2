import CSystem
import Cluster
import FCM
import Faults
import Glibc
import Pipeline
import Runtime
import State
import Synchronization

extension Emulator {
    /// The node's link to its cluster, when `--cluster` names one: a change made here is shipped
    /// from the state log; one made elsewhere is applied to the stores and kept in the log. A
    /// cluster node needs a state log (not `--in-memory`).
    static func joinCluster(
        _ c: EmulatorConfiguration, registry: StoreRegistry, stateLog: StateLog?, metrics: Metrics, faults: FaultEngine,
        fcmQuota: FCMQuota, fcmTokens: FCMAccessTokens
    ) throws -> ClusterLink? {
        guard let url = c.cluster else { return nil }
        guard let log = stateLog else {
            throw ConfigurationError("--cluster needs a data directory for the node's state (not --in-memory)")
        }
        let hostname = Emulator.hostname()
        let port = c.httpPort
        // A node on a port chosen at bind time (0) is named by its process until it says otherwise.
        let node = c.nodeName ?? (port == 0 ? "\(hostname)-\(getpid())" : "\(hostname):\(port)")
        let advertise = c.advertise ?? advertiseURL(c, hostname: hostname, port: port)
        let meter = RateMeter(count: { metrics.requestCount })
        let link = ClusterLink(
            options: ClusterLink.Options(
                url: url, cluster: c.clusterName, node: node, advertise: advertise, compactAfter: c.clusterCompactAfter),
            apply: { record in
                try registry.apply(record)
                _ = log.append(record)
            },
            rate: { meter.perSecond() },
            state: { registry.forEachRecord($0) },
            resetState: { origin in registry.resetPersistent(log: log, origin: origin, nowMs: Clock.nowMs()) },
            demand: { fcmQuota.demand },
            share: { fcmQuota.setShare($0) })
        log.shipChanges(to: { link.ship($0) })
        // An access token one node issued verifies on every node: one OAuth secret for all.
        link.agree("fcm-oauth-secret", proposal: { fcmTokens.secret }, adopt: { fcmTokens.adoptShared($0) })
        faults.sharedCounter = ClusterRuleCounter(link: link)
        return link
    }

    static func hostname() -> String {
        var host = [UInt8](repeating: 0, count: 256)
        _ = host.withUnsafeMutableBufferPointer {
            gethostname(UnsafeMutableRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), 255)
        }
        return String(decoding: host.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// `http://HOST:PORT` as peers reach this node (the host name when it listens on every address).
    static func advertiseURL(_ c: EmulatorConfiguration, hostname: String, port: Int) -> String {
        let host = c.host == "0.0.0.0" || c.host == "::" ? hostname : c.host
        return "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// Requests a second since the last reading (the heartbeat reads it once a second).
final class RateMeter: Sendable {
    let count: @Sendable () -> UInt64
    private let last = Mutex<(count: UInt64, ns: UInt64)>((0, 0))

    init(count: @escaping @Sendable () -> UInt64) { self.count = count }

    func perSecond() -> Double {
        let now = Runtime.Clock.monotonicNanoseconds()
        let n = count()
        return last.withLock { l in
            defer { l = (n, now) }
            guard l.ns > 0, now > l.ns else { return 0 }
            return Double(n &- l.count) / (Double(now - l.ns) / 1e9)
        }
    }
}
