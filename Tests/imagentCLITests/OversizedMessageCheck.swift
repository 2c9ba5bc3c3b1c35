import AgentIPC
import NIOCore
import Testing

/// Sends "small", a payload of `size` bytes that the upstream can never take, and
/// "after" on one echo session of the daemon at `socketPath`: the two small ones
/// come back, the big one alone fails with EXPIRED PAYLOAD_TOO_LARGE, and the
/// link is never dropped for it. `limit` names the upstream's limit in the log.
func expectOversizedMessageFailsAlone(socketPath: String, size: Int, limit: String) async throws {
    let client = try await IPCClient.connect(socketPath: socketPath, clientName: "big")
    let session = try await client.open(service: "echo").session
    var events = client.events.makeAsyncIterator()
    try await client.send(session: session, text: "small")
    try await client.send(session: session, payload: ByteBuffer(repeating: 0x62, count: size))
    try await client.send(session: session, text: "after")
    var echoes: [String] = []
    var expired: [IPCMessage.Expired] = []
    while echoes.count < 2, let event = try await events.next() {
        switch event {
        case .message(let message):
            echoes.append(String(buffer: message.payload))
            try await client.ack(session: session, seq: message.seq)
        case .expired(let message): expired.append(message)
        default: continue
        }
    }
    print("over \(limit): \(expired.map { "seq \($0.seq) code \($0.code): \($0.message ?? "")" })")
    #expect(echoes == ["small", "after"])
    #expect(expired.map(\.seq) == [2])
    #expect(expired.first?.code == .payloadTooLarge)
    let status = try await client.status()
    #expect(status.contains("\"reconnects\":0"), "the link was dropped: \(status)")
    await client.close()
}
