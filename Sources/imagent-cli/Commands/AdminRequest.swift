import AgentIPC

/// What CONNECT, DISCONNECT, RECONNECT and RELOAD have in common: one
/// request, an OK, and a sentence saying what now happens.
enum AdminRequest {
    static func run(_ options: GlobalOptions, op: IPCOp, done: String,
                    _ request: (IPCClient) async throws -> Void) async throws {
        try await options.withClient(for: "\(op)".lowercased()) { try await request($0) }
        if options.json {
            Output.json(.object(["ok": .bool(true), "request": .string("\(op)")]))
        } else {
            Output.line(done)
        }
    }
}
