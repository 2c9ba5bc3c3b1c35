import AgentIPC
import Synchronization

/// `sessions`: `--sessions` sessions on one connection, message 1 sent on each, every echo checked.
final class SessionsScenario: Sendable {
    private let options: Options
    private let deadline: ContinuousClock.Instant
    private let state = Mutex(Tally())

    struct Tally {
        /// Sessions whose echo is still to come.
        var waiting: Set<UInt64> = []
        var opened = 0
        var sent = 0
        var received = 0
        var wrong = 0
        var errors = ErrorCounts()
        /// Every echo is in, or the time is up: the connection is closed on purpose.
        var finished = false
    }

    init(_ options: Options, deadline: ContinuousClock.Instant) {
        self.options = options
        self.deadline = deadline
    }

    func run() async throws {
        let client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-conformance")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.receive(client) }
            var sessions: [UInt64] = []
            for _ in 0..<options.sessions where ContinuousClock.now < deadline {
                do {
                    sessions.append(try await client.open(service: options.service).session)
                } catch {
                    state.withLock { $0.errors.count(errorName(error)) }
                }
            }
            state.withLock { $0.opened = sessions.count }
            for session in sessions where ContinuousClock.now < deadline {
                // Waiting before the SEND: the echo may overtake its ACCEPTED.
                state.withLock { _ = $0.waiting.insert(session) }
                do {
                    try await client.send(session: session, payload: Payload.make(1, size: options.size))
                    state.withLock { $0.sent += 1 }
                } catch {
                    state.withLock { tally in
                        tally.waiting.remove(session)
                        tally.errors.count(errorName(error))
                    }
                }
            }
            while state.withLock({ !$0.waiting.isEmpty }) {
                guard ContinuousClock.now < deadline else {
                    state.withLock { $0.errors.count("TIMED_OUT") }
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            state.withLock { $0.finished = true }
            group.cancelAll()
            await client.close()
        }
        let tally = state.withLock { $0 }
        Output.line { json in
            json.field("scenario", "sessions")
            json.field("opened", tally.opened)
            json.field("sent", tally.sent)
            json.field("received", tally.received)
            json.field("wrong", tally.wrong)
            tally.errors.write(to: &json)
        }
    }

    private func receive(_ client: IPCClient) async throws {
        do {
            for try await event in client.events {
                switch event {
                case .message(let message):
                    state.withLock { tally in
                        if tally.waiting.contains(message.session), Payload.number(in: message.payload, size: options.size) == 1 {
                            tally.waiting.remove(message.session)
                            tally.received += 1
                        } else {
                            tally.wrong += 1
                        }
                    }
                    try await client.ack(session: message.session, seq: message.seq)
                default:
                    if let name = errorName(of: event) { state.withLock { $0.errors.count(name) } }
                }
            }
        } catch {
            // Closing the client at the end may fail an ACK in flight: not the library's error.
            state.withLock { tally in
                if !tally.finished, !(error is CancellationError) { tally.errors.count(errorName(error)) }
            }
        }
    }
}
