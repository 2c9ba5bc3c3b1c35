import Foundation
import Glibc
import Testing

@testable import IMAgentCore

/// `token_command` runs in its own process group, which goes as a whole on
/// timeout, and the wait for its exit is bounded (finding 7).
@Suite(.timeLimit(.minutes(1))) struct TokenCommandTests {
    @Test func aCommandThatPrintsButNeverExits_isGivenUpWithinItsBound() throws {
        let start = ContinuousClock.now
        #expect(throws: TokenError.self) {
            // Prints a token, closes its stdout, then lingers: the old blocking waitpid stayed 30 s.
            try TokenSource.command(["/bin/sh", "-c", "echo token; exec >&-; sleep 30"]).read(timeout: .seconds(1))
        }
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test func onTimeout_theWholeProcessGroupIsKilled() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.cleanup() }
        let pidFile = scratch.path + "/helper.pid"
        // The helper the command started holds stdout open and writes its pid down.
        #expect(throws: TokenError.self) {
            try TokenSource.command(["/bin/sh", "-c", "sleep 30 & echo $! > \(pidFile); wait"]).read(timeout: .milliseconds(500))
        }
        let text = try String(contentsOfFile: pidFile, encoding: .utf8)
        let helper = try #require(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        // It was killed with the group: gone, or a zombie waiting for its new parent.
        var alive = true
        for _ in 0..<100 where alive {
            alive = kill(helper, 0) == 0 && !Self.isZombie(helper)
            if alive { usleep(20_000) }
        }
        #expect(!alive, "the helper \(helper) survived its command's timeout")
        if alive { kill(helper, SIGKILL) }
    }

    @Test func aTokenFileReadableByOthers_isWarnedAbout() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.cleanup() }
        let path = try scratch.write("token", "secret\n")
        #expect(chmod(path, 0o644) == 0)
        var c = DaemonConfiguration()
        c.token = .file(path)
        #expect(SecurityWarnings.of(c).contains { $0.contains("chmod 0600") })
        #expect(chmod(path, 0o600) == 0)
        #expect(SecurityWarnings.of(c).isEmpty)
    }

    private static func isZombie(_ pid: pid_t) -> Bool {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return true }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 512)
        guard fgets(&buffer, 512, file) != nil else { return true }
        let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let close = line.lastIndex(of: ")") else { return false }
        return line[line.index(close, offsetBy: 2)] == "Z"
    }
}
