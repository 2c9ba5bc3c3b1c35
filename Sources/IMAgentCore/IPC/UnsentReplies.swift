/// Replies and events written to clients and not yet taken by their sockets, per uid: what
/// the daemon holds for clients that ask and do not read. MESSAGE frames are not counted
/// here: delivery already stops while a client's channel is not writable.
///
/// Past `perUIDLimit` for one uid, that uid's connection holding the most is closed (its
/// queued bytes go with it), so a user's clients that never read cost the daemon at most
/// this much, and never another user's connection. One per IPC server, on the daemon's loop.
final class UnsentReplies {
    static let perUIDLimit = 16 << 20

    private struct Holder {
        var uid: UInt32
        var bytes: Int
        let connection: IPCClientConnection
    }

    private var byUID: [UInt32: Int] = [:]
    /// Only connections holding bytes: an entry goes when its bytes are written.
    private var holders: [UInt64: Holder] = [:]
    let limit: Int

    init(limit: Int = UnsentReplies.perUIDLimit) {
        self.limit = limit
    }

    /// Bytes of `uid` not yet written, all its connections.
    func bytes(of uid: UInt32) -> Int { byUID[uid] ?? 0 }

    /// `connection` hands `bytes` of replies to its channel. Returns false when its uid
    /// is past the limit and `connection` itself holds the most: it is to be closed and
    /// the bytes dropped. (Another connection of the uid holding more is closed instead.)
    func admit(_ bytes: Int, for connection: IPCClientConnection) -> Bool {
        let uid = connection.peer.uid
        while byUID[uid, default: 0] + bytes > limit {
            guard let (id, largest) = holders.filter({ $0.value.uid == uid }).max(by: { $0.value.bytes < $1.value.bytes }),
                  largest.bytes > (holders[connection.id]?.bytes ?? 0) else { return false }
            // Its pending writes fail as it closes, and `written` gives their bytes back; they are
            // forgotten now so that this write goes on.
            forget(id)
            largest.connection.close()
        }
        byUID[uid, default: 0] += bytes
        holders[connection.id, default: Holder(uid: uid, bytes: 0, connection: connection)].bytes += bytes
        return true
    }

    /// `bytes` of `connection`'s replies left the daemon (written, or dropped as it closed).
    func written(_ bytes: Int, for connection: IPCClientConnection) {
        guard var holder = holders[connection.id] else { return }  // forgotten when it was closed
        let released = min(bytes, holder.bytes)
        holder.bytes -= released
        holders[connection.id] = holder.bytes == 0 ? nil : holder
        let total = byUID[holder.uid, default: 0] - released
        byUID[holder.uid] = total == 0 ? nil : total
    }

    private func forget(_ connection: UInt64) {
        guard let holder = holders.removeValue(forKey: connection) else { return }
        let total = byUID[holder.uid, default: 0] - holder.bytes
        byUID[holder.uid] = total == 0 ? nil : total
    }
}
