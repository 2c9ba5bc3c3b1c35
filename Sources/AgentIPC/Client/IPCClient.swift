import NIOCore

/// A local program's connection to `imagentd`, with async/await.
///
/// ```swift
/// let client = try await IPCClient.connect(clientName: "my-app")
/// let session = try await client.open(service: "echo")
/// let seq = try await client.send(session: session.session, text: "hello")   // durably stored
/// for try await event in client.events {
///     guard case .message(let message) = event else { continue }
///     handle(message.payload)
///     try await client.ack(session: message.session, seq: message.seq)     // processed: never again
/// }
/// await client.close()
/// ```
///
/// Requests may be made from any task, concurrently; replies are matched to
/// them by request id. `ERROR` replies are thrown as
/// `IPCClientError.refused(op:code:message:)`. When the connection ends, every
/// pending request fails with the same error and `events` ends with it.
public final class IPCClient: Sendable {
    /// What the daemon said in WELCOME: its version, MAX_PAYLOAD (at most `maxPayloadCeiling`) and link state.
    public let welcome: IPCMessage.Welcome
    /// The socket this client is connected to, and how it was chosen.
    public let socketPath: IPCSocketPath
    /// Everything the daemon sends on its own. One consumer; see `IPCEvents`.
    public let events: IPCEvents
    /// How long each request waits for its reply; nil waits forever.
    public let requestTimeout: Duration?

    private let connection: IPCConnection

    private init(connection: IPCConnection, welcome: IPCMessage.Welcome, events: IPCEvents,
                 requestTimeout: Duration?) {
        self.connection = connection
        self.welcome = welcome
        self.socketPath = connection.socketPath
        self.events = events
        self.requestTimeout = requestTimeout
    }

    /// Connects to the daemon and says HELLO.
    ///
    /// - Parameters:
    ///   - socketPath: the socket to use; nil looks in the order `IPCSocketPath` documents
    ///     (`$IMAGENT_SOCKET`, `/run/imagent/imagent.sock`, `$XDG_RUNTIME_DIR/imagent/imagent.sock`).
    ///   - clientName: for the daemon's logs (cut to 128 bytes); the daemon
    ///     identifies clients by their kernel credentials, not by this.
    ///   - timeout: the limit for connecting, for the handshake and for each
    ///     later request; nil waits forever.
    /// - Throws: `IPCClientError`: `.daemonNotRunning`, `.permissionDenied`, … with advice.
    public static func connect(socketPath: String? = nil, clientName: String,
                               timeout: Duration? = .seconds(30)) async throws -> IPCClient {
        let location = IPCSocketPath.resolve(explicit: socketPath)
        let connection = try await IPCConnection.connect(to: location, timeout: timeout)
        do {
            let hello = IPCMessage.hello(.init(ipcVersion: 1, clientName: Self.truncatedName(clientName)))
            let welcome = try acceptWelcome(try await connection.exchange(hello, timeout: timeout))
            try await connection.setMaxPayload(welcome.maxPayload)
            return IPCClient(connection: connection, welcome: welcome, events: try await connection.events,
                             requestTimeout: timeout)
        } catch {
            await connection.close()
            throw error
        }
    }

    /// A client dropped without `close()` must not leave its connection
    /// (and the sessions attached through it) open for the process's lifetime.
    deinit {
        let handler = connection.handler
        connection.channel.eventLoop.execute { handler.value.closeByUser() }
    }

    // MARK: Requests

    /// Sends any request and returns its success reply.
    ///
    /// - Throws: `IPCClientError.refused` for an `ERROR` reply, `.timedOut`,
    ///   `.connectionLost`, or `CancellationError` when the task is cancelled.
    public func request(_ message: IPCMessage) async throws -> IPCMessage {
        try await request(message, timeout: requestTimeout)
    }

    /// `request(_:)` with its own time limit (nil: wait forever).
    public func request(_ message: IPCMessage, timeout: Duration?) async throws -> IPCMessage {
        let reply = try await connection.exchange(message, timeout: timeout)
        if case .error(let error) = reply {
            throw IPCClientError.refused(op: message.op, code: error.code, message: error.message)
        }
        return reply
    }

    /// Sends a request with request id 0: no reply on success; a failure
    /// comes later as an `.error` event. Returns once the frame is written.
    public func post(_ message: IPCMessage) async throws {
        try await connection.post(message)
    }

    // MARK: Sessions

    /// Creates a session for `service` and attaches this client to it.
    public func open(service: String, priority: IPCPriority = .normal,
                     durable: Bool = true) async throws -> IPCMessage.Opened {
        try await opened(.open(.init(service: service, priority: priority, durable: durable)))
    }

    /// Attaches this client to an existing session it owns; undelivered
    /// inbound messages follow as `.message` events, after `deliveredSeq`.
    public func attach(session: UInt64) async throws -> IPCMessage.Opened {
        try await opened(.open(.init(session: session)))
    }

    /// Hands one outbound message to the daemon and returns its seq once the
    /// daemon has stored it durably.
    ///
    /// - Parameter ttl: how long it may wait for the link (whole
    ///   milliseconds, at most about 49 days); nil waits forever.
    @discardableResult
    public func send(session: UInt64, payload: ByteBuffer, ttl: Duration? = nil) async throws -> UInt64 {
        guard payload.readableBytes <= Int(welcome.maxPayload) else {
            throw IPCClientError.payloadTooLarge(size: payload.readableBytes, limit: welcome.maxPayload)
        }
        let send = IPCMessage.Send(session: session, payload: payload, ttlMS: ttl.map(Self.milliseconds))
        let reply = try await request(.send(send))
        guard case .accepted(let accepted) = reply else {
            throw IPCClientError.unexpectedReply(op: .send, reply: reply.op)
        }
        return accepted.seq
    }

    /// Starts a SEND without waiting for ACCEPTED, for a program that keeps
    /// several messages of a session in flight. Sends started one after
    /// another from one task reach the daemon in that order, so their seqs
    /// follow the same order (concurrent `send` calls from several tasks
    /// promise no order). Await `accepted()` on the result for the seq.
    public func startSend(session: UInt64, payload: ByteBuffer, ttl: Duration? = nil) throws -> IPCPendingSend {
        guard payload.readableBytes <= Int(welcome.maxPayload) else {
            throw IPCClientError.payloadTooLarge(size: payload.readableBytes, limit: welcome.maxPayload)
        }
        let send = IPCMessage.Send(session: session, payload: payload, ttlMS: ttl.map(Self.milliseconds))
        return IPCPendingSend(reply: connection.start(.send(send), timeout: requestTimeout))
    }

    /// `send(session:payload:ttl:)` for UTF-8 text.
    @discardableResult
    public func send(session: UInt64, text: String, ttl: Duration? = nil) async throws -> UInt64 {
        try await send(session: session, payload: ByteBuffer(string: text), ttl: ttl)
    }

    /// Acknowledges every inbound message of the session up to `seq`
    /// (cumulative) with request 0, so it costs no round trip; the daemon
    /// will not deliver them again. A failure arrives as an `.error` event.
    public func ack(session: UInt64, seq: UInt64) async throws {
        try await post(.ack(.init(session: session, seq: seq)))
    }

    /// Ends the session for good, here and upstream.
    public func close(session: UInt64) async throws {
        try await expectOK(.close(.init(session: session)))
    }

    /// Lets go of the session without ending it; it can be attached again.
    public func detach(session: UInt64) async throws {
        try await expectOK(.detach(.init(session: session)))
    }

    // MARK: Queries and administration

    /// The daemon's STATUS document (link, daemon, sessions), as JSON text.
    public func status() async throws -> String { try await result(.status(.init())) }
    /// The caller's sessions (all of them for an admin), as JSON text.
    public func sessions() async throws -> String { try await result(.sessions(.init())) }
    /// Counters and gauges, as JSON text.
    public func metrics() async throws -> String { try await result(.metrics(.init())) }

    /// The daemon's recent link and session events (a bounded ring), as JSON text.
    public func events() async throws -> String { try await result(.events(.init())) }

    /// Subscribes to the daemon's EVENT stream; they arrive on `events` as
    /// `.watch` until the client is closed.
    @discardableResult
    public func watch() async throws -> IPCEvents {
        try await expectOK(.watch(.init()))
        return events
    }

    /// Round-trip time of one PING.
    public func ping() async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        let reply = try await request(.ping(.init()))
        guard case .pong = reply else { throw IPCClientError.unexpectedReply(op: .ping, reply: reply.op) }
        return clock.now - start
    }

    /// Admin: bring the link up.
    public func connectLink() async throws { try await expectOK(.connect(.init())) }
    /// Admin: take the link down; it stays down until `connectLink()`.
    public func disconnectLink() async throws { try await expectOK(.disconnect(.init())) }
    /// Admin: drop the link and connect again at once.
    public func reconnectLink() async throws { try await expectOK(.reconnect(.init())) }
    /// Admin: re-read the daemon's configuration. Returns the daemon's report
    /// (RESULT: what was applied, what needs a restart), or nil from a daemon
    /// that answers a bare OK.
    @discardableResult
    public func reload() async throws -> String? {
        let reply = try await request(.reload(.init()))
        switch reply {
        case .ok: return nil
        case .result(let document): return document.json
        default: throw IPCClientError.unexpectedReply(op: .reload, reply: reply.op)
        }
    }

    /// Closes the connection: pending requests fail with `.closed`, `events`
    /// ends without error, and the daemon detaches this client's sessions
    /// (they live on).
    public func close() async {
        await connection.close()
    }

    // MARK: Internals

    private func opened(_ message: IPCMessage) async throws -> IPCMessage.Opened {
        let reply = try await request(message)
        guard case .opened(let opened) = reply else {
            throw IPCClientError.unexpectedReply(op: message.op, reply: reply.op)
        }
        return opened
    }

    private func expectOK(_ message: IPCMessage) async throws {
        let reply = try await request(message)
        guard case .ok = reply else { throw IPCClientError.unexpectedReply(op: message.op, reply: reply.op) }
    }

    private func result(_ message: IPCMessage) async throws -> String {
        let reply = try await request(message)
        guard case .result(let document) = reply else {
            throw IPCClientError.unexpectedReply(op: message.op, reply: reply.op)
        }
        return document.json
    }

    /// TTL_MS is a u32 where 0 means forever: a positive duration below 1 ms
    /// becomes 1 ms rather than forever, and one above the range is capped.
    private static func milliseconds(_ duration: Duration) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0, seconds > 0 || attoseconds > 0 else { return 1 }
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        guard !milliseconds.overflow else { return UInt32.max }
        let total = milliseconds.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return UInt32(clamping: total)
    }

    /// CLIENT_NAME is at most 128 bytes of UTF-8; cut at a character boundary.
    private static func truncatedName(_ name: String) -> String {
        var result = ""
        var size = 0
        for character in name {
            size += character.utf8.count
            guard size <= 128 else { break }
            result.append(character)
        }
        return result
    }
}

/// A SEND started by `IPCClient.startSend`: its ACCEPTED is still to come.
public struct IPCPendingSend: Sendable {
    let reply: EventLoopFuture<IPCMessage>

    /// The seq the daemon gave the message once it stored it durably.
    /// - Throws: `IPCClientError.refused` (e.g. `QUEUE_FULL`: nothing was
    ///   stored), `.timedOut`, `.connectionLost` (stored or not: after
    ///   attaching again, OPENED's SENT_SEQ tells).
    public func accepted() async throws -> UInt64 {
        let message = try await reply.get()
        switch message {
        case .accepted(let accepted): return accepted.seq
        case .error(let error): throw IPCClientError.refused(op: .send, code: error.code, message: error.message)
        default: throw IPCClientError.unexpectedReply(op: .send, reply: message.op)
        }
    }
}
