#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit
import Testing

@testable import imagent_bench

/// Bytes written to disk per payload byte, and the disk probe that bounds `power` (issue 29).
@Suite struct DiskCostTests {
    /// `/proc/PID/io` as Linux prints it.
    static let procIO = """
        rchar: 2012
        wchar: 1203402
        syscr: 7
        syscw: 31
        read_bytes: 4096
        write_bytes: 1204224
        cancelled_write_bytes: 8192

        """

    @Test func procIO_isParsed() throws {
        let io = try #require(ProcessIO(Self.procIO))
        #expect(io == ProcessIO(writeBytes: 1_204_224, cancelledWriteBytes: 8_192))
        // Without write_bytes (a kernel without task I/O accounting prints other lines): nothing to report.
        #expect(ProcessIO("rchar: 2012\nwchar: 1203402\n") == nil)
        #expect(ProcessIO("") == nil)
        #expect(ProcessIO("write_bytes: lots\n") == nil)
        #expect(ProcessIO("write_bytes:\t12288\n") == ProcessIO(writeBytes: 12_288, cancelledWriteBytes: 0))
        #expect(ProcessIO.of(-1) == nil, "no such process")
    }

    /// Bytes written and fdatasynced by this process show in its own `/proc/self/io`, and per payload byte;
    /// the CPU it spent meanwhile shows per message.
    @Test(.timeLimit(.minutes(1))) func writesToAFile_countPerPayloadByte() async throws {
        let directory = try makeTemporaryDirectory(prefix: "imagent-bench-io")
        defer { removeTree(directory) }
        let bytes = 1 << 20
        let burn = 0.1  // seconds of this thread's CPU the run spends on purpose
        let clock = ContinuousClock()
        let started = clock.now
        let (_, cost) = try await measureCost(of: [getpid()], messages: 16, payloadBytes: bytes) {
            let descriptor = open(directory + "/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let block = [UInt8](repeating: 7, count: bytes / 16)
            for index in 0..<16 {
                #expect(block.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(index * block.count)) } == block.count)
            }
            #expect(fdatasync(descriptor) == 0)
            let until = threadCPUSeconds() + burn
            while threadCPUSeconds() < until {}
        }
        let wall = clock.now - started
        // At least the payload (the suite's other tests may write too, in this same process).
        let perByte = try #require(cost.diskBytesPerPayloadByte)
        #expect(perByte >= 1.0, "\(perByte) bytes written per payload byte")
        // At least the CPU burnt, at most every core for the whole run; /proc/PID/stat counts in clock ticks.
        let cpu = try #require(cost.cpuPerMessage) * 16
        let tick = 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
        let cores = Double(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect(cpu >= burn * 1e6 - 2 * tick, "\(cpu) µs of CPU counted for a run that burnt \(burn) s")
        #expect(cpu <= wall.seconds * 1e6 * cores + 2 * tick, "\(cpu) µs of CPU counted in \(wall) on \(cores) cores")
    }

    /// CPU time of the calling thread, in seconds.
    private func threadCPUSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    @Test func ratios() {
        #expect(RunCost.perPayloadByte(written: 147_456, payloadBytes: 131_072) == 1.125)
        #expect(RunCost.perPayloadByte(written: 0, payloadBytes: 65_536) == 0)
        #expect(RunCost.perPayloadByte(written: 4096, payloadBytes: 0) == nil)
        // 250 batches of 12 × 64 KiB in 2 s: 1,500 payloads/s, 98.304 MB/s, 250 fdatasyncs/s.
        let probe = DiskProbeResult(size: 65_536, batch: 12, batches: 250, seconds: 2)
        #expect(probe.payloadsPerSecond == 1_500)
        #expect(probe.payloadBytesPerSecond == 98_304_000)
        #expect(probe.fdatasyncsPerSecond == 250)
        // imagentd at 1,200 msg/s of 64 KiB: 0.8× the probe.
        #expect(abs(probe.ratio(ofPayloadBytesPerSecond: 1_200 * 65_536) - 0.8) < 1e-12)
        #expect(probe.summary == "12 × 64 KiB per batch: 98.3 MB/s of payload, 1,500 payloads/s, 250 fdatasyncs/s")
    }

    /// The batch comes from METRICS: SENDs accepted and store commits, their deltas over the one-way run.
    @Test func storeCommits_fromMetrics() throws {
        let json = #"{"counters":{"link_connect_attempts_total":1,"messages_accepted_total":21000,"messages_received_total":0},"#
            + #""gauges":{"sessions":1},"histograms":{"store_commit_seconds":{"count":1500,"sum":2.5},"#
            + #""store_commit_operations":{"count":1750,"sum":42000}},"prometheus":"imagentd_store_commit_operations_count 1750"}"#
        let after = try #require(StoreCommits(metrics: json))
        #expect(after == StoreCommits(accepted: 21_000, commits: 1_750))
        #expect(after.payloadsPerCommit(since: StoreCommits(accepted: 1_000, commits: 750)) == 20)
        #expect(after.payloadsPerCommit(since: after) == nil, "no commit in between")
        // A client that is not an admin sees neither.
        #expect(StoreCommits(metrics: #"{"counters":{"link_connect_attempts_total":1},"gauges":{"sessions":0}}"#) == nil)
    }

    /// The probe in this process writes what it says to the disk, and leaves nothing behind.
    @Test(.timeLimit(.minutes(1))) func theProbe_writesItsPayloadsToTheDisk() throws {
        let directory = try makeTemporaryDirectory(prefix: "imagent-bench-probe")
        defer { removeTree(directory) }
        let before = try #require(ProcessIO.of(getpid()))
        let clock = ContinuousClock()
        let started = clock.now
        let result = try DiskProbe(size: 16_384, batch: 3, seconds: 0.3, directory: directory).run()
        let wall = clock.now - started
        let after = try #require(ProcessIO.of(getpid()))
        // It runs its 0.3 s and reports the time it took, which lies within the call.
        #expect(result.batches > 0 && result.seconds >= 0.3 && result.seconds <= wall.seconds, "\(result.seconds) s of a call of \(wall)")
        #expect(after.writeBytes - before.writeBytes >= result.batches * 3 * 16_384,
                "write_bytes grew by \(after.writeBytes - before.writeBytes) over \(result.batches) batches")
        #expect(listDirectory(directory).isEmpty, "left \(listDirectory(directory))")
    }

    /// `imagent-bench diskprobe`, the binary, for 2 s: positive figures that agree with each other within 1 %.
    @Test(.timeLimit(.minutes(1))) func diskprobe_reportsConsistentFigures() async throws {
        let binary = try SubcommandHelpTests.binaryPath()
        let directory = try makeTemporaryDirectory(prefix: "imagent-bench-diskprobe")
        defer { removeTree(directory) }
        let output = try await ChildProcess.run(binary, ["diskprobe", "--size", "64KiB", "--batch", "4", "--seconds", "2",
                                                         "--dir", directory], limit: .seconds(30))
        #expect(output.status == 0 && !output.signaled, "\(output.stdout)\(output.stderr)")
        // "N batches in T s; 4 × 64 KiB per batch: X MB/s of payload, P payloads/s, F fdatasyncs/s"
        let line = try #require(output.stdout.split(separator: "\n").first { $0.contains(" batches in ") }, "\(output.stdout)")
        let numbers = line.split(whereSeparator: { $0 == " " || $0 == ";" || $0 == ":" })
            .compactMap { Double($0.filter { $0 != "," }) }
        try #require(numbers.count == 7, "\(line)")
        let (batches, seconds, batch, size) = (numbers[0], numbers[1], numbers[2], numbers[3] * 1024)
        let (megabytesPerSecond, payloadsPerSecond, fdatasyncsPerSecond) = (numbers[4], numbers[5], numbers[6])
        #expect(batch == 4 && size == 65_536)
        #expect(batches > 0 && seconds >= 2 && megabytesPerSecond > 0 && payloadsPerSecond > 0 && fdatasyncsPerSecond > 0)
        func near(_ value: Double, _ expected: Double) -> Bool { abs(value - expected) <= 0.01 * expected }
        #expect(near(megabytesPerSecond * 1e6, size * batch * batches / seconds), "\(line)")
        #expect(near(payloadsPerSecond, batch * batches / seconds), "\(line)")
        #expect(near(fdatasyncsPerSecond, 2 * batches / seconds), "\(line)")
        #expect(listDirectory(directory).isEmpty, "left \(listDirectory(directory))")
    }
}
