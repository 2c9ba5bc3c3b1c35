import ArgumentParser
import Dispatch
import Logging
import RefServer

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `imagent-refserver`: the reference IMLink/1 server as a process.
@main
struct RefServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imagent-refserver",
        abstract: "The reference IMLink/1 server: services echo, sink and push, with fault knobs for tests.",
        discussion: """
            The first line on stdout is "listening on HOST:PORT" with the real port. Logs go to stderr. \
            SIGTERM or SIGINT stops the server cleanly (with --state, after the last commit).

            Admin commands are read one per line from stdin (a pipe or terminal) and, with \
            --admin-socket, from each connection to that Unix socket; each gets one reply line:

            \(AdminCommand.reference)
            """)

    @Option(help: ArgumentHelp("Address to listen on; port 0 picks a free port.", valueName: "host:port"))
    var listen: String

    @Option(help: ArgumentHelp("File of accepted tokens, one per line; re-read at every LOGIN.", valueName: "file"))
    var tokenFile: String

    @Option(help: ArgumentHelp("SQLite file (WAL) that keeps sessions and undelivered messages across restarts; without it state is in memory only.", valueName: "file"))
    var state: String?

    @Option(help: "HEARTBEAT_MS sent in LOGIN_OK; a connection silent for 3 × this is closed.")
    var heartbeatMs: UInt32 = 30_000

    @Option(help: "MAX_FRAME announced in HELLO_OK: the largest body accepted (at most 16777216).")
    var maxFrame: UInt32 = 1 << 20

    @Option(help: ArgumentHelp("TLS certificate chain (PEM); needs --tls-key. ALPN imlink/1.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("TLS private key (PEM); needs --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Option(help: ArgumentHelp("Unix socket that accepts admin commands, one per line.", valueName: "path"))
    var adminSocket: String?

    @Option(help: "Messages a new push session receives.")
    var pushCount: Int = 10

    @Option(help: "Payload bytes of each pushed message.")
    var pushSize: Int = 64

    @Option(help: "Pushed messages per second (0: all at once).")
    var pushRate: Int = 10

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        _ = try endpoint()
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level \"\(logLevel)\"") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        if let problem = makeConfiguration().problem { throw ValidationError(problem) }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "imagent.refserver")
        // Taken before anything opens a descriptor: were stdin closed, a
        // socket could take number 0 and pass for it. Duplicates, so the
        // server closing them at end of input leaves stdin and stdout alone.
        let commandInput = dup(STDIN_FILENO)
        let commandOutput = dup(STDOUT_FILENO)
        // Ignored as signals, delivered as events below, so shutdown is orderly.
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let (signals, signalContinuation) = AsyncStream.makeStream(of: Int32.self)
        let sources = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { signalContinuation.yield(number) }
            source.resume()
            return source
        }

        let server = try await RefServer.start(configuration: makeConfiguration(), logger: logger)
        print("listening on \(server.address)")
        fflush(nil)  // every stream: `stdout` itself is not concurrency-safe to name in Swift 6
        if commandInput >= 0, commandOutput >= 0 {
            do {
                try await server.serveCommands(input: commandInput, output: commandOutput)
            } catch {
                logger.debug("no admin commands on stdin: \(error)")
            }
        } else {
            logger.debug("no admin commands on stdin: stdin or stdout is closed")
            for descriptor in [commandInput, commandOutput] where descriptor >= 0 { close(descriptor) }
        }

        for await number in signals {
            logger.info("signal \(number): stopping")
            break
        }
        sources.forEach { $0.cancel() }
        try await server.stop()
    }

    private func endpoint() throws -> (host: String, port: Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
              (0...65535).contains(port) else {
            throw ValidationError("--listen needs HOST:PORT with a port from 0 to 65535, not \"\(listen)\"")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen needs a host, e.g. 127.0.0.1:0") }
        return (host, port)
    }

    private func makeConfiguration() -> RefServerConfiguration {
        let (host, port) = (try? endpoint()) ?? ("127.0.0.1", 0)
        return RefServerConfiguration(
            host: host, port: port, tokenFile: tokenFile, statePath: state, heartbeatMS: heartbeatMs,
            maxFrame: maxFrame, tls: tlsCert.flatMap { cert in tlsKey.map { .init(certificatePath: cert, privateKeyPath: $0) } },
            adminSocketPath: adminSocket, push: .init(count: pushCount, size: pushSize, rate: pushRate))
    }
}
