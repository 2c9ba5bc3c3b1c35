import MQTT5
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

@Suite struct PacketCodecTests {
    /// Every valid vector, decoded.
    static let vectorPackets: [Packet] = MQTT5Vectors.shared.valid.map { vector in
        var buffer = ByteBuffer(bytes: vector.bytes)
        return try! PacketParser.parse(&buffer)!
    }

    @Test func decoder_handlesByteByByteAndCoalescedInput() throws {
        let pairs = Self.vectorPackets.map { (try! $0.encoded(), [$0]) }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { MQTT5PacketDecoder() }
    }

    @Test func aPartialPacket_leavesTheReaderIndexWhereItWas() throws {
        let whole = try Self.vectorPackets.first { $0.type == .connect }!.encoded()
        for cut in 0..<whole.readableBytes {
            var partial = whole.getSlice(at: whole.readerIndex, length: cut)!
            #expect(try PacketParser.parse(&partial) == nil)
            #expect(partial.readerIndex == 0 && partial.readableBytes == cut)
        }
    }

    @Test func encoderAndDecoder_onAChannel_leaveItClean() throws {
        let channel = EmbeddedChannel(handlers: [
            ByteToMessageHandler(MQTT5PacketDecoder()), MessageToByteHandler(MQTT5PacketEncoder()),
        ])
        for packet in Self.vectorPackets {
            try channel.writeOutbound(packet)
            let bytes = try #require(try channel.readOutbound(as: ByteBuffer.self))
            try channel.writeInbound(bytes)
            #expect(try channel.readInbound(as: Packet.self) == packet)
        }
        #expect(try channel.finish().isClean)
    }

    @Test func aPacketAboveThePeersMaximum_isNotWritten() throws {
        let publish = Packet.publish(Publish(topic: "a/b", payload: ByteBuffer(string: "hi")))  // 10 bytes
        var buffer = ByteBuffer(string: "before")
        #expect(throws: MQTT5Error.packetTooLarge(size: 10, limit: 9)) { try publish.encode(into: &buffer, maxPacketSize: 9) }
        #expect(String(buffer: buffer) == "before")
        try publish.encode(into: &buffer, maxPacketSize: 10)
        #expect(buffer.readableBytes == 16)
    }

    @Test func publishEncodedSize_isTheEncodedLength() throws {
        var publishes = Self.vectorPackets.compactMap { if case .publish(let publish) = $0 { publish } else { nil } }
        publishes.append(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: 1, properties: [.user("k", "v")],
                                 payload: ByteBuffer(repeating: 7, count: 20_000)))
        for publish in publishes {
            let encoded = try Packet.publish(publish).encoded()
            #expect(publish.encodedSize == encoded.readableBytes, "\(publish.topic)")
        }
    }

    @Test func aLargePayload_getsAFourByteRemainingLength() throws {
        let payload = ByteBuffer(repeating: 0x5A, count: 2_097_152)
        let bytes = try Packet.publish(Publish(topic: "t", payload: payload)).encoded()
        #expect(Array(bytes.readableBytesView.prefix(5)) == [0x30, 0x84, 0x80, 0x80, 0x01])
        var again = bytes
        guard case .publish(let publish) = try PacketParser.parse(&again) else { Issue.record("not a PUBLISH"); return }
        #expect(publish.payload == payload)
    }

    @Test func theEncoderRefusesWhatTheStandardForbids() {
        let cases: [(Packet, MQTT5Error)] = [
            (.publish(Publish(topic: "a\u{0}b", payload: ByteBuffer())),
             .invalidString(field: "Topic Name", reason: "contains U+0000")),
            (.publish(Publish(topic: String(repeating: "x", count: 65_536), payload: ByteBuffer())),
             .invalidString(field: "Topic Name", reason: "65536 bytes; at most 65535 can be encoded")),
            (.publish(Publish(topic: "a/+", payload: ByteBuffer())),
             .protocolViolation(.publish, section: "3.3.2.1", rule: "Topic Name must not contain wildcards [MQTT-3.3.2-2]")),
            (.publish(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: 0, payload: ByteBuffer())),
             .protocolViolation(.publish, section: "2.2.1", rule: "Packet Identifier must be non-zero [MQTT-2.2.1-3]")),
            (.publish(Publish(topic: "t", properties: [Property(.receiveMaximum, integer: 5)], payload: ByteBuffer())),
             .propertyNotAllowed(identifier: 0x21, in: .publish)),
            (.publish(Publish(topic: "t", properties: [Property(.topicAlias, integer: 1), Property(.topicAlias, integer: 2)], payload: ByteBuffer())),
             .duplicateProperty(.topicAlias)),
            (.publish(Publish(topic: "t", properties: [Property(.topicAlias, .string("1"))], payload: ByteBuffer())),
             .propertyNotAllowed(identifier: 0x23, in: .publish)),
            (.connect(Connect(clientIdentifier: "c", cleanStart: true, keepAlive: 0, properties: [Property(.receiveMaximum, integer: 0)])),
             .invalidPropertyValue(.receiveMaximum, value: 0)),
            (.puback(PublishAck(packetIdentifier: 1, reasonCode: .grantedQoS1)), .invalidReasonCode(.puback, code: 0x01)),
            (.subscribe(Subscribe(packetIdentifier: 1, subscriptions: [])),
             .protocolViolation(.subscribe, section: "3.8.3", rule: "at least one Topic Filter is required [MQTT-3.8.3-2]")),
            (.connect(Connect(clientIdentifier: "c", cleanStart: true, keepAlive: 0, password: ByteBuffer(repeating: 0, count: 65_536))),
             .binaryTooLong(field: "Password", length: 65_536)),
        ]
        for (packet, expected) in cases {
            var buffer = ByteBuffer()
            #expect(throws: expected) { try packet.encode(into: &buffer) }
            #expect(buffer.readableBytes == 0, "a refused packet left bytes behind")
        }
    }

    @Test func subscriptionIdentifier_mayRepeatInPublish_butNotInSubscribe() throws {
        let twice: Properties = [Property(.subscriptionIdentifier, integer: 1), Property(.subscriptionIdentifier, integer: 2)]
        var publish = try Packet.publish(Publish(topic: "t", properties: twice, payload: ByteBuffer())).encoded()
        guard case .publish(let decoded) = try PacketParser.parse(&publish) else { Issue.record("not a PUBLISH"); return }
        #expect(decoded.properties.subscriptionIdentifiers == [1, 2])
        let subscribe = Packet.subscribe(Subscribe(packetIdentifier: 1, properties: twice, subscriptions: [.init(topicFilter: "a", maximumQoS: .atMostOnce)]))
        #expect(throws: MQTT5Error.duplicateProperty(.subscriptionIdentifier)) { _ = try subscribe.encoded() }
    }

    /// `Properties.validate` finds repeats with one bit per identifier in a 64-bit word.
    @Test func everyPropertyIdentifier_fitsTheRepeatMask_andEachOneRepeatedIsFoundOrAllowed() throws {
        #expect(PropertyIdentifier.allCases.allSatisfy { $0.rawValue < 64 })
        for identifier in PropertyIdentifier.allCases where identifier.isAllowed(in: .publish) && !identifier.mayRepeat(in: .publish) {
            let value: PropertyValue = switch identifier.dataType {
            case .byte: .byte(0)
            case .twoByteInteger: .twoByteInteger(1)
            case .fourByteInteger: .fourByteInteger(1)
            case .variableByteInteger: .variableByteInteger(1)
            case .string: .string("s")
            case .binary: .binary(ByteBuffer(string: "b"))
            case .stringPair: .stringPair(name: "n", value: "v")
            }
            let twice: Properties = [Property(identifier, value), Property(identifier, value)]
            #expect(throws: MQTT5Error.duplicateProperty(identifier)) {
                _ = try Packet.publish(Publish(topic: "t", properties: twice, payload: ByteBuffer())).encoded()
            }
        }
    }

    @Test func userProperties_repeatAndKeepTheirOrder() throws {
        let properties: Properties = [.user("k", "1"), .user("k", "2"), .user("a", "")]
        var bytes = try Packet.disconnect(Disconnect(reasonCode: .serverShuttingDown, properties: properties)).encoded()
        guard case .disconnect(let decoded) = try PacketParser.parse(&bytes) else { Issue.record("not a DISCONNECT"); return }
        #expect(decoded.properties.userProperties.map { "\($0.name)=\($0.value)" } == ["k=1", "k=2", "a="])
    }

    @Test func everyDecodingError_mapsToAMalformedOrProtocolReasonCode() {
        for vector in MQTT5Vectors.shared.invalid {
            var buffer = ByteBuffer(bytes: vector.bytes)
            do {
                _ = try PacketParser.parse(&buffer, maxPacketSize: vector.maxPacketSize)
            } catch {
                #expect([.malformedPacket, .protocolError, .packetTooLarge].contains(error.reasonCode), "\(vector.name)")
                #expect(error.reasonCode.isAllowed(in: .disconnect))
            }
        }
    }

    @Test func topicFilters_followTheWildcardRules() {
        for valid in ["#", "+", "a/#", "a/+/b", "+/+", "/", "a//b", "$share/g/a/#", "$share/g/#", "sport/tennis/+"] {
            #expect(Topic.isValidFilter(valid), "\(valid)")
        }
        for invalid in ["", "a#", "a/#/b", "a+", "a/b+", "#/a", "++", "$share/g", "$share//a", "$share/+/a", "$share/g#/a", "$share/g/"] {
            #expect(!Topic.isValidFilter(invalid), "\(invalid)")
        }
        #expect(Topic.isValidName("a/b") && !Topic.isValidName("a/+") && !Topic.isValidName("#") && !Topic.isValidName(""))
    }

    /// A PUBLISH whose payload is left out (a gathering write) gives the same bytes as one encoded
    /// whole, at every Remaining Length size, and leaves small payloads and other packets in place.
    @Test func aPublishEncodedLeavingItsPayload_isTheSameBytesAsWhole() throws {
        for size in [0, 1, 100, 127 - 9, 127, 16_383, 16_384, 65_536, 2_097_151, 2_097_152] {
            let payload = ByteBuffer(repeating: UInt8(truncatingIfNeeded: size), count: size)
            let packet = Packet.publish(Publish(topic: "a/b", qos: .atLeastOnce, packetIdentifier: 7,
                                                properties: Properties([Property(.messageExpiryInterval, integer: 60)]),
                                                payload: payload))
            let whole = try packet.encoded()
            var head = ByteBuffer()
            let left = try packet.encode(into: &head, leavingPayloadFrom: 100)
            #expect(left == (size >= 100 ? payload : nil), "\(size)")
            if let left { head.writeImmutableBuffer(left) }
            #expect(head == whole, "\(size)")
            var parsed = whole
            #expect(try PacketParser.parse(&parsed) == packet, "\(size)")
        }
        let connack = try #require(Self.vectorPackets.first { $0.type == .connack })
        var buffer = ByteBuffer()
        #expect(try connack.encode(into: &buffer, leavingPayloadFrom: 0) == nil)
        #expect(buffer == (try connack.encoded()))
    }

    @Test func aPublishTooLargeForThePeer_leavesNothingWhenItsPayloadIsLeftOut() throws {
        let packet = Packet.publish(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: 1,
                                            payload: ByteBuffer(repeating: 1, count: 70_000)))
        var buffer = ByteBuffer(string: "before")
        #expect(throws: MQTT5Error.packetTooLarge(size: 70_010, limit: 65_536)) {
            _ = try packet.encode(into: &buffer, maxPacketSize: 65_536, leavingPayloadFrom: 1)
        }
        #expect(buffer == ByteBuffer(string: "before"))
    }
}
