#if canImport(Glibc)
import Glibc
#endif

/// Counts local connections from the moment they are accepted (before HELLO,
/// which a hostile client never sends), all users together and per uid, and
/// refuses those beyond the limits. Pure: the IPC server asks and reports.
struct ConnectionLimits: Sendable {
    var total: Int
    var perUID: Int
    private(set) var count = 0
    private(set) var byUID: [UInt32: Int] = [:]
    /// Connections refused on the main socket since its last batch of accepts.
    private(set) var refusedSinceBatch = 0

    init(total: Int, perUID: Int) {
        self.total = total
        self.perUID = perUID
    }

    /// Counts the connection in, or says why it is refused (LIMIT_REACHED).
    /// `viaAdminSocket`: it came through the admin socket, which may also use
    /// the places kept for admins.
    mutating func admit(uid: UInt32, viaAdminSocket: Bool = false) -> String? {
        let reserve = Self.adminReserve(total: total)
        if !viaAdminSocket { refusedSinceBatch += 1 }  // undone below when admitted
        guard count < total - (viaAdminSocket ? 0 : reserve) else {
            return reserve == 0 || viaAdminSocket
                ? "imagentd already serves \(total) connections ([limits] max_clients)"
                : "imagentd already serves \(count) connections ([limits] max_clients \(total), \(reserve) of them kept for admins)"
        }
        let mine = byUID[uid, default: 0]
        // Root is bound by the total only: it administers the daemon and could lift any cap anyway.
        guard mine < perUID || uid == 0 else {
            return "uid \(uid) already has \(perUID) connections to imagentd ([limits] max_clients_per_uid)"
        }
        count += 1
        byUID[uid] = mine + 1
        if !viaAdminSocket { refusedSinceBatch -= 1 }
        return nil
    }

    /// How many connections the IPC server accepts in one turn of its loop.
    static let acceptBatch = 8

    /// Whether the main socket's next batch of accepts should wait
    /// (`AcceptPacer`): every connection of the last batch was refused.
    /// Asked once per batch; starts the next count.
    mutating func paceAccepting() -> Bool {
        defer { refusedSinceBatch = 0 }
        return refusedSinceBatch >= Self.acceptBatch
    }

    /// An admitted connection closed.
    mutating func release(uid: UInt32) {
        count -= 1
        let left = byUID[uid, default: 1] - 1
        byUID[uid] = left > 0 ? left : nil
    }

    /// Places of `max_clients` only the admin socket's connections may take, so
    /// that users who fill the rest together (64 each, from a few uids) still
    /// leave root and the admins a way in: an eighth of the total, at most 8.
    static func adminReserve(total: Int) -> Int { min(8, total / 8) }

    /// Descriptors kept back from clients for the link, the store, DNS, the
    /// token command and the journal, whatever `max_clients` says.
    static let descriptorReserve = 64

    /// `max_clients`, lowered so that clients can never take the descriptors
    /// the daemon itself needs (RLIMIT_NOFILE minus the reserve).
    static func effectiveTotal(configured: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return configured }
        let available = Int(clamping: limit.rlim_cur) - descriptorReserve
        return max(1, min(configured, available))
    }
}
