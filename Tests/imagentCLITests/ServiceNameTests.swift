import AgentIPC
import Foundation
import IMAgentTestKit
import NIOConcurrencyHelpers
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One name of each class a broker may refuse in a topic (imagent-ipc(7) SERVICE): controls, DEL,
/// C1, noncharacters at both ends of their ranges and planes, and the topic's own separators.
/// Built from values: Swift's lexer takes no noncharacter in a literal.
let refusableServiceNames: [String] = [
    "\u{1}", "tab\tname", "\u{1B}]0;pwned\u{7}\u{1B}[31m", "\u{1F}", "del\u{7F}", "c1\u{80}", "csi\u{9B}2J", "\u{9F}", "a/b", "+", "x#",
] + [0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF].map { "non" + String(Character(Unicode.Scalar(UInt32($0))!)) }

/// SERVICE names a broker may refuse, through a real daemon: refused at OPEN whatever the
/// upstream (BAD_REQUEST, the connection goes on), and a session stored under such a name before
/// the rule existed is failed at start-up with its reason in SESSIONS, never sent upstream.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ServiceNameTests {
    @Test func openOfARefusableName_isBadRequest_andTheConnectionGoesOn() async throws {
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "names")
            for name in refusableServiceNames {
                do {
                    _ = try await client.open(service: name)
                    Issue.record("\(name.debugDescription) was opened")
                } catch IPCClientError.refused(_, let code, let message) {
                    #expect(code == .badRequest, "\(name.debugDescription): \(code)")
                    #expect(message?.hasPrefix("SERVICE \"") == true, "\(message ?? "")")
                }
            }
            // Still the same connection: a valid name opens and echoes.
            let session = try await client.open(service: "echo").session
            try await client.send(session: session, text: "still here")
            var events = client.events.makeAsyncIterator()
            #expect(try await nextEcho(&events, client, session) == "still here")
            await client.close()

            let cli = try await daemon.imagent(["open", "\u{1B}[31mred"])
            #expect(cli.status == 4 && cli.stderr.contains("BAD_REQUEST") && cli.stderr.contains("U+001B is a control character"),
                    "\(cli.status) \(cli.stderr)")
            #expect(!cli.stderr.contains("\u{1B}"), "the refusal shows the name escaped: \(cli.stderr.debugDescription)")
            let sessions = try await daemon.imagent(["sessions", "--json"])
            #expect(sessions.stdout.components(separatedBy: "\"session\":").count == 2, "only the echo session: \(sessions.stdout)")
        }
    }

    /// A store from before the rule (the name written in with SQLite): the session is failed, its
    /// reason is in SESSIONS and the log, `imagent sessions` shows the name escaped, it can be
    /// closed, and it never reaches the server.
    @Test func aStoredSessionWithARefusableName_isFailedAtStartUp_andShownEscaped() async throws {
        try await withRealDaemon { first in
            _ = try await first.waitForLink("connected")
            let legacy = try await openedSession(try await first.imagent(["open", "legacy-1", "--json"]))
            let echo = try await openedSession(try await first.imagent(["open", "echo", "--json"]))
            first.signal(SIGTERM)
            #expect(await first.waitForExit(within: .seconds(10)) != nil, "imagentd did not stop on SIGTERM")
            try renameStoredService(in: first.directory, from: "legacy-1", to: "\u{1B}]0;pwned\u{7}\u{1B}[31m")

            // withRealDaemon stops the first process and removes the folder; this one is stopped here.
            let daemon = try await first.restarted()
            do {
                _ = try await daemon.waitForLink("connected")
                #expect(daemon.log.contains("session \(legacy) of uid \(getuid()) failed at start-up"), "\(daemon.log.suffix(2000))")
                #expect(!daemon.log.contains("\u{1B}"), "the log shows the name escaped")

                let json = try await daemon.imagent(["sessions", "--json"])
                let rows = try #require((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["sessions"]
                    as? [[String: Any]], "\(json.stdout)")
                let row = try #require(rows.first { ($0["session"] as? NSNumber)?.uint64Value == legacy }, "\(rows)")
                #expect(row["state"] as? String == "failed")
                #expect((row["reason"] as? String)?.contains("U+001B is a control character") == true, "\(row)")
                // The other session goes on (pending or open, by when its OPEN_OK comes).
                let other = rows.first { ($0["session"] as? NSNumber)?.uint64Value == echo }?["state"] as? String
                #expect(other == "pending" || other == "open", "\(rows)")

                let human = try await daemon.imagent(["sessions"])
                #expect(human.status == 0)
                #expect(!human.stdout.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(human.stdout.debugDescription)")
                #expect(human.stdout.contains("\\u{1B}]0;pwned\\u{7}\\u{1B}[31m"), "\(human.stdout)")

                let sent = try await daemon.imagent(["send", "\(legacy)", "x"])
                #expect(sent.status == 4 && sent.stderr.contains("UPSTREAM_REJECTED") && sent.stderr.contains("never sent upstream")
                        && !sent.stderr.contains("the server refused"), "\(sent.stderr)")
                let closed = try await daemon.imagent(["close", "\(legacy)"])
                #expect(closed.status == 0, "\(closed.stderr)")
            } catch {
                print("restarted daemon's log ends with:\n\(daemon.log.suffix(3000))")
                await daemon.handle.stop()
                throw error
            }
            await daemon.handle.stop()
        }
    }
}

/// Over MQTT, with Debian's mosquitto (which drops the link on such a topic): a hostile uid
/// (65534) with sessions stored under refusable names before the upgrade, each with a byte
/// queued, that goes on trying every such name, costs the owner nothing: every echo within
/// 5 s, at most 3 reconnects.
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
                "needs root and setpriv(1) to run a client as another uid"))
struct HostileServiceNameMQTTTests {
    @Test func aHostileUid_cannotStopTheOwnersTraffic() async throws {
        try await withMQTTDaemon(socketMode: "0666") { daemon, broker, _ in
            // The test's folder is 0700: let other users through to the socket, not read the folder.
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")

            // Before the upgrade: nobody's sessions, each with one byte still queued (the link is down).
            let names = refusableServiceNames
            var legacy: [UInt64] = []
            for index in names.indices {
                legacy.append(try await openedSession(try await asNobody(daemon, ["open", "legacy-\(index)", "--json"])))
            }
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            for session in legacy {
                let sent = try await asNobody(daemon, ["send", "\(session)", "x"])
                #expect(sent.status == 0, "\(sent.stderr)")
            }
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(within: .seconds(10)) != nil, "imagentd did not stop on SIGTERM")
            for (index, name) in names.enumerated() {
                try renameStoredService(in: daemon.directory, from: "legacy-\(index)", to: name)
            }

            // After the upgrade.
            daemon = try await daemon.restarted()
            // The daemon made its store's folder private again at start-up.
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")
            let owner = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "owner")
            let session = try await owner.open(service: "echo").session
            let reconnectsBefore = try await reconnectCount(daemon)

            // nobody tries every name again, meanwhile the owner echoes.
            let hostileDone = NIOLockedValueBox(false)
            let hostileResults = NIOLockedValueBox<[(String, Int32, String)]>([])
            let hostile = Task { [daemon] in
                defer { hostileDone.withLockedValue { $0 = true } }
                for name in names {
                    let result = try await asNobody(daemon, ["open", name])
                    hostileResults.withLockedValue { $0.append((name, result.status, result.stderr)) }
                }
                let listed = try await asNobody(daemon, ["sessions", "--json"])
                hostileResults.withLockedValue { $0.append(("sessions", listed.status, listed.stdout)) }
            }
            // Each echo is timed; all of them together may take 60 s at most, so a link that
            // drops at every connect fails the test here rather than at the suite's time limit.
            let latencies = try await withThrowingTaskGroup(of: [Duration]?.self) { group in
                group.addTask {
                    var events = owner.events.makeAsyncIterator()
                    var latencies: [Duration] = []
                    repeat {
                        let sentAt = ContinuousClock.now
                        try await owner.send(session: session, text: "e\(latencies.count + 1)")
                        guard try await nextEcho(&events, owner, session) == "e\(latencies.count + 1)" else { return nil }
                        latencies.append(ContinuousClock.now - sentAt)
                        try await Task.sleep(for: .milliseconds(100))
                    } while !hostileDone.withLockedValue({ $0 }) || latencies.count < 20
                    return latencies
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(60))
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            let count = latencies?.count ?? 0
            #expect(latencies != nil, "the owner's echoes stopped (or came out of order) within 60 s")
            try await hostile.value
            await owner.close()

            let reconnects = try await reconnectCount(daemon) - reconnectsBefore
            let slowest = latencies?.max() ?? .seconds(60)
            print("hostile service names over MQTT: \(count) echoes, slowest \(slowest), \(reconnects) reconnects")
            #expect(slowest < .seconds(5), "an echo took \(slowest)")
            #expect(reconnects <= 3, "\(reconnects) reconnects")
            #expect(!broker.log.contains("malformed") && !broker.log.contains("protocol error"), "\(broker.log.suffix(2000))")
            for (name, status, text) in hostileResults.withLockedValue({ $0 }) {
                if name == "sessions" {
                    let failed = text.components(separatedBy: "\"state\":\"failed\"").count - 1
                    #expect(failed == names.count, "nobody's stored sessions are failed: \(text)")
                } else {
                    #expect(status == 4 && text.contains("BAD_REQUEST"), "\(name.debugDescription): exit \(status): \(text)")
                }
            }
        }
    }

    private func asNobody(_ daemon: RealDaemon, _ arguments: [String]) async throws -> ImagentProcess.Result {
        try await ImagentProcess.run(["--reuid=65534", "--regid=65534", "--clear-groups",
                                      ImagentProcess.binary.path, "--socket", daemon.socketPath] + arguments,
                                     limit: .seconds(20), executable: URL(fileURLWithPath: "/usr/bin/setpriv"))
    }

    private func reconnectCount(_ daemon: RealDaemon) async throws -> Int {
        let status = try await daemon.waitForLink("connected")
        let link = try #require(status["link"] as? [String: Any], "no link in \(status)")
        return try #require((link["reconnects"] as? NSNumber)?.intValue, "no reconnects in \(status)")
    }
}

/// The id in `imagent open … --json`'s output.
private func openedSession(_ result: ImagentProcess.Result) async throws -> UInt64 {
    try #require(((try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any])?["session"] as? NSNumber,
                 "open: \(result.status) \(result.stdout) \(result.stderr)").uint64Value
}

/// Writes `name` as the service of the stored session of service `old`, as a daemon from before
/// the rule could have stored it (python3's sqlite3: the test target does not link the store).
private func renameStoredService(in directory: String, from old: String, to name: String) throws {
    let script = """
        import sqlite3, sys
        db = sqlite3.connect(sys.argv[1])
        changed = db.execute("UPDATE sessions SET service = ? WHERE service = ?", (sys.argv[3], sys.argv[2])).rowcount
        db.commit()
        sys.exit(0 if changed == 1 else 3)
        """
    let python = try ChildProcess(executable: "/usr/bin/python3", arguments: ["-c", script, directory + "/imagentd.sqlite3", old, name],
                                  stdout: .null, stderr: .null)
    python.waitUntilExit()
    guard python.terminationStatus == 0 else { throw RealDaemonError("python3 could not rename session \(old) (exit \(python.terminationStatus))") }
}

/// The next echoed MESSAGE of `session`, acknowledged.
private func nextEcho(_ events: inout IPCEvents.AsyncIterator, _ client: IPCClient, _ session: UInt64) async throws -> String? {
    while let event = try await events.next() {
        if case .message(let message) = event, message.session == session {
            try await client.ack(session: session, seq: message.seq)
            return String(buffer: message.payload)
        }
    }
    return nil
}
