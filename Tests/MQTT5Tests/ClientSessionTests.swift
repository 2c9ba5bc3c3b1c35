import MQTT5
import NIOCore
import Testing

/// The pure client session driven by events, as the I/O layer will drive it.
@Suite struct ClientSessionTests {
    static let downFilter = "imagent/c/+/+/down"

    static func session(topicAliasMaximum: UInt16 = 0, receiveMaximum: UInt16 = 100) -> ClientSession {
        ClientSession(configuration: .init(
            clientIdentifier: "c", keepAlive: 30, sessionExpiryInterval: 86_400, receiveMaximum: receiveMaximum,
            maximumPacketSize: 1 << 20, topicAliasMaximum: topicAliasMaximum,
            subscriptions: [.init(topicFilter: downFilter, maximumQoS: .atLeastOnce)],
            userName: "u", password: ByteBuffer(string: "token")))
    }

    static func connack(sessionPresent: Bool = false, _ properties: Properties = []) -> ClientSession.Event {
        .received(.connack(ConnAck(sessionPresent: sessionPresent, reasonCode: .success, properties: properties)))
    }

    /// Connects and acknowledges the subscription; returns the session ready to publish.
    static func connected(_ properties: Properties = [], topicAliasMaximum: UInt16 = 0, receiveMaximum: UInt16 = 100) -> ClientSession {
        var session = session(topicAliasMaximum: topicAliasMaximum, receiveMaximum: receiveMaximum)
        _ = session.handle(.connected)
        let actions = session.handle(connack(properties))
        guard case .send(.subscribe(let subscribe)) = actions.last else { fatalError("no SUBSCRIBE: \(actions)") }
        _ = session.handle(.received(.suback(SubscriptionAck(packetIdentifier: subscribe.packetIdentifier, reasonCodes: [.grantedQoS1]))))
        return session
    }

    static func sentPublish(_ result: ClientSession.PublishResult) -> Publish? {
        if case .send(.publish(let publish)) = result { publish } else { nil }
    }

    @Test func connect_usesCleanStart0_theSessionExpiry_andTheLimits() throws {
        var session = Self.session()
        let actions = session.handle(.connected)
        guard case .send(.connect(let connect)) = try #require(actions.first) else { Issue.record("\(actions)"); return }
        #expect(!connect.cleanStart && connect.keepAlive == 30 && connect.clientIdentifier == "c")
        #expect(connect.userName == "u" && connect.password == ByteBuffer(string: "token"))
        #expect(connect.properties.integer(.sessionExpiryInterval) == 86_400)
        #expect(connect.properties.integer(.receiveMaximum) == 100)
        #expect(connect.properties.integer(.maximumPacketSize) == 1 << 20)
        #expect(throws: Never.self) { _ = try Packet.connect(connect).encoded() }
    }

    @Test func sessionPresent0_subscribes_andSubackReportsTheGrant() throws {
        var session = Self.session()
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: false))
        #expect(actions.first == .ready(BrokerLimits(), sessionPresent: false))
        guard case .send(.subscribe(let subscribe)) = actions.last else { Issue.record("\(actions)"); return }
        #expect(subscribe.subscriptions.map(\.topicFilter) == [Self.downFilter])
        #expect(subscribe.packetIdentifier != 0)
        let granted = session.handle(.received(.suback(SubscriptionAck(packetIdentifier: subscribe.packetIdentifier, reasonCodes: [.grantedQoS1]))))
        #expect(granted == [.subscribed(filter: Self.downFilter, granted: .atLeastOnce)])
    }

    @Test func sessionPresent1_afterAConfirmedSubscription_doesNotSubscribeAgain() {
        var session = Self.connected()
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        #expect(session.handle(Self.connack(sessionPresent: true)) == [.ready(BrokerLimits(), sessionPresent: true)])
    }

    @Test func sessionPresent0_afterARestart_ofTheBroker_subscribesAgain() {
        var session = Self.connected()
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: false))
        #expect(actions.contains { if case .send(.subscribe) = $0 { true } else { false } })
    }

    @Test func aSubscribeNeverAcknowledged_isSentAgainEvenWithSessionPresent1() {
        var session = Self.session()
        _ = session.handle(.connected)
        _ = session.handle(Self.connack())
        _ = session.handle(.connectionLost)  // before SUBACK
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: true))
        #expect(actions.contains { if case .send(.subscribe) = $0 { true } else { false } })
    }

    @Test func refusedConnack_reportsTheCodeAndServerReference() {
        var session = Self.session()
        _ = session.handle(.connected)
        let actions = session.handle(.received(.connack(ConnAck(
            sessionPresent: false, reasonCode: .useAnotherServer, properties: [Property(.serverReference, .string("b:8883"))]))))
        #expect(actions == [.refused(.useAnotherServer, serverReference: "b:8883")])
        #expect(!session.isConnected)
    }

    @Test func theBrokersReceiveMaximum_boundsWhatIsInFlight() throws {
        var session = Self.connected([Property(.receiveMaximum, integer: 2)])
        let first = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(string: "1"), tag: 1)))
        _ = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(string: "2"), tag: 2)))
        #expect(session.publish(topic: "t", payload: ByteBuffer(string: "3"), tag: 3) == .wouldBlock)
        #expect(session.handle(.received(.puback(PublishAck(packetIdentifier: first.packetIdentifier)))) == [.published(tag: 1)])
        #expect(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(string: "3"), tag: 3)) != nil)
        #expect(session.unacknowledgedCount == 2)
    }

    @Test func aMessageAboveTheBrokersMaximumPacketSize_isRefusedAtOnce() throws {
        var session = Self.connected([Property(.maximumPacketSize, integer: 128)])
        let result = session.publish(topic: "t", payload: ByteBuffer(repeating: 1, count: 200), tag: 1)
        #expect(result == .tooLarge(size: 209, limit: 128))  // 1 + 2 (Remaining Length) + 3 + 2 + 1 + 200
        #expect(session.unacknowledgedCount == 0)
        #expect(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(repeating: 1, count: 100), tag: 2)) != nil)
    }

    @Test func aBrokerWithMaximumQoS0_takesNoQoS1Message() throws {
        var session = Self.connected()
        _ = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(), tag: 1)))
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: true, [Property(.maximumQoS, integer: 0)]))
        #expect(actions.contains(.publishRefused(tag: 1, .qosNotSupported)))
        #expect(session.publish(topic: "t", payload: ByteBuffer(), tag: 2) == .qosNotSupported)
        #expect(session.unacknowledgedCount == 0)
    }

    @Test func aFailurePuback_reportsTheRefusal() throws {
        var session = Self.connected()
        let sent = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(), tag: 9)))
        let actions = session.handle(.received(.puback(PublishAck(packetIdentifier: sent.packetIdentifier, reasonCode: .quotaExceeded))))
        #expect(actions == [.publishRefused(tag: 9, .quotaExceeded)])
        #expect(session.handle(.received(.puback(PublishAck(packetIdentifier: sent.packetIdentifier)))).first.map {
            if case .close(.protocolError, _) = $0 { true } else { false }
        } == true)
    }

    @Test func packetIdentifiers_areNonZero_wrap_andSkipOnesInUse() throws {
        var session = Self.connected()
        let held = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(), tag: 0)))
        var seen = Set<UInt16>()
        for tag in 1...70_000 {
            let sent = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(), tag: UInt64(tag))))
            #expect(sent.packetIdentifier != 0 && sent.packetIdentifier != held.packetIdentifier)
            seen.insert(sent.packetIdentifier)
            _ = session.handle(.received(.puback(PublishAck(packetIdentifier: sent.packetIdentifier))))
        }
        #expect(seen.count == 65_534)
    }

    @Test func reconnectWithSessionPresent1_resendsWithDUPAndTheSameIdentifiers() throws {
        var session = Self.connected()
        let sent = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(string: "x"), tag: 5)))
        _ = session.handle(.connectionLost)
        #expect(session.publish(topic: "t", payload: ByteBuffer(), tag: 6) == .notConnected)
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: true))
        var again = sent
        again.dup = true
        #expect(actions.last == .send(.publish(again)))
        #expect(session.handle(.received(.puback(PublishAck(packetIdentifier: sent.packetIdentifier)))) == [.published(tag: 5)])
    }

    @Test func reconnectWithSessionPresent0_resendsAsNewMessages_withinTheNewLimits() throws {
        var session = Self.connected()
        for tag in 1...3 { _ = session.publish(topic: "t", payload: ByteBuffer(string: "\(tag)"), tag: UInt64(tag)) }
        _ = session.publish(topic: "t", payload: ByteBuffer(repeating: 0, count: 300), tag: 4)
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: false, [Property(.receiveMaximum, integer: 2), Property(.maximumPacketSize, integer: 200)]))
        let resent = actions.compactMap { if case .send(.publish(let publish)) = $0 { publish } else { nil } }
        #expect(resent.map { String(buffer: $0.payload) } == ["1", "2"])
        #expect(resent.allSatisfy { !$0.dup })
        #expect(actions.contains(.publishRefused(tag: 4, .packetTooLarge)))
        // A new message waits behind the held one: order is kept.
        #expect(session.publish(topic: "t", payload: ByteBuffer(string: "5"), tag: 5) == .wouldBlock)
        // The third goes when the first is acknowledged.
        let next = session.handle(.received(.puback(PublishAck(packetIdentifier: resent[0].packetIdentifier))))
        #expect(next.first == .published(tag: 1))
        guard case .send(.publish(let third)) = next.last else { Issue.record("\(next)"); return }
        #expect(String(buffer: third.payload) == "3")
    }

    /// The largest window the standard allows, acknowledged in an order of the broker's choosing, then resent
    /// oldest first into a smaller window after a broker restart: every message reported once, an identifier
    /// left for the SUBSCRIBE, the work per message constant (with a scan of the window per PUBACK, as
    /// before, this test ran for minutes).
    @Test func aFullWindow_acknowledgedOutOfOrder_thenResentOldestFirst() throws {
        var session = Self.connected([Property(.receiveMaximum, integer: 65_535)])
        var identifiers: [UInt16] = []
        for tag in 1...65_534 {
            let sent = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(), tag: UInt64(tag))))
            identifiers.append(sent.packetIdentifier)
        }
        // The last identifier is kept for a SUBSCRIBE.
        #expect(session.publish(topic: "t", payload: ByteBuffer(), tag: 65_535) == .wouldBlock)
        // Every third message, from the newest down: gaps at the front and behind it.
        var reported: [UInt64] = []
        for index in stride(from: identifiers.count - 1, through: 0, by: -3) {
            for action in session.handle(.received(.puback(PublishAck(packetIdentifier: identifiers[index])))) {
                guard case .published(let tag) = action else { Issue.record("\(action)"); continue }
                reported.append(tag)
            }
        }
        #expect(reported.count == 21_845 && session.unacknowledgedCount == 43_689)

        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        let actions = session.handle(Self.connack(sessionPresent: false, [Property(.receiveMaximum, integer: 1_000)]))
        #expect(actions.contains { if case .send(.subscribe) = $0 { true } else { false } })
        var window = actions.compactMap { if case .send(.publish(let publish)) = $0 { publish } else { nil } }
        #expect(window.count == 1_000)
        var resentOrder: [UInt16] = []
        while let oldest = window.first {
            window.removeFirst()
            resentOrder.append(oldest.packetIdentifier)
            for action in session.handle(.received(.puback(PublishAck(packetIdentifier: oldest.packetIdentifier)))) {
                switch action {
                case .published(let tag): reported.append(tag)
                case .send(.publish(let publish)): window.append(publish)
                default: Issue.record("\(action)")
                }
            }
        }
        let unacknowledged = identifiers.indices.filter { (identifiers.count - 1 - $0) % 3 != 0 }.map { identifiers[$0] }
        #expect(resentOrder == unacknowledged, "resent oldest first, each once")
        #expect(reported.sorted() == Array(1...65_534))
        #expect(session.unacknowledgedCount == 0)
        #expect(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(), tag: 65_535)) != nil)
    }

    @Test func topicAliases_areUsedWhereTheBrokerOffersThem_andResetOnReconnect() throws {
        var session = Self.connected([Property(.topicAliasMaximum, integer: 1)])
        let first = try #require(Self.sentPublish(session.publish(topic: "a", payload: ByteBuffer(), tag: 1)))
        #expect(first.topic == "a" && first.properties.integer(.topicAlias) == 1)
        let second = try #require(Self.sentPublish(session.publish(topic: "a", payload: ByteBuffer(), tag: 2)))
        #expect(second.topic == "" && second.properties.integer(.topicAlias) == 1)
        let other = try #require(Self.sentPublish(session.publish(topic: "b", payload: ByteBuffer(), tag: 3)))
        #expect(other.topic == "b" && other.properties.integer(.topicAlias) == nil)
        for publish in [first, second, other] { #expect(throws: Never.self) { _ = try Packet.publish(publish).encoded() } }
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        let resent = session.handle(Self.connack(sessionPresent: true, [Property(.topicAliasMaximum, integer: 1)]))
            .compactMap { if case .send(.publish(let publish)) = $0 { publish } else { nil } }
        // Aliases live for one connection: the first resend names the topic again.
        #expect(resent.map(\.topic) == ["a", "", "b"])
    }

    @Test func aTopicAliasThatWouldPassTheMaximumPacketSize_isNotUsed() throws {
        // "t" with 1 byte of payload at QoS 1 is 9 bytes; with a Topic Alias property, 12.
        var session = Self.connected([Property(.topicAliasMaximum, integer: 4), Property(.maximumPacketSize, integer: 9)])
        let sent = try #require(Self.sentPublish(session.publish(topic: "t", payload: ByteBuffer(string: "x"), tag: 1)))
        #expect(sent.topic == "t" && sent.properties.isEmpty)
        #expect(sent.encodedSize == 9)
    }

    @Test func theServersKeepAlive_replacesOurs() {
        let session = Self.connected([Property(.serverKeepAlive, integer: 10)])
        #expect(session.keepAlive == 10)
        #expect(Self.session().keepAlive == 30)
    }

    @Test func inboundQoS1_isAcknowledgedOnlyOnceStored_onItsOwnConnection() throws {
        var session = Self.connected()
        let message = Publish(topic: "imagent/c/echo/1/down", qos: .atLeastOnce, packetIdentifier: 7, payload: ByteBuffer(string: "m"))
        let actions = session.handle(.received(.publish(message)))
        guard case .deliver(let topic, _, let receipt?) = actions.first else { Issue.record("\(actions)"); return }
        #expect(topic == "imagent/c/echo/1/down" && actions.count == 1)
        #expect(session.handle(.stored(receipt)) == [.send(.puback(PublishAck(packetIdentifier: 7)))])
        #expect(session.handle(.stored(receipt)).isEmpty)

        guard case .deliver(_, _, let stale?) = session.handle(.received(.publish(message))).first else { Issue.record("no deliver"); return }
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        _ = session.handle(Self.connack(sessionPresent: true))
        #expect(session.handle(.stored(stale)).isEmpty, "a PUBACK for the old connection must not leave on the new one")
    }

    /// A broker that breaks [MQTT-3.3.4-9] (mosquitto 2.0.11 after a reconnect, with queued messages)
    /// is reported once per connection, and its messages are taken: closing would not help, it sends
    /// them again on the next connection.
    @Test func moreInboundThanOurReceiveMaximum_isReportedOnce_andTaken() {
        var session = Self.connected(receiveMaximum: 2)
        var receipts: [ClientSession.Receipt] = []
        var reports: [Int] = []
        for identifier in UInt16(1)...5 {
            for action in session.handle(.received(.publish(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: identifier, payload: ByteBuffer())))) {
                switch action {
                case .deliver(_, _, let receipt?): receipts.append(receipt)
                case .receiveMaximumExceeded(let unacknowledged): reports.append(unacknowledged)
                default: Issue.record("\(action)")
                }
            }
        }
        #expect(receipts.count == 5 && reports == [3])
        #expect(session.handle(.stored(receipts[4])) == [.send(.puback(PublishAck(packetIdentifier: 5)))])
        _ = session.handle(.connectionLost)
        _ = session.handle(.connected)
        _ = session.handle(Self.connack(sessionPresent: true))
        for identifier in UInt16(1)...3 {
            let actions = session.handle(.received(.publish(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: identifier, payload: ByteBuffer()))))
            #expect(actions.contains(.receiveMaximumExceeded(unacknowledged: 3)) == (identifier == 3), "again once on a new connection")
        }
    }

    /// A message the caller will not keep is answered with the failure code, and only once.
    @Test func declined_isAPubackWithItsCode_once() {
        var session = Self.connected()
        let message = Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: 9, payload: ByteBuffer(string: "m"))
        guard case .deliver(_, _, let receipt?) = session.handle(.received(.publish(message))).first else { Issue.record("no deliver"); return }
        let actions = session.handle(.declined(receipt, .quotaExceeded, reason: "full"))
        #expect(actions == [.send(.puback(PublishAck(packetIdentifier: 9, reasonCode: .quotaExceeded,
                                                     properties: [Property(.reasonString, .string("full"))])))])
        #expect(session.handle(.declined(receipt, .quotaExceeded, reason: "full")).isEmpty)
        #expect(session.handle(.stored(receipt)).isEmpty)
    }

    @Test func inboundTopicAliases_resolve_andAnUnknownOneCloses() {
        var session = Self.connected(topicAliasMaximum: 4)
        let named = Publish(topic: "x/y", properties: [Property(.topicAlias, integer: 2)], payload: ByteBuffer(string: "1"))
        let aliased = Publish(topic: "", properties: [Property(.topicAlias, integer: 2)], payload: ByteBuffer(string: "2"))
        _ = session.handle(.received(.publish(named)))
        guard case .deliver(let topic, _, nil) = session.handle(.received(.publish(aliased))).first else { Issue.record("no deliver"); return }
        #expect(topic == "x/y")
        let unknown = Publish(topic: "", properties: [Property(.topicAlias, integer: 3)], payload: ByteBuffer())
        guard case .close(.protocolError, _) = session.handle(.received(.publish(unknown))).first else { Issue.record("not closed"); return }
        let above = Publish(topic: "z", properties: [Property(.topicAlias, integer: 5)], payload: ByteBuffer())
        guard case .close(.topicAliasInvalid, _) = session.handle(.received(.publish(above))).first else { Issue.record("not closed"); return }
    }

    @Test func serverDisconnect_withServerReference_isReported() {
        var session = Self.connected()
        let actions = session.handle(.received(.disconnect(Disconnect(reasonCode: .serverMoved, properties: [Property(.serverReference, .string("b2:8883"))]))))
        #expect(actions == [.disconnected(.serverMoved, serverReference: "b2:8883")])
    }

    @Test func aPacketBeforeConnack_closesWithProtocolError() {
        var session = Self.session()
        _ = session.handle(.connected)
        guard case .close(.protocolError, _) = session.handle(.received(.pingresp)).first else { Issue.record("not closed"); return }
    }
}
