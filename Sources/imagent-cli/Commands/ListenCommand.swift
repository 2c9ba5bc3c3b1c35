import AgentIPC
import ArgumentParser
import NIOCore

/// `imagent listen`: read a session's inbound messages and acknowledge them.
struct ListenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Print a session's inbound messages and acknowledge them, until Ctrl-C or --count.",
        discussion: """
            Attaches to the session (another client attached to it gets SESSION_BUSY), prints each \
            message as "#SEQ TEXT" (payloads that are not UTF-8, and all with --hex, as hex digits), \
            and acknowledges it once printed, so imagentd never delivers it again. Messages not yet \
            acknowledged come again after the next attach. With --json, one object per message: \
            {"session":…,"seq":…,"size":…,"hex":"…","text":"…"} (text only for UTF-8 payloads).
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The session to listen on.", valueName: "session"))
    var session: UInt64

    @Option(help: ArgumentHelp("Stop after printing this many messages.", valueName: "n"))
    var count: Int?

    @Option(name: .customLong("from-seq"),
            help: ArgumentHelp("Print only messages from this seq on; earlier ones are acknowledged unprinted "
                + "(you processed them before).", valueName: "seq"))
    var fromSeq: UInt64?

    @Flag(help: "Print every payload as hex digits.")
    var hex = false

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be 1 or more") }
    }

    func run() async throws {
        Interrupt.exitQuietly()
        try await options.withClient(for: "listen") { client in
            _ = try await client.attach(session: session)
            var printed = 0
            for try await event in client.events {
                switch event {
                case .message(let message) where message.session == session:
                    if message.seq >= fromSeq ?? 0 {
                        Output.line(line(for: message))
                        printed += 1
                    }
                    // With a request id, so that a refused ACK is reported
                    // here, and the last one is processed before we exit.
                    _ = try await client.request(.ack(.init(session: session, seq: message.seq)))
                    if let count, printed >= count { return }
                case .sessionState(let change) where change.session == session:
                    try Self.checkStillOpen(change)
                case .error(let error):
                    throw IPCClientError.refused(op: .ack, code: error.code, message: error.message)
                default:
                    continue
                }
            }
        }
    }

    private static func checkStillOpen(_ change: IPCMessage.SessionStateChange) throws {
        guard change.state == .closed || change.state == .failed else { return }
        let reason = change.code.map { " with \($0)" } ?? ""
        let detail = change.message.map { ": \($0)" } ?? ""
        throw CLIFailure(message: "session \(change.session) is \(change.state)\(reason)\(detail)", status: .refused)
    }

    private func line(for message: IPCMessage.InboundMessage) -> String {
        let bytes = Array(message.payload.readableBytesView)
        let hexDigits = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let text = String(validating: bytes, as: UTF8.self)
        if options.json {
            var members: [JSONValue.Member] = [
                .init(key: "session", value: .integer(message.session)),
                .init(key: "seq", value: .integer(message.seq)),
                .init(key: "size", value: .integer(bytes.count)),
                .init(key: "hex", value: .string(hexDigits)),
            ]
            if let text { members.append(.init(key: "text", value: .string(text))) }
            return JSONValue.object(members).compactText
        }
        if hex || text == nil {
            return "#\(message.seq) \(hex ? "" : "hex:")\(hexDigits)"
        }
        return "#\(message.seq) \(text ?? "")"
    }
}
