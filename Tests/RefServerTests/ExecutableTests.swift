import Foundation
import IMAgentTestKit
import IMLink
import NIOCore
import RefServer
import Testing

/// The `imagent-refserver` binary, spawned as a process.
@Suite("The imagent-refserver executable")
struct ExecutableTests {
    /// The binary sits next to the test bundle in the build products directory.
    static func binaryPath() throws -> String {
        let testExecutable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: testExecutable).deletingLastPathComponent().appendingPathComponent("imagent-refserver").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestTimeout(what: "the imagent-refserver binary at \(path) (build it with `swift build`)")
        }
        return path
    }

    /// Reads one line from `descriptor`, waiting at most `timeout` in total.
    static func readLine(_ descriptor: Int32, timeout: Duration) async throws -> String {
        var bytes: [UInt8] = []
        let line = try await IMAgentTestKit.poll(within: timeout, every: .milliseconds(10)) { () -> String? in
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            while Glibc.poll(&poller, 1, 0) > 0 {
                var byte: UInt8 = 0
                guard read(descriptor, &byte, 1) == 1 else {
                    throw TestTimeout(what: "a line from the server process (it closed its output after \"\(String(decoding: bytes, as: UTF8.self))\")")
                }
                if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
                bytes.append(byte)
            }
            return nil
        }
        if let line { return line }
        throw TestTimeout(what: "a line from the server process (got \"\(String(decoding: bytes, as: UTF8.self))\")")
    }

    @Test("prints the listening line first, serves a handshake and admin commands, and stops on SIGTERM",
          .timeLimit(.minutes(1)))
    func binary_listensServesAndStopsOnSigterm() async throws {
        let environment = try TestEnvironment.make()
        defer { environment.remove() }
        let output = try ChildPipe()
        let input = try ChildPipe()
        let process = try ChildProcess(executable: try Self.binaryPath(),
                                       arguments: ["--listen", "127.0.0.1:0", "--token-file", environment.tokenFile,
                                                   "--state", environment.statePath, "--admin-socket", environment.adminSocket,
                                                   "--heartbeat-ms", "4321", "--log-level", "warning"],
                                       stdin: .descriptor(input.readEnd), stdout: .descriptor(output.writeEnd),
                                       stderr: .file(environment.emptyFile("refserver.err").path))
        output.closeWrite()
        input.closeRead()
        defer { if process.isRunning { process.terminate() } }
        let stdout = output.readEnd

        let first = try await Self.readLine(stdout, timeout: .seconds(20))
        let prefix = "listening on 127.0.0.1:"
        #expect(first.hasPrefix(prefix))
        let port = try #require(Int(first.dropFirst(prefix.count)))
        #expect(port > 0)

        let client = try await TestClient.connect(port: port)
        #expect(try await client.handshake(agentID: "agent-x").heartbeatMS == 4321)
        try await client.open(1, service: "echo")
        try await client.sendData(1, seq: 1, "through the binary")
        let frames = try await collect(client) { $0.dataSeqs.count == 1 && $0.acks == [1] }
        #expect(frames.payloads == ["through the binary"])

        input.write("stats\n")
        let stats = try await Self.readLine(stdout, timeout: .seconds(5))
        #expect(stats.hasPrefix("ok {\"connections\":1,"))
        #expect(try await AdminClient.send("drop", socket: environment.adminSocket) == "ok dropped 1 connections")
        try await client.expectClosed()

        kill(process.processIdentifier, SIGTERM)
        #expect(await process.exit(within: .seconds(10)) == 0)
        #expect(process.terminationReason == .exit)
        #expect(!FileManager.default.fileExists(atPath: environment.adminSocket))
    }

    /// Starts the binary on a free port; returns the process and the port from its first line.
    static func spawn(_ arguments: [String]) async throws -> (process: ChildProcess, port: Int) {
        let output = try ChildPipe()
        let process = try ChildProcess(executable: try binaryPath(),
                                       arguments: ["--listen", "127.0.0.1:0", "--log-level", "warning"] + arguments,
                                       stdout: .descriptor(output.writeEnd), stderr: .null)
        output.closeWrite()
        let first = try await readLine(output.readEnd, timeout: .seconds(20))
        guard first.hasPrefix("listening on 127.0.0.1:"), let port = Int(first.dropFirst("listening on 127.0.0.1:".count)) else {
            process.terminate()
            throw TestTimeout(what: "a listening line, got \"\(first)\"")
        }
        return (process, port)
    }

    @Test("what the server ACKed survives SIGKILL: a new process on the same state file has it all",
          .timeLimit(.minutes(1)))
    func acknowledgedData_survivesKill() async throws {
        let environment = try TestEnvironment.make()
        defer { environment.remove() }
        let arguments = ["--token-file", environment.tokenFile, "--state", environment.statePath]

        let (first, firstPort) = try await Self.spawn(arguments)
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        let client = try await TestClient.connect(port: firstPort)
        try await client.handshake(agentID: "agent-k")
        try await client.open(1, service: "echo")
        for seq in 1...5 as ClosedRange<UInt64> { try await client.sendData(1, seq: seq, "durable \(seq)") }
        let frames = try await collect(client) { $0.acks.last == 5 && $0.dataSeqs.count == 5 }
        #expect(frames.dataSeqs == [1, 2, 3, 4, 5])
        // No graceful stop: whatever was acknowledged must already be on disk.
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        await client.close()

        let (second, secondPort) = try await Self.spawn(arguments)
        defer { if second.isRunning { kill(second.processIdentifier, SIGTERM) } }
        let again = try await TestClient.connect(port: secondPort)
        try await again.handshake(agentID: "agent-k")
        #expect(try await again.open(1, service: "echo", resumeAfter: 2).lastAcked == 5)
        let resent = try await collect(again) { $0.dataSeqs.count == 3 }
        #expect(resent.dataSeqs == [3, 4, 5])
        #expect(resent.payloads == ["durable 3", "durable 4", "durable 5"])
        await again.close()
    }

    @Test("commands are not served from /dev/null, which NIO cannot poll; the server keeps running")
    func serveCommands_refusesDevNull() async throws {
        try await withRefServer { server, _ in
            let input = open("/dev/null", O_RDONLY)
            let output = open("/dev/null", O_WRONLY)
            await #expect(throws: RefServerError.commandInputNotPollable) {
                try await server.serveCommands(input: input, output: output)
            }
            let client = try await TestClient.connect(port: server.port)
            try await client.handshake(agentID: "agent-null")
            await client.close()
        }
    }

    @Test("--help documents every admin command", .timeLimit(.minutes(1)))
    func help_listsEveryAdminCommand() async throws {
        let text = try await ChildProcess.run(try Self.binaryPath(), ["--help"], limit: .seconds(30)).stdout
        for command in ["goaway", "fail-login", "drop", "drop-after", "drop-on-data SESSION|off", "stall on|off", "nat-timeout", "heartbeat MS", "advertise-heartbeat MS|off",
                        "push SESSION|all", "stats", "--listen", "--token-file", "--state", "--admin-socket",
                        "--tls-cert", "--push-rate", "--log-level"] {
            #expect(text.contains(command), "--help does not mention \(command)")
        }
    }
}
