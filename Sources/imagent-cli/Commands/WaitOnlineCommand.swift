import AgentIPC
import ArgumentParser

/// `imagent wait-online`: returns once the link is up, for scripts and units
/// that need the server (as `nm-online` does for the network).
struct WaitOnlineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait-online",
        abstract: "Wait until imagentd's link to the server is up; exit 0 then, 5 after --timeout seconds (default 30).",
        discussion: """
            Waits for imagentd too, if it is not running yet (as at boot). --timeout 0 waits \
            forever. Exit status: 0 the link is up, 5 it did not come up in time (the last state \
            is printed), 2 imagentd never answered, 3 permission denied on the socket.
            """)

    @OptionGroup var options: GlobalOptions

    /// How often the link's state is asked for while it is down.
    static let pollInterval: Duration = .milliseconds(200)

    func run() async throws {
        let limit = options.timeout ?? 30
        let clock = ContinuousClock()
        let deadline: ContinuousClock.Instant? = limit == 0 ? nil : clock.now + .milliseconds(Int64((limit * 1000).rounded(.up)))
        func remaining() -> Duration? { deadline.map { max(.zero, $0 - clock.now) } }
        var lastState: String?
        var unreachable: IPCClientError?

        while true {
            // Each answer may take what is left, at most 10 s, so a stuck daemon cannot outlast the deadline.
            let answerLimit = remaining().map { min($0, .seconds(10)) } ?? .seconds(10)
            do {
                let client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent wait-online",
                                                         timeout: max(answerLimit, .milliseconds(100)))
                unreachable = nil
                let online: Bool
                do {
                    online = try await poll(client, remaining: remaining, lastState: &lastState)
                    await client.close()
                } catch {
                    await client.close()
                    throw error
                }
                if online { return }
            } catch let error as IPCClientError {
                switch error {
                case .permissionDenied, .refused, .versionUnsupported: throw error
                case .daemonNotRunning, .daemonNotListening, .connectFailed: unreachable = error
                case .timedOut, .connectionLost, .protocolViolation, .unexpectedReply, .payloadTooLarge, .closed: break
                }
            }
            guard try await pause(until: remaining()) else { break }
        }
        if let unreachable, lastState == nil { throw unreachable }
        throw CLIFailure(message: "the link did not come up within \(HumanFormat.decimal(limit)) s; "
            + "it is \(lastState ?? "unknown"); see `imagent status`", status: .timedOut)
    }

    /// Asks for STATUS until the link is up (true, after printing it) or the time is up (false).
    private func poll(_ client: IPCClient, remaining: () -> Duration?, lastState: inout String?) async throws -> Bool {
        while true {
            let status = try DaemonDocument.parse(try await client.status(), from: .status)
            let link = status["link"]
            if link["state"]?.stringValue == "connected" {
                if options.json {
                    Output.json(link ?? .null)
                } else {
                    Output.line("imagentd is online: connected to \(link["endpoint"].displayText)")
                }
                return true
            }
            lastState = link["detail"]?.stringValue ?? link["state"]?.stringValue
            guard try await pause(until: remaining()) else { return false }
        }
    }

    /// Sleeps one poll interval, or what is left of it; false when the time is up.
    private func pause(until remaining: Duration?) async throws -> Bool {
        guard let remaining else {
            try await Task.sleep(for: Self.pollInterval)
            return true
        }
        guard remaining > .zero else { return false }
        try await Task.sleep(for: min(remaining, Self.pollInterval))
        return true
    }
}
