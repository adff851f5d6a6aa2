import PushCore
import Runtime

/// A report and campaign totals over part of the journal (a scope's requests, `scope=` on
/// `/report` and `/campaigns`), read record by record.
extension Journal {
    /// The campaign report of the records `include` takes (a scope's), every one read: a
    /// request when `include` takes it, a tracking attempt when its notification's request was
    /// taken. Always exact.
    public func report(sinceMs: Int64, campaign: String?, include: @escaping (StoredRequest) -> Bool) -> CampaignReport {
        CampaignReport.build(sinceMs: sinceMs, campaign: campaign, nowMs: Clock.nowMs()) { body in
            scanTaken(sinceMs: sinceMs, include: include, body)
        }
    }

    /// Every campaign's totals over the requests `include` takes.
    public func campaignCounts(sinceMs: Int64, include: @escaping (StoredRequest) -> Bool) -> [CampaignTally] {
        var tallies: [String: CampaignTally] = [:]
        scanTaken(sinceMs: sinceMs, include: include) { e in
            guard case .request(let r) = e else { return true }
            let rejection = PushProvider.accepts(r.status) ? "" : (r.reason.isEmpty ? "HTTP \(r.status)" : r.reason)
            let key = (r.campaign ?? "\u{0}") + "\u{1}" + r.provider.name + "\u{1}" + rejection
            if var t = tallies[key] {
                t.count += 1
                t.firstMs = min(t.firstMs, r.atMs)
                t.lastMs = max(t.lastMs, r.atMs)
                tallies[key] = t
            } else {
                tallies[key] = CampaignTally(
                    campaign: r.campaign, provider: r.provider, rejection: rejection, count: 1, firstMs: r.atMs, lastMs: r.atMs)
            }
            return true
        }
        return Array(tallies.values)
    }

    private func scanTaken(sinceMs: Int64, include: (StoredRequest) -> Bool, _ body: (JournalEntry) -> Bool) {
        var taken = Set<String>()
        scan(sinceMs: sinceMs) { e in
            switch e {
            case .request(let r):
                guard include(r) else { return true }
                if let id = r.notificationID { taken.insert(id) }
                return body(e)
            case .tracking(let t):
                return taken.contains(t.notificationID) ? body(e) : true
            }
        }
    }
}

extension Journal {
    /// The campaign digests of the requests `include` takes and the tracking their notifications
    /// caused, as the bytes `ClusterSummaries` merges (a scope's report on a cluster). Every
    /// record since `sinceMs` is read.
    public func summaryBytes(sinceMs: Int64, include: @escaping (StoredRequest) -> Bool) -> [UInt8] {
        var digests = CampaignDigests()
        digests.limit = .max
        var campaigns: [String: String?] = [:]
        scanTaken(sinceMs: sinceMs, include: include) { e in
            switch e {
            case .request(let r):
                if let id = r.notificationID { campaigns[id] = r.campaign }
                guard let i = digests.slot(r.campaign) else { return true }
                let token = r.token.isEmpty ? nil : Array(r.token.utf8).withUnsafeBytes { SummaryKey.token($0, packed: false) }
                digests.digests[i].addRequest(
                    provider: r.provider.storedByte, status: r.status, reason: r.reason, atMs: r.atMs,
                    latencyUs: UInt64(max(0, r.latencyUs)), size: r.payloadSize, token: token)
                let display = r.display.map { d -> UInt16 in
                    let b = d.storedBytes
                    return UInt16(b.0) << 8 | UInt16(b.1)
                }
                if display != nil || !r.lint.isEmpty {
                    digests.digests[i].addOutcome(display: display, lint: r.lint.map { ($0.code, $0.severity.rawValue) })
                }
            case .tracking(let t):
                let a = TrackingAttribution.Attempt(
                    id: UUIDValue(high: 0, low: 0), event: t.event, outcome: t.outcome, attempt: t.attempt, events: t.events,
                    atMs: t.atMs)
                digests.add(a, campaign: t.campaign ?? (campaigns[t.notificationID] ?? nil))
            }
            return true
        }
        return digests.bytes
    }
}
