import NIOCore
import NIOEmbedded
import Testing

@testable import IMAgentCore

/// `UnsentReplies`: what one uid's clients leave unread is bounded, and the connection that
/// holds the most pays for it, never another uid's.
@Suite struct UnsentRepliesTests {
    func connection(_ id: UInt64, uid: UInt32) throws -> (IPCClientConnection, EmbeddedChannel) {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/unsent-replies-test")).wait()
        let connection = IPCClientConnection(id: id, peer: PeerCredentials(pid: 1, uid: uid, gid: uid),
                                             policy: AdminPolicy(adminGroup: "imagent-admin"), channel: channel,
                                             unsent: UnsentReplies(limit: 1))  // this connection's own ledger is not used here
        return (connection, channel)
    }

    @Test func pastTheLimit_theUIDsLargestHolderIsClosed_andTheWriteGoesOn() throws {
        let ledger = UnsentReplies(limit: 1_000)
        let (reader, readerChannel) = try connection(1, uid: 1000)
        let (hog, hogChannel) = try connection(2, uid: 1000)
        let (other, otherChannel) = try connection(3, uid: 1001)
        #expect(ledger.admit(900, for: hog))
        #expect(ledger.admit(900, for: other))  // another uid: its own limit
        #expect(ledger.admit(50, for: reader))
        #expect(ledger.admit(100, for: reader))  // 1,050 for uid 1000: the hog goes
        #expect(!hogChannel.isActive)
        #expect(readerChannel.isActive && otherChannel.isActive)
        #expect(ledger.bytes(of: 1000) == 150)
        #expect(ledger.bytes(of: 1001) == 900)
        ledger.written(900, for: hog)  // its pending writes fail as it closes: already forgotten
        #expect(ledger.bytes(of: 1000) == 150)
    }

    @Test func theConnectionThatHoldsTheMost_isRefusedItself() throws {
        let ledger = UnsentReplies(limit: 1_000)
        let (hog, _) = try connection(1, uid: 1000)
        let (small, smallChannel) = try connection(2, uid: 1000)
        #expect(ledger.admit(100, for: small))
        #expect(ledger.admit(800, for: hog))
        #expect(!ledger.admit(200, for: hog))
        #expect(smallChannel.isActive)
        #expect(ledger.bytes(of: 1000) == 900)
    }

    @Test func writtenBytesAreGivenBack() throws {
        let ledger = UnsentReplies(limit: 1_000)
        let (client, _) = try connection(1, uid: 1000)
        #expect(ledger.admit(1_000, for: client))
        ledger.written(600, for: client)
        #expect(ledger.bytes(of: 1000) == 400)
        #expect(ledger.admit(600, for: client))
        ledger.written(1_000, for: client)
        #expect(ledger.bytes(of: 1000) == 0)
    }
}
