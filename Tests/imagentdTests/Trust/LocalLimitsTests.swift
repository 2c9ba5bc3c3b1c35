import AgentIPC
import Glibc
import Testing

@testable import IMAgentCore

/// Accept-time connection caps, admin membership from the kernel's groups
/// and the per-uid session cap (findings 4, 5 and 8).
@Suite struct LocalLimitsTests {
    @Test func connections_areCappedPerUID_andInTotal_andReleased() {
        var limits = ConnectionLimits(total: 5, perUID: 2)
        #expect(limits.admit(uid: 1000) == nil)
        #expect(limits.admit(uid: 1000) == nil)
        let refusal = limits.admit(uid: 1000)
        #expect(refusal?.contains("max_clients_per_uid") == true, "\(refusal ?? "admitted")")
        #expect(limits.admit(uid: 0) == nil)
        #expect(limits.admit(uid: 0) == nil)
        #expect(limits.admit(uid: 0) == nil, "root is bound by the total only")
        #expect(limits.admit(uid: 2000)?.contains("[limits] max_clients") == true)
        limits.release(uid: 0)
        limits.release(uid: 0)
        #expect(limits.admit(uid: 2000) == nil)
        #expect(limits.admit(uid: 3000) == nil)
        #expect(limits.admit(uid: 4000)?.contains("[limits] max_clients") == true)
        limits.release(uid: 1000)
        #expect(limits.admit(uid: 1000) == nil, "a closed connection frees its place")
        limits.release(uid: 2000)
        #expect(limits.byUID[2000] == nil, "no entry is kept for a uid without connections")
    }

    @Test func theAdminSocket_keepsPlacesOtherUsersCannotTake() {
        var limits = ConnectionLimits(total: 64, perUID: 16)
        #expect(ConnectionLimits.adminReserve(total: 64) == 8)
        for uid in UInt32(1000)..<1003 {
            for _ in 0..<16 { #expect(limits.admit(uid: uid) == nil) }
        }
        for _ in 0..<8 { #expect(limits.admit(uid: 1003) == nil) }
        let refusal = limits.admit(uid: 1003)
        #expect(refusal == "imagentd already serves 56 connections ([limits] max_clients 64, 8 of them kept for admins)")
        #expect(limits.admit(uid: 0) != nil, "root on the main socket shares the others' places")
        for _ in 0..<8 { #expect(limits.admit(uid: 0, viaAdminSocket: true) == nil) }
        #expect(limits.admit(uid: 0, viaAdminSocket: true)?.contains("[limits] max_clients") == true, "the total holds for admins too")
        #expect(ConnectionLimits.adminReserve(total: 5) == 0 && ConnectionLimits.adminReserve(total: 10_000) == 8)
    }

    @Test func theMainSocketIsPaced_onlyAfterABatchOfRefusals() {
        var limits = ConnectionLimits(total: 64, perUID: 4)
        for _ in 0..<4 { let refusal = limits.admit(uid: 1000); #expect(refusal == nil) }
        for _ in 0..<7 { let refusal = limits.admit(uid: 1000); #expect(refusal != nil) }
        var paced = limits.paceAccepting()
        #expect(!paced, "7 refusals and 4 admitted: not a flood")
        for _ in 0..<ConnectionLimits.acceptBatch { let refusal = limits.admit(uid: 1000); #expect(refusal != nil) }
        paced = limits.paceAccepting()
        #expect(paced, "a whole batch refused")
        paced = limits.paceAccepting()
        #expect(!paced, "each batch counts anew")
        for _ in 0..<ConnectionLimits.acceptBatch { let refusal = limits.admit(uid: 0, viaAdminSocket: true); #expect(refusal == nil) }
        for _ in 0..<ConnectionLimits.acceptBatch { _ = limits.admit(uid: 1000, viaAdminSocket: true) }
        paced = limits.paceAccepting()
        #expect(!paced, "the admin socket is never paced")
    }

    /// imagentd(8) SECURITY states the accept-time numbers the code uses.
    @Test func theSecuritySection_statesTheAcceptNumbers() {
        let page = readRepositoryFile("man/imagentd.8").split(separator: "\n").joined(separator: " ")
        #expect(ConnectionLimits.acceptBatch == 8 && page.contains("at most 8 connections from one before it serves"))
        #expect(AcceptPacer.pause == .milliseconds(5) && page.contains("waits 5 ms before it accepts the next 8"))
        #expect(ConnectionLimits.adminReserve(total: 256) == 8 && page.contains("256 connections, all users (before HELLO included); 8 of them only"))
        #expect(ConnectionLimits.descriptorReserve == 64 && page.contains("64 descriptors of RLIMIT_NOFILE never given to clients"))
        #expect(IPCSocketPath.adminPath(for: "/run/imagent/imagent.sock") == "/run/imagent/imagent.sock.admin"
                && page.contains("/run/imagent/imagent.sock.admin"))
    }

    @Test func clientsNeverTakeTheDescriptorReserve() {
        var limit = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let effective = ConnectionLimits.effectiveTotal(configured: 1_000_000)
        #expect(effective == max(1, Int(clamping: limit.rlim_cur) - ConnectionLimits.descriptorReserve))
        #expect(ConnectionLimits.effectiveTotal(configured: 3) == min(3, effective))
    }

    @Test func adminMembership_comesFromThePeersOwnGroups_andIsAskedOnlyWhenNeeded() {
        var policy = AdminPolicy(adminGroup: "")
        policy.adminGroupID = 4242
        var asked = 0
        let groups: () -> [gid_t]? = { asked += 1; return [100, 4242] }
        #expect(policy.isAdmin(PeerCredentials(pid: 1, uid: 0, gid: 0), groups: groups), "root")
        #expect(asked == 0, "root needs no group lookup")
        #expect(policy.isAdmin(PeerCredentials(pid: 1, uid: 1000, gid: 4242), groups: groups), "primary group")
        #expect(policy.isAdmin(PeerCredentials(pid: 1, uid: 1000, gid: 1000), groups: groups), "supplementary group")
        #expect(asked == 1)
        #expect(!policy.isAdmin(PeerCredentials(pid: 1, uid: 1000, gid: 1000), groups: { [100] }))
        #expect(!policy.isAdmin(PeerCredentials(pid: 1, uid: 1000, gid: 1000), groups: { nil }))
        policy.adminGroupID = nil
        #expect(!policy.isAdmin(PeerCredentials(pid: 1, uid: 1000, gid: 4242), groups: groups), "no admin group: root only")
    }
}

@Suite struct PerUIDSessionLimitTests {
    @Test func oneUid_cannotTakeEverySession_andTheRefusalNamesTheKey() {
        var router = makeRouter(SessionLimits(maxSessions: 100, maxSessionsPerUID: 2))
        _ = router.newSession(alice)
        let second = router.newSession(aliceAgain)
        let refused = router.clientOpen(alice, request: 9, .init(service: "echo"))
        #expect(refused.errors == [.limitReached])
        let text = refused.compactMap { action -> String? in if case .fail(_, _, _, let text) = action { text } else { nil } }.first
        #expect(text?.contains("max_sessions_per_uid") == true, "\(text ?? "")")
        // Other users are not affected, and a closed session frees its place.
        _ = router.newSession(mallory)
        _ = router.completing(router.clientClose(alice, request: 10, session: second))
        #expect(router.clientOpen(alice, request: 11, .init(service: "echo")).errors.isEmpty)
    }

    @Test func root_isBoundByMaxSessionsOnly() {
        var router = makeRouter(SessionLimits(maxSessions: 100, maxSessionsPerUID: 1))
        _ = router.newSession(root)
        #expect(router.clientOpen(root, request: 2, .init(service: "echo")).errors.isEmpty)
    }
}

@Suite struct ClosedSessionIDsTests {
    @Test func remembersTheNewestClosedIDs_only() {
        var ids = ClosedSessionIDs(capacity: 3)
        for id in 1...10 as ClosedRange<UInt64> { ids.insert(id) }
        #expect(ids.count == 3)
        #expect(ids.contains(10) && ids.contains(8) && !ids.contains(7))
        ids.insert(9)
        #expect(ids.count == 3, "an id already remembered is not added twice")
    }

    @Test func anOpenCloseLoop_doesNotGrowTheRoutersMemory() {
        var router = makeRouter()
        for _ in 0..<(ClosedSessionIDs.remembered + 500) {
            let id = router.newSession(alice)
            _ = router.completing(router.clientClose(alice, request: 2, session: id))
        }
        #expect(router.table.closedIDs.count == ClosedSessionIDs.remembered)
        #expect(router.table.isEmpty)
    }
}
