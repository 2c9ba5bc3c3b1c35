extension IPCClient {
    /// The largest MAX_PAYLOAD the client takes from WELCOME: the most an imagentd can announce
    /// (`[limits] max_payload_bytes`, imagentd.toml(5)), and the cap of the C and Python clients.
    /// A larger value counts as this much, so whatever listens at the socket cannot make the
    /// client accept, and buffer, frames of up to 4 GiB.
    public static let maxPayloadCeiling: UInt32 = 16 << 20

    /// HELLO's reply as the client takes it: a WELCOME of IPC version 1 with a MAX_PAYLOAD of at
    /// least 1, that MAX_PAYLOAD lowered to `maxPayloadCeiling`.
    static func acceptWelcome(_ reply: IPCMessage) throws(IPCClientError) -> IPCMessage.Welcome {
        var welcome: IPCMessage.Welcome
        switch reply {
        case .welcome(let value): welcome = value
        case .error(let error): throw .refused(op: .hello, code: error.code, message: error.message)
        default: throw .unexpectedReply(op: .hello, reply: reply.op)
        }
        guard welcome.ipcVersion == 1 else {
            throw .versionUnsupported(daemonIPCVersion: welcome.ipcVersion, daemonVersion: welcome.daemonVersion)
        }
        guard welcome.maxPayload > 0 else {
            throw .protocolViolation("WELCOME announces a MAX_PAYLOAD of 0: no message could be sent")
        }
        welcome.maxPayload = min(welcome.maxPayload, maxPayloadCeiling)
        return welcome
    }
}
