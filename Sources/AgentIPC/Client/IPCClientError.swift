/// Everything that can go wrong between a local program and `imagentd`, as
/// the client sees it. Each description says what happened and what to do,
/// because programs tend to print these errors as they are.
public enum IPCClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Nothing at the socket path (`ENOENT`): the daemon is not running, or
    /// runs with another socket.
    case daemonNotRunning(socketPath: String, alsoTried: [String])
    /// The socket file exists but nobody accepts on it (`ECONNREFUSED`): a
    /// daemon stopped without removing it.
    case daemonNotListening(socketPath: String)
    /// The socket or its directory is not ours to open (`EACCES`, `EPERM`).
    case permissionDenied(socketPath: String)
    /// Any other failure to connect, with the system's reason.
    case connectFailed(socketPath: String, reason: String)
    /// The daemon answered `op` with `ERROR`.
    case refused(op: IPCOp, code: IPCErrorCode, message: String?)
    /// No reply to `op` within `after`.
    case timedOut(op: IPCOp, after: Duration)
    /// The connection ended while requests were pending or events expected;
    /// `reason` is the daemon's last `ERROR` when it sent one before closing.
    case connectionLost(reason: String)
    /// The daemon sent something Agent IPC/1 does not allow; the connection is closed.
    case protocolViolation(String)
    /// The daemon answered `op` with a reply the protocol does not give to it.
    case unexpectedReply(op: IPCOp, reply: IPCOp)
    /// The daemon speaks another version of the protocol.
    case versionUnsupported(daemonIPCVersion: UInt8, daemonVersion: String)
    /// A payload above the daemon's MAX_PAYLOAD, refused before it was sent
    /// (the daemon would close the connection on it).
    case payloadTooLarge(size: Int, limit: UInt32)
    /// The program itself closed this client.
    case closed

    public var description: String {
        switch self {
        case .daemonNotRunning(let path, let alsoTried):
            let tried = alsoTried.isEmpty ? "" : " (nor at \(alsoTried.joined(separator: ", ")))"
            return "imagentd is not running: no socket at \(path)\(tried); start it with `systemctl start imagentd`, "
                + "or set \(IPCSocketPath.environmentVariable) to the socket of the daemon you mean"
        case .daemonNotListening(let path):
            return "imagentd is not running: \(path) exists but nobody accepts connections on it "
                + "(left over from a daemon that stopped); start it with `systemctl start imagentd`"
        case .permissionDenied(let path):
            return "permission denied on \(path): add yourself to the imagent group "
                + "(`sudo usermod -aG imagent $USER`, then log in again), or run as root"
        case .connectFailed(let path, let reason):
            return "cannot connect to imagentd at \(path): \(reason)"
        case .refused(let op, let code, let message):
            let detail = message.map { ": \($0)" } ?? ""
            return "imagentd refused \(op) with \(code)\(detail)\(Self.advice(for: code))"
        case .timedOut(let op, let after):
            return "imagentd did not answer \(op) within \(after.secondsText); "
                + "check it with `systemctl status imagentd` and `journalctl -u imagentd`"
        case .connectionLost(let reason):
            return "lost the connection to imagentd: \(reason); check `journalctl -u imagentd`, then connect again"
        case .protocolViolation(let detail):
            return "imagentd sent a frame this client cannot accept (\(detail)); "
                + "the daemon and this program may be from different releases"
        case .unexpectedReply(let op, let reply):
            return "imagentd answered \(op) with \(reply), which Agent IPC/1 does not allow; "
                + "the daemon and this program may be from different releases"
        case .versionUnsupported(let ipcVersion, let daemonVersion):
            return "imagentd \(daemonVersion) speaks Agent IPC/\(ipcVersion), this program speaks Agent IPC/1; "
                + "install matching releases"
        case .payloadTooLarge(let size, let limit):
            return "the message is \(size) bytes, above the daemon's MAX_PAYLOAD of \(limit) bytes; "
                + "split it, or raise the daemon's payload limit"
        case .closed:
            return "this client was closed; connect again"
        }
    }

    /// What to do about a refusal, where the code alone does not say it.
    private static func advice(for code: IPCErrorCode) -> String {
        switch code {
        case .permissionDenied:
            "; this needs root or the daemon's admin group, or the session belongs to another user"
        case .sessionBusy:
            "; another client is attached to the session: stop it first"
        case .queueFull:
            "; the session's outbox is full: retry later"
        case .unknownSession:
            "; list your sessions with `imagent sessions`"
        case .sessionClosed:
            "; open a new session"
        case .shuttingDown:
            "; the daemon is stopping: retry once it is back"
        case .limitReached:
            "; too many clients or sessions: close some, or raise the daemon's limits"
        case .payloadTooLarge:
            "; send a smaller message"
        case .versionUnsupported:
            "; install matching releases of the daemon and this program"
        default:
            ""
        }
    }
}
