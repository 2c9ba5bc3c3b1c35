import IMLink
import Logging
import MQTT5
import NIOCore
import NIOEmbedded
import Testing

@testable import IMAgentCore

/// A broker that ignores the daemon's Maximum Packet Size (ejabberd, issue 30): the link's decoder
/// reads past the oversized PUBLISH without keeping it, the adapter refuses it in its PUBACK
/// (0x83) so that the broker drops it instead of sending it on every reconnect, and the link and
/// the other sessions go on.
@Suite struct MQTTOversizedPublishTests {
    /// The link's own pipeline half: the decoder as the engine sets it up, then the handler, with
    /// an adapter whose `[server] max_frame_bytes` is 1024 and sessions 9 and 10 open.
    static func channel() throws -> (EmbeddedChannel, limit: Int) {
        let settings = MQTTLinkAdapterTests.settings
        var adapter = MQTTLinkAdapter(settings: settings, topics: try settings.topics(), keepAlive: 30, maxFrame: 1024,
                                      port: 1883, lastAcked: [:])
        _ = adapter.send(.hello(Hello(features: [.flow], agentID: "host-1", maxFrame: 1024)))
        _ = adapter.send(.login(Login(token: ByteBuffer(string: "secret"), agentID: "host-1")))
        _ = adapter.received(.connack(ConnAck(sessionPresent: false, reasonCode: .success)))
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
        _ = adapter.send(.open(Open(session: 10, service: "echo", resumeAfter: 0)))
        let limit = Int(adapter.maximumPacketSize)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([
            ByteToMessageHandler(MQTT5PacketDecoder(maxPacketSize: limit, readsPastOversizedPublish: true)),
            MQTTLinkHandler(adapter: adapter, memory: MQTTLinkMemory(), logger: Logger(label: "test")),
        ])
        return (channel, limit)
    }

    static func bytes(_ packet: Packet) throws -> ByteBuffer {
        try packet.encoded()
    }

    static func written(_ channel: EmbeddedChannel) throws -> [Packet] {
        var packets: [Packet] = []
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
            while let packet = try PacketParser.parse(&bytes) { packets.append(packet) }
        }
        return packets
    }

    @Test func anOversizedPublish_isReadPast_refusedInItsPuback_andTheNextMessageArrives() throws {
        let (channel, limit) = try Self.channel()
        let oversized = Packet.publish(Publish(topic: "imagent/host-1/echo/9/down", qos: .atLeastOnce, packetIdentifier: 7,
                                               properties: [.user("imagent-seq", "1")],
                                               payload: ByteBuffer(repeating: 0x61, count: 3_000)))
        var wire = try Self.bytes(oversized)
        let size = wire.readableBytes
        #expect(size > limit)
        // The broker's bytes in pieces smaller than the limit, the next message right behind them.
        wire.writeImmutableBuffer(try Self.bytes(MQTTLinkAdapterTests.down(session: 10, seq: 1, id: 8, text: "other")))
        while wire.readableBytes > 0 {
            try channel.writeInbound(wire.readSlice(length: min(700, wire.readableBytes))!)
        }
        var frames: [Frame] = []
        while let frame = try channel.readInbound(as: Frame.self) { frames.append(frame) }
        #expect(frames == [.data(DataFrame(session: 10, seq: 1, body: ByteBuffer(string: "other")))],
                "only the other session's message reaches the sessions: \(frames)")
        let packets = try Self.written(channel)
        guard case .puback(let refusal) = packets.first else { Issue.record("no PUBACK: \(packets)"); return }
        #expect(refusal.packetIdentifier == 7 && refusal.reasonCode == .implementationSpecificError)
        #expect(refusal.properties.string(.reasonString)?.contains("\(size) bytes") == true, "\(refusal.properties)")
        #expect(!packets.contains { if case .disconnect = $0 { true } else { false } }, "the link stays up: \(packets)")

        // The other message is acknowledged as usual once stored.
        try channel.writeOutbound(Frame.ack(Ack(session: 10, seq: 1)))
        #expect(try Self.written(channel) == [.puback(PublishAck(packetIdentifier: 8))])
        _ = try channel.finish()
    }

    @Test func withoutReadingPast_theDecoderStillRefusesAnOversizedPacket() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(MQTT5PacketDecoder(maxPacketSize: 100)))
        let packet = try Self.bytes(.publish(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: 1, payload: ByteBuffer(repeating: 0, count: 200))))
        #expect(throws: MQTT5Error.packetTooLarge(size: packet.readableBytes, limit: 100)) { try channel.writeInbound(packet) }
    }

    @Test func anOversizedPacketThatIsNoPublish_stillEndsTheConnection() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(MQTT5PacketDecoder(maxPacketSize: 100, readsPastOversizedPublish: true)))
        let suback = Packet.suback(SubscriptionAck(packetIdentifier: 1, reasonCodes: Array(repeating: .grantedQoS1, count: 200)))
        #expect(throws: MQTT5Error.self) { try channel.writeInbound(try Self.bytes(suback)) }
    }

    @Test func theSkippedPayload_isNeverHeld() throws {
        // The decoder alone: after the head, every chunk of the payload is consumed as it comes.
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(MQTT5PacketDecoder(maxPacketSize: 256, readsPastOversizedPublish: true)))
        var wire = try Self.bytes(.publish(Publish(topic: "t", qos: .atLeastOnce, packetIdentifier: 3,
                                                    payload: ByteBuffer(repeating: 1, count: 1 << 20))))
        try channel.writeInbound(wire.readSlice(length: 256)!)
        while wire.readableBytes > 0 {
            try channel.writeInbound(wire.readSlice(length: min(64 * 1024, wire.readableBytes))!)
        }
        try channel.writeInbound(try Self.bytes(.pingresp))
        #expect(try channel.readInbound(as: Packet.self) == .pingresp, "the packet after it is read as usual")
        _ = try channel.finish()
    }
}
