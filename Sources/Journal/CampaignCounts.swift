import PushCore

/// Every campaign's request totals, from the journal's index (`Journal.campaignCounts`): sent,
/// accepted, rejections by reason, per provider and platform, first and last request. The same
/// fields, with the same names, as the campaign report's, without reading records: the index
/// keeps them per block, so a count over ten million requests adds a few thousand blocks'.
/// Records are counted as the report counts them (tracking attempts are not requests).
public struct CampaignCounts: Sendable {
    public struct Campaign: Sendable {
        public var campaign: String?
        public var totals = CampaignReport.Outcomes()
        public var rejected: [String: Int] = [:]
        public var byProvider: [String: CampaignReport.Outcomes] = [:]
        public var byPlatform: [String: CampaignReport.Outcomes] = [:]
        public var firstMs = Int64.max
        public var lastMs = Int64.min

        mutating func add(_ t: CampaignTally) {
            let accepted = t.rejection.isEmpty
            totals.add(t.count, accepted: accepted)
            byProvider[t.provider.name, default: .init()].add(t.count, accepted: accepted)
            byPlatform[t.provider.platformName, default: .init()].add(t.count, accepted: accepted)
            if !accepted { rejected[t.rejection, default: 0] += t.count }
            firstMs = min(firstMs, t.firstMs)
            lastMs = max(lastMs, t.lastMs)
        }
    }

    var generatedAtMs: Int64
    public var sinceMs: Int64
    /// In order of their first request.
    public var campaigns: [Campaign]
    /// Every campaign together.
    public var all: Campaign

    /// `only`: that campaign's (nil: every one).
    public init(_ tallies: [CampaignTally], only: String?, sinceMs: Int64, nowMs: Int64) {
        var byCampaign: [String?: Campaign] = [:]
        var all = Campaign(campaign: nil)
        for t in tallies {
            all.add(t)
            byCampaign[t.campaign, default: Campaign(campaign: t.campaign)].add(t)
        }
        var list = byCampaign.values.sorted { ($0.firstMs, $0.campaign ?? "") < ($1.firstMs, $1.campaign ?? "") }
        if let only {
            list = list.filter { $0.campaign == only }
            all = list.first ?? Campaign(campaign: only)
        }
        generatedAtMs = nowMs
        self.sinceMs = sinceMs
        campaigns = list
        self.all = all
    }

    public var json: String {
        var out = JSONObjectWriter()
        out.add("generatedAt", generatedAtMs)
        out.add("since", sinceMs)
        out.add("campaigns", jsonArray: campaigns.map(CampaignCounts.json))
        out.add("totals", json: CampaignCounts.json(all))
        return out.text
    }

    static func json(_ c: Campaign) -> String {
        var out = JSONObjectWriter()
        out.add("campaign", c.campaign)
        out.add("sent", c.totals.sent)
        out.add("accepted", c.totals.accepted)
        out.add("rejectedTotal", c.totals.rejected)
        out.add("rejected", json: CampaignReport.jsonMap(c.rejected) { String($0) })
        out.add("byProvider", json: CampaignReport.jsonMap(c.byProvider, CampaignReport.json))
        out.add("byPlatform", json: CampaignReport.jsonMap(c.byPlatform, CampaignReport.json))
        out.add("firstAt", c.totals.sent > 0 ? c.firstMs : nil)
        out.add("lastAt", c.totals.sent > 0 ? c.lastMs : nil)
        return out.text
    }
}

extension CampaignReport.Outcomes {
    mutating func add(_ n: Int, accepted isAccepted: Bool) {
        sent += n
        if isAccepted { accepted += n } else { rejected += n }
    }
}
