import NIOCore

@testable import IMAgentCore

extension OutboundQueue {
    /// Where the queue breaks its invariant (see `OutboundQueue`); empty when it holds.
    func audit() -> [String] {
        var problems: [String] = []
        func check(_ holds: Bool, _ text: @autoclosure () -> String) { if !holds { problems.append(text()) } }
        check(serverAckedSeq <= loadedThroughSeq && loadedThroughSeq <= acceptedSeq && acceptedSeq <= assignedSeq,
              "seqs out of order: server acked \(serverAckedSeq), loaded \(loadedThroughSeq), accepted \(acceptedSeq), assigned \(assignedSeq)")
        check(heldThroughSeq <= acceptedSeq, "held through \(heldThroughSeq) past accepted \(acceptedSeq)")
        check(transmittedThroughSeq <= acceptedSeq, "transmitted through \(transmittedThroughSeq) past accepted \(acceptedSeq)")
        check(assignedSeq - acceptedSeq == UInt64(storing.count), "\(assignedSeq - acceptedSeq) seqs assigned, \(storing.count) being stored")
        check(transmittedCount <= window.count && window.count <= storedCount,
              "counts out of order: on the link \(transmittedCount), window \(window.count), stored \(storedCount)")
        check(UInt64(storedCount) <= acceptedSeq - serverAckedSeq, "\(storedCount) stored after seq \(serverAckedSeq), accepted \(acceptedSeq)")
        check(wireAckedSeq + givenUp + UInt64(storedCount) == acceptedSeq,
              "wire acked \(wireAckedSeq) + given up \(givenUp) + stored \(storedCount) ≠ accepted \(acceptedSeq)")
        var previous = serverAckedSeq
        for entry in window {
            check(entry.seq > previous && entry.seq <= loadedThroughSeq, "window seq \(entry.seq) after \(previous), loaded through \(loadedThroughSeq)")
            previous = entry.seq
        }
        let cost = window.reduce(0) { $0 + Session.windowCost($1.payload) }
        check(windowCost == cost, "window cost \(windowCost), entries cost \(cost)")
        let onLink = window.prefix(transmittedCount).reduce(0) { $0 + $1.bytes }
        check(transmittedBytes == onLink, "transmitted bytes \(transmittedBytes), entries on the link hold \(onLink)")
        let inWindow = window.reduce(0) { $0 + $1.bytes }
        check(storedBytes >= inWindow && (storedCount > 0 || storedBytes == 0), "stored bytes \(storedBytes), window holds \(inWindow)")
        var storingPayload = 0
        storing.forEach { storingPayload += $0.payload.readableBytes }
        check(storingBytes == storingPayload, "storing bytes \(storingBytes), entries hold \(storingPayload)")
        return problems
    }
}

extension InboundQueue {
    /// Where the queue breaks its invariant (see `InboundQueue`); empty when it holds.
    func audit() -> [String] {
        var problems: [String] = []
        func check(_ holds: Bool, _ text: @autoclosure () -> String) { if !holds { problems.append(text()) } }
        check(clientAckedSeq <= handedOverSeq && handedOverSeq <= receivedSeq && receivedSeq <= storingSeq,
              "seqs out of order: client acked \(clientAckedSeq), handed over \(handedOverSeq), received \(receivedSeq), storing \(storingSeq)")
        check(ackedUpstreamSeq <= receivedSeq, "acked upstream \(ackedUpstreamSeq) past received \(receivedSeq)")
        check(highestHandedOverSeq <= receivedSeq, "handed over up to \(highestHandedOverSeq) of \(receivedSeq) received")
        check(storingSeq - receivedSeq == UInt64(storing.count), "\(storingSeq - receivedSeq) seqs storing, \(storing.count) being stored")
        var expected = handedOverSeq + 1
        for message in window {
            check(message.seq == expected && message.seq <= receivedSeq, "window seq \(message.seq) where \(expected) was due (received \(receivedSeq))")
            expected = message.seq + 1
        }
        let cost = window.reduce(0) { $0 + Session.windowCost($1.payload) }
        check(windowCost == cost, "window cost \(windowCost), entries cost \(cost)")
        var storingPayload = 0
        storing.forEach { storingPayload += $0.payload.readableBytes }
        check(storingBytes == storingPayload, "storing bytes \(storingBytes), entries hold \(storingPayload)")
        return problems
    }
}

extension SessionRouter {
    /// Every session's queues' own invariants (`OutboundQueue.audit`, `InboundQueue.audit`).
    func queueAudit() -> [String] {
        table.all.flatMap { session in
            session.outbound.audit().map { "session \(session.id) outbound: \($0)" }
                + session.inbound.audit().map { "session \(session.id) inbound: \($0)" }
        }
    }
}
