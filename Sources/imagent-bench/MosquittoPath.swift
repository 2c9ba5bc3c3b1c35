import NIOCore
import NIOPosix
import Synchronization

/// The inbound packets of one MQTT connection, read by one task at a time.
final class MQTTPacketReader: @unchecked Sendable {
    private var packets: NIOAsyncChannelInboundStream<MQTTPacket>.AsyncIterator

    init(_ inbound: NIOAsyncChannelInboundStream<MQTTPacket>) { packets = inbound.makeAsyncIterator() }

    func next() async throws -> MQTTPacket {
        guard let packet = try await packets.next() else { throw BenchError("the broker closed the connection") }
        return packet
    }
}

/// Numbers the runs: their MQTT client ids must differ, or the broker
/// disconnects the older client. Runs start concurrently, hence atomic.
private let mosquittoRuns = Atomic<Int>(0)

/// The same workload through two bridged mosquitto brokers, the way people
/// put a broker beside each program: the sending client publishes QoS 1 to
/// the local broker, whose bridge forwards `bench/#` to the upstream broker;
/// a client there (the server's part, like the reference server's services)
/// receives every message and, for `echo`, publishes it back on `resp/#`,
/// which the bridge carries back to the local broker and the sending client.
/// A `sink` run is done when the upstream client has received the last
/// message; an `echo` run when the sending client has.
/// `topicRoot`: put before every topic; "direct/" keeps a client talking to the upstream broker
/// alone out of the bridge's `bench/#` and `resp/#`.
func runThroughMosquitto(localPort: Int, upstreamPort: Int, completion: Completion, size: Int, count: Int, window: Int,
                         topicRoot: String = "") async throws -> RunResult {
    let run = mosquittoRuns.add(1, ordering: .relaxed).newValue
    let far = try await connectMQTT(port: upstreamPort)
    let near = try await connectMQTT(port: localPort)
    return try await far.executeThenClose { farInbound, farOutbound in
        try await near.executeThenClose { nearInbound, nearOutbound in
            let farReader = MQTTPacketReader(farInbound)
            let nearReader = MQTTPacketReader(nearInbound)
            try await handshake(farReader, farOutbound, clientID: "imagent-bench-far-\(run)", subscribe: "\(topicRoot)bench/\(run)/#")
            try await handshake(nearReader, nearOutbound, clientID: "imagent-bench-near-\(run)",
                                subscribe: completion == .echo ? "\(topicRoot)resp/\(run)/#" : nil)
            let payload = ByteBuffer(repeating: 0x5A, count: size)
            return try await withThrowingTaskGroup(of: Void.self) { group in
                switch completion {
                case .echo:
                    group.addTask {
                        try await echo(count: count, reader: farReader, outbound: farOutbound, topic: "\(topicRoot)resp/\(run)/m")
                    }
                case .sink:
                    group.addTask { try await drainAcks(count: count, reader: nearReader) }
                }
                let result = try await drive(count: count, window: window, send: { index in
                    try await nearOutbound.write(.publish(topic: "\(topicRoot)bench/\(run)/m", packetID: packetID(index), payload: payload))
                }, receive: { progress in
                    let (reader, outbound) = completion == .echo ? (nearReader, nearOutbound) : (farReader, farOutbound)
                    var received = 0
                    while received < count {
                        switch try await reader.next() {
                        case .publish(_, let id, _):
                            try await outbound.write(.puback(packetID: id))
                            received += 1
                            progress.yield(received)
                        case .puback, .other, .connack, .suback:
                            break
                        case .connect, .subscribe:
                            throw BenchError("the broker sent a client's packet")
                        }
                    }
                    return .now
                })
                try await group.waitForAll()
                return result
            }
        }
    }
}

private func connectMQTT(port: Int) async throws -> NIOAsyncChannel<MQTTPacket, MQTTPacket> {
    try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .channelOption(.socketOption(.tcp_nodelay), value: 1)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandlers([
                    ByteToMessageHandler(MQTTPacketDecoder(maxBody: 1 << 20)),
                    MessageToByteHandler(MQTTPacketEncoder()),
                ])
                return try NIOAsyncChannel<MQTTPacket, MQTTPacket>(wrappingChannelSynchronously: channel)
            }
        }
}

/// CONNECT (clean session), then SUBSCRIBE at QoS 1 if asked.
private func handshake(_ reader: MQTTPacketReader, _ outbound: NIOAsyncChannelOutboundWriter<MQTTPacket>,
                       clientID: String, subscribe filter: String?) async throws {
    try await outbound.write(.connect(clientID: clientID))
    guard case .connack(0) = try await reader.next() else { throw BenchError("mosquitto refused CONNECT") }
    guard let filter else { return }
    try await outbound.write(.subscribe(packetID: 1, filter: filter))
    guard case .suback(1, 1) = try await reader.next() else { throw BenchError("mosquitto refused SUBSCRIBE \(filter) at QoS 1") }
}

/// The upstream side of an echo run: acknowledge each message and publish it back.
private func echo(count: Int, reader: MQTTPacketReader, outbound: NIOAsyncChannelOutboundWriter<MQTTPacket>,
                  topic: String) async throws {
    var echoed = 0
    while echoed < count {
        if case .publish(_, let id, let payload) = try await reader.next() {
            try await outbound.write(.puback(packetID: id))
            try await outbound.write(.publish(topic: topic, packetID: packetID(echoed), payload: payload))
            echoed += 1
        }
    }
}

/// The sending client's PUBACKs in a sink run: read, so they never back up.
private func drainAcks(count: Int, reader: MQTTPacketReader) async throws {
    var acked = 0
    while acked < count {
        if case .puback = try await reader.next() { acked += 1 }
    }
}

/// Packet ids run 1…65535 and wrap; far fewer than that are ever in flight.
private func packetID(_ index: Int) -> UInt16 { UInt16(index % 65_535 + 1) }
