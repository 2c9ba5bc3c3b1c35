import AgentIPC
import AgentStore
import IMAgentTestKit
import IMLink
import NIOCore
import Testing

@testable import IMAgentCore

/// Seeded, so session ids are the same on every run.
typealias TestRouter = SessionRouter<SplitMix64>

let alice = SessionClient(id: 1, uid: 1000, isAdmin: false)
let aliceAgain = SessionClient(id: 2, uid: 1000, isAdmin: false)
let mallory = SessionClient(id: 3, uid: 2000, isAdmin: false)
let root = SessionClient(id: 4, uid: 0, isAdmin: true)

func makeRouter(_ limits: SessionLimits = SessionLimits()) -> TestRouter {
    TestRouter(limits: limits, random: SplitMix64(seed: 42), now: testStart)
}

func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

/// Views of an action list, for one `#expect` per rule.
extension [SessionAction] {
    var frames: [Frame] {
        compactMap { if case .send(let frame) = $0 { frame } else { nil } }
    }

    var dataSeqs: [UInt64] {
        frames.compactMap { if case .data(let data) = $0 { data.seq } else { nil } }
    }

    var ackSeqs: [UInt64] {
        frames.compactMap { if case .ack(let ack) = $0 { ack.seq } else { nil } }
    }

    var opens: [Open] {
        frames.compactMap { if case .open(let open) = $0 { open } else { nil } }
    }

    var windows: [UInt32] {
        frames.compactMap { if case .window(let update) = $0 { update.window } else { nil } }
    }

    var replies: [IPCMessage] {
        compactMap { if case .reply(_, _, let message) = $0 { message } else { nil } }
    }

    var errors: [IPCErrorCode] {
        compactMap { if case .fail(_, _, let code, _) = $0 { code } else { nil } }
    }

    var events: [IPCMessage] {
        compactMap { if case .event(_, let message) = $0 { message } else { nil } }
    }

    var sessionStates: [SessionStateValue] {
        events.compactMap { if case .sessionState(let change) = $0 { change.state } else { nil } }
    }

    var ackedEvents: [UInt64] {
        events.compactMap { if case .acked(let acked) = $0 { acked.seq } else { nil } }
    }

    var delivered: [UInt64] {
        flatMap { action -> [UInt64] in
            if case .deliver(_, _, let messages) = action { messages.map(\.seq) } else { [] }
        }
    }

    /// What the router waits for from the store, for each request in these actions.
    var persists: [StoreContinuation] {
        compactMap { if case .store(_, _, let then) = $0 { then } else { nil } }
    }

    /// The send → ACK latencies measured.
    var latencies: [Duration] {
        compactMap { if case .acknowledged(let latency) = $0 { latency } else { nil } }
    }

    var dropsLink: Bool {
        contains { if case .dropLink = $0 { true } else { false } }
    }

    var storeFailures: [String] {
        compactMap { if case .storeFailed(let reason) = $0 { reason } else { nil } }
    }

    var schedulesAckFlush: Bool {
        contains { if case .scheduleAckFlush = $0 { true } else { false } }
    }

    var accepted: [UInt64] {
        replies.compactMap { if case .accepted(let accepted) = $0 { accepted.seq } else { nil } }
    }

    var opened: IPCMessage.Opened? {
        replies.lazy.compactMap { if case .opened(let opened) = $0 { opened } else { nil } }.first
    }
}

extension SessionRouter {
    /// Completes every persistence operation in `actions` (and those their
    /// completions start) with `result`; returns every action seen, the
    /// persistence requests included. Reads of the store are answered from
    /// `disk` (what a test restored), by seq.
    mutating func completing(_ actions: [SessionAction], _ result: Result<Void, SessionPersistenceError> = .success(()),
                             disk: StoredPayloads = StoredPayloads()) -> [SessionAction] {
        var all: [SessionAction] = []
        var queue = actions
        while !queue.isEmpty {
            let action = queue.removeFirst()
            all.append(action)
            switch action {
            case .store(let operation, let tag, let then):
                switch operation {
                case .outbound(let session, let after, let limit, _):
                    let read = disk.read(disk.outbound[session], after, limit)
                        .map { OutboundMessage(seq: $0.seq, payload: $0.payload, expiresAtMS: disk.deadlines[session]?[$0.seq] ?? nil) }
                    queue += stored(then, tag: tag, .success(.outbound(read)))
                case .giveUpExpiredOutbound(let session, let after, let now, let limit):
                    queue += stored(then, tag: tag, .success(.expiredOutbound(disk.expire(session, after: after, now: now, limit: limit))))
                case .outboundSpan(let session, let after, let count):
                    let span = disk.read(disk.outbound[session], after, count)
                    queue += stored(then, tag: tag, .success(.outboundSpan(OutboundSpan(
                        count: span.count, lastSeq: span.last?.seq ?? after, bytes: span.reduce(0) { $0 + $1.payload.readableBytes }))))
                case .inbound(let session, let after, let limit, _):
                    let read = disk.read(disk.inbound[session], after, limit).map { InboundMessage(seq: $0.seq, payload: $0.payload) }
                    queue += stored(then, tag: tag, .success(.inbound(read)))
                default:
                    if case .success = result {
                        switch operation {
                        case .appendOutbound(let session, let seq, let payload, let deadline, _):
                            disk.outbound[session, default: []].append((seq, payload))
                            disk.deadlines[session, default: [:]][seq] = deadline
                        case .appendInbound(let session, let seq, let payload, _): disk.inbound[session, default: []].append((seq, payload))
                        case .giveUpOutbound(let session, let seq): disk.outbound[session]?.removeAll { $0.seq == seq }
                        case .markAcked(let session, let seq): disk.outbound[session]?.removeAll { $0.seq <= seq }
                        default: break
                        }
                    }
                    queue += stored(then, tag: tag, result.map { .done })
                }
            default: break
            }
        }
        return all
    }

    /// A new session for `client` on `service`, created and stored; its id.
    mutating func newSession(_ client: SessionClient = alice, service: String = "echo", priority: IPCPriority = .normal) -> UInt64 {
        let actions = completing(clientOpen(client, request: 1, .init(service: service, priority: priority)))
        return actions.opened!.session
    }

    /// The link comes up with `flow`, and the server answers every OPEN with OPEN_OK(lastAcked: whatever it says).
    mutating func establish(flow: Bool = true, lastAcked: (UInt64) -> UInt64 = { _ in 0 }) -> [SessionAction] {
        var all = linkEstablished(flow: flow)
        for open in all.opens {
            all += completing(received(.openOK(OpenOK(session: open.session, lastAcked: lastAcked(open.session)))))
        }
        return all
    }

    mutating func send(_ session: UInt64, _ text: String, as client: SessionClient = alice) -> [SessionAction] {
        completing(clientSend(client, request: 7, .init(session: session, payload: bytes(text))))
    }

    mutating func data(_ session: UInt64, _ seq: UInt64, _ text: String = "x", disk: StoredPayloads = StoredPayloads()) -> [SessionAction] {
        completing(received(.data(DataFrame(session: session, seq: seq, body: bytes(text)))), disk: disk)
    }
}

/// The payloads in the store as far as a router test is concerned: what the test put there
/// before a restart, and what `completing(_:disk:)` saw appended. The router reads them on demand.
final class StoredPayloads {
    var outbound: [UInt64: [(seq: UInt64, payload: ByteBuffer)]]
    var inbound: [UInt64: [(seq: UInt64, payload: ByteBuffer)]]

    init(outbound: [UInt64: [(seq: UInt64, payload: ByteBuffer)]] = [:], inbound: [UInt64: [(seq: UInt64, payload: ByteBuffer)]] = [:]) {
        self.outbound = outbound
        self.inbound = inbound
    }

    /// TTL deadlines of outbound messages, by session and seq.
    var deadlines: [UInt64: [UInt64: Int64?]] = [:]

    func read(_ queue: [(seq: UInt64, payload: ByteBuffer)]?, _ after: UInt64, _ limit: Int) -> [(seq: UInt64, payload: ByteBuffer)] {
        Array((queue ?? []).filter { $0.seq > after }.prefix(limit))
    }

    /// What the store's giving up of expired outbound messages does.
    func expire(_ session: UInt64, after: UInt64, now: Int64, limit: Int) -> ExpiredOutbound {
        let deadline = { (seq: UInt64) -> Int64? in self.deadlines[session]?[seq] ?? nil }
        let after = (outbound[session] ?? []).filter { $0.seq > after }
        let due = Array(after.filter { (deadline($0.seq) ?? .max) <= now }.prefix(limit))
        outbound[session]?.removeAll { message in due.contains { $0.seq == message.seq } }
        let next = after.filter { message in !due.contains { $0.seq == message.seq } }.compactMap { deadline($0.seq) }.min()
        return ExpiredOutbound(messages: due.map { OutboundIndexEntry(seq: $0.seq, bytes: $0.payload.readableBytes, expiresAtMS: deadline($0.seq)) },
                               nextExpiryMS: next)
    }
}
