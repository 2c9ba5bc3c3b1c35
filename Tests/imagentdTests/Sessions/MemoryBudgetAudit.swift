import NIOCore

@testable import IMAgentCore

extension SessionRouter {
    /// Where what `MemoryBudget` counts differs from what the sessions hold, or where it
    /// leaves someone waiting for nothing; empty when its invariant holds:
    /// - `held` is the cost of every message in a window plus every read's reservation,
    ///   and each session's own counts match its queues;
    /// - `storingIn` is the payload of every DATA being stored, and each client's and uid's
    ///   SEND account the payload of its SENDs being stored;
    /// - no waiter has room while a wake-up would be due, and no client stays unread
    ///   once its uid's SENDs are half stored.
    func budgetAudit() -> [String] {
        var problems: [String] = []
        var held = 0
        var storingIn = 0
        var storingOut: [UInt64: Int] = [:]
        for session in table.all {
            let id = session.id
            let outbound = session.outbound.window.reduce(0) { $0 + Session.windowCost($1.payload) }
            let inbound = session.inbound.window.reduce(0) { $0 + Session.windowCost($1.payload) }
            if outbound != session.outbound.windowCost { problems.append("session \(id): windowCost \(session.outbound.windowCost), window holds \(outbound)") }
            if inbound != session.inbound.windowCost { problems.append("session \(id): inbound windowCost \(session.inbound.windowCost), window holds \(inbound)") }
            held += outbound + inbound + (session.outbound.load?.reserved ?? 0) + (session.inbound.load?.reserved ?? 0)
            var sessionIn = 0
            session.inbound.storing.forEach { sessionIn += $0.payload.readableBytes }
            if sessionIn != session.inbound.storingBytes { problems.append("session \(id): inbound storingBytes \(session.inbound.storingBytes), being stored \(sessionIn)") }
            storingIn += sessionIn
            var sessionOut = 0
            session.outbound.storing.forEach { entry in
                sessionOut += entry.payload.readableBytes
                storingOut[entry.client, default: 0] += entry.payload.readableBytes
            }
            if sessionOut != session.outbound.storingBytes { problems.append("session \(id): storingBytes \(session.outbound.storingBytes), being stored \(sessionOut)") }
        }
        if held != budget.held { problems.append("budget holds \(budget.held), windows and reads hold \(held)") }
        if storingIn != budget.storingIn { problems.append("budget stores in \(budget.storingIn), sessions \(storingIn)") }
        let counted = budget.storingOutByClient.mapValues(\.bytes)
        if counted != storingOut { problems.append("SENDs being stored by client: budget \(counted), sessions \(storingOut)") }
        var byUID: [UInt32: Int] = [:]
        for (_, account) in budget.storingOutByClient { byUID[account.uid, default: 0] += account.bytes }
        if byUID != budget.storingOutByUID { problems.append("SENDs being stored by uid: \(budget.storingOutByUID), by its clients \(byUID)") }
        let wakeDue = budget.held == 0 || budget.limit - budget.held >= budget.sessionShare / 4
        for id in budget.waiters {
            guard let session = table[id] else { continue }
            if wakeDue, budget.room(for: session) > 0 { problems.append("session \(id) waits with room free") }
        }
        for (client, uid) in budget.pausedClients where (budget.storingOutByUID[uid] ?? 0) <= budget.uidStoringShare / 2 {
            problems.append("client \(client) is not read, though uid \(uid) stores only \(budget.storingOutByUID[uid] ?? 0) bytes")
        }
        return problems
    }

    /// Where the table's indexes differ from its sessions; empty when `SessionTable`'s
    /// invariant holds: each client's index lists exactly the sessions attached to it, and
    /// each uid's outbound bytes are the sum over its sessions.
    func tableAudit() -> [String] {
        var problems: [String] = []
        var byClient: [UInt64: Set<UInt64>] = [:]
        var bytes: [UInt32: Int] = [:]
        for session in table.all {
            if let client = session.attachedClient { byClient[client, default: []].insert(session.id) }
            if session.outboxTotalBytes != 0 { bytes[session.owner, default: 0] += session.outboxTotalBytes }
        }
        if byClient != table.byClient { problems.append("sessions by client: index \(table.byClient), sessions \(byClient)") }
        if bytes != table.outboxBytesByUID { problems.append("outbound bytes by uid: index \(table.outboxBytesByUID), sessions \(bytes)") }
        return problems
    }
}
