import Glibc
import NIOCore
import NIOPosix
import Testing

@testable import IMAgentCore

/// Which failed TCP connects count as a silent path (probe) and which as a
/// refusal (back off), with NIO's real errors from real sockets.
@Suite struct ConnectFailureTests {
    @Test func aConnectThatTimesOut_isSilent_andARefusedOne_isNot() async throws {
        let group = MultiThreadedEventLoopGroup.singleton

        // A full backlog: the SYN is never answered.
        let silent = try SilentPort()
        defer { silent.close() }
        let timedOut = await connectError(group, port: silent.port)
        #expect(timedOut.map(isSilent) == true, "\(String(describing: timedOut))")

        // Nobody listens: RST, connection refused.
        let closed = try SilentPort()
        let port = closed.port
        closed.close()
        let refused = await connectError(group, port: port)
        #expect(refused.map(isSilent) == false, "\(String(describing: refused))")

        #expect(isSilent(IOError(errnoCode: EHOSTUNREACH, reason: "connect")), "a router's unreachable")
        #expect(isSilent(IOError(errnoCode: ENETUNREACH, reason: "connect")))
        #expect(!isSilent(IOError(errnoCode: ECONNRESET, reason: "connect")))
    }

    private func connectError(_ group: EventLoopGroup, port: Int) async -> (any Error)? {
        do {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(.milliseconds(300))
                .connect(host: "127.0.0.1", port: port)
                .get()
            try? await channel.close()
            return nil
        } catch {
            return error
        }
    }
}
