import AgentIPC

/// The exit codes of `imagent`, so that scripts can tell failures apart.
///
/// | code | meaning |
/// |-----:|---------|
/// | 0 | success |
/// | 1 | usage: a bad command line |
/// | 2 | imagentd is not running (no socket, or nobody listening on it) |
/// | 3 | permission denied: on the socket, or the daemon's PERMISSION_DENIED |
/// | 4 | the daemon refused the request with another IPC error code (printed) |
/// | 5 | the daemon did not answer in time (`--timeout`) |
/// | 6 | the connection failed or broke, or the daemon broke the protocol |
///
/// The same table is in `imagent --help` and `imagent(1)`.
enum ExitStatus: Int32, Sendable {
    case success = 0
    case usage = 1
    case daemonNotRunning = 2
    case permissionDenied = 3
    case refused = 4
    case timedOut = 5
    case connectionFailed = 6

    /// For `imagent --help`: the table above, as the help text shows it.
    static let helpText = """
        Exit status:
          0  success
          1  usage error (bad arguments)
          2  imagentd is not running (no socket, or nobody listening on it)
          3  permission denied (on the socket, or PERMISSION_DENIED from imagentd)
          4  imagentd refused the request (its IPC error code is printed)
          5  imagentd did not answer within --timeout
          6  the connection failed or broke, or imagentd broke the protocol
        """

    init(for error: IPCClientError) {
        switch error {
        case .daemonNotRunning, .daemonNotListening: self = .daemonNotRunning
        case .permissionDenied: self = .permissionDenied
        case .refused(_, let code, _): self = code == .permissionDenied ? .permissionDenied : .refused
        case .payloadTooLarge: self = .refused
        case .timedOut: self = .timedOut
        case .connectFailed, .connectionLost, .protocolViolation, .unexpectedReply, .versionUnsupported, .closed:
            self = .connectionFailed
        }
    }
}

/// A failure the CLI itself diagnoses, with the message to print and the
/// status to exit with.
struct CLIFailure: Error, CustomStringConvertible {
    var message: String
    var status: ExitStatus

    var description: String { message }
}
