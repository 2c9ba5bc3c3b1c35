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
