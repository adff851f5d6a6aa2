import Journal
import PushCore
import Transport

/// What every provider answer goes through: the journal (when on) before it leaves, the
/// metrics once it has.
struct AnswerRecording: Sendable {
    let provider: PushProvider
    let journal: Journal?
    let metrics: Metrics

    /// Sends the answer now, or once the journal has committed the request's record. The record's
    /// fields are passed as they lie (see `Journal.appendRequest`).
    func commit(atMs: Int64, provider: PushProvider, connection: UInt64, environment: String,
                token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, status: Int, reason: String, latencyUs: Int64,
                headers: HTTPFields, payload: ArraySlice<UInt8>, warnings: [String], notificationID: UUIDValue?,
                _ ex: Exchange, _ answer: @escaping @Sendable () -> Void) {
        guard let journal else { return answer() }
        journal.appendRequest(atMs: atMs, provider: provider, connection: connection, environment: environment, token: token,
                              topic: topic, status: status, reason: reason, latencyUs: latencyUs, headers: headers,
                              payload: payload, warnings: warnings, notificationID: notificationID,
                              loop: ex.eventLoop, completion: answer)
    }

    /// Counts the answer: status, reason, and the time since `started` plus any injected delay.
    func observe(_ ex: Exchange, _ started: UInt64, status: Int, reason: String, delay: Double) {
        AnswerRecording.observe(metrics, provider, ex, started, status: status, reason: reason, delay: delay)
    }

    /// `observe` for a deferred answer, which keeps only the metrics.
    static func observe(_ metrics: Metrics, _ provider: PushProvider, _ ex: Exchange, _ started: UInt64, status: Int, reason: String,
                        delay: Double) {
        metrics.record(loop: ex.eventLoop.index, provider: provider, status: status, reason: reason,
                       seconds: Double(Clock.monotonicNanoseconds() - started) / 1e9 + delay)
    }
}
