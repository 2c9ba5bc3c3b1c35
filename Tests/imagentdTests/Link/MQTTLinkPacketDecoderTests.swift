import IMLink
import MQTT5
import NIOCore
import NIOEmbedded
import Testing

@testable import IMAgentCore

/// The MQTT link's decoder: large packets gathered into buffers of their own, oversized
/// PUBLISHes still read past.
@Suite struct MQTTLinkPacketDecoderTests {
    static func publish(id: UInt16, size: Int) throws -> ByteBuffer {
        try Packet.publish(Publish(topic: "imagent/host-1/echo/9/down", qos: .atLeastOnce, packetIdentifier: id,
                                   payload: ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(id)) })))
            .encoded()
    }

    /// Feeds `pieces` one read each; returns the packets and the oversized heads that came out.
    static func decode(_ pieces: [ByteBuffer], maxPacketSize: Int = 1 << 20) throws -> (packets: [Packet], oversized: [OversizedPublish]) {
        let events = OversizedHeads()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([ByteToMessageHandler(MQTTLinkPacketDecoder(maxPacketSize: maxPacketSize)), events])
        defer { _ = try? channel.finish() }
        var packets: [Packet] = []
        for piece in pieces {
            try channel.writeInbound(piece)
            while let packet = try channel.readInbound(as: Packet.self) { packets.append(packet) }
        }
        return (packets, events.heads)
    }

    final class OversizedHeads: ChannelInboundHandler {
        typealias InboundIn = Packet
        typealias InboundOut = Packet
        var heads: [OversizedPublish] = []

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let head = event as? OversizedPublish { heads.append(head) }
        }
    }

    @Test func largePublishThenPingresp_splitAtEveryByteBoundary_decodeTheSame() throws {
        let large = try Self.publish(id: 1, size: FrameAssembly.threshold + 50)
        var stream = large
        stream.writeImmutableBuffer(try Packet.pingresp.encoded())
        var expected = large
        let packet = try #require(try PacketParser.parse(&expected))
        for split in 1..<stream.readableBytes {
            let pieces = [stream.getSlice(at: 0, length: split)!, stream.getSlice(at: split, length: stream.readableBytes - split)!]
            let decoded = try Self.decode(pieces).packets
            #expect(decoded == [packet, .pingresp], "split at \(split)")
            if decoded != [packet, .pingresp] { return }
        }
    }

    @Test func eachReadOfALargePublish_isTakenWhole_notKeptInTheDecodersBuffer() throws {
        let bytes = try Self.publish(id: 2, size: 64 * 1024)
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(MQTTLinkPacketDecoder(maxPacketSize: 1 << 20)))
        defer { _ = try? channel.finish() }
        var offset = 0
        while offset < bytes.readableBytes {
            // A read is handed back at once: nothing else holds its storage.
            var read = channel.allocator.buffer(capacity: 5_000)
            read.writeImmutableBuffer(bytes.getSlice(at: offset, length: min(5_000, bytes.readableBytes - offset))!)
            offset += read.readableBytes
            try channel.writeInbound(read)
            #expect(read.modifyIfUniquelyOwned { _ in true } == true, "the read at \(offset) is not kept")
        }
        var whole = bytes
        #expect(try channel.readInbound(as: Packet.self) == PacketParser.parse(&whole))
    }

    @Test func oversizedPublish_isStillReadPast_andTheLargePacketsAroundItArrive() throws {
        let limit = 40 * 1024
        var stream = try Self.publish(id: 1, size: 30 * 1024)
        let oversized = try Self.publish(id: 2, size: 100 * 1024)
        stream.writeImmutableBuffer(oversized)
        stream.writeImmutableBuffer(try Self.publish(id: 3, size: 30 * 1024))
        stream.writeImmutableBuffer(try Packet.pingresp.encoded())
        for readSize in [1_000, 16 * 1024, 64 * 1024] {
            var pieces: [ByteBuffer] = []
            var offset = 0
            while offset < stream.readableBytes {
                let length = min(readSize, stream.readableBytes - offset)
                pieces.append(stream.getSlice(at: offset, length: length)!)
                offset += length
            }
            let (packets, heads) = try Self.decode(pieces, maxPacketSize: limit)
            #expect(packets.map(\.publishIdentifier) == [1, 3, nil], "reads of \(readSize): \(packets.count) packets")
            #expect(heads.map(\.publish.packetIdentifier) == [2] && heads.first?.size == oversized.readableBytes)
        }
    }

    @Test func badFixedHeaderOfALargePacket_isRefusedAtItsHeader() throws {
        var bytes = try Self.publish(id: 1, size: 30 * 1024)
        bytes.setInteger(UInt8(0x00), at: 0)  // packet type 0 is reserved
        #expect(throws: MQTT5Error.reservedPacketType) { _ = try Self.decode([bytes.getSlice(at: 0, length: 100)!]) }
    }
}

extension Packet {
    fileprivate var publishIdentifier: UInt16? {
        if case .publish(let publish) = self { return publish.packetIdentifier }
        return nil
    }
}
