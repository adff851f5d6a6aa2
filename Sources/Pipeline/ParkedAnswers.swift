import Faults
import Journal
import PushCore
import Runtime
import Transport

/// One answer that is decided but not yet given: what stages 8 to 10 need (see `PushPipeline`).
/// A value, the same for every gateway (the gateway's connection actions, when they do
/// anything, come as `after`), so a parked answer costs a slot in its loop's `ParkedAnswers`
/// and nothing is allocated for it.
struct PendingAnswer {
    let exchange: Exchange
    let response: Response
    let fired: FiredFault?
    let status: Int
    let reason: String
    /// The monotonic start (ns) the request's latency counts from.
    let started: UInt64
    /// The gateway's connection actions, run once the answer is out (nil: they do nothing).
    let after: (@Sendable (ConnectionContext) -> Void)?

    /// Stages 8 and 9: shaping and metrics (then the caller's stage 10). A record strict
    /// durability could not store (a full disk) is not acknowledged: the client gets the
    /// service's retryable 503 and sends it again. `decidedNs`: the monotonic time the answer's
    /// latency ends at when it was read just before (its journal record's), else now.
    @inline(__always)
    func give(
        stored: Bool, _ services: PipelineServices, provider: PushProvider, goAwayDebugData: (String) -> [UInt8],
        decidedNs: UInt64? = nil
    ) {
        let delay = services.faults.send(
            stored ? response : exchange.unavailableAnswer, on: exchange, fired: fired, provider: provider,
            goAwayDebugData: goAwayDebugData)
        let endNs = decidedNs ?? Clock.monotonicNanoseconds()
        services.metrics.record(
            loop: exchange.eventLoop.index, provider: provider, status: stored ? status : 503,
            reason: stored ? reason : "JournalCommitFailed", seconds: Double(endNs &- started) / 1e9 + delay)
    }
}

extension PendingAnswer {
    /// Stages 8 to 10 for an answer that waited for its record: shaping and metrics, then the
    /// connection's actions. On the loop the answer is given on.
    @inline(__always)
    func complete(stored: Bool, _ services: PipelineServices, provider: PushProvider, goAwayDebugData: (String) -> [UInt8]) {
        give(stored: stored, services, provider: provider, goAwayDebugData: goAwayDebugData)
        after?(exchange.connection)
    }
}

/// One event loop's answers waiting for their records (strict: written ahead; sync: committed),
/// oldest first, for one gateway's pipeline. The journal counts them (`CommitWaiter`) and tells
/// this loop how many of the oldest may go: under strict at the loop's flush barrier, in the
/// iteration that parked them; under sync after each commit, one hop per loop per commit. No
/// closure, context allocation or capture retains per answer.
///
/// Confined to its loop: `park` runs in the request's handler and `committed` in the loop's
/// barrier or in the block the journal's writer queues on the same loop, so the queue needs no lock.
final class ParkedAnswers: CommitWaiter, @unchecked Sendable {
    /// Given answers are taken out (nil), so giving one moves it rather than copying it.
    private var queue: [PendingAnswer?] = []
    /// The oldest answer not yet given.
    private var head = 0
    private let services: PipelineServices
    private let provider: PushProvider
    private let goAwayDebugData: @Sendable (String) -> [UInt8]
    /// Each loop's queue, made one after another at start-up, off its neighbours' cache lines.
    private let padding = CacheLinePadding()

    init(services: PipelineServices, provider: PushProvider, goAwayDebugData: @escaping @Sendable (String) -> [UInt8]) {
        self.services = services
        self.provider = provider
        self.goAwayDebugData = goAwayDebugData
    }

    func park(_ answer: consuming PendingAnswer) { queue.append(.some(consume answer)) }

    func committed(_ count: Int, stored: Bool) {
        // Bounded by what is queued: the journal never counts more than were parked.
        let end = min(head + max(0, count), queue.count)
        while head < end {
            let answer = queue[head].take()
            head += 1
            guard let answer else { continue }
            answer.complete(stored: stored, services, provider: provider, goAwayDebugData: goAwayDebugData)
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }
}
