import APNs
import FCM
import Faults
import Fleet
import Observation
import PushCore
import State

/// `GET /emulator/v1/stats?scope=`: the counts of one scope, for a job sharing the emulator:
/// when the scope was last reset, its notifications held in memory, the fault rules and
/// scenarios made in it (with their counts), its fleets, and its credentials (a team's APNs
/// keys, a project's service accounts).
struct ScopedStats: Sendable {
    let log: NotificationLog
    let deletions: NotificationDeletions
    let faults: FaultEngine
    let scenarios: ScenarioRegistry
    let deviceStore: DeviceStore
    let apnsKeys: APNsKeyStore
    let fcmAccounts: FCMServiceAccounts

    func document(_ scope: Scope) -> StatsDocument {
        var doc = StatsDocument()
        doc.set("scope", json: JSONWriter.quote(scope.text))
        let reset = deletions.resetMs(scope)
        doc.set("resetAt", json: reset == .min ? "null" : String(reset))
        var f = NotificationLog.Filter()
        f.limit = Int.max
        let labels = deletions.labels
        f.matches = { scope.holds($0, labels: labels) }
        doc.add("notifications", "kept", log.query(deletions.excluding(f)).count)
        let rules = faults.all.filter { $0.match.scope == scope.text }
        var seen: UInt64 = 0
        var fired: UInt64 = 0
        for r in rules {
            let c = faults.counts(r)
            seen &+= c.seen
            fired &+= c.fired
        }
        doc.add("faults", "rules", rules.count)
        doc.add("faults", "seen", seen)
        doc.add("faults", "fired", fired)
        doc.add("faults", "scenarios", scenarios.all.filter { s in s.steps.allSatisfy { $0.rule.match.scope == scope.text } }.count)
        let fleets = FleetsAdminAPI.fleets(deviceStore.allFleets, in: scope, keys: apnsKeys.all)
        doc.add("fleets", "count", fleets.count)
        doc.add("fleets", "members", fleets.reduce(0) { $0 + $1.count })
        switch scope {
        case .team(let t): doc.add("credentials", "apnsKeys", apnsKeys.all.filter { $0.teamID == t }.count)
        case .project(let p): doc.add("credentials", "fcmServiceAccounts", fcmAccounts.all.filter { $0.projectID == p }.count)
        case .label: break
        }
        return doc
    }
}
