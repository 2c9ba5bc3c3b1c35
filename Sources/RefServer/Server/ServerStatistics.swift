/// Counters for the `stats` command.
struct ServerStatistics: Sendable {
    var connectionsAccepted = 0
    var loginsAccepted = 0
    var loginsRejected = 0
    var framesIn = 0
    var framesOut = 0
    /// New agent→server DATA (duplicates are not counted).
    var messagesIn = 0
    /// Server→agent DATA written, including resends after a reconnect.
    var messagesOut = 0
    var protocolErrors = 0
}
