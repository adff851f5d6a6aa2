import Observation

extension Journal: MetricsSource {
    /// The writer's queue and commits, what failed, what is held for a retry, what is stored.
    public func writeMetrics(_ m: inout MetricsText) {
        let journal = statistics
        m.single("pushemu_journal_queue_depth", "gauge", "Journal records waiting for the writer.", journal.queued)
        m.single("pushemu_journal_records_total", "counter", "Journal records committed.", journal.committed)
        m.single("pushemu_journal_commits_total", "counter", "Journal transactions (group commits).", journal.batches)
        m.single("pushemu_journal_last_batch_size", "gauge", "Records in the last group commit.", journal.lastBatch)
        m.family("pushemu_journal_last_commit_seconds", "gauge", "Duration of the last group commit (write and fsync).")
        m.sample("pushemu_journal_last_commit_seconds", [], "\(Double(journal.lastCommitUs) / 1e6)")
        m.single(
            "pushemu_journal_dropped_total", "counter", "Journal records dropped because the queue was full (relaxed records only).",
            journal.dropped)
        m.single(
            "pushemu_journal_failed_commits_total", "counter", "Group commits, and strict write-ahead writes, that failed.",
            journal.failedCommits)
        m.single(
            "pushemu_journal_failing", "gauge",
            "1 while the journal cannot store what it is given (a commit or write-ahead write failed and none succeeded since).",
            journal.failing ? 1 : 0)
        m.single(
            "pushemu_journal_withheld_answers_total", "counter",
            "Strict answers not acknowledged because their record could not be stored (answered 503).", journal.withheldAnswers)
        m.single(
            "pushemu_journal_awaiting_store_records", "gauge",
            "Answered strict records held in their write-ahead files because their commit failed (stored by the next that succeeds).",
            journal.awaitingStore)
        m.single("pushemu_journal_pruned_total", "counter", "Journal records removed by retention.", journal.pruned)
        m.family("pushemu_journal_stored_records", "gauge", "Journal records stored, by kind.")
        m.sample("pushemu_journal_stored_records", [("kind", "request")], journal.storedRequests)
        m.sample("pushemu_journal_stored_records", [("kind", "tracking")], journal.storedTracking)
        m.family("pushemu_journal_commit_duration_seconds", "histogram", "Duration of group commits (write and fsync).")
        m.histogram(
            "pushemu_journal_commit_duration_seconds", bounds: Journal.commitBounds, counts: journal.commitSeconds,
            sum: String(journal.commitSecondsSum))
        m.family("pushemu_journal_batch_records", "histogram", "Records per group commit.")
        m.histogram(
            "pushemu_journal_batch_records", bounds: Journal.batchBounds, counts: journal.batchRecords, sum: String(journal.batchRecordsSum)
        )
    }
}
