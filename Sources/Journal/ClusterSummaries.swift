import PushCore

/// A cluster's campaign report and campaign totals: each node's journal gives its campaign
/// digests as bytes (`Journal.summaryBytes`), and the node that answers merges them. Each node's
/// journal holds only the requests it answered, so the merge adds them; unique devices merge as
/// their HyperLogLog sketches do (a device pushed through two nodes counts once), which makes a
/// cluster report a summarised one (`exact` false) whatever its size.
public enum ClusterSummaries {
    /// Campaigns one node's summary may name at most (more is refused as malformed).
    public static let maxCampaigns = 1_000_000

    /// The campaign report of the nodes' summaries merged; nil when one of them is malformed.
    public static func report(_ parts: [[UInt8]], sinceMs: Int64, campaign: String?, nowMs: Int64) -> CampaignReport? {
        guard let merged = merge(parts) else { return nil }
        return CampaignReport.summarised(merged, sinceMs: sinceMs, campaign: campaign, nowMs: nowMs)
    }

    /// Every campaign's totals from the nodes' summaries merged; nil when one is malformed.
    public static func counts(_ parts: [[UInt8]], sinceMs: Int64, campaign: String?, nowMs: Int64) -> CampaignCounts? {
        guard let merged = merge(parts) else { return nil }
        var tallies: [CampaignTally] = []
        for (i, name) in merged.names.enumerated() where merged.holds(i) {
            let d = merged.digests[i]
            guard d.requests > 0 else { continue }
            // The digest keeps rejections by reason for the campaign, not per provider: each
            // provider's rejections are tallied under the campaign's reasons in turn.
            var reasons = d.rejected.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            for (stored, o) in d.byProvider.sorted(by: { $0.key < $1.key }) {
                let provider = PushProvider.stored(stored)
                if o.accepted > 0 {
                    tallies.append(
                        CampaignTally(
                            campaign: name, provider: provider, rejection: "", count: o.accepted, firstMs: d.firstMs, lastMs: d.lastMs))
                }
                var left = o.rejected
                while left > 0, !reasons.isEmpty {
                    let n = min(left, reasons[0].1)
                    tallies.append(
                        CampaignTally(
                            campaign: name, provider: provider, rejection: reasons[0].0, count: n, firstMs: d.firstMs, lastMs: d.lastMs))
                    left -= n
                    reasons[0].1 -= n
                    if reasons[0].1 == 0 { reasons.removeFirst() }
                }
            }
        }
        return CampaignCounts(tallies, only: campaign, sinceMs: sinceMs, nowMs: nowMs)
    }

    static func merge(_ parts: [[UInt8]]) -> CampaignDigests? {
        var merged = CampaignDigests()
        merged.limit = .max
        for p in parts {
            guard let d = CampaignDigests.read(p, limit: maxCampaigns) else { return nil }
            merged.merge(d)
        }
        return merged
    }
}

extension Journal {
    /// This journal's campaign digests since `sinceMs`, as the bytes `ClusterSummaries` merges.
    public func summaryBytes(sinceMs: Int64) -> [UInt8] { digests(sinceMs: sinceMs).bytes }
}
