import MQTT5
import NIOCore
import NIOPosix

/// The backend of the "imagentd over MQTT" row written in the bench, so the row
/// is answered by the same process, on the same event loops, as the direct
/// MQTT client it is compared with (the Python example answers more slowly).
/// It keeps the backend contract of imagent-mqtt(7): every `up` message is
/// PUBACKed, duplicates are dropped by session and `imagent-seq`, and for the
/// `echo` service the payload goes back on the session's `down` topic with the
/// backend's own `imagent-seq` (1, 2, …); `sink` messages are only PUBACKed.
/// MQTT 5, clean start, the broker's Receive Maximum obeyed.
final class MQTTBenchBackend {
    private let channel: Channel

    /// Connected and subscribed to `filter` (e.g. `imagent/CLIENT/+/+/up`) at QoS 1.
    init(port: Int, clientID: String, filter: String) async throws {
        let subscribed = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        channel = try await ClientBootstrap(group: subscribed.futureResult.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(MQTT5PacketDecoder()),
                        MessageToByteHandler(MQTT5PacketEncoder()),
                        MQTTBenchBackendHandler(clientID: clientID, filter: filter, subscribed: subscribed),
                    ])
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        do {
            try await subscribed.futureResult.get()
        } catch {
            try? await channel.close()
            throw error
        }
    }

    func stop() async {
        try? await channel.close()
    }
}

private final class MQTTBenchBackendHandler: ChannelInboundHandler {
    typealias InboundIn = Packet
    typealias OutboundOut = Packet

    private let clientID: String
    private let filter: String
    private var subscribed: EventLoopPromise<Void>?
    /// The broker's Receive Maximum: our QoS 1 PUBLISHes it has not PUBACKed, at most.
    private var receiveMaximum = 65_535
    private var inFlight = 0
    /// Answers beyond the broker's Receive Maximum, oldest first.
    private var held: [Publish] = []
    private var heldHead = 0
    private var nextPacketID: UInt16 = 0
    /// Per session (its topic without `/up`): the last `imagent-seq` taken and the last one sent down.
    private var lastUp: [Substring: UInt64] = [:]
    private var lastDown: [Substring: UInt64] = [:]

    init(clientID: String, filter: String, subscribed: EventLoopPromise<Void>) {
        self.clientID = clientID
        self.filter = filter
        self.subscribed = subscribed
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(.connect(Connect(clientIdentifier: clientID, cleanStart: true, keepAlive: 0))),
                              promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        subscribed?.fail(BenchError("the broker closed the bench backend's connection"))
        subscribed = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        subscribed?.fail(error)
        subscribed = nil
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .connack(let connack):
            guard connack.reasonCode == .success else {
                errorCaught(context: context, error: BenchError("the broker refused the bench backend: \(connack.reasonCode)"))
                return
            }
            receiveMaximum = Int(connack.properties.integer(.receiveMaximum) ?? 65_535)
            context.write(wrapOutboundOut(.subscribe(Subscribe(packetIdentifier: 1, subscriptions: [
                .init(topicFilter: filter, maximumQoS: .atLeastOnce),
            ]))), promise: nil)
        case .suback(let suback):
            guard suback.reasonCodes.allSatisfy({ $0.rawValue <= 1 }) else {
                errorCaught(context: context, error: BenchError("the broker refused the subscription to \(filter)"))
                return
            }
            subscribed?.succeed()
            subscribed = nil
        case .publish(let publish):
            received(publish, context: context)
        case .puback:
            inFlight -= 1
            while inFlight < receiveMaximum, heldHead < held.count {
                send(held[heldHead], context: context)
                heldHead += 1
            }
            if heldHead == held.count {
                held.removeAll(keepingCapacity: true)
                heldHead = 0
            }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    private func received(_ publish: Publish, context: ChannelHandlerContext) {
        if publish.qos == .atLeastOnce {
            context.write(wrapOutboundOut(.puback(PublishAck(packetIdentifier: publish.packetIdentifier))), promise: nil)
        }
        // `{prefix}/{client}/{service}/{session}/up`
        guard publish.topic.hasSuffix("/up"),
              let seq = publish.properties.userProperties.first(where: { $0.name == "imagent-seq" }).flatMap({ UInt64($0.value) })
        else { return }
        let session = publish.topic.dropLast(3)
        guard seq > lastUp[session] ?? 0 else { return }  // a redelivery
        lastUp[session] = seq
        guard session.split(separator: "/").dropLast().last == "echo" else { return }
        let down = (lastDown[session] ?? 0) + 1
        lastDown[session] = down
        let answer = Publish(topic: String(session) + "/down", qos: .atLeastOnce, packetIdentifier: 0,
                             properties: [.user("imagent-seq", String(down))], payload: publish.payload)
        if inFlight < receiveMaximum && heldHead == held.count {
            send(answer, context: context)
        } else {
            held.append(answer)
        }
    }

    private func send(_ publish: Publish, context: ChannelHandlerContext) {
        var publish = publish
        // Ids 1…65535 in turn: PUBACKs come in order, so an id comes round long after it was freed.
        nextPacketID = nextPacketID == UInt16.max ? 1 : nextPacketID + 1
        publish.packetIdentifier = nextPacketID
        inFlight += 1
        context.write(wrapOutboundOut(.publish(publish)), promise: nil)
    }
}
