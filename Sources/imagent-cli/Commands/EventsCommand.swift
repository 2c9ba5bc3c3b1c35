#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import ArgumentParser

/// `imagent events`: what happened recently (the daemon keeps a bounded history
/// of link, session and reload events); `watch` shows what happens from now on.
struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print imagentd's recent link, session and reload events, oldest first.",
        discussion: """
            The daemon keeps in memory (none survive a restart) the last 256 link and reload \
            events and the last 64 session events of each user, at most 512 of them in all. \
            Session events are shown to the session's owner and to admins only. One line per event as \
            in `imagent watch`; with --json, each event's JSON object on a line of its own.
            """)

    @OptionGroup var options: GlobalOptions

    @Option(help: ArgumentHelp("Only events of the last DURATION: 90s, 10m, 2h, 1d (a bare number is seconds).",
                               valueName: "duration"))
    var since: String?

    func validate() throws {
        if let since, Self.seconds(since) == nil {
            throw ValidationError("--since takes a duration such as 30s, 10m, 2h or 1d, not '\(since)'")
        }
    }

    func run() async throws {
        let text = try await options.withClient(for: "events") { try await $0.events() }
        let document = try DaemonDocument.parse(text, from: .events)
        let nowMS = Self.nowMilliseconds()
        let cutoff = since.flatMap(Self.seconds).map { nowMS - $0 * 1000 }
        for event in document["events"]?.elements ?? [] {
            if let cutoff, let time = event["time_ms"]?.double, time < cutoff { continue }
            Output.line(options.json ? event.compactText : WatchCommand.line(event.compactText))
        }
    }

    /// "90s", "10m", "2h", "1d" or "45" as seconds.
    static func seconds(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var number = Substring(text)
        var scale = 1.0
        if let last = text.last, let unit = units[last] {
            number = number.dropLast()
            scale = unit
        }
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        return value * scale
    }

    private static func nowMilliseconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) * 1000 + Double(spec.tv_nsec) / 1e6
    }
}
