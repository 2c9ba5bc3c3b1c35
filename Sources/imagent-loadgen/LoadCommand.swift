import ArgumentParser

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `imagent-loadgen`: one process, N sessions, a checked stream each way.
@main
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imagent-loadgen",
        abstract: "Load through imagentd: N sessions, every echoed message checked exactly once and in order.",
        discussion: """
            Opens --sessions sessions to --service (echo) and sends --messages messages on each, at most \
            --window per session waiting for ACCEPTED. Each payload carries the process tag, the session \
            index and the message number, so every echo is checked: exactly once, in order, intact.

            The daemon may be killed and restarted meanwhile: the program reconnects, attaches its \
            sessions again by id (OPEN SESSION), resumes sending after OPENED's SENT_SEQ and receiving \
            after the last SEQ it processed (redelivered older ones are skipped, as ipc.md asks of a \
            client). Agent IPC has no idempotency key; SENT_SEQ serves instead, because this program is \
            its sessions' only sender and sends in order: message n is the session's n-th SEND, so its \
            seq is n, and SENT_SEQ = s means messages 1…s are stored — also one whose ACCEPTED was lost \
            in a crash — and n > s are not. (After a crash the store holds exactly what was committed; \
            with the daemon alive, OPENED waits for SENDs still being stored.) One corner is reported, \
            not repaired: if a SEND is refused with QUEUE_FULL while later ones are in flight, those may \
            be stored under seqs one lower than their numbers; keep --window below the daemon's \
            outbox_messages.

            At the end one JSON line on stdout: sent, accepted, received, lost, duplicated, out_of_order, \
            latency p50/p99 (send to echo) and more. Exit status 0 only when every message arrived once, in \
            order, intact; 1 otherwise; 2 for bad options.
            """)

    @Option(help: ArgumentHelp("The daemon's socket (default: $IMAGENT_SOCKET, then the usual places).", valueName: "path"))
    var socket: String?

    @Option(help: "The service the sessions talk to; only echo sends messages back.")
    var service = "echo"

    @Option(help: "Sessions this process opens.")
    var sessions = 10

    @Option(help: "Messages sent (and echoed) per session.")
    var messages = 1000

    @Option(help: "Payload bytes of each message (at least 16).")
    var size = 64

    @Option(help: "Sends per session waiting for ACCEPTED at once.")
    var window = 32

    @Option(help: "Acknowledge received messages every this many per session (and at the last).")
    var ackEvery = 64

    @Option(name: .customLong("stall-reading"), help: ArgumentHelp(
        "Freeze the whole process (SIGSTOP; a helper sends SIGCONT) for this many seconds once --stall-after messages arrived: a client that reads nothing.",
        valueName: "seconds"))
    var stallReading: Double = 0

    @Option(help: "Messages received by this process before it stalls (with --stall-reading).")
    var stallAfter = 100

    @Option(help: ArgumentHelp("Give up after this many seconds: print what arrived and exit 1.", valueName: "seconds"))
    var deadline: Double = 600

    @Option(help: ArgumentHelp("File keeping the session ids, so a restarted loadgen attaches the same sessions.",
                               valueName: "file"))
    var state: String?

    @Option(help: "A number written into every payload and the report, to tell processes apart.")
    var tag: UInt32 = 0

    @Option(name: .customLong("reattach-every"), help: ArgumentHelp(
        "Every this many seconds, close the connection to the daemon and attach the sessions again on a new one, keeping this process's accounting: a client that detaches and comes back (0: never).",
        valueName: "seconds"))
    var reattachEvery: Double = 0

    @Option(name: .customLong("latency-file"), help: ArgumentHelp(
        "At the end, write one line per echoed message to this file: when it was sent (Unix microseconds) and its latency (microseconds).",
        valueName: "file"))
    var latencyFile: String?

    @Option(name: .customLong("interval-ms"), help: ArgumentHelp(
        "Pace each session: message N is sent no earlier than (N − 1) × this many milliseconds after the start, like an echo every so often (0: as fast as --window allows).",
        valueName: "ms"))
    var intervalMS = 0

    @Flag(help: "Leave the sessions open at the end (default: CLOSE them once everything arrived).")
    var keepSessions = false

    func validate() throws {
        guard sessions >= 1 else { throw ValidationError("--sessions must be at least 1") }
        guard messages >= 1 else { throw ValidationError("--messages must be at least 1") }
        guard size >= Payload.headerSize else { throw ValidationError("--size must be at least \(Payload.headerSize)") }
        guard window >= 1 else { throw ValidationError("--window must be at least 1") }
        guard ackEvery >= 1 else { throw ValidationError("--ack-every must be at least 1") }
        guard stallReading >= 0, deadline > 0 else { throw ValidationError("--stall-reading and --deadline must be positive") }
        guard reattachEvery >= 0 else { throw ValidationError("--reattach-every must be 0 or more") }
        guard intervalMS >= 0 else { throw ValidationError("--interval-ms must be 0 or more") }
    }

    func run() async throws {
        let options = LoadOptions(socket: socket, service: service, sessions: sessions, messages: messages, size: size,
                                  window: window, ackEvery: ackEvery, stallSeconds: stallReading, stallAfter: stallAfter,
                                  deadlineSeconds: deadline, stateFile: state, tag: tag, closeAtEnd: !keepSessions,
                                  reattachSeconds: reattachEvery, latencyFile: latencyFile, intervalMS: intervalMS)
        let report = await LoadRunner(options).run()
        print(report.json)
        fflush(nil)
        if !report.passed { throw ExitCode(1) }
    }
}

struct LoadOptions: Sendable {
    var socket: String?
    var service: String
    var sessions: Int
    var messages: Int
    var size: Int
    var window: Int
    var ackEvery: Int
    var stallSeconds: Double
    var stallAfter: Int
    var deadlineSeconds: Double
    var stateFile: String?
    var tag: UInt32
    var closeAtEnd: Bool
    var reattachSeconds: Double = 0
    var latencyFile: String?
    var intervalMS = 0
}

/// Progress and trouble go to stderr; stdout carries only the report.
func note(_ text: String) {
    let line = Array("imagent-loadgen: \(text)\n".utf8)
    _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
