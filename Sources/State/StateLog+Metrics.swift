import Observation

extension StateLog: MetricsSource {
    /// The log's size since its last snapshot, what was appended and failed, the snapshots.
    public func writeMetrics(_ m: inout MetricsText) {
        let s = statistics
        m.single("pushemu_state_log_bytes", "gauge", "Bytes in the state log's files since the last snapshot.", s.logBytes)
        m.single("pushemu_state_log_records", "gauge", "State changes logged since the last snapshot.", s.recordsSinceSnapshot)
        m.single("pushemu_state_changes_total", "counter", "State changes appended to the state log.", s.appended)
        m.single("pushemu_state_write_failures_total", "counter", "Writes of the state log that failed.", s.writeFailures)
        m.single("pushemu_state_failing", "gauge", "1 while the state log cannot be written (changes are refused).", isFailing ? 1 : 0)
        m.single("pushemu_state_snapshots_total", "counter", "Snapshots of the state written.", s.snapshots)
        m.family("pushemu_state_last_snapshot_timestamp_seconds", "gauge", "When the last snapshot of the state was written.")
        m.sample("pushemu_state_last_snapshot_timestamp_seconds", [], s.lastSnapshotAtMs.map { String(Double($0) / 1000) } ?? "0")
        m.single("pushemu_state_last_snapshot_bytes", "gauge", "The size of the last snapshot of the state.", s.lastSnapshotBytes)
    }
}
