import IMLink
import MQTT5
import NIOCore
import Testing

@testable import IMAgentCore

/// The adapter as a pure value at the edges of the sessions' limits (imagent-mqtt(7), INBOX LIMIT and
/// FAILURES): `down` messages within the sessions' WINDOW and refused at a full inbox, and an `up`
/// message the broker refuses failing its session alone.
@Suite struct MQTTInboxLimitAndRefusalTests {
    typealias Output = MQTTLinkAdapter.Output

    static func opened(_ sessions: [(UInt64, window: UInt32?)], receiveMaximum: UInt32 = 100) throws -> MQTTLinkAdapter {
        var adapter = try MQTTLinkAdapterTests.connected(receiveMaximum: receiveMaximum)
        for (session, window) in sessions {
            _ = adapter.send(.open(Open(session: session, service: "echo", resumeAfter: 0, window: window)))
        }
        return adapter
    }

    static func data(_ outputs: [Output]) -> [UInt64] {
        outputs.compactMap { if case .frame(.data(let data)) = $0 { data.seq } else { nil } }
    }

    static func pubacks(_ outputs: [Output]) -> [PublishAck] {
        outputs.compactMap { if case .packet(.puback(let ack)) = $0 { ack } else { nil } }
    }

    static func down(_ adapter: inout MQTTLinkAdapter, session: UInt64, seq: UInt64, id: UInt16) -> [Output] {
        adapter.received(MQTTLinkAdapterTests.down(session: session, seq: seq, id: id))
    }

    /// The issue's finding: with the inbox full (WINDOW 0) a `down` message is refused with 0x97, so
    /// the broker drops it and nothing reaches the store; another session goes on meanwhile.
    @Test func fullInbox_refusesWith0x97_andNothingReachesTheSessions_whileAnotherSessionGoesOn() throws {
        var adapter = try Self.opened([(9, nil), (10, nil)])
        #expect(Self.data(Self.down(&adapter, session: 9, seq: 1, id: 1)) == [1])
        #expect(adapter.send(.window(WindowUpdate(session: 9, window: 0))).isEmpty)
        for (seq, id) in [(2, 2), (3, 3)] as [(UInt64, UInt16)] {
            let outputs = Self.down(&adapter, session: 9, seq: seq, id: id)
            #expect(Self.data(outputs).isEmpty, "nothing beyond the limit goes to the sessions")
            #expect(Self.pubacks(outputs).map(\.reasonCode) == [.quotaExceeded] && Self.pubacks(outputs).first?.packetIdentifier == id)
            let warning = outputs.compactMap { if case .warning(.inboxFull, let details) = $0 { details } else { nil } }.first
            #expect(warning?["session"] == "9" && warning?["seq"] == "\(seq)", "\(outputs)")
        }
        #expect(adapter.refusedAtFullInbox == 2)
        // The other session is not held up, and seq 1's PUBACK still leaves once stored.
        #expect(Self.data(Self.down(&adapter, session: 10, seq: 1, id: 4)) == [1])
        #expect(Self.pubacks(adapter.send(.ack(Ack(session: 10, seq: 1)))).map(\.packetIdentifier) == [4])
        #expect(Self.pubacks(adapter.send(.ack(Ack(session: 9, seq: 1)))).map(\.packetIdentifier) == [1])

        // The client caught up: WINDOW again. seq 3 waits for seq 2, which this side refused, so it
        // is refused too (holding it would spend the broker's quota); seq 2 sent again goes through.
        #expect(adapter.send(.window(WindowUpdate(session: 9, window: 1_024))).isEmpty)
        #expect(Self.pubacks(Self.down(&adapter, session: 9, seq: 4, id: 5)).map(\.reasonCode) == [.quotaExceeded])
        #expect(Self.data(Self.down(&adapter, session: 9, seq: 2, id: 6)) == [2])
        #expect(Self.data(Self.down(&adapter, session: 9, seq: 3, id: 7)) == [3])
        #expect(Self.data(Self.down(&adapter, session: 9, seq: 4, id: 8)) == [4])
        #expect(Self.pubacks(adapter.send(.ack(Ack(session: 9, seq: 4)))).map(\.packetIdentifier) == [6, 7, 8])
    }

    /// WINDOW bounds the DATA frames beyond the sessions' ACK, as from an IMLink server: beyond it a
    /// message waits here (a broker that sends more than our Receive Maximum gets there), and the
    /// reading stops while our Receive Maximum of them wait.
    @Test func window_boundsWhatGoesUp_theRestWaitsForAcks_andWindowZeroRefusesWhatWaits() throws {
        var adapter = try Self.opened([(9, 2)], receiveMaximum: 100)
        #expect(Self.data(Self.down(&adapter, session: 9, seq: 1, id: 1)) == [1])
        #expect(Self.data(Self.down(&adapter, session: 9, seq: 2, id: 2)) == [2])
        #expect(Self.down(&adapter, session: 9, seq: 3, id: 3).isEmpty, "beyond the window: it waits, unacknowledged")
        #expect(Self.down(&adapter, session: 9, seq: 4, id: 4).isEmpty)
        let acked = adapter.send(.ack(Ack(session: 9, seq: 1)))
        #expect(Self.pubacks(acked).map(\.packetIdentifier) == [1] && Self.data(acked) == [3])
        // WINDOW 0 refuses what still waits; what the sessions have keeps its PUBACK for their ACK.
        let paused = adapter.send(.window(WindowUpdate(session: 9, window: 0)))
        #expect(Self.pubacks(paused).map { "\($0.packetIdentifier) \($0.reasonCode)" } == ["4 quotaExceeded"])
        #expect(Self.pubacks(adapter.send(.ack(Ack(session: 9, seq: 3)))).map(\.packetIdentifier) == [2, 3])

        var settings = MQTTLinkAdapterTests.settings
        settings.receiveMaximum = 3
        var holding = MQTTLinkAdapter(settings: settings, topics: try settings.topics(), keepAlive: 30, maxFrame: 1 << 20,
                                      port: 1883, lastAcked: [:])
        _ = holding.send(.login(Login(token: ByteBuffer(), agentID: "host-1")))
        _ = holding.received(.connack(ConnAck(sessionPresent: true, reasonCode: .success)))
        _ = holding.send(.open(Open(session: 9, service: "echo", resumeAfter: 0, window: 1)))
        _ = Self.down(&holding, session: 9, seq: 1, id: 1)
        for (seq, id) in [(2, 2), (3, 3)] as [(UInt64, UInt16)] { _ = Self.down(&holding, session: 9, seq: seq, id: id) }
        #expect(!holding.holdsEnough)
        _ = Self.down(&holding, session: 9, seq: 4, id: 4)
        #expect(holding.holdsEnough, "3 wait: no more is read from the broker")
        _ = holding.send(.ack(Ack(session: 9, seq: 1)))
        #expect(!holding.holdsEnough)
    }

    /// CLOSE acknowledges what the session had unacknowledged, so that its places in our Receive
    /// Maximum are free again (without it, each closed session would keep them until the link ends).
    @Test func close_acknowledgesWhatTheSessionHeld() throws {
        var adapter = try Self.opened([(9, nil)])
        _ = Self.down(&adapter, session: 9, seq: 1, id: 1)
        _ = Self.down(&adapter, session: 9, seq: 3, id: 2)
        #expect(Self.pubacks(adapter.send(.close(Close(session: 9)))).map { "\($0.packetIdentifier) \($0.reasonCode)" }
                == ["1 success", "2 success"])
        #expect(!adapter.holdsEnough)
    }

    /// The broker refuses an `up` message (an ACL: PUBACK 0x87): its session fails as after OPEN_FAIL
    /// FORBIDDEN from an IMLink server, its messages still waiting are not published, and the link and
    /// the other sessions go on.
    @Test func upRefusedByTheBroker_failsThatSessionAlone() throws {
        var adapter = try Self.opened([(9, nil), (10, nil)], receiveMaximum: 2)
        let first = MQTTLinkAdapterTests.publishes(adapter.send(.data(DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a")))))
        let other = MQTTLinkAdapterTests.publishes(adapter.send(.data(DataFrame(session: 10, seq: 1, body: ByteBuffer(string: "b")))))
        #expect(adapter.send(.data(DataFrame(session: 9, seq: 2, body: ByteBuffer(string: "c")))).isEmpty, "waits for Receive Maximum")
        #expect(adapter.send(.data(DataFrame(session: 10, seq: 2, body: ByteBuffer(string: "d")))).isEmpty)

        let refused = adapter.received(.puback(PublishAck(packetIdentifier: first[0].packetIdentifier, reasonCode: .notAuthorized)))
        let ended = refused.contains { $0.endsLink }
        #expect(!ended, "\(refused)")
        guard case .frame(.openFail(let fail)) = refused.first(where: { if case .frame = $0 { true } else { false } }) else {
            Issue.record("\(refused)"); return
        }
        #expect(fail.session == 9 && fail.code == .forbidden && fail.message?.contains("notAuthorized") == true, "\(fail)")
        #expect(fail.message?.contains("0x87") == true && fail.message?.contains("seq 1") == true)
        let next = MQTTLinkAdapterTests.publishes(refused)
        #expect(next.map { String(buffer: $0.payload) } == ["d"], "session 9's waiting message is not published; 10's goes")
        #expect(adapter.send(.data(DataFrame(session: 9, seq: 3, body: ByteBuffer(string: "e")))).isEmpty)

        let acks = adapter.received(.puback(PublishAck(packetIdentifier: other[0].packetIdentifier)))
            + adapter.received(.puback(PublishAck(packetIdentifier: next[0].packetIdentifier)))
        #expect(acks.compactMap { if case .frame(.ack(let ack)) = $0 { "\(ack.session):\(ack.seq)" } else { nil } } == ["10:1", "10:2"])
        #expect(adapter.isConnected)
    }

    /// Which PUBACK codes fail the session and which the link (imagent-mqtt(7), FAILURES).
    @Test func pubackCodes_aboutTheMessageFailTheSession_aboutTheBrokerOrLinkEndTheLink() throws {
        for code in [ReasonCode.unspecifiedError, .implementationSpecificError, .notAuthorized, .topicNameInvalid, .payloadFormatInvalid] {
            var adapter = try Self.opened([(9, nil)])
            let sent = MQTTLinkAdapterTests.publishes(adapter.send(.data(DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a")))))
            let outputs = adapter.received(.puback(PublishAck(packetIdentifier: sent[0].packetIdentifier, reasonCode: code)))
            #expect(outputs.contains { if case .frame(.openFail(let fail)) = $0 { fail.session == 9 } else { false } }, "\(code)")
            let ended = outputs.contains { $0.endsLink }
            #expect(!ended, "\(code)")
        }
        for (code, wire) in [(ReasonCode.quotaExceeded, WireCode.overloaded), (.packetIdentifierInUse, .protocolError)] {
            var adapter = try Self.opened([(9, nil)])
            let sent = MQTTLinkAdapterTests.publishes(adapter.send(.data(DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a")))))
            let outputs = adapter.received(.puback(PublishAck(packetIdentifier: sent[0].packetIdentifier, reasonCode: code)))
            let ended = outputs.contains { $0.endsLink }
            #expect(ended, "\(code)")
            let codes = outputs.compactMap { output -> WireCode? in
                switch output {
                case .frame(.goaway(let goaway)): goaway.code
                case .frame(.error(let error)): error.code
                default: nil
                }
            }
            #expect(codes == [wire], "\(code): \(outputs)")
        }
    }
}
