import IMLink
import MQTT5
import NIOCore

/// The `down` messages of each open session on their way from the broker to the sessions, as a
/// pure value: in seq order, within the session's credit, and refused once its inbox is full
/// (imagent-mqtt(7), INBOX LIMIT).
///
/// The credit is IMLink's flow control, kept as an IMLink server keeps it: at most WINDOW DATA
/// frames beyond the sessions' last ACK, WINDOW as OPEN and each WINDOW frame set it. MQTT 5 has
/// no flow control per topic, so a message beyond the credit cannot be left with the broker:
/// - while WINDOW is 0 (the session's inbox is full), it is refused with PUBACK 0x97 (Quota
///   exceeded): the broker drops it and nothing of it is stored. Holding its PUBACK instead would
///   spend the broker's in-flight quota, our Receive Maximum, which every session shares;
/// - while WINDOW is above 0, it waits here unacknowledged until ACKs free credit (only a broker
///   that sends more than our Receive Maximum gets there: WINDOW is never below it).
/// A message ahead of its turn waits here too, unacknowledged, until the seqs before it come;
/// but not when the seq it waits for is one this side refused: the backend has no cause to send
/// that one again soon, and the messages waiting for it would hold the broker's quota meanwhile.
struct MQTTDownFlow {
    typealias Receipt = ClientSession.Receipt

    enum Step: Hashable, Sendable {
        /// DATA for the sessions; its PUBACK waits for their ACK of its seq.
        case forward(DataFrame)
        /// PUBACK 0x00: the sessions hold the message.
        case acknowledge(Receipt)
        /// PUBACK 0x97: the broker drops the message; nothing of it is stored.
        case refuse(Receipt, session: UInt64, seq: UInt64, because: String)
        /// A QoS 0 message that cannot go now: nothing to refuse, it is gone.
        case drop(session: UInt64, seq: UInt64, because: String)
    }

    private struct Session {
        /// The seq the sessions take next.
        var next: UInt64
        /// The sessions' last ACK.
        var acked: UInt64
        var window: UInt64
        /// Forwarded, their PUBACK waiting for the sessions' ACK, in seq order.
        var unacknowledged: [(seq: UInt64, receipt: Receipt)] = []
        /// Ahead of their turn or beyond the credit, in seq order.
        var held: [(seq: UInt64, payload: ByteBuffer, receipt: Receipt?)] = []
        /// The highest seq refused because the inbox was full (0: none).
        var refusedThrough: UInt64 = 0

        /// DATA frames the sessions may still be sent.
        var credit: UInt64 { window > next - 1 - acked ? window - (next - 1 - acked) : 0 }
    }

    /// IMLink's WINDOW when OPEN carries none (wire.md, section 5).
    static let defaultWindow: UInt32 = 1_024

    private var sessions: [UInt64: Session] = [:]
    /// Messages held across all sessions (the caller stops reading from the broker at its limit).
    private(set) var heldCount = 0
    /// Messages refused at a full inbox since this value began.
    private(set) var refusedCount = 0

    func isOpen(_ session: UInt64) -> Bool { sessions[session] != nil }

    /// OPEN: the sessions hold every seq up to `resumeAfter`; `window` nil is IMLink's default.
    mutating func open(_ session: UInt64, resumeAfter: UInt64, window: UInt32?) -> [Step] {
        let steps = close(session)
        sessions[session] = Session(next: resumeAfter + 1, acked: resumeAfter, window: UInt64(window ?? Self.defaultWindow))
        return steps
    }

    /// CLOSE: the session is over for good, and what it had unacknowledged is acknowledged, so that
    /// the broker stops sending it and frees its places in our Receive Maximum.
    mutating func close(_ session: UInt64) -> [Step] {
        guard let state = sessions.removeValue(forKey: session) else { return [] }
        heldCount -= state.held.count
        return state.unacknowledged.map { .acknowledge($0.receipt) } + state.held.compactMap { $0.receipt.map { .acknowledge($0) } }
    }

    /// A `down` PUBLISH for an open session (`isOpen`).
    mutating func received(_ session: UInt64, seq: UInt64, payload: ByteBuffer, receipt: Receipt?) -> [Step] {
        guard var state = sessions.removeValue(forKey: session) else { return [] }
        defer { sessions[session] = state }
        // A duplicate goes up whatever the credit: the sessions drop it and ACK again, which frees its PUBACK.
        if seq < state.next { return [Self.forward(&state, session, seq, payload, receipt)] }
        if state.window == 0 {
            return [refuse(&state, session, seq, receipt, because: "its inbox is full ([limits] inbox_messages)")]
        }
        if seq > state.next, state.next <= state.refusedThrough {
            return [refuse(&state, session, seq, receipt,
                           because: "it waits for seq \(state.next), which was refused while the inbox was full")]
        }
        if seq > state.next || state.credit == 0 {
            guard receipt != nil else {
                return [.drop(session: session, seq: seq, because: seq > state.next ? "it is out of turn (due: \(state.next))"
                              : "the session's window is used up")]
            }
            let place = state.held.firstIndex { $0.seq > seq } ?? state.held.endIndex
            state.held.insert((seq, payload, receipt), at: place)
            heldCount += 1
            return []
        }
        var steps = [Self.forward(&state, session, seq, payload, receipt)]
        state.next += 1
        steps += drain(&state, session)
        return steps
    }

    /// The sessions' ACK: the PUBACKs of what it covers, and what its credit lets go.
    mutating func acknowledged(_ session: UInt64, through seq: UInt64) -> [Step] {
        guard var state = sessions.removeValue(forKey: session) else { return [] }
        defer { sessions[session] = state }
        state.acked = max(state.acked, min(seq, state.next - 1))
        let covered = state.unacknowledged.prefix { $0.seq <= seq }.count
        let steps = state.unacknowledged.prefix(covered).map { Step.acknowledge($0.receipt) }
        state.unacknowledged.removeFirst(covered)
        return steps + drain(&state, session)
    }

    /// The sessions' WINDOW: 0 refuses what waits here for the session, more lets it go.
    mutating func window(_ session: UInt64, _ window: UInt32) -> [Step] {
        guard var state = sessions.removeValue(forKey: session) else { return [] }
        defer { sessions[session] = state }
        state.window = UInt64(window)
        guard window == 0 else { return drain(&state, session) }
        let held = state.held
        state.held.removeAll()
        heldCount -= held.count
        return held.map { item in
            item.seq < state.next ? Self.forward(&state, session, item.seq, item.payload, item.receipt)
                : refuse(&state, session, item.seq, item.receipt, because: "its inbox is full ([limits] inbox_messages)")
        }
    }

    /// Forwards what waits here, in turn and within the credit.
    private mutating func drain(_ state: inout Session, _ session: UInt64) -> [Step] {
        var steps: [Step] = []
        var taken = 0
        while taken < state.held.count, state.held[taken].seq <= state.next, state.held[taken].seq < state.next || state.credit > 0 {
            let item = state.held[taken]
            steps.append(Self.forward(&state, session, item.seq, item.payload, item.receipt))
            if item.seq == state.next { state.next += 1 }
            taken += 1
        }
        state.held.removeFirst(taken)
        heldCount -= taken
        return steps
    }

    private static func forward(_ state: inout Session, _ session: UInt64, _ seq: UInt64, _ payload: ByteBuffer,
                                _ receipt: Receipt?) -> Step {
        if let receipt {
            let place = state.unacknowledged.lastIndex { $0.seq <= seq }.map { $0 + 1 } ?? 0
            state.unacknowledged.insert((seq, receipt), at: place)
        }
        return .forward(DataFrame(session: session, seq: seq, body: payload))
    }

    private mutating func refuse(_ state: inout Session, _ session: UInt64, _ seq: UInt64, _ receipt: Receipt?,
                                 because: String) -> Step {
        state.refusedThrough = max(state.refusedThrough, seq)
        refusedCount += 1
        guard let receipt else { return .drop(session: session, seq: seq, because: because) }
        return .refuse(receipt, session: session, seq: seq, because: because)
    }
}
