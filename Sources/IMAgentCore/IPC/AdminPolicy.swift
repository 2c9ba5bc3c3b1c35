#if canImport(Glibc)
import Glibc
#endif

/// Decides who may run the admin ops (CONNECT, DISCONNECT, RECONNECT, RELOAD)
/// and see every session and the daemon's totals: root, the daemon's own user
/// (who could signal it anyway; for a per-user daemon, its user), and members
/// of the configured admin group. Membership is the peer's real groups as the
/// kernel holds them (SO_PEERGROUPS), read only when an admin question is
/// asked, so accepting a client never waits for the group database (NSS,
/// LDAP, SSSD).
struct AdminPolicy: Sendable {
    /// The admin group's gid, looked up once when the daemon starts; nil: root only.
    var adminGroupID: gid_t?

    init(adminGroup: String) {
        adminGroupID = adminGroup.isEmpty ? nil : Self.groupID(named: adminGroup)
    }

    /// `groups` is the peer's SO_PEERGROUPS list, nil when it could not be read.
    func isAdmin(_ peer: PeerCredentials, groups: () -> [gid_t]?) -> Bool {
        if peer.uid == 0 || peer.uid == getuid() { return true }
        guard let adminGroupID else { return false }
        if peer.gid == adminGroupID { return true }
        // gid 0 is also what an unused slot of the kernel's answer reads as.
        guard adminGroupID != 0 else { return false }
        return groups()?.contains(adminGroupID) ?? false
    }

    static func groupID(named name: String) -> gid_t? {
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getgrnam_r(name, &group, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return group.gr_gid
    }
}
