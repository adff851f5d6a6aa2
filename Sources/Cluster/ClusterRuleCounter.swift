import Faults
import PushCore
import Runtime

/// A cluster's counts of its counting fault rules, in Redis (`pushemu:{CLUSTER}:rule:ID`, a hash
/// of `seen` and `fired`, changed with `HINCRBY`), and the numbers of new rules' and scenarios'
/// ids (`ids:fault`, `ids:scenario`, with `INCR`). Asked on a rule's path only: a push that no
/// counting rule matches never reaches it. Each call takes a connection from a small pool (the
/// loops may ask at once) and gives up after 200 ms, the node then counting alone.
public final class ClusterRuleCounter: SharedRuleCounter {
    let link: ClusterLink
    private let pool = FutexLock<[RedisConnection]>([])

    public init(link: ClusterLink) { self.link = link }

    private func key(_ rule: String) -> String { link.key + "rule:" + rule }

    private func with<T>(_ body: (RedisConnection) throws(RedisError) -> T) -> T? {
        let c = pool.withLock { $0.popLast() } ?? RedisConnection(link.options.url, timeoutMs: 200)
        do {
            let v = try body(c)
            pool.withLock { if $0.count < 16 { $0.append(c) } }
            return v
        } catch {
            return nil
        }
    }

    public func next(seen rule: String) -> UInt64? {
        with { c throws(RedisError) -> UInt64? in
            if case .integer(let n) = try c.call(["HINCRBY", key(rule), "seen", "1"]), n > 0 { return UInt64(n) }
            return nil
        } ?? nil
    }

    public func fired(_ rule: String) {
        _ = with { c throws(RedisError) in try c.call(["HINCRBY", key(rule), "fired", "1"]) }
    }

    public func nextID(_ kind: String, above known: Int) -> Int? {
        with { c throws(RedisError) -> Int? in
            guard case .integer(var n) = try c.call(["INCR", link.key + "ids:" + kind]) else { return nil }
            // A Redis that lost its keys starts again at 1: past every id the nodes know.
            if n <= known, case .integer(let m) = try c.call(["INCRBY", link.key + "ids:" + kind, String(known - Int(n) + 1)]) { n = m }
            return Int(n)
        } ?? nil
    }

    public func counts(_ rule: String) -> (seen: UInt64, fired: UInt64)? {
        with { c throws(RedisError) -> (seen: UInt64, fired: UInt64)? in
            let v = try c.call(["HMGET", key(rule), "seen", "fired"]).elements
            guard v.count == 2 else { return nil }
            return (UInt64(v[0].text ?? "0") ?? 0, UInt64(v[1].text ?? "0") ?? 0)
        } ?? nil
    }
}
