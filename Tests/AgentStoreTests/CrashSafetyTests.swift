import AgentStore
import Foundation
import IMAgentTestKit
import NIOCore
import SQLiteDatabase
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` of a process in the middle of group commits loses nothing it was told was committed.
@Suite("Crash safety", .serialized)
struct CrashSafetyTests {
    /// The child sits in the build products directory, next to the test executable.
    static let writerBinary: String = {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        while !FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("agentstore-crash-writer").path),
              directory.pathComponents.count > 1 {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("agentstore-crash-writer").path
    }()

    /// What the child writes for seq `seq` (see Sources/agentstore-crash-writer/main.swift).
    static func expectedPayload(_ seq: UInt64, bytes: Int = 64) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(seq, endianness: .little)
        buffer.writeBytes((8..<bytes).map { UInt8(truncatingIfNeeded: seq &+ UInt64($0)) })
        return buffer
    }

    /// Runs the writer on `database`, kills it with SIGKILL after a random delay once it
    /// has reported progress, and returns every seq it reported committed.
    func runAndKill(database: String, durability: Durability, directory: String, round: Int,
                    payloadBytes: Int? = nil) async throws -> [UInt64] {
        let outPath = directory + "/writer-\(durability)-\(round).out"
        // Not the test's own stderr: a writer left running if this process died would keep `swift test` waiting.
        let errPath = directory + "/writer-\(durability)-\(round).err"
        let process = try ChildProcess(executable: Self.writerBinary,
                                       arguments: [database, durability.rawValue] + (payloadBytes.map { [String($0)] } ?? []),
                                       stdout: .file(outPath), stderr: .file(errPath))

        // Wait until it is committing, then let it run a random while more.
        let started = ContinuousClock.now
        while (try? FileManager.default.attributesOfItem(atPath: outPath)[.size] as? Int) ?? 0 == 0 {
            guard process.isRunning, ContinuousClock.now - started < .seconds(20) else {
                process.terminate()
                Issue.record("the writer reported nothing within 20 s (running: \(process.isRunning))")
                return []
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(Int.random(in: 20...600)))
        #expect(process.isRunning, "the writer stopped by itself")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL)

        let text = try String(contentsOfFile: outPath, encoding: .utf8)
        // Each line is one write(2); a line cut by the kill has no newline and is ignored.
        let complete = text.hasSuffix("\n") ? Substring(text) : text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
        return complete.split(separator: "\n").compactMap { UInt64($0) }
    }

    @Test(arguments: Durability.allCases)
    func everySeqReportedCommitted_survivesKill9(durability: Durability) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var reportedTotal = 0
        for round in 1...3 {
            let reported = try await runAndKill(database: directory.databasePath, durability: durability,
                                                directory: directory.path, round: round)
            #expect(!reported.isEmpty, "round \(round): nothing reported")
            reportedTotal += reported.count

            let snapshot = try await reopen(directory.databasePath, durability: durability) { try await $0.load(on: testLoop).get() }
            #expect(try SQLiteDatabase(path: directory.databasePath).integrityCheck() == ["ok"])
            let session = try #require(snapshot.sessions.first, "round \(round): no session")
            let highest = session.record.sentSeq
            // Everything reported is there; more may be (committed, killed before it printed).
            #expect(reported.max() ?? 0 <= highest, "round \(round): reported up to \(reported.max() ?? 0) but only \(highest) stored")
            // Each submission held an outbound and an inbound message: both or neither survived.
            #expect(session.record.receivedSeq == highest)
            #expect(session.outbox.map(\.seq) == Array(stride(from: 1, through: highest, by: 1)))
            #expect(session.inbox.map(\.seq) == Array(stride(from: 1, through: highest, by: 1)))
            let damaged = session.outbox.filter { $0.payload != Self.expectedPayload($0.seq) }.map(\.seq)
                + session.inbox.filter { $0.payload != Self.expectedPayload($0.seq) }.map(\.seq)
            #expect(damaged.isEmpty, "round \(round): payloads differ for seqs \(damaged.prefix(10))")
            print("crash (\(durability)) round \(round): killed after \(reported.count) reported commits; reopened with seqs 1...\(highest) intact")
        }
        #expect(reportedTotal > 0)
    }

    /// Large payloads live in segment files that the writer creates, fills and (once both
    /// queues acknowledged their messages) deletes while it is killed: every message still
    /// queued reads back byte-exact, and no segment file outlives its messages.
    @Test(arguments: Durability.allCases)
    func largePayloadsInSegmentFiles_surviveKill9_whileSegmentsComeAndGo(durability: Durability) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let size = 65536
        for round in 1...4 {
            let reported = try await runAndKill(database: directory.databasePath, durability: durability,
                                                directory: directory.path, round: round, payloadBytes: size)
            #expect(!reported.isEmpty, "round \(round): nothing reported")

            let snapshot = try await reopen(directory.databasePath, durability: durability) { try await $0.load(on: testLoop).get() }
            #expect(try SQLiteDatabase(path: directory.databasePath).integrityCheck() == ["ok"])
            let session = try #require(snapshot.sessions.first, "round \(round): no session")
            let record = session.record
            #expect(reported.max() ?? 0 <= record.sentSeq, "round \(round): reported up to \(reported.max() ?? 0) but only \(record.sentSeq) stored")
            #expect(record.receivedSeq == record.sentSeq)
            #expect(record.ackedSeq == record.deliveredSeq && record.sentSeq - record.ackedSeq <= 32)
            #expect(session.outbox.map(\.seq) == Array(stride(from: record.ackedSeq + 1, through: record.sentSeq, by: 1)))
            #expect(session.inbox.map(\.seq) == Array(stride(from: record.deliveredSeq + 1, through: record.receivedSeq, by: 1)))
            let damaged = session.outbox.filter { $0.payload != Self.expectedPayload($0.seq, bytes: size) }.map(\.seq)
                + session.inbox.filter { $0.payload != Self.expectedPayload($0.seq, bytes: size) }.map(\.seq)
            #expect(damaged.isEmpty, "round \(round): payloads differ for seqs \(damaged.prefix(10))")
            // 33 messages each way of 64 KiB are at most 5 segments of 1 MiB; the open removed the others,
            // and the new segment it starts.
            let segments = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("-payloads.") }
            #expect(segments.count <= 7, "round \(round): \(segments.count) segment files for \(session.outbox.count) messages each way")
            print("crash with segments (\(durability)) round \(round): killed after \(reported.count) reported commits; "
                + "seqs \(record.ackedSeq + 1)...\(record.sentSeq) intact in \(segments.count) segment files")
        }
    }
}
