#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit
import Testing

@testable import imagent_bench

/// `--markdown`: the tables BENCHMARKS.md shows, under a line with the date, the commit and the command (issue 28).
@Suite struct MarkdownTableTests {
    /// The checkout's HEAD as git prints it.
    static func gitHead() async throws -> String {
        let head = try await ChildProcess.run("/usr/bin/git", ["-C", ClientLibrary.checkout, "rev-parse", "--short", "HEAD"],
                                              limit: .seconds(10))
        try #require(head.status == 0, "git rev-parse in \(ClientLibrary.checkout): \(head.stderr)")
        return String(head.stdout.prefix { $0 != "\n" })
    }

    /// The lines of BENCHMARKS.md, whose tables these are.
    static func benchmarksLines() throws -> Set<String> {
        let text = try #require(readFile(ClientLibrary.checkout + "/BENCHMARKS.md"))
        return Set(text.split(separator: "\n").map(String.init))
    }

    /// `date -u` of a time, in the stamp's form.
    static func gnuDate(_ seconds: Int) async throws -> String {
        let output = try await ChildProcess.run("/usr/bin/date", ["-u", "-d", "@\(seconds)", "+%Y-%m-%d %H:%M UTC"], limit: .seconds(10))
        try #require(output.status == 0)
        return String(output.stdout.prefix { $0 != "\n" })
    }

    @Test func theDate_isWhatDatePrints() async throws {
        var generator = SystemRandomNumberGenerator()
        // Now, around leap days and year ends, and spread over two centuries.
        var times = [Int(time(nil)), 951_782_400, 951_868_799, 1_709_164_800, 1_735_689_599, 0]
        for _ in 0..<20 { times.append(Int.random(in: 0..<4_102_444_800, using: &generator)) }
        for seconds in times {
            #expect(utcMinute(secondsSinceEpoch: seconds) == (try await Self.gnuDate(seconds)), "at \(seconds)")
        }
    }

    @Test func theStamp_saysWhenOnWhichCommitAndByWhichCommand() async throws {
        let arguments = ["compare", "--messages", String(Int.random(in: 1_000...9_999)), "--markdown"]
        let before = Int(time(nil))
        let stamp = await RunStamp.now(arguments: arguments)
        let after = Int(time(nil))
        let head = try await Self.gitHead()
        #expect(stamp.commit == head || stamp.commit == head + " + uncommitted changes")
        #expect([try await Self.gnuDate(before), try await Self.gnuDate(after)].contains(stamp.date))
        #expect(stamp.command == "imagent-bench " + arguments.joined(separator: " "))
        #expect(stamp.line.hasPrefix("\(stamp.date), commit \(stamp.commit), "))
        #expect(stamp.line.contains(", `\(stamp.command)`, load average "))
    }

    @Test func compare_givesTheHeaderWithUnits_andRatiosOfItsRows() throws {
        var generator = SystemRandomNumberGenerator()
        let (imagentd, bridge, direct) = (Double.random(in: 10_000...90_000, using: &generator),
                                          Double.random(in: 10_000...90_000, using: &generator),
                                          Double.random(in: 10_000...190_000, using: &generator))
        let (p50, cpu) = (Double.random(in: 0.1...2, using: &generator), Double.random(in: 1...400, using: &generator))
        var summary = CompareSummary(baselineBridge: "as shipped")
        let (disk, probe) = (Double.random(in: 1...3, using: &generator), Double.random(in: 0.1...1.5, using: &generator))
        summary.record(sizeLabel(1024), .imagentd, .init(oneWay: imagentd, p50: p50, oneWayCPU: cpu, oneWayDisk: disk))
        summary.recordProbe(sizeLabel(1024), .imagentd, ratio: probe)
        summary.record(sizeLabel(1024), .bridge("as shipped"), .init(oneWay: bridge, p50: 40, oneWayCPU: nil, oneWayDisk: 0.004))
        summary.record(sizeLabel(1024), .directTCP, .init(oneWay: direct, p50: 0.1, oneWayCPU: nil))
        let lines = (summary.imlinkTable?.text ?? "").split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines.first == "| size | imagentd one way msg/s | ÷ bridge as shipped | ÷ direct TCP | imagentd CPU µs/msg "
            + "| imagentd disk B/payload B | ÷ disk probe | round-trip p50 ms | bridge as shipped msg/s | bridge disk B/payload B "
            + "| direct TCP msg/s |")
        #expect(lines.dropFirst().first == "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        #expect(lines.last == "| 1 KiB | \(grouped(Int(imagentd))) | \(format(imagentd / bridge, decimals: 2))× "
            + "| \(format(imagentd / direct, decimals: 2))× | \(format(cpu, decimals: 1)) | \(format(disk, decimals: 2)) "
            + "| \(format(probe, decimals: 2))× | \(format(p50, decimals: 3)) | \(grouped(Int(bridge))) | 0.00 | \(grouped(Int(direct))) |")
        #expect(summary.mqttTable == nil, "no MQTT table without the MQTT row")
        let document = try Self.benchmarksLines()
        #expect(document.contains(lines[0]) && document.contains(lines[1]), "BENCHMARKS.md's compare table has this header")
    }

    @Test func compare_overMQTT_givesOneColumnPerPayload() throws {
        var summary = CompareSummary(baselineBridge: "as shipped")
        for (size, scale) in [(64, 1.0), (1024, 0.8)] {
            summary.record(sizeLabel(size), .bridge("as shipped"), .init(oneWay: 31_831 * scale, p50: 44.1, oneWayCPU: nil))
            summary.record(sizeLabel(size), .mqtt, .init(oneWay: 26_858 * scale * scale, p50: 44.0 + scale, oneWayCPU: 30,
                                                         oneWayDisk: 2.5 * scale))
            summary.record(sizeLabel(size), .directMQTT, .init(oneWay: 39_098, p50: 44.0, oneWayCPU: nil))
        }
        let lines = (summary.mqttTable?.text ?? "").split(separator: "\n").map(String.init)
        #expect(lines.first == "| path | figure | 64 B | 1 KiB |")
        #expect(lines.dropFirst().first == "|---|---|---:|---:|")
        let ratios = [26_858 / 31_831, 26_858 * 0.8 * 0.8 / (31_831 * 0.8)].map { format($0, decimals: 2) }
        #expect(lines.contains("| imagentd over MQTT | one way msg/s (÷ bridge) | \(grouped(26_858)) (\(ratios[0])×) "
            + "| \(grouped(Int(26_858 * 0.8 * 0.8))) (\(ratios[1])×) |"))
        #expect(lines.contains("| imagentd over MQTT | round-trip p50 ms (− direct MQTT client) | 45.000 (+1.000) | 44.800 (+0.800) |"))
        #expect(lines.contains("| imagentd over MQTT | disk B/payload B one way | 2.50 | 2.00 |"))
        #expect(!lines.contains { $0.hasPrefix("| mosquitto bridge, as shipped | disk") }, "not measured, no row")
        #expect(!lines.contains { $0.contains("disk probe") }, "no probe (durability process)")
        #expect(summary.imlinkTable == nil, "no IMLink table without the imagentd row")
        let document = try Self.benchmarksLines()
        #expect(document.contains(lines[0]) && document.contains(lines[1]), "BENCHMARKS.md's MQTT table has this header")
    }

    /// The binary itself, as `scripts/bench codec --markdown` runs it: its own report, then the stamp and the table.
    @Test(.timeLimit(.minutes(2))) func codec_printsTheStampAndTheTable() async throws {
        let binary = try SubcommandHelpTests.binaryPath()
        let output = try await ChildProcess.run(binary, ["codec", "--seconds", "0.05", "--markdown"], limit: .seconds(90))
        #expect(output.status == 0 && !output.signaled, "\(output.stderr)")
        let head = try await Self.gitHead()
        let tail = output.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { $0 != "BENCHMARKS.md:" }.map(String.init)
        let lines = tail.last == "" ? Array(tail.dropLast()) : tail
        try #require(lines.count == 10, "BENCHMARKS.md:, the stamp and the table after it, in:\n\(output.stdout)")
        #expect(lines[2].hasPrefix(utcMinute(secondsSinceEpoch: Int(time(nil))).prefix(10) + " "), "today's date: \(lines[2])")
        #expect(lines[2].contains(", commit \(head)"))
        #expect(lines[2].contains(", `imagent-bench codec --seconds 0.05 --markdown`, load average "))
        #expect(lines[4] == "| size | CRC-32C MB/s | DATA encode frames/s | DATA decode frames/s | decode MB/s |")
        #expect(lines[5] == "|---:|---:|---:|---:|---:|")
        let document = try Self.benchmarksLines()
        #expect(document.contains(lines[4]) && document.contains(lines[5]), "BENCHMARKS.md's codec table has this header")
        let rows = lines[6...9].map { $0.split(separator: "|").map { $0.filter { $0 != " " } } }
        #expect(rows.map(\.first) == ["64B", "1KiB", "64KiB", "1MiB"])
        // Every rate is a positive number, grouped by thousands; 1 MiB has the CRC's alone.
        for row in rows {
            let figures = row.dropFirst().filter { !$0.isEmpty }
            #expect(figures.count == (row.first == "1MiB" ? 1 : 4), "\(row)")
            #expect(figures.allSatisfy { (Int($0.filter { $0 != "," }) ?? 0) > 0 && !$0.hasPrefix(",") }, "\(row)")
        }
    }
}
