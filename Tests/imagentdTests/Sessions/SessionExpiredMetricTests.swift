import AgentIPC
import AgentStore
import NIOCore
import NIOPosix
import Testing

@testable import IMAgentCore

/// METRICS' `messages_expired_total` counts what the store gave up, once each, whether the
/// message was given up in the window or after it (by the store's own expiry).
@Suite("messages_expired_total against the store", .serialized, .timeLimit(.minutes(1)))
struct SessionExpiredMetricTests {
    @Test func theMetricEqualsWhatTheStoreGaveUp_inTheWindowAndAfterIt() async throws {
        let scratch = try ScratchDirectory("expm")
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let persistence = try await loop.submit { NIOLoopBound(InMemorySessionPersistence(loop: loop), eventLoop: loop) }.get()
        // No server listens there: the messages stay queued until their TTL passes.
        let daemon = try await SessionTestDaemon.start(endpoint: "127.0.0.1:1", tokenFile: tokens,
                                                       socket: scratch.path + "/d.sock", persistence: persistence)
        let client = try await IPCClient.connect(socketPath: daemon.socket, clientName: "expired", timeout: .seconds(20))
        let session = try await client.open(service: "echo").session
        // 1 MiB each: the first is kept in the window (a quarter of the 8 MiB budget), the
        // others stay in the store only, so both ways of giving up are taken.
        let count = 5
        for _ in 0..<count {
            _ = try await client.send(session: session, payload: ByteBuffer(repeating: 1, count: 1 << 20), ttl: .milliseconds(300))
        }
        var expired: Set<UInt64> = []
        var events = client.events.makeAsyncIterator()
        while expired.count < count, let event = try await events.next() {
            if case .expired(let message) = event { expired.insert(message.seq) }
        }
        #expect(expired == Set(1...UInt64(count)))
        let givenUp = try await loop.submit { persistence.value.load() }.get().get()
            .sessions.first { $0.record.id == session }?.record.givenUp
        #expect(givenUp == UInt64(count))
        let metrics = try await client.metrics()
        #expect(metrics.contains("\"messages_expired_total\":\(count),"), "\(metrics)")
        await client.close()
        await daemon.stop()
    }

    @Test func aGiveUpTheStoreRefuses_isNotCounted() async throws {
        let scratch = try ScratchDirectory("expr")
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let persistence = try await loop.submit {
            let persistence = InMemorySessionPersistence(loop: loop)
            persistence.refusing = { if case .giveUpOutbound = $0 { .failed("the disk refuses it") } else { nil } }
            return NIOLoopBound(persistence, eventLoop: loop)
        }.get()
        let daemon = try await SessionTestDaemon.start(endpoint: "127.0.0.1:1", tokenFile: tokens,
                                                       socket: scratch.path + "/d.sock", persistence: persistence)
        let client = try await IPCClient.connect(socketPath: daemon.socket, clientName: "refused", timeout: .seconds(20))
        let session = try await client.open(service: "echo").session
        let seq = try await client.send(session: session, text: "soon stale", ttl: .milliseconds(100))
        // Its client hears it is given up; the store still holds it, so it is not counted.
        var events = client.events.makeAsyncIterator()
        var expired: UInt64?
        while expired == nil, let event = try await events.next() {
            if case .expired(let message) = event { expired = message.seq }
        }
        #expect(expired == seq)
        let stored = try await loop.submit { persistence.value.load() }.get().get().sessions.first { $0.record.id == session }
        #expect(stored?.record.givenUp == 0 && stored?.outboxCount == 1)
        let metrics = try await client.metrics()
        #expect(metrics.contains("\"messages_expired_total\":0,"), "\(metrics)")
        await client.close()
        await daemon.stop()
    }
}
