#if canImport(Glibc)
import Glibc
#endif

/// Decides who may run the admin ops (CONNECT, DISCONNECT, RECONNECT, RELOAD)
/// and see every session: root, the daemon's own user (who could signal it
/// anyway; for a per-user daemon, its user), and members of the admin group.
struct AdminPolicy: Sendable {
    var adminGroup: String

    func isAdmin(_ peer: PeerCredentials) -> Bool {
        if peer.uid == 0 || peer.uid == getuid() { return true }
        guard !adminGroup.isEmpty, let groupID = Self.groupID(named: adminGroup) else { return false }
        return peer.gid == groupID || Self.supplementaryGroups(of: peer.uid).contains(groupID)
    }

    static func groupID(named name: String) -> gid_t? {
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getgrnam_r(name, &group, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return group.gr_gid
    }

    /// The groups the user belongs to in the group database. The kernel's
    /// SO_PEERCRED carries only the primary gid, so membership is looked up.
    static func supplementaryGroups(of uid: uid_t) -> [gid_t] {
        var passwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &passwd, &buffer, buffer.count, &result) == 0, result != nil, let name = passwd.pw_name else {
            return []
        }
        // `name` points into `buffer`, which must outlive its last use here.
        return withExtendedLifetime(buffer) {
            var count: Int32 = 64
            var groups = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(name, passwd.pw_gid, &groups, &count) == -1 {
                groups = [gid_t](repeating: 0, count: Int(count))
                guard getgrouplist(name, passwd.pw_gid, &groups, &count) != -1 else { return [] }
            }
            return Array(groups.prefix(Int(count)))
        }
    }
}
