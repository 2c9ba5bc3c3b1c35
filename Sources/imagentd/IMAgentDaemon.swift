#if canImport(Glibc)
import Glibc
#endif
import IMAgentCore
import NIOCore
import NIOPosix

/// `imagentd`: the connection agent daemon.
///
/// The options are parsed by hand (`DaemonArguments`), not with
/// swift-argument-parser: that package links FoundationEssentials, about 2 MB
/// of resident memory for a daemon that otherwise needs none of it.
///
/// `main` is synchronous so that Swift concurrency's global executor can be
/// replaced before any task runs (see `main()`).
@main
struct IMAgentDaemon {
    /// Runs `asyncMain()` with Swift concurrency's jobs on the daemon's one
    /// event loop thread (`ConcurrencyOnEventLoop`), set up before any task runs.
    static func main() {
        AllocatorSettings.apply()
        NIOSingletons.groupLoopCountSuggestion = 1
        if !ConcurrencyOnEventLoop.install() {
            printError("imagentd: warning: Swift concurrency stays on libdispatch's threads, which wake an idle daemon every second")
        }
        let done = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        Task.detached {
            await asyncMain()
            done.succeed()
        }
        try? done.futureResult.wait()
        exit(0)
    }

    static func asyncMain() async {
        let arguments: DaemonArguments
        do {
            arguments = try DaemonArguments(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            printError("Error: \(error)")
            printError(DaemonArguments.usage)
            exit(64)  // EX_USAGE, as swift-argument-parser exits on a usage error.
        }
        switch arguments.action {
        case .help:
            printLine(DaemonArguments.help)
            exit(0)
        case .version:
            printLine(DaemonMain.version)
            exit(0)
        case .run:
            break
        }
        do {
            try await DaemonMain(configPath: arguments.configPath, checkConfigPath: arguments.checkConfigPath,
                                 checkStore: arguments.checkStore, development: arguments.development,
                                 developmentDirectory: arguments.developmentDirectory).run()
        } catch let exit as DaemonExit {
            Glibc.exit(exit.status)
        } catch {
            printError("imagentd: \(error)")
            exit(1)
        }
    }
}
