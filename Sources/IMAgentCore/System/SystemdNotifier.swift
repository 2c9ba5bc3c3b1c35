import CSystemd
import Glibc

/// Tells the service manager how the daemon is doing, through the
/// `sd_notify(3)` protocol of a `Type=notify` unit: READY once the IPC socket
/// is served, STATUS for `systemctl status`, WATCHDOG pings, RELOADING and
/// STOPPING around a reload and a shutdown.
///
/// Outside systemd (`$NOTIFY_SOCKET` unset: a terminal, a test, `--dev`) every
/// call is a quiet no-op, so callers never have to ask where they run.
/// `sd_notify` reads the variable on every call and does not unset it, so a
/// notifier made before or after it is set behaves the same.
struct SystemdNotifier: Sendable {
    init() {}

    /// Whether a service manager listens: `$NOTIFY_SOCKET` is set and not empty.
    var isActive: Bool {
        guard let socket = getenv("NOTIFY_SOCKET") else { return false }
        return socket.pointee != 0
    }

    /// Start-up is complete: the socket accepts clients. `systemctl start`
    /// returns only now. Also sent after a reload has been applied.
    func ready(status: String? = nil) {
        send(["READY=1"] + Self.statusAssignment(status))
    }

    /// One line for `systemctl status`, e.g. the link state.
    func status(_ text: String) {
        send(Self.statusAssignment(text))
    }

    /// A reload (SIGHUP or the RELOAD request) has begun. systemd (≥ 253, for
    /// `Type=notify-reload`) wants the monotonic time with it to match the
    /// RELOADING to the reload it asked for; older versions ignore the extra
    /// field. Send `ready()` when the new configuration is in force.
    func reloading(status: String? = nil) {
        send(["RELOADING=1", "MONOTONIC_USEC=\(Self.monotonicMicroseconds())"] + Self.statusAssignment(status))
    }

    /// Graceful shutdown has begun: systemd shows "deactivating" and starts
    /// the unit's `TimeoutStopSec`.
    func stopping(status: String? = nil) {
        send(["STOPPING=1"] + Self.statusAssignment(status))
    }

    /// Asks for more time before systemd gives up on a start or a stop, e.g.
    /// while a large outbox is flushed on SIGTERM.
    func extendTimeout(by duration: Duration) {
        send(["EXTEND_TIMEOUT_USEC=\(Self.microseconds(duration))"])
    }

    /// Proves to the watchdog that the event loop still turns. Call it every
    /// `watchdogInterval` from the loop that does the work, never from a
    /// thread of its own, or a hung loop would still be reported alive.
    func watchdogPing() {
        send(["WATCHDOG=1"])
    }

    /// How often to call `watchdogPing()`: half of the unit's `WatchdogSec`
    /// (`$WATCHDOG_USEC`), as `sd_watchdog_enabled(3)` recommends, so that one
    /// late ping does not kill the service. Nil when no watchdog is armed for
    /// this process (also when `$WATCHDOG_PID` names another process).
    var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec / 2))
    }

    /// The newline-separated message the protocol carries, one `KEY=value` a line.
    static func message(_ assignments: [String]) -> String {
        assignments.joined(separator: "\n")
    }

    /// STATUS takes one line; a newline in the text would start a bogus assignment.
    static func statusAssignment(_ text: String?) -> [String] {
        guard let text else { return [] }
        let line = String(text.map { $0.isNewline ? " " : $0 })
        return ["STATUS=\(line)"]
    }

    private func send(_ assignments: [String]) {
        guard !assignments.isEmpty, isActive else { return }
        // A failed notification is not worth failing the daemon for: systemd
        // reports a missing READY or WATCHDOG itself, with the unit's name.
        _ = sd_notify(0, Self.message(assignments))
    }

    private static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
    }
}
