import AgentIPC
import Foundation
import IMAgentTestKit
import Testing

/// `imagentd --dev` runs the `imagent-refserver` beside it as a child process;
/// the daemon itself carries no reference server.
@Suite(.timeLimit(.minutes(2)))
struct DevelopmentModeTests {
    @Test func imagentdLinksNoReferenceServer() async throws {
        let symbols = try await ChildProcess.run("/usr/bin/nm", [BuiltPrograms.daemon])
        #expect(symbols.status == 0, "nm failed: \(symbols.stderr)")
        let referenceServer = symbols.stdout.split(separator: "\n").filter { $0.contains("9RefServer") }
        #expect(symbols.stdout.contains("8imagentd"), "nm listed no symbol of imagentd")
        #expect(referenceServer.isEmpty, "imagentd links the RefServer module: \(referenceServer.prefix(3))")
    }

    @Test func withoutImagentRefserverBesideIt_devModeSaysWhatIsMissing() async throws {
        let directory = try makeTemporaryDirectory(prefix: "dev-missing")
        defer { removeTree(directory) }
        // A copy of the daemon alone: /proc/self/exe is the copy, and nothing is beside it.
        let copy = directory + "/imagentd"
        let copied = try await ChildProcess.run("/bin/cp", [BuiltPrograms.daemon, copy])
        try #require(copied.status == 0, "cp failed: \(copied.stderr)")

        let run = try await ChildProcess.run(copy, ["--dev", "--dev-dir", directory + "/dev"], limit: .seconds(30))
        #expect(run.status == 1 && !run.signaled)
        #expect(run.stderr.contains("\(directory)/imagent-refserver, which is missing"), "stderr: \(run.stderr)")
        #expect(run.stderr.contains("swift build --product imagent-refserver"), "stderr: \(run.stderr)")
    }

    @Test func theReferenceServerServesTheLink_andEndsWithTheDaemonEvenAfterKill9() async throws {
        let directory = try makeTemporaryDirectory(prefix: "dev-child")
        defer { removeTree(directory) }
        let daemon = try ChildProcess(executable: BuiltPrograms.daemon, arguments: ["--dev", "--dev-dir", directory],
                                      stdout: .file(directory + "/out"), stderr: .file(directory + "/err"))
        defer { daemon.signal(SIGKILL) }

        let connected = try await poll(within: .seconds(20), every: .milliseconds(100)) { () -> Bool? in
            guard let client = try? await IPCClient.connect(socketPath: directory + "/imagent.sock", clientName: "dev-test") else {
                return nil
            }
            let status = (try? await client.status()) ?? ""
            await client.close()
            return status.filter { $0 != " " }.contains("\"state\":\"connected\"") ? true : nil
        }
        try #require(connected == true, "the link did not come up; stderr: \(readFile(directory + "/err") ?? "")")
        let children = childProcesses(of: daemon.processIdentifier)
        try #require(children.count == 1, "children of imagentd --dev: \(children)")
        let server = children[0]
        #expect(readFile("/proc/\(server)/cmdline")?.contains("imagent-refserver") == true)

        daemon.signal(SIGKILL)
        daemon.waitUntilExit()
        let gone = try await poll(within: .seconds(10), every: .milliseconds(50)) { isGone(server) ? true : nil }
        #expect(gone == true, "imagent-refserver \(server) outlived imagentd --dev")
        if gone != true { kill(server, SIGKILL) }
    }

    /// Every thread's children (the child may have been forked by any thread of the process).
    private func childProcesses(of pid: pid_t) -> [pid_t] {
        listDirectory("/proc/\(pid)/task").flatMap { task in
            (readFile("/proc/\(pid)/task/\(task)/children") ?? "").split(separator: " ").compactMap { pid_t($0) }
        }
    }

    /// No such process, or only its zombie.
    private func isGone(_ pid: pid_t) -> Bool {
        guard let stat = readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }
}
