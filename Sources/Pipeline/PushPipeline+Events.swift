import Faults
import PushCore
import Transport

extension PushPipeline {
    /// The answer's events for the event stream: `accepted` or `rejected`, and `fault` when a
    /// rule fired. Called only while someone listens (`EventBus.isActive`).
    func publishAnswer(
        _ subject: PushSubject, _ outcome: PushOutcome, stored: Bool, fired: FiredFault?, id: UUIDValue?, device: DeviceOutcome?,
        nowMs: Int64
    ) {
        let events = services.events
        let status = stored ? outcome.status : 503
        let reason = stored ? outcome.reason : "JournalCommitFailed"
        let token = subject.token.utf8String
        let topic = subject.topic?.utf8String ?? ""
        var w = JSONObjectWriter()
        w.add("at", nowMs)
        w.add("provider", provider.name)
        w.add("id", id?.description)
        w.add("token", token)
        w.add("topic", topic)
        w.add("environment", subject.scope)
        w.add("status", status)
        w.add("reason", reason.isEmpty ? nil : reason)
        w.add("display", json: device?.display.json)
        w.add("lint", device.map { $0.lint.count } ?? 0)
        w.add("fault", fired?.ruleID)
        events.publish(
            EmulatorEvent(
                kind: status == 200 ? .accepted : .rejected, provider: provider, token: token, topic: topic,
                environment: subject.scope, status: status, reason: reason, json: w.text))
        if let fired {
            var f = JSONObjectWriter()
            f.add("at", nowMs)
            f.add("rule", fired.ruleID)
            f.add("provider", provider.name)
            f.add("token", token)
            f.add("topic", topic)
            f.add("status", status)
            f.add("reason", reason.isEmpty ? nil : reason)
            events.publish(
                EmulatorEvent(
                    kind: .fault, provider: provider, token: token, topic: topic, environment: subject.scope, status: status,
                    reason: fired.ruleID, json: f.text))
        }
    }
}
