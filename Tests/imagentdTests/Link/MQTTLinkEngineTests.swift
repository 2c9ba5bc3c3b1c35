import MQTT5
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import IMAgentCore

/// A broker that only does what these tests need, on the real MQTT 5 codec:
/// CONNACK for every CONNECT, SUBACK, PINGRESP; with `redirect`, a DISCONNECT
/// Use another server (0x9C) with that Server Reference right after CONNACK.
final class ScriptedBroker: Sendable {
    let channel: Channel
    private let connects: NIOLockedValueBox<Int>
    var address: String { "127.0.0.1:\(channel.localAddress!.port!)" }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = Packet
        typealias OutboundOut = Packet
        let redirect: String?
        let connects: NIOLockedValueBox<Int>

        init(redirect: String?, connects: NIOLockedValueBox<Int>) {
            self.redirect = redirect
            self.connects = connects
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .connect:
                connects.withLockedValue { $0 += 1 }
                context.write(wrapOutboundOut(.connack(ConnAck(sessionPresent: false, reasonCode: .success))), promise: nil)
                if let redirect {
                    let disconnect = Disconnect(reasonCode: .useAnotherServer, properties: [Property(.serverReference, .string(redirect))])
                    let channel = context.channel
                    context.writeAndFlush(wrapOutboundOut(.disconnect(disconnect))).whenComplete { _ in channel.close(promise: nil) }
                    return
                }
                context.flush()
            case .subscribe(let subscribe):
                let granted = SubscriptionAck(packetIdentifier: subscribe.packetIdentifier, reasonCodes: subscribe.subscriptions.map { _ in .grantedQoS1 })
                context.writeAndFlush(wrapOutboundOut(.suback(granted)), promise: nil)
            case .pingreq:
                context.writeAndFlush(wrapOutboundOut(.pingresp), promise: nil)
            default:
                break
            }
        }
    }

    private init(channel: Channel, connects: NIOLockedValueBox<Int>) {
        self.channel = channel
        self.connects = connects
    }

    static func start(redirect: String? = nil) async throws -> ScriptedBroker {
        let connects = NIOLockedValueBox(0)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        ByteToMessageHandler(MQTT5PacketDecoder()),
                        MessageToByteHandler(MQTT5PacketEncoder()),
                        Handler(redirect: redirect, connects: connects))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ScriptedBroker(channel: channel, connects: connects)
    }

    /// CONNECTs received so far.
    var connectCount: Int { connects.withLockedValue { $0 } }

    func stop() async {
        try? await channel.close()
    }
}

/// The link engine with `protocol = "mqtt"` against a scripted broker: DISCONNECT
/// with a Server Reference is a GOAWAY REDIRECT, within the same trust rules.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct MQTTLinkEngineTests {
    static func configuration(_ endpoint: String) -> LinkConfiguration {
        var configuration = testLinkConfiguration(endpoints: [endpoint], tokenFile: "/nonexistent")
        configuration.token = .absent
        configuration.mqtt = MQTTLinkSettings(clientID: "engine-test-\(getpid())")
        return configuration
    }

    @Test func disconnectWithServerReference_isFollowed_whenRedirectAllowTrustsIt() async throws {
        let target = try await ScriptedBroker.start()
        let first = try await ScriptedBroker.start(redirect: target.address)
        var configuration = Self.configuration(first.address)
        configuration.redirectAllow = [target.address]
        let (engine, recorder) = try startEngine(configuration)
        let moved = try await recorder.waitFor(timeout: 15, "connected to the Server Reference") {
            $0.connectedEndpoint?.description == target.address
        }
        #expect(moved.transition.connectedEndpoint?.description == target.address)
        #expect(recorder.all.contains { $0.transition.reason.contains("GOAWAY") || $0.transition.reason.contains("SHUTDOWN") },
                "\(recorder.all.map(\.transition.reason))")
        await engine.shutdown()
        await first.stop()
        await target.stop()
    }

    @Test func disconnectWithServerReference_isIgnored_whenNotTrusted() async throws {
        let target = try await ScriptedBroker.start()
        let first = try await ScriptedBroker.start(redirect: target.address)
        let (engine, recorder) = try startEngine(Self.configuration(first.address))
        try await recorder.waitFor(timeout: 15, "the redirect refused") { $0.reason.contains("ignored") }
        // Back to the configured endpoint, never to the reference.
        try await recorder.waitFor(timeout: 15, "a second connection to the configured broker") { _ in first.connectCount >= 2 }
        #expect(target.connectCount == 0)
        #expect(!recorder.all.contains { $0.transition.connectedEndpoint?.description == target.address })
        await engine.shutdown()
        await first.stop()
        await target.stop()
    }
}
