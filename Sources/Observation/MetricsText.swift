/// What a part of the emulator contributes to `GET /metrics`: its own families, written into
/// the exposition. The admin layer lists the sources (the composition root hands it them) and
/// renders them in order; no source knows about another.
public protocol MetricsSource: Sendable {
    func writeMetrics(_ m: inout MetricsText)
}

/// The Prometheus text exposition (format 0.0.4), written family by family.
public struct MetricsText {
    public private(set) var text = ""

    public init() {}

    /// A family's `# HELP` and `# TYPE` lines.
    public mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    /// One sample: `name{labels} value`.
    public mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: String) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(MetricsText.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + value + "\n"
    }

    public mutating func sample<N: BinaryInteger>(_ name: String, _ labels: [(String, String)] = [], _ value: N) {
        sample(name, labels, String(value))
    }

    /// A family of one unlabelled sample.
    public mutating func single<N: BinaryInteger>(_ name: String, _ type: String, _ help: String, _ value: N) {
        family(name, type, help)
        sample(name, [], value)
    }

    /// Latency histograms, one per value of `label`.
    public mutating func histograms(_ name: String, label: String, _ histograms: [(String, LatencyHistogram)]) {
        for (l, h) in histograms {
            let cumulative = h.cumulative
            for (i, b) in LatencyHistogram.bounds.enumerated() { sample(name + "_bucket", [(label, l), ("le", "\(b)")], cumulative[i]) }
            sample(name + "_bucket", [(label, l), ("le", "+Inf")], h.count)
            sample(name + "_sum", [(label, l)], "\(h.sum)")
            sample(name + "_count", [(label, l)], h.count)
        }
    }

    /// An unlabelled histogram of counts per bound (not cumulative; the last slot is above every
    /// bound) and their sum.
    public mutating func histogram(_ name: String, bounds: [Double], counts: [UInt64], sum: String) {
        var c: UInt64 = 0
        for (i, b) in bounds.enumerated() {
            c += counts[i]
            sample(name + "_bucket", [("le", "\(b)")], c)
        }
        let total = counts.reduce(0, +)
        sample(name + "_bucket", [("le", "+Inf")], total)
        sample(name + "_sum", [], sum)
        sample(name + "_count", [], total)
    }

    /// `text` with `name="value"` first in every sample's labels (comment lines as they are): a
    /// cluster node's `node` label.
    public static func labelled(_ text: String, _ name: String, _ value: String) -> String {
        let label = name + "=\"" + escape(value) + "\""
        var out = ""
        out.reserveCapacity(text.utf8.count + text.utf8.count / 4)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty || line.hasPrefix("#") {
                out += line
            } else if let brace = line.firstIndex(of: "{") {
                let after = line[line.index(after: brace)...]
                out += line[..<brace] + "{" + label + (after.hasPrefix("}") ? "" : ",") + after
            } else if let space = line.firstIndex(of: " ") {
                out += line[..<space] + "{" + label + "}" + line[space...]
            } else {
                out += line
            }
            out += "\n"
        }
        if !text.hasSuffix("\n") { out.removeLast() }
        return out
    }

    /// A label value as the format wants it (backslash, quote and newline escaped).
    static func escape(_ v: String) -> String {
        var s = ""
        for c in v.unicodeScalars {
            switch c {
            case "\\": s += "\\\\"
            case "\"": s += "\\\""
            case "\n": s += "\\n"
            default: s.unicodeScalars.append(c)
            }
        }
        return s
    }
}

/// Seconds in buckets shared by every latency histogram (requests, tracking calls): 100 µs to
/// 10 s. `buckets[i]` counts observations in (bounds[i-1], bounds[i]] (one increment each);
/// `cumulative` gives Prometheus's view.
public struct LatencyHistogram: Sendable {
    public static let bounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]
    public var buckets = [UInt64](repeating: 0, count: LatencyHistogram.bounds.count)
    public var sum = 0.0
    public var count: UInt64 = 0
    public init() {}

    public mutating func observe(_ s: Double) {
        var i = 0
        let bounds = LatencyHistogram.bounds
        while i < bounds.count && s > bounds[i] { i += 1 }
        if i < bounds.count { buckets[i] += 1 }
        sum += s
        count += 1
    }

    /// Observations at or below each bound.
    public var cumulative: [UInt64] {
        var total: UInt64 = 0
        return buckets.map {
            total += $0
            return total
        }
    }

    public mutating func merge(_ o: LatencyHistogram) {
        for i in buckets.indices { buckets[i] += o.buckets[i] }
        sum += o.sum
        count += o.count
    }
}
