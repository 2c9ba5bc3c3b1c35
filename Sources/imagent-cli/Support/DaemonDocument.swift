import AgentIPC

/// The JSON documents of RESULT and EVENT, parsed; the codec checks only
/// that they are UTF-8.
enum DaemonDocument {
    static func parse(_ text: String, from op: IPCOp) throws -> JSONValue {
        do {
            return try JSONParser.parse(text)
        } catch {
            throw CLIFailure(message: "imagentd answered \(op) with a document that is not JSON (\(error)); "
                + "the daemon and this imagent may be from different releases", status: .connectionFailed)
        }
    }
}
