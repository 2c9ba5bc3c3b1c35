import IMLink
import Logging
import MQTT5
import NIOCore
import NIOEmbedded
import Testing

@testable import IMAgentCore

/// The channel side of the MQTT adapter: what reaches the engine from one read of the broker.
@Suite struct MQTTLinkHandlerTests {
    /// A handler whose adapter is connected (Receive Maximum 100) with sessions 9 and 10 open.
    static func channel() throws -> EmbeddedChannel {
        var adapter = try MQTTLinkAdapterTests.connected()
        _ = adapter.send(.open(Open(session: 9, service: "echo", resumeAfter: 0)))
        _ = adapter.send(.open(Open(session: 10, service: "echo", resumeAfter: 0)))
        return EmbeddedChannel(handler: MQTTLinkHandler(adapter: adapter, memory: MQTTLinkMemory(),
                                                        logger: Logger(label: "test")))
    }

    /// Writes DATA frames and returns the packet identifiers of the PUBLISHes they became, in order.
    static func send(_ frames: [DataFrame], on channel: EmbeddedChannel) throws -> [UInt16] {
        for frame in frames { try channel.writeOutbound(Frame.data(frame)) }
        var decoder = MQTT5PacketDecoder()
        var ids: [UInt16] = []
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
            while let packet = try decoder.decode(buffer: &bytes) {
                if case .publish(let publish) = packet { ids.append(publish.packetIdentifier) }
            }
        }
        return ids
    }

    static func frames(_ channel: EmbeddedChannel) throws -> [Frame] {
        var frames: [Frame] = []
        while let frame = try channel.readInbound(as: Frame.self) { frames.append(frame) }
        return frames
    }

    @Test func pubacksOfOneRead_reachTheEngineAsOneAckPerSession() throws {
        let channel = try Self.channel()
        let ids = try Self.send([DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a")),
                                 DataFrame(session: 10, seq: 1, body: ByteBuffer(string: "b")),
                                 DataFrame(session: 9, seq: 2, body: ByteBuffer(string: "c")),
                                 DataFrame(session: 9, seq: 3, body: ByteBuffer(string: "d"))], on: channel)
        #expect(ids.count == 4)
        for id in ids { channel.pipeline.syncOperations.fireChannelRead(NIOAny(Packet.puback(PublishAck(packetIdentifier: id)))) }
        #expect(try Self.frames(channel).isEmpty, "held until the read is done")
        channel.pipeline.syncOperations.fireChannelReadComplete()
        #expect(try Self.frames(channel) == [.ack(Ack(session: 9, seq: 3)), .ack(Ack(session: 10, seq: 1))])
        _ = try channel.finish()  // DISCONNECT goes out on close
    }

    @Test func heldAcks_goBeforeAnyOtherFrameOfTheRead() throws {
        let channel = try Self.channel()
        let ids = try Self.send([DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a"))], on: channel)
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(Packet.puback(PublishAck(packetIdentifier: ids[0]))))
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(MQTTLinkAdapterTests.down(session: 9, seq: 1, id: 500, text: "echo")))
        #expect(try Self.frames(channel) == [.ack(Ack(session: 9, seq: 1)),
                                             .data(DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "echo")))])
        channel.pipeline.syncOperations.fireChannelReadComplete()
        #expect(try Self.frames(channel).isEmpty)
        _ = try channel.finish()  // DISCONNECT goes out on close
    }

    @Test func heldAcks_reachTheEngine_whenTheConnectionEndsMidRead() throws {
        let channel = try Self.channel()
        let ids = try Self.send([DataFrame(session: 9, seq: 1, body: ByteBuffer(string: "a"))], on: channel)
        channel.pipeline.syncOperations.fireChannelRead(NIOAny(Packet.puback(PublishAck(packetIdentifier: ids[0]))))
        channel.pipeline.syncOperations.fireChannelInactive()
        #expect(try Self.frames(channel) == [.ack(Ack(session: 9, seq: 1))])
    }
}
