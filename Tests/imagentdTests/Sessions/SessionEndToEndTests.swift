import AgentIPC
import Foundation
import IMLink
import Logging
import NIOCore
import NIOPosix
import RefServer
import Testing

@testable import IMAgentCore

/// The daemon's real pieces in this process: LinkEngine, SessionService,
/// DaemonCore and IPCServer on one loop, as `DaemonRunner` wires them.
final class SessionTestDaemon: Sendable {
    let link: LinkEngine
    let core: NIOLoopBound<DaemonCore>
    let server: IPCServer
    let socket: String

    private init(link: LinkEngine, core: NIOLoopBound<DaemonCore>, server: IPCServer, socket: String) {
        self.link = link
        self.core = core
        self.server = server
        self.socket = socket
    }

    /// Starts on `persistence`; a second start on the same object is a restart of the session layer.
    static func start(endpoint: String, tokenFile: String, socket: String,
                      persistence: NIOLoopBound<InMemorySessionPersistence>) async throws -> SessionTestDaemon {
        let loop = persistence.eventLoop
        let logger = testLogger("sessions-e2e")
        var configuration = DaemonConfiguration()
        configuration.ipc.socket = socket
        configuration.ipc.adminGroup = ""
        let settled = configuration
        let link = try LinkEngine(configuration: testLinkConfiguration(endpoints: [endpoint], tokenFile: tokenFile),
                                  eventLoop: loop, logger: logger)
        let core = try await loop.flatSubmit {
            let sessions = SessionService(limits: SessionLimits(settled.limits), persistence: persistence.value,
                                          link: link, loop: loop, logger: logger)
            let core = DaemonCore(configuration: settled, link: link, sessions: sessions, loop: loop, logger: logger,
                                  logLevel: LiveLogLevel(.critical), reloadConfiguration: nil)
            let bound = NIOLoopBound(core, eventLoop: loop)
            return sessions.start().map { bound }
        }.get()
        link.onTransition { transition in core.value.linkChanged(transition) }
        let handler = try await loop.submit { NIOLoopBound<any IPCRequestHandler>(core.value, eventLoop: loop) }.get()
        let server = try await IPCServer.start(
            settings: .init(socketPath: socket, mode: 0o600, group: "", adminGroup: "", maxPayload: 1 << 20,
                            maxConnections: 256, maxConnectionsPerUID: 64, adoptedDescriptor: nil),
            eventLoop: loop, daemon: handler, logger: logger)
        link.start()
        return SessionTestDaemon(link: link, core: core, server: server, socket: socket)
    }

    func stop() async {
        await server.stop()
        try? await core.eventLoop.submit { self.core.value.closeAllClients() }.get()
        await link.shutdown()
    }
}

/// Collects MESSAGE events of one session, acknowledging as it goes.
actor Inbox {
    private(set) var payloads: [String] = []
    private(set) var seqs: [UInt64] = []

    func add(seq: UInt64, payload: String) {
        seqs.append(seq)
        payloads.append(payload)
    }

    var count: Int { payloads.count }
}

@Suite("Sessions end to end: daemon pieces against the reference server", .serialized, .timeLimit(.minutes(3)))
struct SessionEndToEndTests {
    @Test func echoesEveryMessageExactlyOnceInOrder_whileTheLinkIsDropped() async throws {
        let scratch = try ScratchDirectory("sess")
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        let refserver = try await startServer(tokenFile: tokens)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let persistence = try await loop.submit { NIOLoopBound(InMemorySessionPersistence(loop: loop), eventLoop: loop) }.get()
        let daemon = try await SessionTestDaemon.start(endpoint: refserver.address, tokenFile: tokens,
                                                       socket: scratch.path + "/d.sock", persistence: persistence)

        let client = try await IPCClient.connect(socketPath: daemon.socket, clientName: "e2e", timeout: .seconds(20))
        let session = try await client.open(service: "echo").session
        let total = 300
        let inbox = Inbox()
        let reader = Task {
            for try await event in client.events {
                guard case .message(let message) = event, message.session == session else { continue }
                await inbox.add(seq: message.seq, payload: String(buffer: message.payload))
                if message.seq % 25 == 0 { try await client.ack(session: session, seq: message.seq) }
                if await inbox.count >= total { return }
            }
        }

        var accepted: [UInt64] = []
        var drops = 0
        for n in 1...total {
            accepted.append(try await client.send(session: session, text: "m-\(n)"))
            if n % 100 == 50 {
                // The link dies with messages in flight both ways; resume must lose and repeat nothing.
                while try await !client.status().contains(#""state":"connected""#) { try await Task.sleep(for: .milliseconds(20)) }
                let answer = await refserver.execute(.drop)
                if answer.hasPrefix("ok dropped 1") { drops += 1 }
                print("  drop after \(n) sent: \(answer)")
            }
        }
        #expect(accepted == (1...UInt64(total)).map { $0 })
        #expect(drops == 3)

        let deadline = nowSeconds() + 60
        while await inbox.count < total, nowSeconds() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        reader.cancel()
        let payloads = await inbox.payloads
        let seqs = await inbox.seqs
        print("  echoes received: \(payloads.count) of \(total); duplicates: \(payloads.count - Set(payloads).count)")
        #expect(payloads == (1...total).map { "m-\($0)" })
        #expect(seqs == (1...UInt64(total)).map { $0 })

        let listing = try await client.sessions()
        #expect(listing.contains(#""session":\#(session)"#))
        #expect(listing.contains(#""received_seq":\#(total)"#))
        #expect(listing.contains(#""sent_seq":\#(total)"#))
        await client.close()
        await daemon.stop()
        try await refserver.stop()
    }

    @Test func secondAttachIsBusy_andARestartRedeliversWhatWasNotAcked() async throws {
        let scratch = try ScratchDirectory("sess")
        defer { scratch.cleanup() }
        let tokens = try scratch.write("tokens", "secret-1\n")
        let refserver = try await startServer(tokenFile: tokens)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let persistence = try await loop.submit { NIOLoopBound(InMemorySessionPersistence(loop: loop), eventLoop: loop) }.get()
        var daemon = try await SessionTestDaemon.start(endpoint: refserver.address, tokenFile: tokens,
                                                       socket: scratch.path + "/d.sock", persistence: persistence)

        let first = try await IPCClient.connect(socketPath: daemon.socket, clientName: "first", timeout: .seconds(20))
        let session = try await first.open(service: "echo").session
        for n in 1...10 { try await first.send(session: session, text: "r-\(n)") }
        var seen: [UInt64] = []
        for try await event in first.events {
            guard case .message(let message) = event else { continue }
            seen.append(message.seq)
            if message.seq == 10 { break }
        }
        #expect(seen == Array(1...10))
        try await first.ack(session: session, seq: 4)
        // A second attach while the first client holds it is refused.
        let second = try await IPCClient.connect(socketPath: daemon.socket, clientName: "second", timeout: .seconds(20))
        await #expect(throws: IPCClientError.self) { try await second.attach(session: session) }
        _ = try await first.ping()  // the ACK (request 0) is processed before this reply
        await first.close()

        // Restart the daemon's pieces on the same store: the session and its inbox survive.
        await second.close()
        await daemon.stop()
        daemon = try await SessionTestDaemon.start(endpoint: refserver.address, tokenFile: tokens,
                                                   socket: scratch.path + "/d.sock", persistence: persistence)
        let third = try await IPCClient.connect(socketPath: daemon.socket, clientName: "third", timeout: .seconds(20))
        let opened = try await third.attach(session: session)
        #expect(opened.deliveredSeq == 4)
        #expect(opened.sentSeq == 10)
        var redelivered: [UInt64] = []
        for try await event in third.events {
            guard case .message(let message) = event else { continue }
            redelivered.append(message.seq)
            if message.seq == 10 { break }
        }
        #expect(redelivered == Array(5...10))
        await third.close()
        await daemon.stop()
        try await refserver.stop()
    }
}
