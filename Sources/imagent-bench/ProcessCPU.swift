#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit

/// CPU time a process has used so far, in milliseconds: the sum over its
/// live threads of the first field of `/proc/PID/task/TID/schedstat` (time on
/// a CPU, in nanoseconds). Unlike wall-clock time it does not grow when other
/// work on the machine keeps the process waiting for a core.
func cpuMilliseconds(of pid: Int32) -> Double {
    var nanoseconds = 0
    for entry in listDirectory("/proc/\(pid)/task") {
        let text = readFile("/proc/\(pid)/task/\(entry)/schedstat") ?? ""
        nanoseconds += Int(text.split(separator: " ").first ?? "") ?? 0
    }
    return Double(nanoseconds) / 1e6
}

/// User plus system CPU time of a whole process (every thread it ever had,
/// those that exited included) in microseconds: `utime` + `stime` of
/// `/proc/PID/stat`, in clock ticks (`sysconf(_SC_CLK_TCK)`, 10 ms here).
/// Nil once the process is gone.
func cpuMicroseconds(of pid: Int32) -> Double? {
    guard let stat = readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
    // After the command name (which may hold spaces and parentheses), field 3 (state) comes first:
    // utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) * 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Microseconds of CPU per message that `pids` spent together while `body` ran, and `body`'s result.
func cpuPerMessage<T>(of pids: [Int32], messages: Int, _ body: () async throws -> T) async rethrows -> (T, Double?) {
    let (result, cost) = try await measureCost(of: pids, messages: messages, payloadBytes: 0, body)
    return (result, cost.cpuPerMessage)
}
