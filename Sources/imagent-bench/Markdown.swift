#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import IMAgentTestKit

// `--markdown`: after its own report, a subcommand prints the table BENCHMARKS.md shows for it,
// under a line saying when, on which commit and by which command, to paste over the section's table.

/// Whether this run was asked for BENCHMARKS.md's tables (`--markdown`, any subcommand).
let markdownRequested = CommandLine.arguments.dropFirst().contains("--markdown")

/// A table as BENCHMARKS.md holds it: the header, the alignment row (numbers to the right), the rows.
struct MarkdownTable {
    /// A column: its title, and whether it holds numbers (aligned right).
    enum Column {
        case text(String)
        case number(String)

        var title: String { switch self { case .text(let title), .number(let title): title } }
        var alignment: String { if case .number = self { "---:" } else { "---" } }
    }

    let columns: [Column]
    private(set) var rows: [[String]] = []

    init(_ columns: [Column]) { self.columns = columns }

    /// One row, a cell per column.
    mutating func add(_ cells: [String]) {
        precondition(cells.count == columns.count, "a row of \(cells.count) cells in a table of \(columns.count) columns")
        rows.append(cells)
    }

    var text: String {
        func line(_ cells: [String]) -> String { "| " + cells.joined(separator: " | ") + " |" }
        let alignment = "|" + columns.map(\.alignment).joined(separator: "|") + "|"
        return ([line(columns.map(\.title)), alignment] + rows.map(line)).joined(separator: "\n")
    }
}

/// The line above a table: "2026-11-27 16:40 UTC, commit 6b930b0, release build, `imagent-bench codec --markdown`,
/// load average 0.52 0.61 0.70".
struct RunStamp {
    let date: String
    let commit: String
    let build: String
    let command: String
    let load: String

    var line: String { "\(date), commit \(commit), \(build), `\(command)`, load average \(load)" }

    /// This run: the time now, the checkout's HEAD, this binary's build, `arguments` (this process's by default).
    static func now(arguments: [String] = Array(CommandLine.arguments.dropFirst())) async -> RunStamp {
        #if DEBUG
        let build = "debug build"
        #else
        let build = "release build"
        #endif
        return RunStamp(date: utcMinute(secondsSinceEpoch: Int(time(nil))), commit: await checkoutCommit(), build: build,
                        command: (["imagent-bench"] + arguments).joined(separator: " "), load: loadAverage())
    }
}

/// Prints, when `--markdown` was given, the stamp and then each table, blank lines between.
func printMarkdown(_ tables: MarkdownTable...) async { await printMarkdown(tables) }

func printMarkdown(_ tables: [MarkdownTable]) async {
    guard markdownRequested, !tables.isEmpty else { return }
    print("\nBENCHMARKS.md:\n\n" + (await RunStamp.now()).line)
    for table in tables { print("\n" + table.text) }
}

/// "YYYY-MM-DD HH:MM UTC" of a time in seconds since 1970 (Howard Hinnant's days-to-civil, no Foundation).
func utcMinute(secondsSinceEpoch seconds: Int) -> String {
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    let minuteOfDay = (seconds - days * 86_400) / 60
    let shifted = days + 719_468
    let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
    let dayOfEra = shifted - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
    return "\(year)-\(two(month))-\(two(day)) \(two(minuteOfDay / 60)):\(two(minuteOfDay % 60)) UTC"
}

/// `git rev-parse --short HEAD` in the checkout this binary was built from, "+ uncommitted changes" when
/// `git status` lists a tracked file as changed; "unknown" without git.
func checkoutCommit() async -> String {
    let checkout = ClientLibrary.checkout
    guard let head = try? await ChildProcess.run("/usr/bin/git", ["-C", checkout, "rev-parse", "--short", "HEAD"], limit: .seconds(10)),
          head.status == 0, !head.signaled else { return "unknown" }
    let commit = String(head.stdout.prefix { $0 != "\n" })
    let status = try? await ChildProcess.run("/usr/bin/git", ["-C", checkout, "status", "--porcelain", "--untracked-files=no"],
                                             limit: .seconds(10))
    return status.map { $0.status == 0 && !$0.stdout.isEmpty } == true ? commit + " + uncommitted changes" : commit
}

/// "64 B", "1 KiB", "64 KiB", "1 MiB": a payload size as the tables name it.
func sizeLabel(_ bytes: Int) -> String {
    bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : bytes % 1024 == 0 ? "\(bytes / 1024) KiB" : "\(bytes) B"
}

/// "1.54×".
func ratioLabel(_ value: Double) -> String { format(value, decimals: 2) + "×" }
