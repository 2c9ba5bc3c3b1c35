import AgentIPC
import IMAgentTestKit
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the load: connections one after another (a new one whenever the
/// daemon goes away), each attaching every session and going on from where
/// the daemon's store and this process's bookkeeping say.
final class LoadRunner: Sendable {
    private let options: LoadOptions
    private let state: NIOLockedValueBox<LoadState>
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    /// `start` on the wall clock, in Unix microseconds, for the latency file.
    private let startUnixMicroseconds: UInt64

    init(_ options: LoadOptions) {
        self.options = options
        state = NIOLockedValueBox(LoadState(sessions: options.sessions, messages: options.messages))
        start = ContinuousClock.now
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        startUnixMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec / 1000)
    }

    private enum Stop: Error {
        case deadline
        /// Time for `--reattach-every`: this connection ends, the next attaches the sessions again.
        case reattach
    }

    func run() async -> LoadReport {
        loadStateFile()
        let deadline = start + .milliseconds(Int64(options.deadlineSeconds * 1000))
        var connections = 0
        var reattaching = false
        while !isComplete, clock.now < deadline {
            let client: IPCClient
            do {
                // Longer than a stall, or requests pending across it would time out at once.
                client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-loadgen",
                                                     timeout: .seconds(30) + .milliseconds(Int64(options.stallSeconds * 1000)))
            } catch {
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            connections += 1
            if connections > 1, !reattaching { state.withLockedValue { $0.counters.reconnects += 1 } }
            do {
                try await runConnection(client, until: deadline)
                if options.closeAtEnd, isComplete { await closeSessions(client) }
            } catch Stop.deadline {
                note("deadline of \(options.deadlineSeconds) s reached")
            } catch Stop.reattach {
                // Detached everything at once (the connection closed with sends and deliveries in flight);
                // the next connection attaches again: the daemon-restart path, with the daemon alive.
            } catch {
                if !state.withLockedValue({ $0.reattaching }) { note("connection \(connections) ended: \(error)") }
            }
            await client.close()
            // The senders' errors may come out of the group before the timer's own Stop.reattach.
            reattaching = state.withLockedValue { state in
                defer { state.reattaching = false }
                if state.reattaching { state.counters.reattached += 1 }
                return state.reattaching
            }
        }
        if isComplete, options.closeAtEnd, let path = options.stateFile { unlink(path) }
        if let path = options.latencyFile { writeLatencyFile(path) }
        return state.withLockedValue { LoadReport(options: options, state: $0, elapsed: clock.now - start) }
    }

    private var isComplete: Bool {
        let messages = options.messages
        return state.withLockedValue { $0.tracks.allSatisfy { $0.received == messages } }
    }

    // MARK: One connection

    private func runConnection(_ client: IPCClient, until deadline: ContinuousClock.Instant) async throws {
        state.withLockedValue { state in
            for index in state.tracks.indices {
                state.tracks[index].attached = false
                state.tracks[index].early = []
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.receive(client) }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                await client.close()  // ends the other tasks now (see --reattach-every below)
                throw Stop.deadline
            }
            if options.reattachSeconds > 0 {
                let seconds = options.reattachSeconds
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                    // Closing first ends the other tasks at once (their requests fail, the events end):
                    // the group waits for every task, and senders do not stop merely for being cancelled.
                    self.state.withLockedValue { $0.reattaching = true }
                    await client.close()
                    throw Stop.reattach
                }
            }
            for index in 0..<options.sessions {
                try await attach(client, index: index)
            }
            for index in 0..<options.sessions {
                group.addTask { try await self.send(client, index: index) }
            }
            // Senders end when their messages are accepted, the receiver when everything arrived;
            // the first error (the connection lost, the deadline) ends them all.
            while try await group.next() != nil {
                if isComplete { break }
            }
            group.cancelAll()
        }
    }

    /// OPEN: a new session the first time, the same id (attach) after a reconnect.
    private func attach(_ client: IPCClient, index: Int) async throws {
        let id = state.withLockedValue { $0.tracks[index].id }
        guard id != 0 else {
            let opened = try await client.open(service: options.service)
            state.withLockedValue { state in
                state.tracks[index].id = opened.session
                state.tracks[index].attached = true
                state.indexByID[opened.session] = index
            }
            saveStateFile()
            return
        }
        var opened: IPCMessage.Opened?
        for attempt in 0..<100 {
            do {
                opened = try await client.attach(session: id)
                break
            } catch IPCClientError.refused(_, let code, _) where code == .sessionBusy && attempt < 99 {
                // Our previous connection's end may not have reached the daemon yet.
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        guard let opened else { return }
        let ack = state.withLockedValue { state -> UInt64? in
            var track = state.tracks[index]
            if opened.sentSeq < track.accepted {
                state.counters.acceptedLost += Int(track.accepted - opened.sentSeq)
                note("session \(id): the daemon holds messages up to \(opened.sentSeq), but \(track.accepted) were ACCEPTED")
            }
            // Everything up to SENT_SEQ is stored and will reach the server: sending resumes after it.
            track.accepted = opened.sentSeq
            if track.issued == 0, track.lastSeq == 0, opened.deliveredSeq > 0 {
                // A session from the state file: an earlier run processed (and acknowledged) up to
                // DELIVERED_SEQ, and a message's number is its seq.
                let delivered = min(Int(opened.deliveredSeq), track.seen.count - 1)
                for number in 1...delivered { track.seen[number] = true }
                track.received = delivered
                track.lastSeq = opened.deliveredSeq
                track.lastNumber = UInt64(delivered)
                track.ackedSeq = opened.deliveredSeq
            }
            track.issued = max(track.issued, opened.sentSeq)
            track.attached = true
            let early = track.early
            track.early = []
            state.tracks[index] = track
            // In order and under the same lock, so the receiving task cannot overtake them.
            return early.compactMap { check($0, index: index, in: &state) }.last
        }
        if let ack { try await client.ack(session: id, seq: ack) }
    }

    // MARK: Sending

    /// Sends the session's messages after the last accepted one, `window` at a time.
    private func send(_ client: IPCClient, index: Int) async throws {
        let (id, first) = state.withLockedValue { ($0.tracks[index].id, $0.tracks[index].accepted + 1) }
        let total = UInt64(options.messages)
        var next = first
        var inFlight = CircularBuffer<(number: UInt64, send: IPCPendingSend)>(initialCapacity: options.window)
        while true {
            let stalling = state.withLockedValue { $0.stalling }
            while !stalling, next <= total, inFlight.count < options.window, sendTime(of: next) <= clock.now {
                let payload = Payload.make(tag: options.tag, index: UInt32(index), number: next, size: options.size)
                let pending = try client.startSend(session: id, payload: payload)
                let now = nanosecondsSinceStart
                let number = next
                state.withLockedValue { state in
                    state.counters.sends += 1
                    if number <= state.tracks[index].issued { state.counters.resent += 1 }
                    state.tracks[index].issued = max(state.tracks[index].issued, number)
                    state.tracks[index].sentAt[Int(number) - 1] = now
                }
                inFlight.append((number, pending))
                next += 1
            }
            guard let head = inFlight.popFirst() else {
                if next > total { return }
                if !stalling, sendTime(of: next) > clock.now {
                    try await Task.sleep(until: sendTime(of: next), clock: .continuous)  // paced
                } else {
                    try await Task.sleep(for: .milliseconds(20))  // stalling
                }
                continue
            }
            do {
                record(accepted: try await head.send.accepted(), number: head.number, index: index)
            } catch IPCClientError.refused(_, let code, _) where code == .queueFull {
                // Nothing stored for this one. Sends behind it may have been stored, under seqs that no
                // longer match their numbers (the receiver will report it); wait for them, then go on
                // after the last accepted seq.
                state.withLockedValue { $0.counters.queueFull += 1 }
                while let later = inFlight.popFirst() {
                    do {
                        record(accepted: try await later.send.accepted(), number: later.number, index: index)
                    } catch IPCClientError.refused(_, let code, _) where code == .queueFull {
                        state.withLockedValue { $0.counters.queueFull += 1 }
                    }
                }
                next = state.withLockedValue { $0.tracks[index].accepted } + 1
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// When message `number` may be sent: at once, or paced by `--interval-ms`.
    private func sendTime(of number: UInt64) -> ContinuousClock.Instant {
        start + .milliseconds(Int64(options.intervalMS) * Int64(number - 1))
    }

    private func record(accepted seq: UInt64, number: UInt64, index: Int) {
        state.withLockedValue { state in
            if seq != number { state.counters.acceptMismatch += 1 }
            state.tracks[index].accepted = max(state.tracks[index].accepted, seq)
        }
    }

    // MARK: Receiving

    /// Checks every MESSAGE and acknowledges; returns once every session has all its messages.
    private func receive(_ client: IPCClient) async throws {
        for try await event in client.events {
            switch event {
            case .message(let message):
                if let ack = process(message) { try await client.ack(session: message.session, seq: ack) }
                if isComplete { return }
                try await stallIfDue()
            case .expired(let expired):
                state.withLockedValue { $0.counters.expired += 1 }
                note("session \(expired.session): message \(expired.seq) expired (\(expired.code))")
            case .sessionState(let change) where change.state == .failed || change.state == .closed:
                state.withLockedValue { $0.counters.sessionFailures += 1 }
                note("session \(change.session) is \(change.state): \(change.message ?? "")")
            case .error(let error):
                note("daemon error \(error.code): \(error.message ?? "")")
            case .acked, .sessionState, .linkState, .watch:
                break
            }
        }
    }

    /// Checks one message; returns the seq to acknowledge, if it is time to.
    private func process(_ message: IPCMessage.InboundMessage) -> UInt64? {
        state.withLockedValue { state -> UInt64? in
            guard let index = state.indexByID[message.session] else { return nil }
            guard state.tracks[index].attached else {
                // MESSAGEs follow OPENED at once and may be read before `attach` has taken in
                // OPENED's DELIVERED_SEQ: they wait for it (`attach` checks them in order).
                state.tracks[index].early.append(message)
                return nil
            }
            return check(message, index: index, in: &state)
        }
    }

    /// Checks one message of an attached session against the track; returns the seq to acknowledge, if due.
    private func check(_ message: IPCMessage.InboundMessage, index: Int, in state: inout LoadState) -> UInt64? {
        let now = nanosecondsSinceStart
        let (tag, size, ackEvery, total) = (options.tag, options.size, UInt64(options.ackEvery), options.messages)
        do {
            var track = state.tracks[index]
            defer { state.tracks[index] = track }
            guard message.seq > track.lastSeq else {
                // Delivered before, its ACK lost with the daemon: ipc.md has the client skip it by SEQ.
                state.counters.redelivered += 1
                return nil
            }
            if message.seq != track.lastSeq + 1 { state.counters.seqGaps += 1 }
            track.lastSeq = message.seq
            if let number = Payload.number(in: message.payload, tag: tag, index: UInt32(index), size: size),
               number >= 1, number <= UInt64(total) {
                if track.seen[Int(number)] {
                    state.counters.duplicated += 1
                } else {
                    track.seen[Int(number)] = true
                    track.received += 1
                    if number != track.lastNumber + 1 { state.counters.outOfOrder += 1 }
                    let sentAt = track.sentAt[Int(number) - 1]
                    if sentAt > 0, now > sentAt {
                        state.counters.latenciesNS.append(now - sentAt)
                        state.counters.latencySentAtNS.append(sentAt)
                    }
                }
                track.lastNumber = number
            } else {
                state.counters.corrupt += 1
            }
            if let last = state.counters.lastReceiveNS { state.counters.maxGapNS = max(state.counters.maxGapNS, now - last) }
            state.counters.lastReceiveNS = now
            guard message.seq - track.ackedSeq >= ackEvery || track.received == total else { return nil }
            track.ackedSeq = message.seq
            return message.seq
        }
    }

    /// The stuck client: once `stallAfter` messages arrived, the whole process stops (SIGSTOP) for
    /// `stallSeconds` and a helper resumes it (SIGCONT). Merely not consuming events would not do:
    /// `IPCClient` keeps reading its socket while a request waits for its reply, so the daemon would
    /// never face a client that reads nothing.
    private func stallIfDue() async throws {
        guard options.stallSeconds > 0 else { return }
        let due = state.withLockedValue { state -> Bool in
            guard !state.stalled, state.totalReceived >= options.stallAfter else { return false }
            state.stalled = true
            state.stalling = true
            return true
        }
        guard due else { return }
        note("stalling: reading and sending nothing for \(options.stallSeconds) s")
        freeze(seconds: options.stallSeconds)
        state.withLockedValue { state in
            state.stalling = false
            // The stall itself is not a gap in the daemon's service.
            state.counters.lastReceiveNS = nil
        }
        note("reading again")
    }

    /// Stops this process; a `sh` child sends SIGCONT after `seconds`.
    private func freeze(seconds: Double) {
        let script = "sleep \(seconds); kill -CONT \(getpid())"
        guard let child = try? ChildProcess(executable: "/bin/sh", arguments: ["-c", script]) else {
            return note("cannot start the helper that would resume this process; not stalling")
        }
        raise(SIGSTOP)
        child.waitUntilExit()
    }

    // MARK: The end

    private func closeSessions(_ client: IPCClient) async {
        let ids = state.withLockedValue { $0.tracks.map(\.id) }
        for id in ids where id != 0 {
            do { try await client.close(session: id) } catch { note("closing session \(id): \(error)") }
        }
    }

    private var nanosecondsSinceStart: UInt64 {
        let (seconds, attoseconds) = (clock.now - start).components
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    // MARK: State file: the session ids, so a restarted loadgen attaches the same sessions

    /// Lines `INDEX ID`. Attaching after a restart of this program resumes with the store's
    /// counters: sent up to SENT_SEQ, processed up to DELIVERED_SEQ (this program acknowledges
    /// only what it processed, and a message's number is its seq).
    private func loadStateFile() {
        guard let path = options.stateFile, let text = readFile(path) else { return }
        state.withLockedValue { state in
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ")
                guard words.count == 2, let index = Int(words[0]), let id = UInt64(words[1]),
                      index >= 0, index < state.tracks.count else { continue }
                state.tracks[index].id = id
                state.indexByID[id] = index
            }
        }
        note("attaching the sessions in \(path)")
    }

    private func saveStateFile() {
        guard let path = options.stateFile else { return }
        let text = state.withLockedValue { state in
            state.tracks.filter { $0.id != 0 }.map { "\($0.index) \($0.id)\n" }.joined()
        }
        let temporary = path + ".tmp"
        guard let file = fopen(temporary, "w") else { return note("cannot write \(temporary)") }
        fputs(text, file)
        fflush(file)
        fsync(fileno(file))
        fclose(file)
        rename(temporary, path)
    }

    /// Lines `SENT_UNIX_US LATENCY_US`, one per echo whose send this process timed.
    private func writeLatencyFile(_ path: String) {
        let base = startUnixMicroseconds
        let lines = state.withLockedValue { state in
            zip(state.counters.latencySentAtNS, state.counters.latenciesNS).map { "\(base + $0 / 1000) \($1 / 1000)\n" }
        }
        do { try writeFile(path, lines.joined()) } catch { note("\(error)") }
    }
}
