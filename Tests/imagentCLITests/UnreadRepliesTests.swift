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
            let asker = try RawIPCSocket(path: daemon.socketPath, timeout: .seconds(2))
            asker.write(RawIPCSocket.hello())
            guard case .frame(let welcome) = asker.read(), welcome.op == 0x8001 else {
                Issue.record("no WELCOME")
                return
            }
            // STATUS requests (10 bytes each) until the socket takes no more: each reply is far
            // larger than its request, so a daemon that kept reading would answer them all.
            var asked: UInt32 = 0
            while asked < 2_000_000 {
                let batch = (0..<1_024).flatMap { RawIPCSocket.frame(op: 0x0010, request: asked + 2 + UInt32($0)) }
                guard asker.write(batch) else { break }  // the send timed out: nothing is read
                asked += 1_024
            }
            #expect(asked < 2_000_000, "the daemon read \(asked) requests without their replies being read")

            // Another client is answered meanwhile.
            let other = try RawIPCSocket(path: daemon.socketPath, timeout: .seconds(5))
            other.write(RawIPCSocket.hello())
            _ = other.read()
            other.write(RawIPCSocket.frame(op: 0x007F, request: 2))
            guard case .frame(let pong) = other.read() else {
                Issue.record("another client got no PONG while one did not read")
                return
            }
            #expect(pong.op == 0x807F)

            // The asker reads: every request is answered, in order (the daemon reads on as the replies drain).
            var answered: UInt32 = 0
            while answered < asked, case .frame(let reply) = asker.read() {
                #expect(reply.request == answered + 2, "reply \(reply.request) where \(answered + 2) was due")
                guard reply.request == answered + 2 else { break }
                answered += 1
            }
            print("\(asked) STATUS requests written before the daemon stopped reading; \(answered) answered once read")
            #expect(answered == asked)
        }
    }
}
