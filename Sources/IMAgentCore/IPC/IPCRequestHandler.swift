import AgentIPC

/// What the IPC server hands to the daemon: connected clients and their
/// requests, already past HELLO. Called on the daemon's event loop.
protocol IPCRequestHandler: AnyObject {
    /// A client said HELLO. Return an error code to refuse it (LIMIT_REACHED).
    func clientGreeted(_ client: IPCClientConnection) -> (IPCErrorCode, String)?
    func clientDisconnected(_ client: IPCClientConnection)
    func handle(_ message: IPCMessage, request: UInt32, from client: IPCClientConnection)
    /// The client's channel became writable again: resume what was held back.
    func clientCanReceive(_ client: IPCClientConnection)
    /// WELCOME's fields.
    var welcome: IPCMessage.Welcome { get }
}
