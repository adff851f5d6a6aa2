import PushCore
import Runtime

/// The report's three forms: JSON (tests and tools), text (a terminal), and one self-contained
/// HTML file with inline SVG charts (no external assets, no JavaScript).
extension CampaignReport {
    public enum Format: String, Sendable, CaseIterable { case json, text, html }

    public func render(_ format: Format) -> String {
        switch format {
        case .json: json
        case .text: text
        case .html: html
        }
    }

    // MARK: JSON

    public var json: String {
        var s = "{\"generatedAt\":\(generatedAtMs),\"since\":\(sinceMs),\"exact\":\(exact),\"campaigns\":["
        s += campaigns.map { CampaignReport.json($0) }.joined(separator: ",")
        s += "],\"totals\":" + CampaignReport.json(all) + "}"
        return s
    }

    static func json(_ o: Outcomes) -> String { "{\"sent\":\(o.sent),\"accepted\":\(o.accepted),\"rejected\":\(o.rejected)}" }

    /// An object of `m`'s members in key order, each value written by `f`.
    static func jsonMap<V>(_ m: [String: V], _ f: (V) -> String) -> String {
        "{" + m.keys.sorted().map { JSONWriter.quote($0) + ":" + f(m[$0]!) }.joined(separator: ",") + "}"
    }

    static func json(_ c: Campaign) -> String {
        let outcomes: (Outcomes) -> String = json
        func map<V>(_ m: [String: V], _ f: (V) -> String) -> String { jsonMap(m, f) }
        func ints(_ a: [Int]) -> String { "[" + a.map(String.init).joined(separator: ",") + "]" }
        func ms(_ us: Int64) -> String { String(Double(us) / 1000) }
        var s = "{\"campaign\":" + (c.campaign.map(JSONWriter.quote) ?? "null")
        s += ",\"sent\":\(c.totals.sent),\"accepted\":\(c.totals.accepted),\"rejectedTotal\":\(c.totals.rejected)"
        s += ",\"rejected\":" + map(c.rejected) { String($0) }
        s += ",\"byProvider\":" + map(c.byProvider, outcomes) + ",\"byPlatform\":" + map(c.byPlatform, outcomes)
        s += ",\"uniqueDevices\":\(c.uniqueDevices)"
        if c.uniqueDevicesEstimated { s += ",\"uniqueDevicesError\":\(format3(HyperLogLog.standardError))" }
        let p = c.payload
        s +=
            ",\"payloadBytes\":{\"min\":\(p.min),\"p50\":\(p.percentile(50)),\"p90\":\(p.percentile(90)),\"p99\":\(p.percentile(99)),\"max\":\(p.max)"
        s += ",\"mean\":\(p.mean),\"histogram\":" + map(p.bands) { String($0) } + "}"
        let l = c.latency
        s +=
            ",\"latencyMs\":{\"p50\":\(ms(l.percentile(50))),\"p90\":\(ms(l.percentile(90))),\"p99\":\(ms(l.percentile(99))),\"max\":\(ms(l.max))}"
        s +=
            ",\"tracking\":"
            + map(c.tracking) {
                "{\"fired\":\($0.fired),\"succeeded\":\($0.succeeded),\"failed\":\($0.failed),\"retried\":\($0.retried),\"attempts\":\($0.attempts)}"
            }
        s += ",\"display\":" + map(c.display) { String($0) } + ",\"displayReasons\":" + map(c.displayReasons) { String($0) }
        s += ",\"lint\":" + map(c.lint) { String($0) } + ",\"lintSeverity\":" + map(c.lintSeverity, JSONWriter.quote)
        s += ",\"receiveRate\":\(c.rate("receive")),\"openRate\":\(c.rate("open"))"
        s +=
            ",\"firstAt\":" + (c.totals.sent > 0 ? String(c.firstMs) : "null") + ",\"lastAt\":"
            + (c.totals.sent > 0 ? String(c.lastMs) : "null")
        let t = c.timeline
        s += ",\"timeline\":{\"start\":\(t.startMs),\"bucketMs\":\(t.bucketMs),\"sent\":\(ints(t.sent)),\"accepted\":\(ints(t.accepted))"
        s += ",\"rejected\":\(ints(t.rejected)),\"tracking\":" + map(t.tracked, ints) + "}}"
        return s
    }

    static func format3(_ v: Double) -> String { String(Double((v * 1000).rounded()) / 1000) }

    static let bands = (0..<8).map { "\($0 * 512)-\($0 * 512 + 511)" } + ["4096+"]
    static func band(_ size: Int) -> String { size >= 4096 ? "4096+" : bands[size / 512] }

    // MARK: text

    public var text: String {
        var s = "pushemu campaign report, generated \(Clock.iso8601(generatedAtMs))"
        if sinceMs > 0 { s += ", records since \(Clock.iso8601(sinceMs))" }
        s +=
            "\n\(campaigns.count) campaign(s); \(all.totals.sent) requests, \(all.totals.accepted) accepted, \(all.totals.rejected) rejected\n"
        for c in campaigns { s += "\n" + CampaignReport.text(c) }
        return s
    }

    static func text(_ c: Campaign) -> String {
        func pct(_ a: Int, _ b: Int) -> String { b == 0 ? "-" : String(format1(100 * Double(a) / Double(b))) + "%" }
        var s = "Campaign \(c.campaign ?? "(none)")"
        if c.totals.sent > 0 { s += "  (\(Clock.iso8601(c.firstMs)) .. \(Clock.iso8601(c.lastMs)))" }
        s +=
            "\n  sent \(c.totals.sent)   accepted \(c.totals.accepted) (\(pct(c.totals.accepted, c.totals.sent)))   rejected \(c.totals.rejected)\n"
        for (reason, n) in c.rejected.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
            s += "    \(reason): \(n)\n"
        }
        let prov = c.byProvider.keys.sorted().map { "\($0) \(c.byProvider[$0]!.accepted)/\(c.byProvider[$0]!.sent)" }.joined(
            separator: ", ")
        let plat = c.byPlatform.keys.sorted().map { "\($0) \(c.byPlatform[$0]!.accepted)/\(c.byPlatform[$0]!.sent)" }.joined(
            separator: ", ")
        s += "  accepted/sent by provider: \(prov.isEmpty ? "-" : prov); by platform: \(plat.isEmpty ? "-" : plat)\n"
        s += "  unique devices \(c.uniqueDevices)" + (c.uniqueDevicesEstimated ? " (estimated, ±1.6%)\n" : "\n")
        let p = c.payload
        let l = c.latency
        s += "  payload bytes: min \(p.min), p50 \(p.percentile(50)), p90 \(p.percentile(90)), max \(p.max)\n"
        s +=
            "  answer latency: p50 \(format1(Double(l.percentile(50)) / 1000)) ms, p99 \(format1(Double(l.percentile(99)) / 1000)) ms, max \(format1(Double(l.max) / 1000)) ms\n"
        if !c.display.isEmpty {
            let shown = ["shown", "quiet", "not-shown"].map { "\($0) \(c.display[$0] ?? 0)" }.joined(separator: ", ")
            s += "  display: \(shown)\n"
            for (reason, n) in c.displayReasons.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
                s += "    \(reason): \(n)\n"
            }
        }
        if !c.lint.isEmpty {
            s += "  SDK lint:\n"
            for (code, n) in c.lint.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
                s += "    \(code) (\(c.lintSeverity[code] ?? "")): \(n)\n"
            }
        }
        if c.tracking.isEmpty { s += "  tracking: none\n" }
        for (event, k) in c.tracking.sorted(by: { $0.key > $1.key }) {
            s += "  tracking \(event): fired \(k.fired), succeeded \(k.succeeded), failed \(k.failed), retried \(k.retried)"
            s += " (\(event) rate \(pct(k.succeeded, c.totals.accepted)))\n"
        }
        return s
    }

    static func format1(_ v: Double) -> String {
        let r = (v * 10).rounded() / 10
        return r == r.rounded() ? String(Int(r)) : String(r)
    }

    // MARK: HTML

    public var html: String {
        var s = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>pushemu campaign report</title>
            <style>
            body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1000px;color:#1d2330;padding:0 1em}
            h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:2px solid #e3e7ef;padding-bottom:.2em}
            table{border-collapse:collapse;margin:.8em 0}td,th{padding:.3em .8em;border-bottom:1px solid #e3e7ef;text-align:right}
            th:first-child,td:first-child{text-align:left}.muted{color:#6b7385}.grid{display:flex;flex-wrap:wrap;gap:1.5em}
            .card{border:1px solid #e3e7ef;border-radius:8px;padding:.8em 1em}.big{font-size:1.5em;font-weight:600}
            svg text{font:11px system-ui,sans-serif}svg text:not([fill]){fill:#1d2330}
            </style></head><body>
            <h1>pushemu campaign report</h1>
            """
        s += "<p class=\"muted\">Generated \(esc(Clock.iso8601(generatedAtMs)))"
        if sinceMs > 0 { s += ", records since \(esc(Clock.iso8601(sinceMs)))" }
        s += ". \(campaigns.count) campaign(s), \(all.totals.sent) requests.</p>\n"
        s +=
            "<table><tr><th>Campaign</th><th>Sent</th><th>Accepted</th><th>Rejected</th><th>Unique devices</th><th>Receive rate</th><th>Open rate</th></tr>\n"
        for c in campaigns {
            s +=
                "<tr><td>\(esc(c.campaign ?? "(none)"))</td><td>\(c.totals.sent)</td><td>\(c.totals.accepted)</td><td>\(c.totals.rejected)</td>"
            s += "<td>\(c.uniqueDevices)</td><td>\(percent(c.rate("receive")))</td><td>\(percent(c.rate("open")))</td></tr>\n"
        }
        s += "</table>\n"
        for c in campaigns { s += section(c) }
        return s + "</body></html>\n"
    }

    func section(_ c: Campaign) -> String {
        var s = "<h2>Campaign \(esc(c.campaign ?? "(none)"))</h2>\n<div class=\"grid\">"
        s += "<div class=\"card\"><div class=\"muted\">Sent</div><div class=\"big\">\(c.totals.sent)</div></div>"
        s += "<div class=\"card\"><div class=\"muted\">Accepted</div><div class=\"big\">\(c.totals.accepted)</div></div>"
        s += "<div class=\"card\"><div class=\"muted\">Rejected</div><div class=\"big\">\(c.totals.rejected)</div></div>"
        s += "<div class=\"card\"><div class=\"muted\">Unique devices</div><div class=\"big\">\(c.uniqueDevices)</div></div>"
        s +=
            "<div class=\"card\"><div class=\"muted\">Receive / open rate</div><div class=\"big\">\(percent(c.rate("receive"))) / \(percent(c.rate("open")))</div></div></div>\n"
        var outcomes = [("accepted", c.totals.accepted, "#2f9e44")]
        outcomes += c.rejected.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value, "#e03131") }
        s += "<h3>Answers</h3>" + CampaignReport.bars(outcomes)
        s += "<h3>Timeline</h3>" + CampaignReport.timeline(c.timeline)
        let hist = c.payload.bands
        s +=
            "<h3>Payload size (bytes)</h3>"
            + CampaignReport.bars(CampaignReport.bands.filter { hist[$0] != nil }.map { ($0, hist[$0]!, "#1971c2") })
        let l = c.latency
        s +=
            "<p class=\"muted\">Answer latency: p50 \(CampaignReport.format1(Double(l.percentile(50)) / 1000)) ms, p90 \(CampaignReport.format1(Double(l.percentile(90)) / 1000)) ms, p99 \(CampaignReport.format1(Double(l.percentile(99)) / 1000)) ms, max \(CampaignReport.format1(Double(l.max) / 1000)) ms.</p>"
        if !c.display.isEmpty {
            let colors = ["shown": "#2f9e44", "quiet": "#f08c00", "not-shown": "#868e96"]
            s += "<h3>Display on the devices</h3>"
            s += CampaignReport.bars(
                c.displayReasons.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map {
                    ($0.key, $0.value, colors[String($0.key.split(separator: " ").first ?? "")] ?? "#868e96")
                })
        }
        if !c.lint.isEmpty {
            let colors = ["error": "#e03131", "warning": "#f08c00", "info": "#1971c2"]
            s += "<h3>SDK lint</h3><table><tr><th>Code</th><th>Severity</th><th>Notifications</th></tr>"
            for (code, n) in c.lint.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
                let sev = c.lintSeverity[code] ?? ""
                s += "<tr><td>\(esc(code))</td><td style=\"color:\(colors[sev] ?? "#1d2330")\">\(esc(sev))</td><td>\(n)</td></tr>"
            }
            s += "</table>"
        }
        s += "<h3>Tracking</h3>"
        if c.tracking.isEmpty { return s + "<p class=\"muted\">No tracking calls.</p>\n" }
        s += "<table><tr><th>Event</th><th>Fired</th><th>Succeeded</th><th>Failed</th><th>Retried</th><th>Rate</th></tr>"
        for (event, k) in c.tracking.sorted(by: { $0.key > $1.key }) {
            s +=
                "<tr><td>\(esc(event))</td><td>\(k.fired)</td><td>\(k.succeeded)</td><td>\(k.failed)</td><td>\(k.retried)</td><td>\(percent(c.rate(event)))</td></tr>"
        }
        s += "</table>"
        var funnel = [("accepted", c.totals.accepted, "#2f9e44")]
        for (event, k) in c.tracking.sorted(by: { $0.key > $1.key }) {
            funnel.append(("\(event) ok", k.succeeded, "#1971c2"))
            if k.failed > 0 { funnel.append(("\(event) failed", k.failed, "#e03131")) }
        }
        return s + CampaignReport.bars(funnel) + "\n"
    }

    /// A horizontal bar chart.
    static func bars(_ rows: [(String, Int, String)]) -> String {
        guard !rows.isEmpty else { return "<p class=\"muted\">None.</p>" }
        let top = max(1, rows.map(\.1).max() ?? 1)
        let h = rows.count * 24 + 10
        var s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"\(h)\" role=\"img\">"
        for (i, (label, n, color)) in rows.enumerated() {
            let y = i * 24 + 5
            let w = Int(Double(n) / Double(top) * 440)
            s += "<text x=\"190\" y=\"\(y + 15)\" text-anchor=\"end\">\(esc(label))</text>"
            s += "<rect x=\"200\" y=\"\(y + 3)\" width=\"\(max(w, n > 0 ? 1 : 0))\" height=\"16\" rx=\"2\" fill=\"\(color)\"/>"
            s += "<text x=\"\(206 + w)\" y=\"\(y + 15)\">\(n)</text>"
        }
        return s + "</svg>"
    }

    /// Stacked bars of accepted/rejected per bucket, tracking deliveries as lines.
    static func timeline(_ t: Timeline) -> String {
        let n = t.sent.count
        guard n > 0 else { return "<p class=\"muted\">No requests.</p>" }
        let lines = t.tracked.sorted { $0.key > $1.key }
        let top = max(1, (t.sent + lines.flatMap(\.value)).max() ?? 1)
        let width = 720.0
        let height = 200.0
        let left = 50.0
        let bw = (width - left - 10) / Double(n)
        func y(_ v: Int) -> Double { height - 20 - Double(v) / Double(top) * (height - 40) }
        var s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"230\" role=\"img\">"
        s += "<line x1=\"\(left)\" y1=\"\(height - 20)\" x2=\"\(width - 10)\" y2=\"\(height - 20)\" stroke=\"#999\"/>"
        s +=
            "<text x=\"\(left - 6)\" y=\"\(y(top) + 4)\" text-anchor=\"end\">\(top)</text><text x=\"\(left - 6)\" y=\"\(height - 16)\" text-anchor=\"end\">0</text>"
        for i in 0..<n {
            let x = left + Double(i) * bw
            let a = t.accepted[i]
            let r = t.rejected[i]
            s += "<rect x=\"\(x)\" y=\"\(y(a))\" width=\"\(max(1, bw - 1))\" height=\"\(height - 20 - y(a))\" fill=\"#2f9e44\"/>"
            if r > 0 {
                s += "<rect x=\"\(x)\" y=\"\(y(a + r))\" width=\"\(max(1, bw - 1))\" height=\"\(y(a) - y(a + r))\" fill=\"#e03131\"/>"
            }
        }
        let colors = ["#1971c2", "#f08c00", "#7048e8"]
        for (k, (event, row)) in lines.enumerated() {
            let pts = row.enumerated().map { "\(left + (Double($0.offset) + 0.5) * bw),\(y($0.element))" }.joined(separator: " ")
            s += "<polyline fill=\"none\" stroke=\"\(colors[k % 3])\" stroke-width=\"2\" points=\"\(pts)\"/>"
            s += "<text x=\"\(left + 10 + Double(k) * 150)\" y=\"225\" fill=\"\(colors[k % 3])\">— \(esc(event)) delivered</text>"
        }
        s +=
            "<text x=\"\(width - 10)\" y=\"225\" text-anchor=\"end\">bucket \(format1(Double(t.bucketMs) / 1000)) s from \(esc(Clock.iso8601(t.startMs)))</text>"
        s += "<text x=\"\(left + 10 + Double(lines.count) * 150)\" y=\"225\" fill=\"#2f9e44\">■ accepted</text>"
        s += "<text x=\"\(left + 100 + Double(lines.count) * 150)\" y=\"225\" fill=\"#e03131\">■ rejected</text>"
        return s + "</svg>"
    }

    func percent(_ v: Double) -> String { CampaignReport.format1(v * 100) + "%" }
}

/// HTML-escapes text.
func esc(_ s: String) -> String { MarkupEscaping.escape(s) }
