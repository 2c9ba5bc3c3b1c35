import AgentIPC
import Foundation
import Testing

/// `imagent connect|disconnect|reconnect|reload`, and how every subcommand
/// fails: exit codes and messages that say what to do.
@Suite struct CLIAdminAndErrorTests {
    static let adminCommands: [(String, IPCOp, String)] = [
        ("connect", .connect, "imagentd is bringing the link up; follow it with `imagent watch`"),
        ("disconnect", .disconnect, "imagentd took the link down; it stays down until `imagent connect`"),
        ("reconnect", .reconnect, "imagentd is reconnecting the link; follow it with `imagent watch`"),
        ("reload", .reload, "imagentd re-read its configuration; its log says what could not change live"),
    ]

    @Test(arguments: adminCommands)
    func adminCommand_sendsItsRequest_andSaysWhatHappens(_ command: String, _ op: IPCOp, _ message: String) async throws {
        try await withFakeDaemon { daemon in
            let human = try await ImagentProcess.run([command], against: daemon)
            #expect(human.status == 0, "\(human.stderr)")
            #expect(human.stdoutLines == [message])
            let json = try await ImagentProcess.run([command, "--json"], against: daemon)
            #expect(try jsonObject(json.stdout) == jsonObject(#"{"ok":true,"request":"\#(op)"}"#))
            #expect(daemon.received(op).count == 2)
        }
    }

    @Test func aNonAdmin_getsExit3_andIsToldWhy() async throws {
        var script = FakeDaemon.Script()
        script.refusals[.disconnect] = .init(code: .permissionDenied, message: "uid 1000 is not an admin")
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["disconnect"], against: daemon)
            #expect(result.status == 3)
            #expect(result.stderr == "imagent: imagentd refused DISCONNECT with PERMISSION_DENIED: uid 1000 is not "
                + "an admin; this needs root or the daemon's admin group, or the session belongs to another user\n")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test func anotherRefusal_getsExit4_withItsIPCCode() async throws {
        var script = FakeDaemon.Script()
        script.refusals[.send] = .init(code: .queueFull, message: nil)
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["send", "7", "x"], against: daemon)
            #expect(result.status == 4)
            #expect(result.stderr.contains("QUEUE_FULL; the session's outbox is full: retry later"))
        }
    }

    @Test func noAnswer_getsExit5() async throws {
        var script = FakeDaemon.Script()
        script.unanswered = [.status]
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["status", "--timeout", "2"], against: daemon)
            #expect(result.status == 5)
            #expect(result.stderr.contains("imagentd did not answer STATUS within 2 s"))
        }
    }

    @Test func aDaemonThatHangsUp_getsExit6() async throws {
        var script = FakeDaemon.Script()
        script.disconnectOn = [.metrics]
        try await withFakeDaemon(script) { daemon in
            let result = try await ImagentProcess.run(["metrics"], against: daemon)
            #expect(result.status == 6)
            #expect(result.stderr.contains("lost the connection to imagentd: it closed the connection"))
        }
    }

    static let everySubcommand: [[String]] = [
        ["status"], ["status", "--json"], ["sessions"], ["metrics"], ["metrics", "--prometheus"], ["watch"],
        ["ping"], ["connect"], ["disconnect"], ["reconnect"], ["reload"], ["open", "chat"],
        ["open", "--session", "7"], ["close", "7"], ["send", "7", "hi"], ["listen", "7"],
    ]

    @Test(arguments: everySubcommand)
    func withoutADaemon_everySubcommandExits2_andSaysHowToStartIt(_ arguments: [String]) async throws {
        let socket = try FakeDaemon.makeTemporaryDirectory() + "/imagent.sock"
        let result = try await ImagentProcess.run(["--socket", socket] + arguments)
        #expect(result.status == 2)
        #expect(result.stderr == "imagent: imagentd is not running: no socket at \(socket); start it with "
            + "`systemctl start imagentd`, or set IMAGENT_SOCKET to the socket of the daemon you mean\n")
        #expect(result.stdout.isEmpty)
    }

    @Test func aBadCommandLine_exits1_withUsage() async throws {
        let result = try await ImagentProcess.run(["status", "--bogus"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("Unknown option '--bogus'"))
        #expect(result.stderr.contains("Usage: imagent status"))
    }

    @Test func help_listsTheExitCodes() async throws {
        let result = try await ImagentProcess.run(["--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("5  imagentd did not answer within --timeout"))
        #expect(result.stdout.contains("listen"))
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScripts_areGenerated(_ shell: String) async throws {
        let result = try await ImagentProcess.run(["--generate-completion-script", shell])
        #expect(result.status == 0)
        for subcommand in ["status", "sessions", "metrics", "watch", "listen", "reconnect"] {
            #expect(result.stdout.contains(subcommand), "\(shell) completion lacks \(subcommand)")
        }
        #expect(result.stdout.contains("prometheus"))
    }
}
