/// How hard SQLite works to make a commit survive (`PRAGMA synchronous`).
///
/// In WAL mode `normal` survives a process crash but may lose the last
/// commits on power loss; `full` survives power loss at the price of an
/// fsync per commit.
public enum Synchronous: String, Sendable, CaseIterable {
    case off = "OFF"
    case normal = "NORMAL"
    case full = "FULL"
    case extra = "EXTRA"
}
