import IMLink
import NIOCore
@testable import RefServer
import Testing

/// The session rules of `wire.md` section 5, driven without sockets.
@Suite("SessionBook")
struct SessionBookTests {
    let connection = ConnectionID(rawValue: 1)
    let key = SessionKey(agent: "a", id: 7)

    func data(_ seq: UInt64) -> DataFrame { DataFrame(session: 7, seq: seq, body: ByteBuffer(string: "m\(seq)")) }

    @Test func inboundSequence_acceptsNext_reAcksDuplicate_refusesGap() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "sink", resumeAfter: 0), agent: "a", service: .sink, connection: connection, flow: false)
        #expect(book.receive(data(1), agent: "a", connection: connection) == .accepted(.sink))
        #expect(book.receive(data(2), agent: "a", connection: connection) == .accepted(.sink))
        #expect(book.takeAcks().map(\.1) == [Ack(session: 7, seq: 2)])
        #expect(book.receive(data(1), agent: "a", connection: connection) == .duplicate)
        #expect(book.takeAcks().map(\.1) == [Ack(session: 7, seq: 2)])
        #expect(book.receive(data(4), agent: "a", connection: connection) == .gap(expected: 3))
        #expect(book.receive(data(3), agent: "a", connection: ConnectionID(rawValue: 2)) == .notOpen)
    }

    @Test func window_limitsUnacknowledgedFrames() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "push", resumeAfter: 0, window: 2), agent: "a", service: .push, connection: connection, flow: true)
        for _ in 0..<5 { book.enqueue(key, compressed: false, body: ByteBuffer(string: "p")) }
        #expect(book.takeSendable(key, limit: 100, maxBody: 1024).frames.map(\.seq) == [1, 2])
        #expect(book.receive(Ack(session: 7, seq: 1), agent: "a", connection: connection) == .accepted)
        #expect(book.takeSendable(key, limit: 100, maxBody: 1024).frames.map(\.seq) == [3])
        let windowApplied = book.receive(WindowUpdate(session: 7, window: 0), agent: "a", connection: connection)
        #expect(windowApplied)
        #expect(book.receive(Ack(session: 7, seq: 3), agent: "a", connection: connection) == .accepted)
        #expect(book.takeSendable(key, limit: 100, maxBody: 1024).frames.isEmpty)
        #expect(book.receive(Ack(session: 7, seq: 9), agent: "a", connection: connection) == .beyondAssigned(5))
    }

    @Test func reopen_resendsFromResumeAfter_andReportsInboundLast() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "echo", resumeAfter: 0), agent: "a", service: .echo, connection: connection, flow: false)
        _ = book.receive(data(1), agent: "a", connection: connection)
        for _ in 0..<3 { book.enqueue(key, compressed: false, body: ByteBuffer(string: "e")) }
        #expect(book.takeSendable(key, limit: 100, maxBody: 1024).frames.map(\.seq) == [1, 2, 3])
        book.detach(connection)

        let again = ConnectionID(rawValue: 2)
        let outcome = book.open(Open(session: 7, service: "echo", resumeAfter: 1), agent: "a", service: .echo, connection: again, flow: false)
        #expect(outcome == .opened(OpenOK(session: 7, lastAcked: 1, window: 64), created: false))
        #expect(book.takeSendable(key, limit: 100, maxBody: 1024).frames.map(\.seq) == [2, 3])
    }

    @Test func resumeAfterBeyondLastAssigned_movesTheSequenceForward() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "push", resumeAfter: 40), agent: "a", service: .push, connection: connection, flow: false)
        #expect(book.enqueue(key, compressed: false, body: ByteBuffer()) == 41)
    }

    @Test func close_isForever_andServiceMismatchIsForbidden() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "echo", resumeAfter: 0), agent: "a", service: .echo, connection: connection, flow: false)
        guard case .failed(let mismatch) = book.open(Open(session: 7, service: "sink", resumeAfter: 0), agent: "a", service: .sink,
                                                      connection: connection, flow: false) else {
            Issue.record("a session changed service")
            return
        }
        #expect(mismatch.code == .forbidden)
        book.close(key)
        guard case .failed(let closed) = book.open(Open(session: 7, service: "echo", resumeAfter: 0), agent: "a", service: .echo,
                                                    connection: connection, flow: false) else {
            Issue.record("a closed session reopened")
            return
        }
        #expect(closed.code == .sessionClosed)
    }

    @Test func oversizedMessage_isHeldBack() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "push", resumeAfter: 0), agent: "a", service: .push, connection: connection, flow: false)
        book.enqueue(key, compressed: false, body: ByteBuffer(repeating: 0, count: 10))
        book.enqueue(key, compressed: false, body: ByteBuffer(repeating: 0, count: 100))
        let (frames, oversized) = book.takeSendable(key, limit: 100, maxBody: 50)
        #expect(frames.map(\.seq) == [1])
        #expect(oversized == 2)
    }

    @Test func operations_recordMessagesAcksAndCounters() {
        var book = SessionBook(receiveWindow: 64)
        _ = book.open(Open(session: 7, service: "echo", resumeAfter: 0), agent: "a", service: .echo, connection: connection, flow: false)
        _ = book.receive(data(1), agent: "a", connection: connection)
        book.enqueue(key, compressed: false, body: ByteBuffer(string: "e"))
        _ = book.takeSendable(key, limit: 10, maxBody: 100)
        _ = book.receive(Ack(session: 7, seq: 1), agent: "a", connection: connection)
        let operations = book.takeOperations()
        #expect(operations == [
            .insertMessage(key, OutboundMessage(seq: 1, compressed: false, body: ByteBuffer(string: "e"))),
            .deleteMessages(key, through: 1),
            .saveSession(SessionRecord(key: key, service: .echo, inboundLast: 1, outboundLast: 1, outboundAcked: 1)),
        ])
        #expect(book.takeOperations().isEmpty)
    }
}
