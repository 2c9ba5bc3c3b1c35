import Foundation
import Testing

private let setprivPath = "/usr/bin/setpriv"
private let pythonPath = "/usr/bin/python3"

/// The log cannot be drowned from outside (imagentd(8), LOGGING): thousands of connections that
/// break the protocol, from another uid, give a few lines and a summary with their count, and the
/// daemon's own link messages still reach the log.
@Suite(.serialized, .timeLimit(.minutes(2)),
       .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: setprivPath)
                    && FileManager.default.isExecutableFile(atPath: pythonPath),
                "needs root, setpriv(1) and python3 to act as another uid"))
struct OutsideLogFloodTests {
    static let nobody: UInt32 = 65534

    /// Connects `count` times, one after the other, sends a frame header no daemon accepts and
    /// reads until the daemon closes; prints how many connections it closed.
    private static let protocolBreaker = """
        import socket, sys
        path, count = sys.argv[1], int(sys.argv[2])
        closed = 0
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(path)
                s.sendall(b"\\xff" * 16)
                while s.recv(4096):
                    pass
                closed += 1
            except OSError:
                pass
            finally:
                s.close()
        print(closed)
        """

    @Test func aFloodOfProtocolBreakers_fromAnotherUid_givesBoundedLinesAndASummary_andLinkMessagesStillAppear() async throws {
        try await withRealDaemon(socketMode: "0666") { daemon in
            #expect(chmod(daemon.directory, 0o711) == 0)
            _ = try await daemon.waitForLink("connected")
            let before = daemon.log.components(separatedBy: "\n").count

            let count = 3_000
            let flood = try await ImagentProcess.run(
                ["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", pythonPath, "-c", Self.protocolBreaker,
                 daemon.socketPath, "\(count)"],
                limit: .seconds(60), executable: URL(fileURLWithPath: setprivPath))
            #expect(flood.status == 0, "\(flood.stderr)")
            let closed = Int(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect(closed == count, "\(flood.stdout) \(flood.stderr)")

            // The summary comes when the window ends, within 10 s of the flood's first line.
            let summaryPattern = "closing a client that broke the protocol: … and "
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, !daemon.log.contains(summaryPattern) {
                try await Task.sleep(for: .milliseconds(200))
            }
            // The daemon's own messages: the link taken down and up again by the owner.
            #expect(try await daemon.imagent(["disconnect"]).status == 0)
            _ = try await daemon.waitForLink("stopped")
            #expect(try await daemon.imagent(["connect"]).status == 0)
            _ = try await daemon.waitForLink("connected")
            try await Task.sleep(for: .milliseconds(300))

            let lines = Array(daemon.log.components(separatedBy: "\n").dropFirst(before - 1))
            let written = lines.filter { $0.contains(": closing a client that broke the protocol client=") && $0.contains("uid 65534") }
            let summaries = lines.filter { $0.contains(summaryPattern) && $0.contains("from uid 65534") }
            let summarised = summaries.compactMap { line -> Int? in
                guard let range = line.range(of: "… and ") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber || $0 == "," }.replacingOccurrences(of: ",", with: ""))
            }.reduce(0, +)
            let fromNobody = lines.filter { $0.contains("uid 65534") }
            print("\(count) protocol breakers as uid 65534: \(fromNobody.count) lines, \(written.count) written, summaries: \(summaries)")
            #expect(!summaries.isEmpty, "no summary:\n\(fromNobody.suffix(20).joined(separator: "\n"))")
            #expect(fromNobody.count <= 20, "\(fromNobody.count) lines from uid 65534")
            #expect(written.count + summarised == count, "\(written.count) written + \(summarised) summarised")
            #expect(lines.contains { $0.contains("link: ") && $0.contains("→ stopped (disconnected by user)") }
                    && lines.contains { $0.contains("link: ") && $0.contains("→ connected to ") },
                    "the daemon's own link messages are missing:\n\(lines.suffix(20).joined(separator: "\n"))")
            print(lines.filter { !$0.contains("uid 65534") }.suffix(8).joined(separator: "\n"))
        }
    }
}
