import CSystem
import XCTest

@testable import Transport

/// The connection's life without a socket: each transition, what it answers and what the
/// connection may do afterwards.
final class ConnectionStateMachineTests: XCTestCase {
    let readEvents = CSYS_EPOLLIN | CSYS_EPOLLRDHUP

    func testCleartextSniffsThenSpeaks() {
        var m = ConnectionStateMachine(tls: false, now: 7)
        XCTAssertEqual(m.stage, .sniffing(startedAt: 7))
        XCTAssertTrue(m.reads)
        XCTAssertEqual(m.events, readEvents)
        m.speak(http2: true)
        XCTAssertTrue(m.speaksHTTP2)
        // An h2c upgrade from HTTP/1.1 goes the same way.
        var h1 = ConnectionStateMachine(tls: false, now: 0)
        h1.speak(http2: false)
        XCTAssertEqual(h1.stage, .http1)
        h1.speak(http2: true)
        XCTAssertEqual(h1.stage, .http2)
    }

    func testHandshakeAdmitsOnceAndALPNDecides() {
        var m = ConnectionStateMachine(tls: true, now: 5)
        XCTAssertTrue(m.isHandshaking)
        XCTAssertTrue(m.admitHandshake())
        XCTAssertFalse(m.admitHandshake(), "admission is asked once")
        m.handshakeWaits(write: true)
        XCTAssertEqual(m.events, readEvents | CSYS_EPOLLOUT)
        XCTAssertEqual(m.handshakeDone(alpn: "h2"), .http2)
        XCTAssertEqual(m.output, .flowing)

        var h1 = ConnectionStateMachine(tls: true, now: 5)
        XCTAssertEqual(h1.handshakeDone(alpn: "http/1.1"), .http1)
        // No ALPN: the first bytes decide, and the handshake's start time carries over.
        var none = ConnectionStateMachine(tls: true, now: 9)
        XCTAssertEqual(none.handshakeDone(alpn: nil), .sniffing(startedAt: 9))
    }

    func testReadStopsPauseAndResumeIndependently() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.speak(http2: true)
        XCTAssertTrue(m.setOutputBacklog(true))
        XCTAssertFalse(m.setOutputBacklog(true), "no change answers false")
        XCTAssertFalse(m.reads)
        XCTAssertTrue(m.hasOutputBacklog)
        XCTAssertTrue(m.setSessionPaused(true))
        XCTAssertTrue(m.setOutputBacklog(false))
        XCTAssertFalse(m.reads, "the session's pause still holds")
        XCTAssertEqual(m.events, 0)
        XCTAssertTrue(m.setSessionPaused(false))
        XCTAssertTrue(m.reads)
    }

    func testBlockedWriteWaitsAndFlushResumesBackloggedReading() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.speak(http2: true)
        XCTAssertTrue(m.writeBlocked())
        XCTAssertFalse(m.writeBlocked(), "already waiting")
        XCTAssertEqual(m.events & CSYS_EPOLLOUT, CSYS_EPOLLOUT)
        _ = m.setOutputBacklog(true)
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: false), .resumeReading)
        XCTAssertEqual(m.output, .flowing)
        XCTAssertTrue(m.reads)
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: false), .serve)
    }

    func testTLSReadWaitingForWritable() {
        var m = ConnectionStateMachine(tls: true, now: 0)
        _ = m.handshakeDone(alpn: "h2")
        XCTAssertFalse(m.becameWritable(), "no read was waiting")
        m.readWaitsForWritable()
        XCTAssertTrue(m.readWaitsForWrite)
        XCTAssertTrue(m.becameWritable())
        XCTAssertFalse(m.readWaitsForWrite)
    }

    func testPeerCloseOnHTTP1OwesTheDispatchedAnswer() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.speak(http2: false)
        XCTAssertFalse(m.peerClosedInput(answering: true), "the answer is still owed")
        XCTAssertFalse(m.reads)
        // Flushing before the answer exists keeps the connection open...
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: true), .serve)
        // ...and once it is written, the connection closes (the peer is gone, no linger).
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: false), .close)

        var idle = ConnectionStateMachine(tls: false, now: 0)
        idle.speak(http2: false)
        XCTAssertTrue(idle.peerClosedInput(answering: false), "nothing owed: close now")

        var sniffing = ConnectionStateMachine(tls: false, now: 0)
        XCTAssertTrue(sniffing.peerClosedInput(answering: false))
    }

    func testHTTP2SessionEndLingersUnlessThePeerIsGone() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.speak(http2: true)
        m.sessionEnded()
        XCTAssertEqual(m.input, .ended)
        XCTAssertEqual(m.flushed(sessionDone: true, answerOwed: false), .linger)
        m.linger(now: 1_000)
        XCTAssertTrue(m.isLingering)
        XCTAssertFalse(m.reads, "lingering drops input rather than reading it")
        XCTAssertEqual(m.events, readEvents, "but still waits for it, to drain it")
        XCTAssertEqual(m.stage, .lingering(until: 2_000_001_000, budget: 4 * 1024 * 1024))
        XCTAssertFalse(m.dropped(4 * 1024 * 1024 - 1))
        XCTAssertTrue(m.dropped(1), "the linger budget bounds what is drained")

        var gone = ConnectionStateMachine(tls: false, now: 0)
        gone.speak(http2: true)
        XCTAssertFalse(gone.peerClosedInput(answering: false), "streams finish first")
        XCTAssertEqual(gone.flushed(sessionDone: true, answerOwed: false), .close)
    }

    func testDrainAsksEachStageForItsOwnEnding() {
        var h2 = ConnectionStateMachine(tls: false, now: 0)
        h2.speak(http2: true)
        XCTAssertEqual(h2.beginDrain(), .goAway)
        XCTAssertTrue(h2.isDraining)
        XCTAssertEqual(h2.beginDrain(), .none, "a drain starts once")

        var h1 = ConnectionStateMachine(tls: false, now: 0)
        h1.speak(http2: false)
        XCTAssertEqual(h1.beginDrain(), .finishHTTP1)

        var handshake = ConnectionStateMachine(tls: true, now: 0)
        XCTAssertEqual(handshake.beginDrain(), .close)

        var closed = ConnectionStateMachine(tls: false, now: 0)
        XCTAssertTrue(closed.close())
        XCTAssertFalse(closed.close(), "closing twice answers false")
        XCTAssertEqual(closed.beginDrain(), .none)
        XCTAssertFalse(closed.reads)
    }

    func testKeepAliveStopsAndCloseAfterSendLingers() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.speak(http2: false)
        m.stopKeepAlive(closeAfterSend: false)
        XCTAssertEqual(m.ending, .draining)
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: false), .serve)
        m.stopKeepAlive(closeAfterSend: true)
        XCTAssertEqual(m.ending, .closingAfterFlush)
        // The peer may still be sending: half-close and drain rather than reset.
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: false), .linger)
    }

    func testCloseAfterFlushBeforeAProtocolClosesOutright() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.closeAfterFlush()
        XCTAssertEqual(m.flushed(sessionDone: false, answerOwed: false), .close)
    }

    func testTunnelRestartsTheHandshake() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.speak(http2: false)
        _ = m.writeBlocked()
        m.tunnelStarted(now: 42)
        XCTAssertEqual(m.stage, .handshaking(startedAt: 42, admitted: false))
        XCTAssertEqual(m.output, .flowing)
        XCTAssertTrue(m.admitHandshake())
    }

    func testSpeakIsIgnoredOnceClosedOrLingering() {
        var m = ConnectionStateMachine(tls: false, now: 0)
        m.linger(now: 0)
        m.speak(http2: true)
        XCTAssertTrue(m.isLingering)
        _ = m.close()
        m.speak(http2: false)
        XCTAssertTrue(m.isClosed)
    }
}
