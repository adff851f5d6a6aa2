import Observation
import PushCore
import Transport

/// `GET /metrics`: Prometheus text. The request counters first, then the transport's gauges,
/// then each service's families (`MetricsSource`), then the state's memory. Never rate-limited.
struct MetricsAdminAPI: AdminResource {
    /// What `/metrics` shows, in order: the request counters first, then each service's families.
    let sources: [any MetricsSource]
    let gauges: AdminAPI.ServerGauges
    /// The stored state's measured memory (`--max-state-memory`).
    let stateMemory: StateMemory
    /// A cluster node's name: every sample then carries `node="NAME"` (Prometheus scrapes each node).
    let node: String?

    func register(_ routes: inout RouterGroup) {
        let sources = self.sources
        let gauges = self.gauges
        let memory = stateMemory
        let node = self.node
        routes.add(.get, "/metrics") { ex in
            var m = MetricsText()
            sources.first?.writeMetrics(&m)
            m.single("pushemu_open_connections", "gauge", "Open client connections.", gauges.openConnections())
            m.single(
                "pushemu_open_streams", "gauge", "Open HTTP/2 streams (requests in progress on HTTP/2 connections).", gauges.openStreams())
            for source in sources.dropFirst() { source.writeMetrics(&m) }
            m.single(
                "pushemu_state_memory_bytes", "gauge",
                "What the stored state takes by its measured costs (device records, tokens, subscriptions, channels).", memory.usedBytes)
            m.single("pushemu_state_memory_limit_bytes", "gauge", "--max-state-memory.", memory.limit)
            var h = HTTPFields()
            h.add(name: "content-type", value: "text/plain; version=0.0.4; charset=utf-8")
            let text = node.map { MetricsText.labelled(m.text, "node", $0) } ?? m.text
            ex.respond(Response(status: 200, headers: h, body: Array(text.utf8)))
        }
    }
}
