import IMLink
import MQTT5
import NIOCore
import Testing

@testable import IMAgentCore

/// The pure IMLink ↔ MQTT 5 adapter, driven with frames and packets (imagent-mqtt(7)).
@Suite struct MQTTLinkAdapterTests {
    static let settings = MQTTLinkSettings(clientID: "host-1", username: "dev", passwordFromToken: true,
                                           sessionExpirySeconds: 600, topicPrefix: "imagent")

    static func adapter(lastAcked: [UInt64: UInt64] = [:], noSubscriberStreak: Int = 0) throws -> MQTTLinkAdapter {
        MQTTLinkAdapter(settings: settings, topics: try settings.topics(), keepAlive: 30, maxFrame: 1 << 20, port: 1883,
                        lastAcked: lastAcked, noSubscriberStreak: noSubscriberStreak)
    }

    /// HELLO, LOGIN, CONNACK: the adapter as the engine sees it after LOGIN_OK.
    static func connected(receiveMaximum: UInt32 = 100, sessionPresent: Bool = false,
                          lastAcked: [UInt64: UInt64] = [:]) throws -> MQTTLinkAdapter {
        var adapter = try adapter(lastAcked: lastAcked)
        _ = adapter.send(.hello(Hello(features: [.flow], agentID: "host-1", maxFrame: 1 << 20)))
        _ = adapter.send(.login(Login(token: ByteBuffer(string: "secret"), agentID: "host-1")))
        _ = adapter.received(.connack(ConnAck(sessionPresent: sessionPresent, reasonCode: .success,
                                              properties: [Property(.receiveMaximum, integer: receiveMaximum)])))
        return adapter
    }

    static func publishes(_ outputs: [MQTTLinkAdapter.Output]) -> [Publish] {
        outputs.compactMap { if case .packet(.publish(let publish)) = $0 { publish } else { nil } }
    }

    static func down(session: UInt64, seq: UInt64, id: UInt16, text: String = "x") -> Packet {
        .publish(Publish(topic: "imagent/host-1/echo/\(session)/down", qos: .atLeastOnce, packetIdentifier: id,
                         properties: [.user("imagent-seq", String(seq))], payload: ByteBuffer(string: text)))
    }

    @Test func handshake_helloAtOnce_loginIsConnect_connackIsLoginOK_andSubscribes() throws {
        var adapter = try Self.adapter()
        #expect(adapter.send(.hello(Hello(features: [.flow], agentID: "host-1", maxFrame: 65536)))
                == [.frame(.helloOK(HelloOK(features: [.flow], maxFrame: 65536)))])
        let connect = adapter.send(.login(Login(token: ByteBuffer(string: "secret"), agentID: "host-1")))
        guard case .packet(.connect(let packet)) = try #require(connect.first) else { Issue.record("\(connect)"); return }
        #expect(packet.clientIdentifier == "host-1" && !packet.cleanStart && packet.keepAlive == 30)
        #expect(packet.userName == "dev" && packet.password == ByteBuffer(string: "secret"))
        #expect(packet.properties.integer(.sessionExpiryInterval) == 600)

        let ack = adapter.received(.connack(ConnAck(sessionPresent: false, reasonCode: .success, properties: [
            Property(.serverKeepAlive, integer: 20), Property(.maximumPacketSize, integer: 2_000),
        ])))
        #expect(ack.contains(.packet(.subscribe(Subscribe(packetIdentifier: 1, subscriptions: [
            .init(topicFilter: "imagent/host-1/+/+/down", maximumQoS: .atLeastOnce),
        ])))))
        #expect(ack.contains(.frame(.loginOK(LoginOK(heartbeatMS: 20_000)))), "the heartbeat stays within Server Keep Alive")
        #expect(adapter.maxBody == UInt32(2_000 - Self.settings.publishOverhead), "MAX_FRAME is the broker's limit less an up PUBLISH's overhead")
    }

    /// The broker closes after 1.5 Keep Alive of silence: twice the heartbeat's longest interval (at
    /// least 30 s) leaves judging the link to the heartbeat, and the broker acts only after it would.
    @Test func keepAlive_isTwiceTheHeartbeatsLongestInterval_atLeast30s_atMost65535() {
        #expect(MQTTLinkSettings.keepAlive(heartbeatMax: .seconds(2)) == 30)
        #expect(MQTTLinkSettings.keepAlive(heartbeatMax: .seconds(15)) == 30)
        #expect(MQTTLinkSettings.keepAlive(heartbeatMax: .seconds(16)) == 32)
        #expect(MQTTLinkSettings.keepAlive(heartbeatMax: .seconds(300)) == 600)
        #expect(MQTTLinkSettings.keepAlive(heartbeatMax: .seconds(40_000)) == 65_535)
    }

    @Test func subscribesAtEveryConnection_sessionPresentOrNot() throws {
        // Session Present 0 needs it; with 1 it is harmless and repairs a subscription the broker lost.
        for present in [false, true] {
            var adapter = try Self.adapter()
            _ = adapter.send(.login(Login(token: ByteBuffer(), agentID: "host-1")))
            let ack = adapter.received(.connack(ConnAck(sessionPresent: present, reasonCode: .success)))
            #expect(ack.contains { if case .packet(.subscribe) = $0 { true } else { false } })
        }
    }

    @Test func open_answersLastAckedAndTheBrokersReceiveMaximum_butNoLessThanTheMinimumWindow() throws {
        var adapter = try Self.connected(receiveMaximum: 7, lastAcked: [9: 41])
        #expect(adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
                == [.frame(.openOK(OpenOK(session: 9, lastAcked: 41, window: UInt32(MQTTLinkAdapter.minimumSessionWindow))))])
        var large = try Self.connected(receiveMaximum: 5_000)
        #expect(large.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
                == [.frame(.openOK(OpenOK(session: 9, lastAcked: 0, window: 5_000)))])
        guard case .frame(.openFail(let fail)) = adapter.send(.open(Open(session: 10, service: "a/b", resumeAfter: 0))).first else {
            Issue.record("a service that is not one topic level must be refused"); return
        }
        #expect(fail.code == .forbidden)
        // A service that would make the topic longer than MQTT allows is refused at OPEN, not at its first message.
        guard case .frame(.openFail(let long)) = adapter.send(.open(Open(session: 11, service: String(repeating: "s", count: 65_530),
                                                                         resumeAfter: 0))).first else {
            Issue.record("a topic longer than 65,535 bytes must be refused"); return
        }
        #expect(long.code == .forbidden && long.message?.contains("65535") == true)
    }

    @Test func data_isQoS1OnUp_withImagentSeq_andPubackIsAck_inOrderWithinReceiveMaximum() throws {
        var adapter = try Self.connected(receiveMaximum: 2)
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
        var sent: [Publish] = []
        for seq in UInt64(1)...4 {
            sent += Self.publishes(adapter.send(.data(DataFrame(session: 9, seq: seq, body: ByteBuffer(string: "m\(seq)")))))
        }
        #expect(sent.count == 2, "Receive Maximum 2: the others wait")
        #expect(sent[0].topic == "imagent/host-1/echo/9/up" && sent[0].qos == .atLeastOnce && !sent[0].retain)
        #expect(sent[0].properties.userProperties.map { "\($0.name)=\($0.value)" } == ["imagent-seq=1"])
        var acks: [UInt64] = []
        var index = 0
        while index < sent.count {
            let outputs = adapter.received(.puback(PublishAck(packetIdentifier: sent[index].packetIdentifier)))
            acks += outputs.compactMap { if case .frame(.ack(let ack)) = $0 { ack.seq } else { nil } }
            sent += Self.publishes(outputs)
            index += 1
        }
        #expect(sent.map { String(buffer: $0.payload) } == ["m1", "m2", "m3", "m4"], "waiting messages go in order")
        #expect(acks == [1, 2, 3, 4])
        #expect(adapter.lastAcked == [9: 4])
    }

    @Test func noMatchingSubscribers_isNoAck_theLinkGoesAway_andNothingLaterCounts() throws {
        var adapter = try Self.connected()
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
        let first = Self.publishes(adapter.send(.data(DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a")))))
        let second = Self.publishes(adapter.send(.data(DataFrame(session: 9, seq: 2, body: ByteBuffer(string: "b")))))
        let outputs = adapter.received(.puback(PublishAck(packetIdentifier: first[0].packetIdentifier, reasonCode: .noMatchingSubscribers)))
        guard case .frame(.goaway(let goaway)) = try #require(outputs.first) else { Issue.record("\(outputs)"); return }
        #expect(goaway.code == .overloaded && goaway.retryAfterMS == 2_000)
        #expect(adapter.noSubscriberStreak == 1)
        #expect(adapter.received(.puback(PublishAck(packetIdentifier: second[0].packetIdentifier))).isEmpty,
                "a later ACK would cover the dropped message")
        #expect(adapter.lastAcked[9] == nil)
    }

    @Test func noSubscriberRetries_backOff_andAnAcceptedMessageResetsThem() throws {
        #expect((0...7).map { MQTTLinkAdapter.noSubscriberRetryMS(streak: $0) } == [2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 64_000, 64_000])
        var adapter = try Self.adapter(noSubscriberStreak: 3)
        _ = adapter.send(.login(Login(token: ByteBuffer(), agentID: "host-1")))
        _ = adapter.received(.connack(ConnAck(sessionPresent: true, reasonCode: .success)))
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
        let sent = Self.publishes(adapter.send(.data(DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a")))))
        _ = adapter.received(.puback(PublishAck(packetIdentifier: sent[0].packetIdentifier)))
        #expect(adapter.noSubscriberStreak == 0)
    }

    @Test func down_isData_pubackOnlyAfterTheSessionsAck_andEarlyOnesWaitForTheirTurn() throws {
        var adapter = try Self.connected()
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 3)))
        #expect(adapter.received(Self.down(session: 9, seq: 5, id: 1)).isEmpty, "seq 5 waits for 4")
        let frames = adapter.received(Self.down(session: 9, seq: 4, id: 2)).compactMap { output -> UInt64? in
            if case .frame(.data(let data)) = output { data.seq } else { nil }
        }
        #expect(frames == [4, 5])
        #expect(adapter.send(.ack(Ack(session: 9, seq: 4))) == [.packet(.puback(PublishAck(packetIdentifier: 2)))])
        #expect(adapter.send(.ack(Ack(session: 9, seq: 5))) == [.packet(.puback(PublishAck(packetIdentifier: 1)))])

        // A redelivery of what the sessions hold goes up again; they drop it and ACK again, then its PUBACK leaves.
        #expect(adapter.received(Self.down(session: 9, seq: 4, id: 3)).count == 1)
        #expect(adapter.send(.ack(Ack(session: 9, seq: 5))) == [.packet(.puback(PublishAck(packetIdentifier: 3)))])
    }

    /// Several backends answer out of order: each early message waits, in seq order, for those before it;
    /// one beyond a gap keeps waiting.
    @Test func down_earlyOnesInAnyOrder_goInSeqOrder_andOneBeyondAGapWaits() throws {
        var adapter = try Self.connected()
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 3)))
        func seqs(_ outputs: [MQTTLinkAdapter.Output]) -> [UInt64] {
            outputs.compactMap { if case .frame(.data(let data)) = $0 { data.seq } else { nil } }
        }
        for (seq, id) in [(7, 1), (9, 2), (5, 3), (6, 4)] as [(UInt64, UInt16)] {
            #expect(seqs(adapter.received(Self.down(session: 9, seq: seq, id: id))).isEmpty, "seq \(seq) waits for 4")
        }
        #expect(seqs(adapter.received(Self.down(session: 9, seq: 4, id: 5))) == [4, 5, 6, 7])
        #expect(seqs(adapter.received(Self.down(session: 9, seq: 8, id: 6))) == [8, 9])
        #expect(adapter.send(.ack(Ack(session: 9, seq: 9))).count == 6, "every PUBACK leaves once the sessions took all")
    }

    @Test func down_forNoOpenSession_isAcknowledgedAndDropped_withAWarning() throws {
        var adapter = try Self.connected()
        let outputs = adapter.received(Self.down(session: 77, seq: 1, id: 4))
        #expect(outputs.contains(.packet(.puback(PublishAck(packetIdentifier: 4)))))
        #expect(outputs.contains { if case .warning = $0 { true } else { false } })
        #expect(!outputs.contains { if case .frame = $0 { true } else { false } })

        // More, on one topic or many: each acknowledged and warned about (the log's limiter bounds
        // the lines), with the topic cut short.
        let long = "imagent/host-1/" + String(repeating: "x", count: 60_000) + "/1/down"
        var warnings: [[String: String]] = []
        for id in UInt16(5)...11 {
            let topic = id % 2 == 0 ? long : "imagent/host-1/echo/\(id)/down"
            let outputs = adapter.received(.publish(Publish(topic: topic, qos: .atLeastOnce, packetIdentifier: id,
                                                            properties: [.user("imagent-seq", "1")], payload: ByteBuffer(string: "x"))))
            #expect(outputs.contains(.packet(.puback(PublishAck(packetIdentifier: id)))))
            warnings += outputs.compactMap { if case .warning(.publishForNoSession, let details) = $0 { details } else { nil } }
        }
        #expect(warnings.count == 7)
        #expect(warnings.allSatisfy { ($0["topic"]?.utf8.count ?? .max) <= LogText.maxBytes + 40 }, "\(warnings.map { $0["topic"]?.utf8.count })")
    }

    @Test func ping_isPingreq_andPingrespIsItsPong() throws {
        var adapter = try Self.connected()
        let ping = Ping(id: 5, timestampUS: 123)
        #expect(adapter.send(.ping(ping)) == [.packet(.pingreq)])
        #expect(adapter.received(.pingresp) == [.frame(.pong(ping))])
    }

    @Test func reasonCodes_mapToTheDaemonsFailureClasses() throws {
        func connack(_ code: ReasonCode, reference: String? = nil) throws -> MQTTLinkAdapter.Output? {
            var adapter = try Self.adapter()
            _ = adapter.send(.login(Login(token: ByteBuffer(), agentID: "host-1")))
            let properties: Properties = reference.map { [Property(.serverReference, .string($0))] } ?? []
            return adapter.received(.connack(ConnAck(sessionPresent: false, reasonCode: code, properties: properties))).first
        }
        for refusal in [ReasonCode.badUserNameOrPassword, .notAuthorized] {
            guard case .frame(.loginFail(let fail)) = try connack(refusal) else { Issue.record("\(refusal)"); return }
            #expect(fail.code == .tokenInvalid, "a refused password is a token to read again, never a stop")
            #expect(fail.message?.contains("CONNACK 0x\(String(refusal.rawValue, radix: 16))") == true && fail.message?.contains("check that the [auth] token") == true,
                    "\(fail.message ?? "")")
        }
        guard case .frame(.loginFail(let forbidden)) = try connack(.banned) else { Issue.record("0x8a"); return }
        #expect(forbidden.code == .forbidden)
        guard case .frame(.goaway(let busy)) = try connack(.serverBusy) else { Issue.record("0x89"); return }
        #expect(busy.code == .overloaded)
        guard case .frame(.error(let version)) = try connack(.unsupportedProtocolVersion) else { Issue.record("0x84"); return }
        #expect(version.code == .versionUnsupported)

        var adapter = try Self.connected()
        let moved = adapter.received(.disconnect(Disconnect(reasonCode: .useAnotherServer, properties: [
            Property(.serverReference, .string("other.example.net")),
        ])))
        guard case .frame(.goaway(let goaway)) = try #require(moved.first) else { Issue.record("\(moved)"); return }
        #expect(goaway.code == .shutdown && goaway.redirect == "other.example.net:1883", "the current endpoint's port when none is given")
    }
}
