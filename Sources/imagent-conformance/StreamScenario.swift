import AgentIPC
import NIOCore
import Synchronization

/// `echo`, `large`, `queue-full`, `server-down` and `stream`: one echo session, `--messages` sent one
/// at a time while a second task receives, checks and acknowledges the echoes.
///
/// `IPCClient` does not reconnect, so this does what a Swift program must (imagent-loadgen's
/// `LoadRunner` does the same for many sessions): when the connection is lost, connect again,
/// attach the session, take OPENED's SENT_SEQ for the fate of the send in flight (stored if it is
/// at or below), resume after it, and skip redelivered messages at or below the last seq processed.
final class StreamScenario: Sendable {
    private let options: Options
    private let deadline: ContinuousClock.Instant
    private let state = Mutex(Track())

    /// What was sent and received so far, across connections.
    struct Track {
        var session: UInt64 = 0
        /// Messages 1...sent are ACCEPTED (stored by the daemon).
        var sent: UInt64 = 0
        /// The message whose SEND awaits its ACCEPTED.
        var inFlight: UInt64?
        var seqsInOrder = true
        var received = 0
        /// The counter of the next message expected.
        var expected: UInt64 = 1
        /// The last inbound seq processed: redeliveries at or below it are skipped.
        var lastSeq: UInt64 = 0
        var duplicates = 0
        var gaps = 0
        var corrupt = 0
        var errors = ErrorCounts()
        var acceptedBeforeFull: UInt64?
        var announcedAccepted = false
        var reconnects = 0
    }

    init(_ options: Options, deadline: ContinuousClock.Instant) {
        self.options = options
        self.deadline = deadline
    }

    func run() async throws {
        let start = ContinuousClock.now
        var client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-conformance")
        let session = try await client.open(service: options.service).session
        state.withLock { $0.session = session }
        while true {
            do {
                try await exchange(on: client)
                break
            } catch is Deadline {
                state.withLock { $0.errors.count("TIMED_OUT") }
                break
            } catch where isConnectionLoss(error) {
                Output.note("connection lost (\(error)); connecting again")
                state.withLock { $0.errors.count("DAEMON_UNAVAILABLE") }
                await client.close()
                guard let again = try await reconnect(session: session) else {
                    state.withLock { $0.errors.count("TIMED_OUT") }
                    return report(start: start, tooLarge: nil)
                }
                client = again
            }
        }
        var tooLarge: String?
        if options.scenario == "large" {
            do {
                try await client.send(session: session, payload: Payload.make(UInt64(options.messages) + 1, size: options.size + 1))
                tooLarge = "accepted"
            } catch {
                tooLarge = errorName(error)
            }
        }
        await client.close()
        report(start: start, tooLarge: tooLarge)
    }

    private func report(start: ContinuousClock.Instant, tooLarge: String?) {
        let elapsed = ContinuousClock.now - start
        let track = state.withLock { $0 }
        Output.line { json in
            json.field("scenario", options.scenario)
            json.field("sent", track.sent)
            json.field("seqs_in_order", track.seqsInOrder)
            json.field("received", track.received)
            json.field("duplicates", track.duplicates)
            json.field("gaps", track.gaps)
            json.field("corrupt", track.corrupt)
            track.errors.write(to: &json)
            if options.scenario == "queue-full" { json.field("accepted_before_full", track.acceptedBeforeFull) }
            if options.scenario == "large" { json.field("too_large", tooLarge) }
            json.field("reconnects", track.reconnects)
            json.field("elapsed_ms", elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        }
    }

    // MARK: One connection

    /// Sends what is left and receives until the last echo is in; throws when the connection is lost.
    private func exchange(on client: IPCClient) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.receive(client) }
            group.addTask { try await self.send(client) }
            group.addTask {
                try await Task.sleep(until: self.deadline, clock: .continuous)
                throw Deadline()
            }
            do {
                // The receiver and the sender; the deadline only ever ends with an error.
                for _ in 0..<2 { try await group.next() }
            } catch {
                // Closing ends a pending request and the events at once, so the group can end.
                group.cancelAll()
                await client.close()
                throw error
            }
            group.cancelAll()
        }
    }

    private func send(_ client: IPCClient) async throws {
        let (session, total) = (state.withLock { $0.session }, UInt64(options.messages))
        while true {
            let next = state.withLock { track -> UInt64? in
                guard track.sent < total else { return nil }
                track.inFlight = track.sent + 1
                return track.inFlight
            }
            guard let number = next else { break }
            do {
                let seq = try await client.send(session: session, payload: Payload.make(number, size: options.size))
                state.withLock { track in
                    if seq != number { track.seqsInOrder = false }
                    track.sent = number
                    track.inFlight = nil
                }
            } catch IPCClientError.refused(_, let code, _) where code == .queueFull {
                // Nothing was stored: retry the same message every 50 ms.
                let first = state.withLock { track -> UInt64? in
                    track.errors.count("QUEUE_FULL")
                    track.inFlight = nil
                    guard track.acceptedBeforeFull == nil else { return nil }
                    track.acceptedBeforeFull = track.sent
                    return track.sent
                }
                if let accepted = first { Output.event("queue_full") { $0.field("accepted", accepted) } }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        guard options.scenario == "server-down" else { return }
        let announce = state.withLock { track in
            defer { track.announcedAccepted = true }
            return !track.announcedAccepted
        }
        if announce { Output.event("accepted") { $0.field("count", total) } }
    }

    private func receive(_ client: IPCClient) async throws {
        let total = UInt64(options.messages)
        if state.withLock({ $0.expected > total }) { return }
        for try await event in client.events {
            switch event {
            case .message(let message):
                let (progress, done) = state.withLock { $0.take(message, size: options.size, total: total) }
                try await client.ack(session: message.session, seq: message.seq)
                if let (sent, received) = progress {
                    Output.event("progress") { json in
                        json.field("sent", sent)
                        json.field("received", received)
                    }
                }
                if done { return }
            default:
                if let name = errorName(of: event) { state.withLock { $0.errors.count(name) } }
            }
        }
        throw IPCClientError.connectionLost(reason: "the events ended")
    }

    // MARK: After a lost connection

    /// Connects again and attaches the session, until the deadline (nil then).
    private func reconnect(session: UInt64) async throws -> IPCClient? {
        while ContinuousClock.now < deadline {
            var client: IPCClient?
            do {
                let connected = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-conformance",
                                                            timeout: .seconds(5))
                client = connected
                let opened = try await connected.attach(session: session)
                resume(after: opened)
                return connected
            } catch where isConnectionLoss(error) || errorName(error) == "TIMED_OUT" || errorName(error) == "SESSION_BUSY" {
                // Not back yet, or our previous connection's end has not reached it yet.
                await client?.close()
                try await Task.sleep(for: .milliseconds(50))
            } catch {
                await client?.close()
                throw error
            }
        }
        return nil
    }

    /// OPENED's SENT_SEQ counts every message that will ever be ACCEPTED: the one in flight was stored
    /// if it is at or below it, and sending resumes after it.
    private func resume(after opened: IPCMessage.Opened) {
        state.withLock { track in
            track.reconnects += 1
            if let number = track.inFlight, opened.sentSeq >= number {
                track.sent = number
            }
            track.inFlight = nil
            if opened.sentSeq != track.sent {
                Output.note("the daemon holds messages up to \(opened.sentSeq), but \(track.sent) were ACCEPTED")
                track.seqsInOrder = false
            }
        }
        Output.note("attached session \(opened.session) again: sent_seq \(opened.sentSeq), delivered_seq \(opened.deliveredSeq)")
    }
}

extension StreamScenario.Track {
    /// Checks one MESSAGE; returns (sent, received) when a progress line is due, and whether the last echo is in.
    mutating func take(_ message: IPCMessage.InboundMessage, size: Int, total: UInt64) -> (progress: (UInt64, Int)?, done: Bool) {
        // Delivered before, its ACK lost with the daemon: skipped by seq, as imagent-ipc(7) has a client do.
        guard message.session == session, message.seq > lastSeq else { return (nil, expected > total) }
        lastSeq = message.seq
        var progress: (UInt64, Int)?
        if let number = Payload.number(in: message.payload, size: size) {
            if number == expected {
                received += 1
                expected += 1
                if received % 500 == 0 { progress = (sent, received) }
            } else if number < expected {
                duplicates += 1
            } else {
                gaps += 1
                expected = number + 1
            }
        } else {
            corrupt += 1
        }
        return (progress, expected > total)
    }
}
