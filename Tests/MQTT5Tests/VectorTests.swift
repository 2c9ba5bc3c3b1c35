import MQTT5
import NIOCore
import Testing

/// Every vector of `vectors/mqtt5.json`: valid ones decode to the stated
/// fields and re-encode to the same bytes (or the stated shorter form);
/// invalid ones are refused with the stated error.
@Suite struct VectorTests {
    @Test(arguments: MQTT5Vectors.shared.valid.map(\.name))
    func validVector_decodesToItsFields_andReencodesByteForByte(name: String) throws {
        let vector = MQTT5Vectors.shared.valid.first { $0.name == name }!
        var buffer = ByteBuffer(bytes: vector.bytes)
        let packet = try #require(try PacketParser.parse(&buffer, maxPacketSize: vector.maxPacketSize))
        #expect(buffer.readableBytes == 0)
        #expect(vectorFields(of: packet) == vector.decoded)
        #expect(Array(try packet.encoded().readableBytesView) == vector.canonical)
        // The shorter form a non-canonical vector re-encodes to decodes to the same packet.
        var canonical = ByteBuffer(bytes: vector.canonical)
        #expect(try PacketParser.parse(&canonical) == packet)
    }

    @Test(arguments: MQTT5Vectors.shared.invalid.map(\.name))
    func invalidVector_isRefusedWithItsError(name: String) throws {
        let vector = MQTT5Vectors.shared.invalid.first { $0.name == name }!
        var buffer = ByteBuffer(bytes: vector.bytes)
        do {
            let packet = try PacketParser.parse(&buffer, maxPacketSize: vector.maxPacketSize)
            Issue.record("\(name) was not refused: \(String(describing: packet))")
        } catch {
            #expect(vectorName(of: error) == vector.error, "\(name) gave: \(error)")
            #expect(!error.description.isEmpty)
        }
    }

    @Test func theVectorsCoverEveryPacketType() throws {
        var seen = Set<PacketType>()
        for vector in MQTT5Vectors.shared.valid {
            var buffer = ByteBuffer(bytes: vector.bytes)
            seen.insert(try #require(try PacketParser.parse(&buffer, maxPacketSize: vector.maxPacketSize)).type)
        }
        #expect(seen.count == 15)
    }

    @Test func theVectorsCoverEveryProperty() throws {
        var seen = Set<PropertyIdentifier>()
        for vector in MQTT5Vectors.shared.valid {
            var buffer = ByteBuffer(bytes: vector.bytes)
            let packet = try #require(try PacketParser.parse(&buffer, maxPacketSize: vector.maxPacketSize))
            seen.formUnion(allProperties(of: packet).map(\.identifier))
        }
        #expect(seen == Set(PropertyIdentifier.allCases))
    }

    @Test func anOversizedPacket_isRefusedFromItsFixedHeaderAlone() {
        // Five bytes announce a 268 MB packet: refused without waiting for its body.
        var buffer = ByteBuffer(bytes: [0x30, 0xFF, 0xFF, 0xFF, 0x7F])
        #expect(throws: MQTT5Error.packetTooLarge(size: Packet.largestSize, limit: 1024)) {
            _ = try PacketParser.parse(&buffer, maxPacketSize: 1024)
        }
    }
}

func allProperties(of packet: Packet) -> [Property] {
    switch packet {
    case .connect(let connect): connect.properties.entries + (connect.will?.properties.entries ?? [])
    case .connack(let connack): connack.properties.entries
    case .publish(let publish): publish.properties.entries
    case .puback(let ack), .pubrec(let ack), .pubrel(let ack), .pubcomp(let ack): ack.properties.entries
    case .subscribe(let subscribe): subscribe.properties.entries
    case .suback(let ack), .unsuback(let ack): ack.properties.entries
    case .unsubscribe(let unsubscribe): unsubscribe.properties.entries
    case .pingreq, .pingresp: []
    case .disconnect(let disconnect), .auth(let disconnect): disconnect.properties.entries
    }
}
