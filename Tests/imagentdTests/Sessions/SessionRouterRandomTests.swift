import AgentIPC
import AgentStore
import IMAgentTestKit
import IMLink
import NIOCore
import NIOEmbedded
import Testing

@testable import IMAgentCore

/// The router against a seeded world whose every step is a random enabled event: the store
/// completing writes (in order) and reads (in any order), frames crossing a link that drops,
/// an echo server, a client that sends, acknowledges, goes away and comes back, and restarts
/// of the router on what the store holds, and time passing: some messages have a TTL, and
/// the TTL timer fires when the router set it. Then the faults stop, and everything must arrive
/// exactly once, in order, with nothing left in memory, save the messages with a TTL given up:
/// a missed wake-up anywhere shows as a world with nothing left to do and messages still queued.
/// After every step the memory budget's invariant must hold (`budgetAudit`), and the queues'
/// and the expiry schedule's (`queueAudit`, `expiryAudit`).
@Suite struct SessionRouterRandomTests {
    /// Audited every 16th step: this suite runs among the others, and a full audit of every
    /// step would hold one of the test pool's threads for a minute and a half.
    @Test func everyMessageEchoedOnce_throughRandomFaults() async {
        await Self.run(seeds: 0..<50, auditEvery: 16)
    }

    /// Runs `seeds` on a thread of its own (minutes of CPU in a debug build would starve the
    /// test pool's threads, which every other test shares) and checks each; the client's socket
    /// must have been paused by the budget in some of them, and some message given up for its TTL,
    /// or the suite does not test those paths.
    /// The budget is audited every `auditEvery` steps (and at the end): every step costs about
    /// fifteen times the step itself in a debug build.
    static func run(seeds: Range<UInt64>, auditEvery: Int = 1) async {
        let (failures, readingChanges, givenUp) = await onOwnThread {
            var failures: [String] = []
            var readingChanges = 0
            var givenUp: UInt64 = 0
            for seed in seeds {
                var world = RandomWorld(seed: seed, auditEvery: auditEvery)
                world.run(chaosSteps: 3_000)
                failures += world.failures()
                readingChanges += world.readingChanges
                givenUp += world.client.reduce(0) { $0 + (world.router.table[$1.id]?.outbound.givenUp ?? 0) }
            }
            return (failures, readingChanges, givenUp)
        }
        #expect(failures == [])
        #expect(readingChanges > 0, "no seed made the router stop reading the client")
        #expect(givenUp > 0, "no seed gave a message up for its TTL")
    }
}

/// The same model at 1,000 seeds, and 50 of them with the budget audited after every step:
/// in the serial group of `scripts/test` (with the load tests).
@Suite(.serialized) struct SessionRouterRandomSlowTests {
    @Test func everyMessageEchoedOnce_throughRandomFaults_thousandSeeds() async {
        await SessionRouterRandomTests.run(seeds: 50..<1_050, auditEvery: 16)
    }

    @Test func theBudgetHoldsAfterEveryStep() async {
        await SessionRouterRandomTests.run(seeds: 0..<50, auditEvery: 1)
    }
}

/// Everything outside the router, as plain values.
private struct RandomWorld {
    static let sessions = 8
    static let messages: UInt64 = 40
    /// A tight budget (two 100-byte messages per session's share), so reads wait for room often;
    /// and small messages at most, so that the client's SENDs being stored pass their share
    /// (`uidStoringBytes`, 2,048 bytes: about 16 of them) and its socket stops being read.
    static let limits = SessionLimits(maxPayloadBytes: 512, deliveryBatch: 3, memoryBudgetBytes: 2_048, readBatch: 4)

    struct ServerSession {
        var received: UInt64 = 0
        var echoes: [ByteBuffer] = []
        var ackedByDaemon: UInt64 = 0
        var sentOnLink: UInt64 = 0
        var open = false
        var paused = false
    }

    struct ClientSession {
        var id: UInt64 = 0
        var attached = false
        var accepted: UInt64 = 0
        var nextToSend: UInt64 = 1
        var inFlight = 0
        var lastSeq: UInt64 = 0
        var ackedSeq: UInt64 = 0
        var seen: [Bool] = Array(repeating: false, count: Int(RandomWorld.messages) + 1)
    }

    enum Request {
        case create(Int)
        case attach(Int)
        case send(Int)
    }

    var random: SplitMix64
    var router = TestRouter(limits: RandomWorld.limits, random: SplitMix64(seed: 42), now: testStart)
    let persistence = InMemorySessionPersistence(loop: EmbeddedEventLoop())
    /// Store requests not yet answered: writes are answered in order, reads in any order.
    var writes: [StoreRequest] = []
    var reads: [StoreRequest] = []
    var ackFlushDue = false
    var linkUp = false
    var toServer: [Frame] = []
    var toDaemon: [Frame] = []
    var server: [UInt64: ServerSession] = [:]
    var clientID: UInt64?
    var nextClientID: UInt64 = 100
    var nextRequest: UInt32 = 1
    var requests: [UInt32: Request] = [:]
    var client = Array(repeating: ClientSession(), count: RandomWorld.sessions)
    var problems: [String] = []
    /// The daemon stopped reading the client's socket: it sends nothing until told to resume.
    var clientPaused = false
    /// How often the router stopped or resumed reading a client (the suite checks it happens).
    var readingChanges = 0
    /// Steps taken, and how often the budget is audited (`SessionRouter.budgetAudit`).
    var steps = 0
    /// The wall clock (ms): a step takes a millisecond, and the TTL timer's firing moves it to the timer's deadline.
    var clock = testStart.wallMS
    let auditEvery: Int
    let seed: UInt64

    /// The store's outcomes: it calls back within `submit`.
    let outcomesBox = OutcomeBox()

    init(seed: UInt64, auditEvery: Int) {
        self.seed = seed
        self.auditEvery = auditEvery
        random = SplitMix64(seed: seed)
        persistence.deliverOutcomes { [outcomesBox] in outcomesBox.outcomes += $0 }
    }

    // MARK: Running

    mutating func run(chaosSteps: Int) {
        connectClient()
        for _ in 0..<chaosSteps { step(faults: true) }
        if !linkUp { bringLinkUp() }
        if clientID == nil { connectClient() }
        var quiet = 0
        while quiet < 200_000 {
            quiet += 1
            if !step(faults: false) { break }
        }
    }

    /// One random enabled event; false when none is.
    @discardableResult
    mutating func step(faults: Bool) -> Bool {
        var events: [(weight: Int, run: (inout RandomWorld) -> Void)] = []
        if !writes.isEmpty { events.append((20, { $0.completeWrite() })) }
        if !reads.isEmpty { events.append((10, { $0.completeRead() })) }
        if !toServer.isEmpty { events.append((20, { $0.serverReceives() })) }
        if !toDaemon.isEmpty { events.append((20, { $0.daemonReceives() })) }
        if ackFlushDue { events.append((10, { world in world.ackFlushDue = false; world.perform(world.router.flushAcks()) })) }
        if let timer = router.expiry.timer { events.append((timer <= clock ? 20 : 1, { $0.timerFires(at: timer) })) }
        if canSend { events.append((10, { $0.clientSends() })) }
        if canAck { events.append((faults ? 5 : 30, { $0.clientAcks() })) }
        if !linkUp, clientID != nil || !faults { events.append((faults ? 3 : 50, { $0.bringLinkUp() })) }
        if faults {
            if linkUp { events.append((1, { $0.dropLink() })) }
            if clientID != nil { events.append((1, { $0.disconnectClient() })) } else { events.append((5, { $0.connectClient() })) }
            events.append((1, { $0.restartRouter() }))
        }
        let total = events.reduce(0) { $0 + $1.weight }
        guard total > 0 else { return false }
        var pick = Int(random.next() % UInt64(total))
        for event in events {
            if pick < event.weight {
                clock += 1
                router.now.wallMS = clock
                event.run(&self)
                steps += 1
                if steps % auditEvery == 0 { for text in audits() { problem("audit: \(text)") } }
                return true
            }
            pick -= event.weight
        }
        return false
    }

    func audits() -> [String] {
        router.budgetAudit() + router.tableAudit() + router.queueAudit() + router.expiryAudit()
    }

    /// The TTL timer fires at its deadline, or later: the service's timer runs on a busy loop.
    mutating func timerFires(at deadline: Int64) {
        clock = max(clock, deadline)
        router.now.wallMS = clock
        perform(router.expireDue())
    }

    // MARK: The store

    mutating func completeWrite() {
        answer(writes.removeFirst())
    }

    mutating func completeRead() {
        answer(reads.remove(at: Int(random.next() % UInt64(reads.count))))
    }

    mutating func answer(_ request: StoreRequest) {
        persistence.submit(request.operation, tag: request.tag)
        for outcome in outcomesBox.take() {
            perform(router.stored(request.then, tag: outcome.tag, outcome.result))
        }
    }

    // MARK: The link and the echo server

    mutating func bringLinkUp() {
        linkUp = true
        perform(router.linkEstablished(flow: true))
    }

    mutating func dropLink() {
        linkUp = false
        toServer.removeAll()
        toDaemon.removeAll()
        for id in server.keys { server[id]?.open = false }
        // The path's loss: this world drops the link at random, three times in a row before a
        // message's ACK as often as not, which is no message's doing (PoisonWatchTests cover quarantine).
        perform(router.linkLost(byServer: false))
    }

    mutating func daemonReceives() {
        perform(router.received(toDaemon.removeFirst()))
    }

    mutating func serverReceives() {
        let frame = toServer.removeFirst()
        switch frame {
        case .open(let open):
            var session = server[open.session] ?? ServerSession()
            session.open = true
            session.paused = open.window == 0
            session.ackedByDaemon = max(session.ackedByDaemon, open.resumeAfter)
            session.sentOnLink = session.ackedByDaemon
            server[open.session] = session
            toDaemon.append(.openOK(OpenOK(session: open.session, lastAcked: session.received)))
            serverSendsEchoes(open.session)
        case .data(let data):
            guard var session = server[data.session], session.open else { return problem("DATA for a session not open on the server") }
            if data.seq == session.received + 1 {
                session.received = data.seq
                session.echoes.append(data.body)
            } else if data.seq > session.received {
                return problem("DATA seq \(data.seq) after \(session.received) for session \(data.session): a gap")
            }
            server[data.session] = session
            toDaemon.append(.ack(Ack(session: data.session, seq: session.received)))
            serverSendsEchoes(data.session)
        case .ack(let ack):
            let acked = max(server[ack.session]?.ackedByDaemon ?? 0, ack.seq)
            server[ack.session]?.ackedByDaemon = acked
            serverSendsEchoes(ack.session)
        case .window(let update):
            server[update.session]?.paused = update.window == 0
            serverSendsEchoes(update.session)
        default:
            problem("the server got \(frame.type)")
        }
    }

    mutating func serverSendsEchoes(_ id: UInt64) {
        guard var session = server[id], session.open, !session.paused else { return }
        while session.sentOnLink < UInt64(session.echoes.count), session.sentOnLink - session.ackedByDaemon < UInt64(Session.defaultWindow) {
            session.sentOnLink += 1
            toDaemon.append(.data(DataFrame(session: id, seq: session.sentOnLink, body: session.echoes[Int(session.sentOnLink) - 1])))
        }
        server[id] = session
    }

    // MARK: The client

    var canSend: Bool {
        clientID != nil && !clientPaused && client.contains { $0.attached && $0.nextToSend <= Self.messages && $0.inFlight < 4 }
    }

    var canAck: Bool {
        clientID != nil && client.contains { $0.attached && $0.lastSeq > $0.ackedSeq }
    }

    mutating func connectClient() {
        nextClientID += 1
        clientID = nextClientID
        clientPaused = false
        for index in client.indices {
            client[index].attached = false
            client[index].inFlight = 0
            let open = client[index].id == 0 ? IPCMessage.Open(service: "echo\(index)") : IPCMessage.Open(session: client[index].id)
            request(client[index].id == 0 ? .create(index) : .attach(index)) { world, client, request in
                world.router.clientOpen(client, request: request, open)
            }
        }
    }

    mutating func disconnectClient() {
        guard let id = clientID else { return }
        clientID = nil
        requests.removeAll()
        perform(router.clientDisconnected(id))
    }

    mutating func clientSends() {
        let ready = client.indices.filter { client[$0].attached && client[$0].nextToSend <= Self.messages && client[$0].inFlight < 4 }
        let index = ready[Int(random.next() % UInt64(ready.count))]
        let number = client[index].nextToSend
        client[index].nextToSend += 1
        client[index].inFlight += 1
        let ttl = hasTTL(number) ? UInt32(100 + random.next() % 2_000) : nil
        let send = IPCMessage.Send(session: client[index].id, payload: Self.payload(session: index, number: number), ttlMS: ttl)
        request(.send(index)) { world, client, request in world.router.clientSend(client, request: request, send) }
    }

    mutating func clientAcks() {
        let due = client.indices.filter { client[$0].attached && client[$0].lastSeq > client[$0].ackedSeq }
        let index = due[Int(random.next() % UInt64(due.count))]
        client[index].ackedSeq = client[index].lastSeq
        let (session, seq) = (client[index].id, client[index].lastSeq)
        guard let id = clientID else { return }
        nextRequest += 1
        perform(router.clientAck(SessionClient(id: id, uid: 1000, isAdmin: false), request: nextRequest, session: session, seq: seq))
    }

    mutating func request(_ kind: Request, _ body: (inout RandomWorld, SessionClient, UInt32) -> [SessionAction]) {
        guard let id = clientID else { return }
        nextRequest += 1
        requests[nextRequest] = kind
        let actions = body(&self, SessionClient(id: id, uid: 1000, isAdmin: false), nextRequest)
        perform(actions)
    }

    mutating func clientGets(_ message: IPCMessage, request: UInt32, from id: UInt64) {
        guard id == clientID, let kind = requests.removeValue(forKey: request) else { return }
        switch (kind, message) {
        case (.create(let index), .opened(let opened)), (.attach(let index), .opened(let opened)):
            client[index].id = opened.session
            client[index].attached = true
            if opened.sentSeq < client[index].accepted { problem("session \(index): OPENED sent \(opened.sentSeq) after \(client[index].accepted) ACCEPTED") }
            client[index].accepted = opened.sentSeq
            client[index].nextToSend = opened.sentSeq + 1
            // An ACK lost with the daemon is given again (`ipc.md`: DELIVERED_SEQ is what it holds).
            client[index].ackedSeq = opened.deliveredSeq
        case (.send(let index), .accepted(let accepted)):
            client[index].inFlight -= 1
            if accepted.seq <= client[index].accepted { problem("session \(index): ACCEPTED \(accepted.seq) after \(client[index].accepted)") }
            client[index].accepted = accepted.seq
        default:
            problem("unexpected reply \(message) to \(kind)")
        }
    }

    mutating func clientReceives(_ messages: [(seq: UInt64, payload: ByteBuffer)], session id: UInt64) {
        guard let index = client.firstIndex(where: { $0.id == id }) else { return problem("MESSAGE for an unknown session") }
        for message in messages where message.seq > client[index].lastSeq {
            if message.seq != client[index].lastSeq + 1 { problem("session \(index): MESSAGE seq \(message.seq) after \(client[index].lastSeq)") }
            client[index].lastSeq = message.seq
            guard let number = Self.number(message.payload, session: index) else { return problem("session \(index): corrupt payload") }
            if client[index].seen[Int(number)] { problem("session \(index): echo \(number) twice") }
            client[index].seen[Int(number)] = true
        }
    }

    /// In even seeds every fourth message has a TTL: it may be given up, and then it is never
    /// echoed. Odd seeds have none: they keep the pace at which the client's SENDs being
    /// stored pass their share, which no seed with TTLs reaches.
    func hasTTL(_ number: UInt64) -> Bool { seed % 2 == 0 && number % 4 == 0 }

    static func payload(session: Int, number: UInt64) -> ByteBuffer {
        let text = "s\(session) n\(number) "
        return ByteBuffer(string: text + String(repeating: ".", count: 100 - text.utf8.count))
    }

    static func number(_ payload: ByteBuffer, session: Int) -> UInt64? {
        let words = String(buffer: payload).split(separator: " ")
        guard words.count >= 2, words[0] == "s\(session)", words[1].first == "n" else { return nil }
        return UInt64(words[1].dropFirst()).flatMap { $0 >= 1 && $0 <= messages ? $0 : nil }
    }

    // MARK: A restart

    /// The process dies: writes not yet done are lost, like the link and the client's connection.
    mutating func restartRouter() {
        writes.removeAll()
        reads.removeAll()
        ackFlushDue = false
        linkUp = false
        toServer.removeAll()
        toDaemon.removeAll()
        for id in server.keys { server[id]?.open = false }
        clientID = nil
        clientPaused = false
        requests.removeAll()
        router = TestRouter(limits: Self.limits, random: SplitMix64(seed: 42), now: testStart)
        router.now.wallMS = clock
        // The in-memory store completes on an EmbeddedEventLoop, which runs on this thread.
        var loaded: Result<StoreIndex, Error>?
        persistence.load().assumeIsolated().whenComplete { loaded = $0 }
        switch loaded {
        case .success(let stored): router.restore(stored)
        case .failure(let error): problem("the store did not load: \(error)")
        case nil: problem("the store did not load at once")
        }
    }

    // MARK: Performing actions

    mutating func perform(_ actions: [SessionAction]) {
        var queue = actions[...]
        while let action = queue.popFirst() {
            switch action {
            case .send(let frame): if linkUp { toServer.append(frame) }
            case .store(let operation, let tag, let then):
                switch operation {
                case .outbound, .inbound, .outboundSpan, .giveUpExpiredOutbound: reads.append(StoreRequest(operation: operation, tag: tag, then: then))
                default: writes.append(StoreRequest(operation: operation, tag: tag, then: then))
                }
            case .reply(let client, let request, let message): clientGets(message, request: request, from: client)
            case .fail(let client, let request, let code, let text):
                if client == clientID, requests[request] != nil { problem("request failed: \(code) \(text)") }
            case .deliver(let client, let session, let messages):
                if client == clientID { clientReceives(messages, session: session) }
                queue += router.batchWritten(session: session, client: client, writable: true)
            case .dropLink(let reason): problem("the router dropped the link: \(reason)")
            case .storeFailed(let reason): problem("store failure: \(reason)")
            case .scheduleAckFlush: ackFlushDue = true
            case .log(.warning, let text): problem("warning: \(text)")
            case .clientReading(let client, let on):
                if client == clientID { clientPaused = !on }
                readingChanges += 1
            case .event, .linkReading, .sessionsActive, .watch, .expireAt, .log, .acknowledged: break
            }
        }
    }

    mutating func problem(_ text: String) {
        if problems.count < 10 { problems.append(text) }
    }

    // MARK: The verdict

    /// What is wrong with the world once it has settled, as one line per failure.
    func failures() -> [String] {
        var failures = problems.map { "seed \(seed): \($0)" }
        failures += audits().map { "seed \(seed): \($0)" }
        for (index, session) in client.enumerated() {
            let missing = (1...Self.messages).filter { !session.seen[Int($0)] }
            let givenUp = router.table[session.id]?.outbound.givenUp ?? 0
            if missing.contains(where: { !hasTTL($0) }) || UInt64(missing.count) != givenUp {
                failures.append("seed \(seed): session \(index) never got echoes \(missing.prefix(10)), \(givenUp) given up for their TTL")
            }
            let received = server[session.id]?.received ?? 0
            if received + givenUp != Self.messages { failures.append("seed \(seed): session \(index): the server got \(received), \(givenUp) given up") }
            let stuck = router.table[session.id]
            if !(stuck?.outboxCount == 0 && stuck?.inboxCount == 0) {
                failures.append("seed \(seed): session \(index) holds outbox \(stuck?.outboxCount ?? -1), inbox \(stuck?.inboxCount ?? -1)")
            }
        }
        if router.budget.held != 0 { failures.append("seed \(seed): the budget still holds \(router.budget.held) bytes") }
        if !router.budget.waiters.isEmpty { failures.append("seed \(seed): \(router.budget.waiters.count) budget waiters left") }
        return failures
    }
}

/// A request the router made of the store, waiting for its answer.
private struct StoreRequest {
    var operation: StoreOperation
    var tag: UInt64
    var then: StoreContinuation
}

/// Where the store's outcomes land (the persistence calls back synchronously).
private final class OutcomeBox {
    var outcomes: [PersistOutcome] = []
    func take() -> [PersistOutcome] {
        defer { outcomes = [] }
        return outcomes
    }
}
