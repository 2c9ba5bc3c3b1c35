extension SessionRouter {
    /// Why `uid` may not open one more session ([limits] max_sessions_per_uid), or nil.
    /// Root is bounded by `max_sessions` only.
    func perUIDSessionRefusal(_ uid: UInt32) -> String? {
        guard uid != 0 else { return nil }
        var held = 0
        for session in sessions.values where session.owner == uid { held += 1 }
        for session in creating.values where session.owner == uid { held += 1 }
        guard held >= limits.maxSessionsPerUID else { return nil }
        return "uid \(uid) already holds \(limits.maxSessionsPerUID) sessions ([limits] max_sessions_per_uid); close some first"
    }
}
