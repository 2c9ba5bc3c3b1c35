/// Every payload byte the session layer holds in memory, and who may take more: the one
/// owner of the memory budget's invariant. Nothing else changes what it counts; the
/// router asks it, and performs what `settle` says at the end of every event.
///
/// Three accounts, each with its own push-back:
/// - **windows**: outbound messages on the link or read ahead, inbound messages read ahead
///   for a client, and the reads of the store under way (`[store] memory_budget_bytes`,
///   one session at most a quarter). A session that finds no room waits; when bytes are
///   released, the waiters are woken by `settle`, never by the code that released them.
/// - **inbound being stored**: DATA received and not yet stored. Past the budget the link
///   stops reading (TCP pushes back on the server) until half of it is stored.
/// - **outbound being stored**: SENDs read from clients and not yet stored, per uid. Past
///   `uidStoringShare` the sending client's socket is no longer read (TCP pushes back on
///   the client) until its uid's SENDs are half stored.
///
/// The byte fields of a session's queues (`windowCost`, `load`, `storingBytes` of its
/// `OutboundQueue` and `InboundQueue`) are changed only here, so
/// `held` is always their sum over the sessions (`SessionRouter.budgetAudit` checks it in the tests).
struct MemoryBudget {
    /// The windows' limit (`[store] memory_budget_bytes`; applies from the next start).
    let limit: Int
    /// What the SENDs being stored of one uid may hold before its clients are no longer read.
    let uidStoringShare: Int

    /// Window bytes of all sessions, reservations of reads under way included
    /// (≤ `limit`, give or take the one message an empty budget always admits).
    private(set) var held = 0
    /// Sessions whose window waits for room: refilled, by priority, when some frees.
    private(set) var waiters: Set<UInt64> = []
    /// Whether bytes were released since the waiters were last woken.
    private var released = false

    /// Inbound payload bytes received and still being stored, all sessions.
    private(set) var storingIn = 0
    /// Whether the link was told to stop reading.
    private(set) var linkReadingPaused = false

    /// Outbound payload bytes being stored, per sending client (with its uid) and per uid.
    private(set) var storingOutByClient: [UInt64: (uid: UInt32, bytes: Int)] = [:]
    private(set) var storingOutByUID: [UInt32: Int] = [:]
    /// Clients whose socket is not read, with their uid.
    private(set) var pausedClients: [UInt64: UInt32] = [:]
    /// Changes to clients' reading not yet handed out by `settle`.
    private var readingChanges: [(client: UInt64, reading: Bool)] = []

    init(limit: Int, uidStoringShare: Int) {
        self.limit = limit
        self.uidStoringShare = uidStoringShare
    }

    /// What one session's windows may hold, so one long queue cannot starve the others.
    var sessionShare: Int { max(1, limit / 4) }

    // MARK: Windows

    /// Whether `cost` more may come into memory for `session` (the one message of an
    /// empty budget always may, however large).
    func fits(_ cost: Int, _ session: Session) -> Bool {
        fits(cost, windowBytes: session.windowBytes)
    }

    /// The same for a session whose windows hold `windowBytes`.
    func fits(_ cost: Int, windowBytes: Int) -> Bool {
        if held == 0 { return true }
        return held + cost <= limit && windowBytes + cost <= sessionShare
    }

    /// Bytes `session` may still take, within `cap` (negative: none; an empty budget still admits one message).
    func room(for session: Session, cap: Int = .max) -> Int {
        room(windowBytes: session.windowBytes, cap: cap)
    }

    /// The same for a session whose windows hold `windowBytes`.
    func room(windowBytes: Int, cap: Int = .max) -> Int {
        min(limit - held, sessionShare - windowBytes, cap)
    }

    /// An outbound message comes into the session's window.
    mutating func keepOutbound(_ cost: Int, in queue: inout OutboundQueue) {
        queue.windowCost += cost
        held += cost
    }

    /// Outbound messages leave the window (acknowledged, given up).
    mutating func releaseOutbound(_ cost: Int, from queue: inout OutboundQueue) {
        queue.windowCost -= cost
        release(cost)
    }

    /// An inbound message comes into the session's window.
    mutating func keepInbound(_ cost: Int, in queue: inout InboundQueue) {
        queue.windowCost += cost
        held += cost
    }

    /// Inbound messages leave the window (handed to the client, acknowledged).
    mutating func releaseInbound(_ cost: Int, from queue: inout InboundQueue) {
        queue.windowCost -= cost
        release(cost)
    }

    /// Starts a read of the store into `load` (one of the session's windows' reads), holding
    /// the room the session has beside `windowBytes` (at most `cap`) until it completes, and
    /// returns those bytes. With no room, nil: the session waits, and `settle` wakes it when
    /// bytes are released. An empty budget admits the one message, however large.
    mutating func beginRead(_ load: inout Session.Load?, session id: UInt64, windowBytes: Int, cap: Int = .max,
                            token: UInt64) -> Int? {
        let room = room(windowBytes: windowBytes, cap: cap)
        guard room > 0 || held == 0 else {
            waiters.insert(id)
            return nil
        }
        let reserved = max(room, 0)
        load = Session.Load(token: token, reserved: reserved)
        held += reserved
        return reserved
    }

    /// That read is over (completed, or forgotten by a reset).
    mutating func endRead(_ load: inout Session.Load?) {
        guard let ended = load else { return }
        load = nil
        release(ended.reserved)
    }


    /// The session waits no more (it failed: nothing is read for it).
    mutating func stopWaiting(_ session: UInt64) {
        waiters.remove(session)
    }

    /// The session is closed: nothing of it stays in memory, and what it was storing is
    /// no longer counted (the store's completions find it gone).
    mutating func forget(_ session: inout Session) {
        session.inbound.dropWindow(budget: &self)
        session.outbound.dropWindow(budget: &self)
        waiters.remove(session.id)
        storingIn -= session.inbound.storingBytes
        session.inbound.storingBytes = 0
        session.outbound.storing.forEach { endStoringOut($0.payload.readableBytes, client: $0.client) }
        session.outbound.storingBytes = 0
    }

    private mutating func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        held -= bytes
        released = true
    }

    // MARK: Being stored

    mutating func beginStoringIn(_ bytes: Int, in queue: inout InboundQueue) {
        queue.storingBytes += bytes
        storingIn += bytes
    }

    mutating func endStoringIn(_ bytes: Int, in queue: inout InboundQueue) {
        queue.storingBytes -= bytes
        storingIn -= bytes
    }

    /// A SEND of `client` (of `uid`) is handed to the store.
    mutating func beginStoringOut(_ bytes: Int, client: UInt64, uid: UInt32, in queue: inout OutboundQueue) {
        queue.storingBytes += bytes
        storingOutByClient[client, default: (uid, 0)].bytes += bytes
        let total = storingOutByUID[uid, default: 0] + bytes
        storingOutByUID[uid] = total
        if total > uidStoringShare, pausedClients.updateValue(uid, forKey: client) == nil {
            readingChanges.append((client, false))
        }
    }

    /// The store is done with a SEND of `client` (stored or failed).
    mutating func endStoringOut(_ bytes: Int, client: UInt64, in queue: inout OutboundQueue) {
        queue.storingBytes -= bytes
        endStoringOut(bytes, client: client)
    }

    private mutating func endStoringOut(_ bytes: Int, client: UInt64) {
        guard let (uid, held) = storingOutByClient[client] else { preconditionFailure("client \(client) stores nothing") }
        storingOutByClient[client] = held == bytes ? nil : (uid, held - bytes)
        let total = storingOutByUID[uid, default: 0] - bytes
        storingOutByUID[uid] = total == 0 ? nil : total
        guard total <= uidStoringShare / 2 else { return }
        for (paused, owner) in pausedClients where owner == uid {
            pausedClients[paused] = nil
            readingChanges.append((paused, true))
        }
    }

    /// The client's connection is gone: nothing is read from it anyway. Its SENDs still
    /// being stored stay counted until the store is done with them.
    mutating func forgetClient(_ client: UInt64) {
        pausedClients[client] = nil
        readingChanges.removeAll { $0.client == client }
    }

    // MARK: Settling an event

    /// What the end of an event must do about memory.
    struct Settlement {
        /// Sessions to refill, in no order (the router orders them by priority).
        var wake: Set<UInt64> = []
        /// Stop (false) or resume (true) reading the link.
        var linkReading: Bool?
        /// Clients whose socket to stop or resume reading.
        var clientReading: [(client: UInt64, reading: Bool)] = []
    }

    /// Called once at the end of every event (and again while it wakes anyone): who to
    /// wake, and whether the link and the clients are read. Waiters wake only once bytes
    /// were released and a quarter of a share is free (or nothing is held), so that a
    /// full budget freed one ACK at a time does not turn into one read per message.
    mutating func settle() -> Settlement {
        var settlement = Settlement()
        if released, !waiters.isEmpty, held == 0 || limit - held >= sessionShare / 4 {
            settlement.wake = waiters
            waiters.removeAll()
        }
        released = false
        if !linkReadingPaused, storingIn > limit {
            linkReadingPaused = true
            settlement.linkReading = false
        } else if linkReadingPaused, storingIn <= limit / 2 {
            linkReadingPaused = false
            settlement.linkReading = true
        }
        settlement.clientReading = readingChanges
        readingChanges.removeAll()
        return settlement
    }
}
