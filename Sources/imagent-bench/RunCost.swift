#if canImport(Glibc)
import Glibc
#endif

/// What a run cost the processes that carried it: CPU per message and bytes written to
/// disk per payload byte, from `/proc/PID/stat` and `/proc/PID/io` sampled at its start
/// and end.
struct RunCost: Hashable, Sendable {
    /// µs of user + sys CPU per message; nil when no process was measured or one ended.
    var cpuPerMessage: Double?
    /// `write_bytes` of the processes over the run ÷ the payload bytes the run carried; nil likewise.
    var diskBytesPerPayloadByte: Double?

    /// `written` bytes over `payloadBytes`; nil without payload.
    static func perPayloadByte(written: Int, payloadBytes: Int) -> Double? {
        payloadBytes > 0 ? Double(written) / Double(payloadBytes) : nil
    }
}

/// One process's counters at an instant.
private struct CostSample {
    var cpu: Double
    /// Nil where `/proc/PID/io` cannot be read: the CPU figure stands without it.
    var io: ProcessIO?

    init?(_ pid: Int32) {
        guard let cpu = cpuMicroseconds(of: pid) else { return nil }
        (self.cpu, io) = (cpu, ProcessIO.of(pid))
    }
}

/// `body`'s result and what it cost `pids` together, for `messages` messages carrying `payloadBytes` bytes
/// (the sum over the directions the processes store: a round trip carries each payload twice).
func measureCost<T>(of pids: [Int32], messages: Int, payloadBytes: Int, _ body: () async throws -> T) async rethrows -> (T, RunCost) {
    let before = pids.map { CostSample($0) }
    let result = try await body()
    var (cpu, written) = (0.0, Optional(0))
    for (pid, start) in zip(pids, before) {
        guard let start, let end = CostSample(pid) else { return (result, RunCost()) }
        cpu += end.cpu - start.cpu
        if let first = start.io, let last = end.io { written? += last.writeBytes - first.writeBytes } else { written = nil }
    }
    guard !pids.isEmpty else { return (result, RunCost()) }
    return (result, RunCost(cpuPerMessage: messages > 0 ? cpu / Double(messages) : nil,
                            diskBytesPerPayloadByte: written.flatMap { RunCost.perPayloadByte(written: $0, payloadBytes: payloadBytes) }))
}

/// The plain output's line on the disk column, `processes` naming whose writes count.
func diskColumnMethod(of processes: String) -> String {
    "disk B/payload B: bytes \(processes) wrote to disk over that run (write_bytes of /proc/PID/io, counted as "
        + "pages are dirtied, not at writeback) ÷ the payload bytes the run carried: one way counts each payload "
        + "once, round trip twice (the message up and its echo down)."
}
