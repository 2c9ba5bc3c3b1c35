import AgentIPC
import Foundation
import NIOCore
import Testing

/// `imagent open|close|send|listen` as a child process against the fake daemon.
@Suite struct CLISessionTests {
    @Test func open_createsASession_withItsOptions() async throws {
        try await withFakeDaemon { daemon in
            let human = try await ImagentProcess.run(["open", "chat", "--priority", "low", "--no-durable"],
                                                     against: daemon)
            #expect(human.status == 0, "\(human.stderr)")
            #expect(human.stdoutLines == ["session 42 opened for chat: pending; sent 0, acked 0, delivered 0"])
            #expect(daemon.received(.open).first?.message == .open(.init(service: "chat", priority: .low, durable: false)))

            let json = try await ImagentProcess.run(["open", "chat", "--json"], against: daemon)
            #expect(try jsonObject(json.stdout) == jsonObject(
                #"{"session":43,"state":"pending","sent_seq":0,"acked_seq":0,"delivered_seq":0}"#))
        }
    }

    @Test func open_session_attaches() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["open", "--session", "7"], against: daemon)
            #expect(result.status == 0)
            #expect(result.stdoutLines == ["session 7 attached: open; sent 0, acked 0, delivered 0"])
            #expect(daemon.received(.open).first?.message == .open(.init(session: 7)))
        }
    }

    @Test func open_withBothOrNeither_isAUsageError() async throws {
        try await withFakeDaemon { daemon in
            for arguments in [["open"], ["open", "chat", "--session", "7"], ["open", "--session", "7", "--priority", "high"]] {
                let result = try await ImagentProcess.run(arguments, against: daemon)
                #expect(result.status == 1, "\(arguments)")
                #expect(result.stderr.contains("Usage: imagent open"))
            }
            #expect(daemon.received.isEmpty, "a usage error never reaches the daemon")
        }
    }

    @Test func close_closesTheSession_orSaysItIsUnknown() async throws {
        try await withFakeDaemon { daemon in
            let ok = try await ImagentProcess.run(["close", "7"], against: daemon)
            #expect(ok.status == 0)
            #expect(ok.stdoutLines == ["session 7 closed"])
            #expect(daemon.received(.close).first?.message == .close(.init(session: 7)))

            let unknown = try await ImagentProcess.run(["close", "99"], against: daemon)
            #expect(unknown.status == 4)
            #expect(unknown.stderr == "imagent: imagentd refused CLOSE with UNKNOWN_SESSION: no such session; "
                + "list your sessions with `imagent sessions`\n")
        }
    }

    @Test func send_anArgument_printsTheAcceptedSeq() async throws {
        try await withFakeDaemon { daemon in
            let human = try await ImagentProcess.run(["send", "7", "hello there", "--ttl", "2.5"], against: daemon)
            #expect(human.status == 0, "\(human.stderr)")
            #expect(human.stdoutLines == ["session 7: accepted seq 1"])
            let json = try await ImagentProcess.run(["send", "7", "again", "--json"], against: daemon)
            #expect(try jsonObject(json.stdout) == jsonObject(#"{"session":7,"seq":2}"#))
            #expect(daemon.received(.send).map(\.message) == [
                .send(.init(session: 7, payload: ByteBuffer(string: "hello there"), ttlMS: 2500)),
                .send(.init(session: 7, payload: ByteBuffer(string: "again"))),
            ])
            #expect(daemon.received(.open).isEmpty, "send does not attach the session")
        }
    }

    @Test func send_readsStdin_wholeOrLineByLine() async throws {
        try await withFakeDaemon { daemon in
            let whole = try await ImagentProcess.run(["send", "7"], against: daemon, stdin: "line one\nline two\n")
            #expect(whole.stdoutLines == ["session 7: accepted seq 1"])
            let lines = try await ImagentProcess.run(["send", "7", "--lines"], against: daemon,
                                                     stdin: "a\r\n\nb\nc")
            #expect(lines.status == 0)
            #expect(lines.stdoutLines == ["session 7: accepted seq 2", "session 7: accepted seq 3",
                                          "session 7: accepted seq 4"])
            let payloads = daemon.received(.send).compactMap { frame -> String? in
                guard case .send(let send) = frame.message else { return nil }
                return String(buffer: send.payload)
            }
            #expect(payloads == ["line one\nline two\n", "a", "b", "c"])

            let both = try await ImagentProcess.run(["send", "7", "x", "--lines"], against: daemon)
            #expect(both.status == 1)
        }
    }

    @Test func send_aTooLargeMessage_isRefused() async throws {
        var script = FakeDaemon.Script()
        script.maxPayload = 8
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["send", "7", "0123456789"], against: daemon)
            #expect(result.status == 4)
            #expect(result.stderr.contains("above the daemon's MAX_PAYLOAD of 8 bytes"))
        }
    }

    @Test func listen_printsMessages_andAcknowledgesEach() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["listen", "7", "--count", "2"], against: daemon)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdoutLines == ["#1 hello", "#2 world"])
            #expect(daemon.received(.open).first?.message == .open(.init(session: 7)))
            #expect(daemon.received(.ack).map(\.message) == [
                .ack(.init(session: 7, seq: 1)), .ack(.init(session: 7, seq: 2)),
            ])
        }
    }

    @Test func listen_fromSeq_skipsPrintingEarlierMessages_butAcknowledgesThem() async throws {
        try await withFakeDaemon { daemon in
            let result = try await ImagentProcess.run(["listen", "7", "--count", "1", "--from-seq", "2", "--hex"],
                                                      against: daemon)
            #expect(result.stdoutLines == ["#2 776f726c64"])
            #expect(daemon.received(.ack).count == 2)
        }
    }

    @Test func listen_json_and_binaryPayloads() async throws {
        var script = FakeDaemon.Script()
        script.inbound = [7: [[0xFF, 0x00], Array("ok".utf8)]]
        try await withFakeDaemon(script) { daemon in
            let human = try await ImagentProcess.run(["listen", "7", "--count", "2"], against: daemon)
            #expect(human.stdoutLines == ["#1 hex:ff00", "#2 ok"])
            let json = try await ImagentProcess.run(["listen", "7", "--count", "2", "--json"], against: daemon)
            #expect(try json.stdoutLines.map(jsonObject) == [
                jsonObject(#"{"session":7,"seq":1,"size":2,"hex":"ff00"}"#),
                jsonObject(#"{"session":7,"seq":2,"size":2,"hex":"6f6b","text":"ok"}"#),
            ])
        }
    }
}
