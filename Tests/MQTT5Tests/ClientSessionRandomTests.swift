import IMAgentTestKit
import MQTT5
import NIOCore
import Testing

/// ClientSession under random event sequences against a model broker: the
/// standard's bounds hold at every step, and every message offered is reported
/// exactly once (taken or refused), across reconnects with and without Session Present.
@Suite struct ClientSessionRandomTests {
    @Test(arguments: 1...20)
    func everyMessageIsReportedOnce_andTheBrokersLimitsHold(seed: Int) throws {
        var random = SplitMix64(seed: UInt64(seed))
        var session = ClientSession(configuration: .init(
            clientIdentifier: "r", subscriptions: [.init(topicFilter: "d/+", maximumQoS: .atLeastOnce)]))
        var receiveMaximum = 1 + random.next(5)
        var maximumPacketSize = 40 + random.next(60)
        var outstanding: [UInt16: Publish] = [:]  // sent, not acknowledged by the model broker
        var reported: [UInt64: Int] = [:]
        var offered = Set<UInt64>()
        var nextTag: UInt64 = 1

        func apply(_ actions: [ClientSession.Action]) throws {
            for action in actions {
                switch action {
                case .send(.publish(let publish)):
                    #expect(publish.packetIdentifier != 0)
                    #expect(publish.dup || outstanding[publish.packetIdentifier] == nil, "identifier \(publish.packetIdentifier) reused while in flight")
                    outstanding[publish.packetIdentifier] = publish
                    #expect(outstanding.count <= receiveMaximum, "more in flight than Receive Maximum \(receiveMaximum)")
                    #expect(publish.encodedSize <= maximumPacketSize)
                case .published(let tag), .publishedWithoutSubscribers(let tag), .publishRefused(let tag, _):
                    reported[tag, default: 0] += 1
                case .close(_, let because):
                    Issue.record("the session closed: \(because)")
                case .send, .ready, .deliver, .subscribed, .subscriptionRefused, .pong, .refused, .disconnected, .receiveMaximumExceeded:
                    break
                }
            }
        }

        func connect(sessionPresent: Bool) throws {
            if !sessionPresent { outstanding.removeAll() }  // the broker forgot the session
            receiveMaximum = 1 + random.next(5)
            maximumPacketSize = 40 + random.next(60)
            _ = session.handle(.connected)
            let properties: Properties = [
                Property(.receiveMaximum, integer: UInt32(receiveMaximum)), Property(.maximumPacketSize, integer: UInt32(maximumPacketSize)),
                Property(.topicAliasMaximum, integer: UInt32(random.next(3))),
            ]
            // A resend replaces the broker's copy: what is outstanding is what the session sends now.
            outstanding.removeAll()
            try apply(session.handle(.received(.connack(ConnAck(sessionPresent: sessionPresent, reasonCode: .success, properties: properties)))))
        }

        try connect(sessionPresent: false)
        for _ in 0..<400 {
            switch random.next(10) {
            case 0..<5:
                let tag = nextTag
                nextTag += 1
                let result = session.publish(topic: "u/\(random.next(4))", payload: ByteBuffer(repeating: 1, count: random.next(80)), tag: tag)
                switch result {
                case .send(let packet):
                    offered.insert(tag)
                    try apply([.send(packet)])
                case .tooLarge, .wouldBlock, .notConnected, .qosNotSupported:
                    break  // never taken: the caller keeps or refuses it
                }
            case 5..<8:
                guard let identifier = outstanding.keys.randomElement(using: &random) else { continue }
                outstanding[identifier] = nil
                let code: ReasonCode = random.next(10) == 0 ? .quotaExceeded : .success
                try apply(session.handle(.received(.puback(PublishAck(packetIdentifier: identifier, reasonCode: code)))))
            case 8:
                _ = session.handle(.connectionLost)
                try connect(sessionPresent: random.next(2) == 0)
            default:
                let identifier = UInt16(1 + random.next(3))
                for action in session.handle(.received(.publish(Publish(topic: "d/x", qos: .atLeastOnce, packetIdentifier: identifier, payload: ByteBuffer())))) {
                    if case .deliver(_, _, let receipt?) = action { try apply(session.handle(.stored(receipt))) }
                }
            }
        }
        // Drain: the broker acknowledges everything, with as large limits as the standard allows.
        _ = session.handle(.connectionLost)
        receiveMaximum = 65_535
        maximumPacketSize = Packet.largestSize
        outstanding.removeAll()
        _ = session.handle(.connected)
        try apply(session.handle(.received(.connack(ConnAck(sessionPresent: true, reasonCode: .success)))))
        while let identifier = outstanding.keys.first {
            outstanding[identifier] = nil
            try apply(session.handle(.received(.puback(PublishAck(packetIdentifier: identifier)))))
        }
        #expect(session.unacknowledgedCount == 0)
        #expect(Set(reported.keys) == offered)
        #expect(reported.values.allSatisfy { $0 == 1 }, "a message reported twice")
    }
}

extension SplitMix64 {
    /// A number in 0..<bound.
    fileprivate mutating func next(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
