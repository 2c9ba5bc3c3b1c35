import IMLink
import Logging
import NIOCore
import NIOPosix

/// Owns everything server-wide: connections, sessions, knobs, counters.
///
/// Why one event loop for all of it, connections included: this server's job
/// is exact, observable protocol behaviour under test, not throughput. With
/// every connection and all shared state on one loop, events are totally
/// ordered, no lock is needed, and cross-connection effects (a login that
/// replaces another, echo, pushes, knobs) are plain calls. A thousand agents
/// exchanging small frames are far below one core's capacity. The only slow
/// work, SQLite commits, runs on a store thread, and the loop never waits for it.
final class ServerCore {
    let loop: EventLoop
    let configuration: RefServerConfiguration
    let logger: Logger
    let store: StateStore?
    let storeThread: NIOThreadPool?

    var book: SessionBook
    var knobs: Knobs
    var statistics = ServerStatistics()
    private(set) var connections: [ConnectionID: ConnectionHandler] = [:]
    /// Which connection each logged-in agent uses; a newer login replaces the older connection.
    private var agents: [String: ConnectionID] = [:]
    private var nextConnectionID: UInt64 = 1

    // Group commit (see ServerCore+Flush.swift).
    var pendingFrames: [(ConnectionID, Frame)] = []
    var flushScheduled = false
    var commitInFlight = false
    var drainPromise: EventLoopPromise<Void>?

    // Timers.
    var sweepTask: Scheduled<Void>?
    var pushJobs: [Int: PushJob] = [:]
    var nextPushJobID = 1
    var stopping = false

    init(loop: EventLoop, configuration: RefServerConfiguration, logger: Logger,
         store: StateStore?, storeThread: NIOThreadPool?, stored: StoredState) {
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
        self.store = store
        self.storeThread = storeThread
        self.book = SessionBook(receiveWindow: configuration.receiveWindow, restoring: stored)
        self.knobs = Knobs(heartbeatMS: configuration.heartbeatMS)
    }

    /// The features this server implements.
    static let features: Features = [.deflate, .flow]

    // MARK: Connections

    func connectionOpened(_ handler: ConnectionHandler) -> ConnectionID {
        loop.preconditionInEventLoop()
        let id = ConnectionID(rawValue: nextConnectionID)
        nextConnectionID += 1
        connections[id] = handler
        statistics.connectionsAccepted += 1
        return id
    }

    func connectionClosed(_ id: ConnectionID, agentID: String?) {
        connections[id] = nil
        if let agentID, agents[agentID] == id { agents[agentID] = nil }
        book.detach(id)
    }

    // MARK: Login

    enum LoginVerdict {
        case accepted(heartbeatMS: UInt32, serverTimeMS: UInt64)
        case rejected(LoginFail)
    }

    func authenticate(_ login: Login, connection id: ConnectionID) -> LoginVerdict {
        if var failing = knobs.failLogin {
            failing.remaining -= 1
            knobs.failLogin = failing.remaining > 0 ? failing : nil
            statistics.loginsRejected += 1
            return .rejected(LoginFail(code: failing.code, message: "refused by the fail-login knob",
                                       retryAfterMS: failing.retryAfterMS))
        }
        let accepted: Bool
        do {
            accepted = try TokenFile.accepts(login.token.readableBytesView, path: configuration.tokenFile)
        } catch {
            logger.error("LOGIN refused: \(error)")
            accepted = false
        }
        guard accepted else {
            statistics.loginsRejected += 1
            return .rejected(LoginFail(code: .tokenInvalid, message: "token not accepted"))
        }
        if let older = agents[login.agentID], older != id, let handler = connections[older] {
            logger.info("agent \(login.agentID) logged in again on \(id); closing its older connection \(older)")
            book.detach(older)
            handler.closeSilently()
        }
        agents[login.agentID] = id
        statistics.loginsAccepted += 1
        return .accepted(heartbeatMS: knobs.heartbeatMS, serverTimeMS: WallClock.nowMS())
    }

    // MARK: Session frames

    /// Applies one established-phase frame; returns the fatal error to close with, if any.
    func handle(_ frame: ConnectionStateMachine.SessionFrame, from id: ConnectionID,
                negotiated: ConnectionStateMachine.Negotiated) -> (WireCode, String)? {
        let agent = negotiated.agentID
        defer { scheduleFlush() }
        switch frame {
        case .open(let open):
            guard let service = Service(rawValue: open.service) else {
                enqueue(.openFail(OpenFail(session: open.session, code: .forbidden, message: "unknown service \"\(open.service)\"")), to: id)
                return nil
            }
            switch book.open(open, agent: agent, service: service, connection: id, flow: negotiated.features.contains(.flow)) {
            case .opened(let ok, let created):
                enqueue(.openOK(ok), to: id)
                let push = configuration.push
                if created, service == .push, push.count > 0 {
                    startPush(SessionKey(agent: agent, id: open.session), count: push.count, size: push.size, rate: push.rate)
                }
            case .failed(let failure):
                enqueue(.openFail(failure), to: id)
            }
        case .close(let close):
            book.close(SessionKey(agent: agent, id: close.session))
        case .data(let data):
            switch book.receive(data, agent: agent, connection: id) {
            case .accepted(let service):
                statistics.messagesIn += 1
                if service == .echo {
                    // A copy, so the echo does not pin the whole receive buffer it was sliced from.
                    let body = ByteBuffer(bytes: data.body.readableBytesView)
                    book.enqueue(SessionKey(agent: agent, id: data.session), compressed: data.compressed, body: body)
                }
            case .duplicate:
                break
            case .notOpen:
                enqueue(.error(ErrorFrame(session: data.session, code: .unknownSession,
                                          message: "session \(data.session) is not open on this connection")), to: id)
            case .gap(let expected):
                return (.protocolError, "DATA seq \(data.seq) on session \(data.session) leaves a gap: expected \(expected)")
            }
        case .ack(let ack):
            switch book.receive(ack, agent: agent, connection: id) {
            case .accepted, .notOpen:
                break
            case .beyondAssigned(let last):
                return (.protocolError, "ACK \(ack.seq) on session \(ack.session) is above the last DATA sent, \(last)")
            }
        case .window(let window):
            _ = book.receive(window, agent: agent, connection: id)
        }
        return nil
    }

    /// Queues a frame behind the pending store commit (see ServerCore+Flush.swift).
    func enqueue(_ frame: Frame, to id: ConnectionID) {
        pendingFrames.append((id, frame))
        scheduleFlush()
    }

    // MARK: Knob queries for handlers

    var isStalled: Bool { knobs.stalled }
}
