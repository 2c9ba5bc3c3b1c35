import AgentIPC
import Foundation
import NIOCore
import Testing

private let setprivPath = "/usr/bin/setpriv"

/// Sessions belong to their creator's uid, end to end: the real daemon reads
/// a client's uid from the kernel (SO_PEERCRED), and a client of another uid
/// — the `imagent` binary started by setpriv(1) as `nobody` — can neither
/// attach to, send on nor close a session it does not own, nor run the admin
/// requests; each gets PERMISSION_DENIED, and the owner notices nothing.
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: setprivPath),
                "needs root and setpriv(1) to run a client as another uid"))
struct OtherUserTests {
    static let setpriv = URL(fileURLWithPath: setprivPath)
    static let nobody: UInt32 = 65534

    /// `imagent --socket … ARGUMENTS…` as uid and gid 65534 with no supplementary groups.
    private func asNobody(_ daemon: RealDaemon, _ arguments: [String], limit: Duration = .seconds(20)) async throws -> ImagentProcess.Result {
        try await ImagentProcess.run(["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups",
                                      ImagentProcess.binary.path, "--socket", daemon.socketPath] + arguments,
                                     limit: limit, executable: Self.setpriv)
    }

    @Test func watchAsAnotherUid_showsItsOwnSessionEvents_notTheOwners() async throws {
        try await withRealDaemon(socketMode: "0666") { daemon in
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")
            let owner = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "owner")
            // `imagent watch` as nobody for a few seconds (SIGTERM ends it; every line is flushed).
            async let watched = asNobody(daemon, ["watch", "--json"], limit: .seconds(10))
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline, try await connectedClients(owner) < 2 {
                try await Task.sleep(for: .milliseconds(50))
            }
            try await Task.sleep(for: .milliseconds(200))  // WATCH itself follows HELLO
            let rootSession = try await owner.open(service: "sink").session
            try await owner.close(session: rootSession)
            let own = try await asNobody(daemon, ["open", "sink", "--json"])
            let ownID = try #require(((try? JSONSerialization.jsonObject(with: Data(own.stdout.utf8))) as? [String: Any])?["session"] as? NSNumber).uint64Value
            let output = try await watched
            let events = output.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let sessionEvents = events.filter { $0["event"] as? String == "session" }
            print("watch as uid 65534: \(events.count) events, session events \(sessionEvents.map { "\($0["change"] ?? "?") of \($0["owner"] ?? "?")" })")
            #expect(sessionEvents.allSatisfy { ($0["owner"] as? Int) == Int(Self.nobody) }, "\(output.stdout)")
            #expect(sessionEvents.contains { ($0["session"] as? NSNumber)?.uint64Value == ownID && $0["change"] as? String == "opened" },
                    "\(output.stdout) \(output.stderr)")
            #expect(!output.stdout.contains("\(rootSession)"))
            await owner.close()
        }
    }

    private func connectedClients(_ client: IPCClient) async throws -> Int {
        let status = try JSONSerialization.jsonObject(with: Data(try await client.status().utf8)) as? [String: Any]
        return (status?["daemon"] as? [String: Any])?["clients"] as? Int ?? 0
    }

    @Test func anotherUid_cannotAttachSendOrClose_norRunAdminRequests_andTheOwnerGoesOn() async throws {
        try await withRealDaemon(socketMode: "0666") { daemon in
            // The test's folder is 0700: let other users through to the socket, not read the folder.
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")

            let owner = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "owner")
            let session = try await owner.open(service: "echo").session
            var events = owner.events.makeAsyncIterator()
            var problems: [String] = []
            try await owner.send(session: session, text: "before")
            #expect(try await nextEcho(&events, owner, session, &problems) == "before")

            // The other uid reaches the socket at all: otherwise every refusal below would prove nothing.
            let ping = try await asNobody(daemon, ["ping"])
            #expect(ping.status == 0, "nobody cannot reach the daemon: \(ping.stderr)")

            // Attach, send, close: the owner's session is not nobody's.
            for arguments in [["open", "--session", "\(session)"], ["send", "\(session)", "intruder"], ["close", "\(session)"]] {
                let result = try await asNobody(daemon, arguments)
                print("as uid 65534: imagent \(arguments.joined(separator: " ")) -> exit \(result.status): \(result.stderr.prefix(160))")
                #expect(result.status == 3, "\(arguments): \(result.stdout) \(result.stderr)")
                #expect(result.stderr.contains("PERMISSION_DENIED"), "\(arguments): \(result.stderr)")
            }
            // Admin requests.
            for request in ["connect", "disconnect", "reconnect", "reload"] {
                let result = try await asNobody(daemon, [request])
                print("as uid 65534: imagent \(request) -> exit \(result.status): \(result.stderr.prefix(160))")
                #expect(result.status == 3, "\(request): \(result.stdout) \(result.stderr)")
                #expect(result.stderr.contains("PERMISSION_DENIED"), "\(request): \(result.stderr)")
            }
            // A session nobody does not know stays unknown; the owner's is not even listed to nobody.
            let unknown = try await asNobody(daemon, ["open", "--session", "12345"])
            #expect(unknown.status == 4 && unknown.stderr.contains("UNKNOWN_SESSION"), "\(unknown.stderr)")
            let listed = try await asNobody(daemon, ["sessions", "--json"])
            #expect(listed.status == 0)
            #expect(!listed.stdout.contains("\(session)"), "nobody sees the owner's session: \(listed.stdout)")

            // nobody's own session is nobody's: the daemon took the uid from the kernel.
            let own = try await asNobody(daemon, ["open", "echo", "--json"])
            #expect(own.status == 0, "\(own.stderr)")
            let ownID = try #require(((try? JSONSerialization.jsonObject(with: Data(own.stdout.utf8))) as? [String: Any])?["session"] as? NSNumber).uint64Value
            #expect(try await asNobody(daemon, ["send", "\(ownID)", "mine"]).status == 0)
            let all = try await owner.sessions()
            #expect(all.contains("\"session\":\(ownID)") && all.contains("\"owner\":65534"), "\(all)")

            // The owner noticed nothing: same link (no reconnect), session attached, echo still flows.
            try await owner.send(session: session, text: "after")
            #expect(try await nextEcho(&events, owner, session, &problems) == "after")
            #expect(problems.isEmpty, "the owner saw \(problems)")
            let status = try await owner.status()
            #expect(status.contains("\"state\":\"connected\"") && status.contains("\"reconnects\":0"), "\(status)")
            let mine = try await owner.sessions()
            #expect(mine.contains("\"session\":\(session)"), "the owner's session is gone: \(mine)")
            await owner.close()
        }
    }

    /// The next echoed MESSAGE of `session`, acknowledged; anything else but ACKED and state changes is a problem.
    private func nextEcho(_ events: inout IPCEvents.AsyncIterator, _ client: IPCClient, _ session: UInt64,
                          _ problems: inout [String]) async throws -> String? {
        while let event = try await events.next() {
            switch event {
            case .message(let message):
                try await client.ack(session: session, seq: message.seq)
                return String(buffer: message.payload)
            case .acked, .linkState:
                continue
            case .sessionState(let change):
                if change.state != .open { problems.append("\(change)") }
            case .expired, .error, .watch:
                problems.append("\(event)")
            }
        }
        return nil
    }
}
