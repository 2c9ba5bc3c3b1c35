import Foundation
import Testing

/// A client that asks without reading is not read either (imagent-ipc(7), "Isolation and flow
/// control"): the daemon answers until about 1 MiB waits unread, then leaves the rest of the
/// requests in the client's socket, and answers them, all and in order, once the client reads.
/// Meanwhile another client is served as usual.
@Suite struct UnreadRepliesTests {
    @Test(.timeLimit(.minutes(2)))
    func aClientThatDoesNotRead_isNotReadEither_untilItReads_andIsThenAnsweredInOrder() async throws {
        try await withRealDaemon { daemon in
            let path = daemon.socketPath
            // Blocking sockets, on threads of their own: not on the test's cooperative pool.
            let outcome = Outcome()
            await onThreads(1) { _ in Self.askWithoutReading_thenRead(path, outcome) }
            print("\(outcome.asked) STATUS requests written before the daemon stopped reading; \(outcome.answered) answered once read")
            #expect(outcome.problems == [])
            #expect(outcome.asked < 2_000_000, "the daemon read \(outcome.asked) requests without their replies being read")
            #expect(outcome.asked > 0 && outcome.answered == outcome.asked)
        }
    }

    private final class Outcome: @unchecked Sendable {  // written by one thread, read after it ends
        var asked: UInt32 = 0
        var answered: UInt32 = 0
        var problems: [String] = []
    }

    private static func askWithoutReading_thenRead(_ path: String, _ outcome: Outcome) {
        guard let asker = try? RawIPCSocket(path: path, timeout: .seconds(2)) else { return outcome.problems.append("cannot connect") }
        asker.write(RawIPCSocket.hello())
        guard case .frame(let welcome) = asker.read(), welcome.op == 0x8001 else { return outcome.problems.append("no WELCOME") }
        // STATUS requests (10 bytes each) until the socket takes no more: each reply is far
        // larger than its request, so a daemon that kept reading would answer them all.
        var asked: UInt32 = 0
        while asked < 2_000_000 {
            let batch = (0..<1_024).flatMap { RawIPCSocket.frame(op: 0x0010, request: asked + 2 + UInt32($0)) }
            guard asker.write(batch) else { break }  // the send timed out: nothing is read
            asked += 1_024
        }
        outcome.asked = asked

        // Another client is answered meanwhile.
        guard let other = try? RawIPCSocket(path: path, timeout: .seconds(5)) else { return outcome.problems.append("cannot connect another client") }
        other.write(RawIPCSocket.hello())
        _ = other.read()
        other.write(RawIPCSocket.frame(op: 0x007F, request: 2))
        guard case .frame(let pong) = other.read(), pong.op == 0x807F else {
            return outcome.problems.append("another client got no PONG while one did not read")
        }

        // The asker reads: every request is answered, in order (the daemon reads on as the replies drain).
        var answered: UInt32 = 0
        while answered < asked, case .frame(let reply) = asker.read() {
            guard reply.request == answered + 2 else { return outcome.problems.append("reply \(reply.request) where \(answered + 2) was due") }
            answered += 1
        }
        outcome.answered = answered
    }
}
