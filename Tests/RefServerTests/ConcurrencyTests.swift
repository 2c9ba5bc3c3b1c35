import IMLink
import NIOCore
import NIOPosix
import RefServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// 1,000 agents and the server on an event loop of their own: on the shared ones their
/// traffic would hold up the I/O of every other test in the process for a minute.
@Suite("Many agents at once")
struct ConcurrencyTests {
    static let agents = 1000

    @Test("1,000 concurrent agents log in and each gets its message echoed", .timeLimit(.minutes(2)))
    func thousandAgents_loginAndEcho() async throws {
        try raiseDescriptorLimit(to: 8192)
        let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await agentsLogInAndEcho(on: loop)
        } catch {
            try? await loop.shutdownGracefully()
            throw error
        }
        try await loop.shutdownGracefully()
    }

    private func agentsLogInAndEcho(on loop: MultiThreadedEventLoopGroup) async throws {
        try await withRefServer(limit: .seconds(90), group: loop) { server, _ in
            let clients = try await withThrowingTaskGroup(of: TestClient.self) { group in
                for index in 0..<Self.agents {
                    group.addTask {
                        // Generous: the whole suite may be running beside this test on two cores.
                        let client = try await TestClient.connect(port: server.port, frameTimeout: .seconds(30), group: loop)
                        try await client.handshake(agentID: "load-\(index)")
                        try await client.open(1, service: "echo")
                        try await client.sendData(1, seq: 1, "hello from \(index)")
                        let frames = try await collect(client) { $0.dataSeqs.count == 1 && $0.acks == [1] }
                        #expect(frames.payloads == ["hello from \(index)"])
                        return client
                    }
                }
                var clients: [TestClient] = []
                for try await client in group { clients.append(client) }
                return clients
            }
            #expect(clients.count == Self.agents)
            let stats = await server.execute(.stats)
            #expect(stats.contains("\"connections\":\(Self.agents),"))
            #expect(stats.contains("\"messages_in\":\(Self.agents),"))
            for client in clients { await client.close() }
        }
    }

    /// 1,000 clients and 1,000 server sockets live in this one process.
    private func raiseDescriptorLimit(to wanted: rlim_t) throws {
        var limit = rlimit()
        try #require(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, "getrlimit: errno \(errno)")
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            try #require(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, "setrlimit: errno \(errno)")
        }
        // What the kernel holds now, not what was asked for.
        var granted = rlimit()
        try #require(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &granted) == 0, "getrlimit: errno \(errno)")
        try #require(granted.rlim_cur >= 2 * rlim_t(Self.agents) + 100, "too few file descriptors for this test: \(granted.rlim_cur)")
    }
}
