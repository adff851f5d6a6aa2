import Faults
import Observation
import PushCore
import Transport

extension PushPipeline {
    /// The answer's events for the event stream: `accepted` or `rejected`, and `fault` when a
    /// rule fired. Called only while some subscriber wants one of them (`EventBus.wants`).
    func publishAnswer(
        _ subject: PushSubject, _ outcome: PushOutcome, fired: FiredFault?, id: UUIDValue?, device: DeviceOutcome?, nowMs: Int64
    ) {
        let events = services.events
        let status = outcome.status
        let reason = outcome.reason
        let token = subject.token.utf8String
        let topic = subject.topic?.utf8String ?? ""
        let provider = self.provider
        var event = EmulatorEvent(
            kind: PushProvider.accepts(status) ? .accepted : .rejected, provider: provider, token: token, topic: topic,
            environment: subject.scope, status: status, reason: reason)
        event.team = subject.team?.text ?? ""
        if events.wants(event.kind) {
            events.publish(event) { w in
                w.add("at", nowMs)
                w.add("provider", provider.name)
                w.add("id", id: id)
                w.add("token", token)
                w.add("topic", topic)
                w.add("environment", subject.scope)
                if let team = subject.team { w.add("team", team.text) }
                w.add("status", status)
                w.add("reason", reason.isEmpty ? nil : reason)
                w.add("display", json: device.map { EventJSON.display($0.display) })
                w.add("lint", device.map { $0.lint.count } ?? 0)
                if let fired { w.add("fault", fired.ruleID) }
            }
        }
        if let fired, events.wants(.fault) {
            var event = EmulatorEvent(
                kind: .fault, provider: provider, token: token, topic: topic, environment: subject.scope, status: status,
                reason: fired.ruleID)
            event.team = subject.team?.text ?? ""
            events.publish(event) { f in
                f.add("at", nowMs)
                f.add("rule", fired.ruleID)
                f.add("provider", provider.name)
                f.add("token", token)
                f.add("topic", topic)
                f.add("status", status)
                f.add("reason", reason.isEmpty ? nil : reason)
            }
        }
    }
}
