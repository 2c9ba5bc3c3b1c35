#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import IMAgentTestKit
import Logging
import RefServer

struct DaemonBenchOptions: Sendable {
    /// Messages per throughput run.
    var messages = 10_000
    /// Request/response pairs per latency run.
    var requests = 1_000
    var sizes = [64, 1024, 65_536]
    var durabilities = ["process", "power"]
    /// Messages sent but not yet echoed, at most, in throughput runs.
    var window = 256
    /// Sessions opened for the memory figure.
    var sessions = 10_000
    var timeLimitSeconds = 900
    /// Where to write every latency sample (durability, path, payload, ms), for plots; nil for nowhere.
    var samplesCSV: String?
    /// `--scaling`: one-way runs of each of `scalingCounts` messages instead of the usual table.
    var scaling = false
    var scalingCounts = [10_000, 100_000, 1_000_000]
}

/// Directories to remove if the watchdog has to end the run.
nonisolated(unsafe) var temporaryDirectories: [String] = []

/// The token the benchmarks' reference server accepts.
let benchToken = "imagent-bench-token"

/// Ends the whole run after `seconds`: kills the child processes and removes
/// the temporary directories, so a hung run leaves nothing behind.
func startWatchdog(seconds: Int) {
    Task.detached {
        try await Task.sleep(for: .seconds(seconds))
        print("imagent-bench: time limit of \(seconds) s reached; stopping")
        if runningDaemonPID != 0 { kill(runningDaemonPID, SIGKILL) }
        mosquittoPIDs.forEach { kill($0, SIGKILL) }
        temporaryDirectories.forEach(removeDirectory)
        exit(3)
    }
}

/// The reference server in this process, state in memory, its token file in a
/// new temporary directory (the caller removes it); `port` 0 picks a free port.
func startReferenceServer(port: Int = 0, heartbeatMS: UInt32 = 30_000) async throws -> (server: RefServer, directory: String) {
    var template = Array("/tmp/imagent-bench-ref-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed") }
    let directory = String(cString: made)
    temporaryDirectories.append(directory)
    do {
        try writeFile(directory + "/token", benchToken + "\n")
        let server = try await RefServer.start(configuration: RefServerConfiguration(port: port, tokenFile: directory + "/token",
                                                                                             heartbeatMS: heartbeatMS),
                                               logger: Logger(label: "refserver", factory: { _ in SwiftLogNoOpLogHandler() }))
        return (server, directory)
    } catch {
        removeDirectory(directory)
        throw error
    }
}

/// `imagent-bench daemon`: an in-process reference server, the release
/// `imagentd` as a child process, and the same traffic through both paths.
func runDaemonBench(_ options: DaemonBenchOptions) async -> Int32 {
    startWatchdog(seconds: options.timeLimitSeconds)
    let token = benchToken
    let server: RefServer
    let serverDirectory: String
    do {
        (server, serverDirectory) = try await startReferenceServer()
    } catch {
        print("imagent-bench: cannot start the reference server: \(error)")
        return 1
    }
    defer { removeDirectory(serverDirectory) }

    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
    print("reference server: in process, \(server.address), state in memory; imagentd: \(DaemonProcess.binaryPath)")
    if options.scaling {
        print("one-way runs of \(options.scalingCounts.map(grouped).joined(separator: ", ")) messages to `sink` on each path, "
              + "each done at the server's ACK of its last, at most \(options.window) not yet acknowledged; "
              + "CPU µs/msg: user + sys of imagentd (/proc/PID/stat) over that run ÷ its messages.")
        print(diskColumnMethod(of: "imagentd"))
    } else {
        print("one-way: \(grouped(options.messages)) messages to `sink`, done at the server's ACK of the last; " +
              "round trip: \(grouped(options.messages)) messages to `echo`, done at the last echo; " +
              "both with at most \(options.window) messages not yet done. Latency: \(grouped(options.requests)) " +
              "messages to `echo`, one at a time, send to echo. Echoes acknowledged every \(ackEvery). " +
              "CPU µs/msg: user + sys of imagentd (/proc/PID/stat) over that run ÷ its messages.")
        print(diskColumnMethod(of: "imagentd"))
    }
    if let path = options.samplesCSV {
        do { try writeFile(path, "durability,path,payload_bytes,latency_ms\n") } catch {
            print("imagent-bench: \(error)")
            return 1
        }
    }
    var status: Int32 = 0
    for durability in options.durabilities {
        do {
            if options.scaling {
                try await benchScaling(durability: durability, server: server, options: options)
            } else {
                try await benchDaemon(durability: durability, server: server, token: token, options: options)
            }
        } catch {
            print("imagent-bench: durability \(durability): \(error)")
            status = 1
        }
    }
    print("load average \(loadAverage()) at the end")
    try? await server.stop()
    return status
}

private func benchDaemon(durability: String, server: RefServer, token: String, options: DaemonBenchOptions) async throws {
    let daemon = try await DaemonProcess(serverAddress: server.address, token: token, durability: durability,
                                         maxSessions: options.sessions + 100)
    temporaryDirectories.append(daemon.directory)
    do {
        try await waitForLink(daemon)
        try await Task.sleep(for: .seconds(1))
        let idle = daemon.memory()

        // Memory with many sessions, before any traffic; they are closed again before the runs.
        let sessions = options.sessions
        let (socket, pid) = (daemon.socketPath, daemon.pid)
        let withSessions = try await withDeadline(300, "opening and closing \(sessions) sessions") {
            let holders = try await openSessions(socketPath: socket, count: sessions, clients: 4)
            try await Task.sleep(for: .seconds(2))
            let memory = DaemonProcess.memory(of: pid)
            try await closeSessions(holders)
            return memory
        }
        let (host, port) = (server.host, server.port)
        // Warm-up on both paths, not measured.
        _ = try await withDeadline(60, "warm-up") {
            _ = try await runThroughDaemon(socketPath: socket, completion: .echo, size: 64, count: 1_000, window: options.window)
            return try await runDirect(host: host, port: port, token: token, completion: .echo, size: 64, count: 1_000,
                                       window: options.window)
        }
        let store = daemon.storeFiles()
        print("")
        print("### durability = \"\(durability)\"")
        print("")
        print("store directory holds: " + (store.isEmpty ? "no database file (the daemon keeps sessions in memory)" : store.joined(separator: ", ")))
        print("")
        print("| payload | path | one-way msg/s | round-trip msg/s | p50 ms | p99 ms | CPU µs/msg one-way | CPU µs/msg round trip "
              + "| disk B/payload B one-way | disk B/payload B round trip |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in options.sizes {
            let (messages, requests, window) = (options.messages, options.requests, options.window)
            let viaDaemon = try await withDeadline(300, "\(size) B through imagentd") {
                try await Figures(count: messages, requests: requests, window: window, size: size, cpuOf: [pid]) { completion, count, window in
                    try await runThroughDaemon(socketPath: socket, completion: completion, size: size, count: count, window: window)
                }
            }
            let direct = try await withDeadline(300, "\(size) B direct") {
                try await Figures(count: messages, requests: requests, window: window, size: size) { completion, count, window in
                    try await runDirect(host: host, port: port, token: token, completion: completion, size: size,
                                        count: count, window: window)
                }
            }
            let (a, b) = (viaDaemon, direct)
            let label = size % 1024 == 0 ? "\(size / 1024) KiB" : "\(size) B"
            print("| \(label) | imagentd | \(grouped(Int(a.oneWay))) | \(grouped(Int(a.roundTrip))) | \(format(a.p50, decimals: 3)) | \(format(a.p99, decimals: 3)) | \(microseconds(a.oneWayCPU)) | \(microseconds(a.roundTripCPU)) "
                  + "| \(perPayloadByte(a.oneWayDisk)) | \(perPayloadByte(a.roundTripDisk)) |")
            print("| \(label) | direct TCP | \(grouped(Int(b.oneWay))) | \(grouped(Int(b.roundTrip))) | \(format(b.p50, decimals: 3)) | \(format(b.p99, decimals: 3)) | | | | |")
            print("| \(label) | imagentd ÷ direct | \(format(a.oneWay / b.oneWay, decimals: 2))× | \(format(a.roundTrip / b.roundTrip, decimals: 2))× | \(format(a.p50 / b.p50, decimals: 1))× | \(format(a.p99 / b.p99, decimals: 1))× | | | | |")
            if let path = options.samplesCSV {
                appendSamples(path, durability: durability, path: "imagentd", size: size, a.latencies)
                appendSamples(path, durability: durability, path: "direct TCP", size: size, b.latencies)
            }
        }
        let afterTraffic = daemon.memory()

        print("")
        print("| imagentd memory | VmRSS | VmHWM (peak) |")
        print("|---|---:|---:|")
        print("| idle, link up, no client | \(mib(idle.rss)) | \(mib(idle.peak)) |")
        print("| \(grouped(sessions)) `echo` sessions open, 4 clients attached | \(mib(withSessions.rss)) | \(mib(withSessions.peak)) |")
        print("| after closing them and the runs above | \(mib(afterTraffic.rss)) | \(mib(afterTraffic.peak)) |")
        if sessions > 0 {
            print("")
            print("about \(grouped((withSessions.rss - idle.rss) * 1024 / sessions)) bytes of RSS per open session")
        }
    } catch {
        let log = daemon.log
        await daemon.stop()
        throw BenchError("\(error)\nimagentd log (tail):\n\(String(log.suffix(2000)))")
    }
    await daemon.stop()
}

/// One path's figures for one payload size: rates in messages per second, latencies in milliseconds.
struct Figures: Sendable {
    var oneWay: Double
    var roundTrip: Double
    var p50: Double
    var p99: Double
    /// Every latency sample in milliseconds, sorted.
    var latencies: [Double]
    /// µs of CPU (user + sys) of the measured processes per message, over the one-way and the
    /// round-trip run alone; nil when no process was measured (direct TCP).
    var oneWayCPU: Double?
    var roundTripCPU: Double?
    /// Bytes the measured processes wrote to disk (`write_bytes` of /proc/PID/io) per payload byte, over
    /// each run alone: one way counts each payload once (up), round trip twice (up and its echo down).
    var oneWayDisk: Double?
    var roundTripDisk: Double?
    /// Payloads imagentd accepted per store commit over the one-way run (METRICS); nil unless asked for.
    var oneWayPayloadsPerCommit: Double?

    /// `run(completion, count, window)` is one run on the path being measured with payloads of `size`
    /// bytes; `cpuOf` are the processes whose CPU time and disk writes the path costs (imagentd; the
    /// brokers); `commitsOf`, an imagentd's socket whose store commits to count over the one-way run.
    init(count: Int, requests: Int, window: Int, size: Int, cpuOf pids: [Int32] = [], commitsOf socket: String? = nil,
         _ run: (Completion, Int, Int) async throws -> RunResult) async throws {
        var commitsBefore: StoreCommits?
        if let socket { commitsBefore = await StoreCommits.read(socketPath: socket) }
        let (sink, sinkCost) = try await measureCost(of: pids, messages: count, payloadBytes: count * size) {
            try await run(.sink, count, window)
        }
        if let socket, let commitsBefore, let after = await StoreCommits.read(socketPath: socket) {
            oneWayPayloadsPerCommit = after.payloadsPerCommit(since: commitsBefore)
        }
        let (echo, echoCost) = try await measureCost(of: pids, messages: count, payloadBytes: 2 * count * size) {
            try await run(.echo, count, window)
        }
        oneWay = Double(count) / sink.elapsed.seconds
        roundTrip = Double(count) / echo.elapsed.seconds
        (oneWayCPU, roundTripCPU) = (sinkCost.cpuPerMessage, echoCost.cpuPerMessage)
        (oneWayDisk, roundTripDisk) = (sinkCost.diskBytesPerPayloadByte, echoCost.diskBytesPerPayloadByte)
        let sorted = (try await run(.echo, requests, 1)).latencies.sorted()
        p50 = sorted[sorted.count / 2].seconds * 1000
        p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)].seconds * 1000
        latencies = sorted.map { $0.seconds * 1000 }
    }
}

/// Appends one CSV line per latency sample.
private func appendSamples(_ file: String, durability: String, path: String, size: Int, _ latencies: [Double]) {
    guard let output = fopen(file, "a") else { return }
    defer { fclose(output) }
    for latency in latencies { fputs("\(durability),\(path),\(size),\(format(latency, decimals: 4))\n", output) }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// CPU µs per message for a table cell: "?" when it could not be read.
func microseconds(_ value: Double?) -> String { value.map { format($0, decimals: 1) } ?? "?" }

/// Disk bytes per payload byte for a table cell: "?" when /proc/PID/io could not be read.
func perPayloadByte(_ value: Double?) -> String { value.map { format($0, decimals: 2) } ?? "?" }

func mib(_ kib: Int) -> String { kib < 0 ? "?" : "\(format(Double(kib) / 1024, decimals: 1)) MiB" }

func loadAverage() -> String {
    (readFile("/proc/loadavg") ?? "").split(separator: " ").prefix(3).joined(separator: " ")
}

/// Polls STATUS until the daemon's link is connected.
func waitForLink(_ daemon: DaemonProcess) async throws {
    let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "imagent-bench")
    defer { Task { await client.close() } }
    for _ in 0..<150 {
        let status = try await client.status().filter { $0 != " " }
        if status.contains("\"state\":\"connected\"") { return }
        try await Task.sleep(for: .milliseconds(100))
    }
    throw BenchError("the daemon's link did not come up within 15 s")
}

/// A client and the sessions it opened.
private struct SessionHolder: Sendable {
    var client: IPCClient
    var sessions: [UInt64]
}

/// Opens `count` `echo` sessions from `clients` clients, 64 requests in flight each.
private func openSessions(socketPath: String, count: Int, clients: Int) async throws -> [SessionHolder] {
    try await withThrowingTaskGroup(of: SessionHolder.self) { group in
        for index in 0..<clients {
            let share = count / clients + (index < count % clients ? 1 : 0)
            group.addTask {
                let client = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-sessions")
                let events = client.events
                Task { for try await _ in events {} }  // Keep reading, so replies never queue behind events.
                let sessions = try await inFlight(share) { _ in try await client.open(service: "echo").session }
                return SessionHolder(client: client, sessions: sessions)
            }
        }
        return try await group.reduce(into: []) { $0.append($1) }
    }
}

/// Closes every session, then the clients.
private func closeSessions(_ holders: [SessionHolder]) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for holder in holders {
            group.addTask {
                _ = try await inFlight(holder.sessions.count) { try await holder.client.close(session: holder.sessions[$0]) }
                await holder.client.close()
            }
        }
        try await group.waitForAll()
    }
}

/// `body(0..<count)` with at most 64 calls at a time; the results in completion order.
private func inFlight<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
    try await withThrowingTaskGroup(of: T.self) { group in
        var results: [T] = []
        for index in 0..<count {
            if index >= 64, let result = try await group.next() { results.append(result) }
            group.addTask { try await body(index) }
        }
        for try await result in group { results.append(result) }
        return results
    }
}

/// `body`, or an error after `seconds` (the body is cancelled).
func withDeadline<T: Sendable>(_ seconds: Int, _ what: String,
                               _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else {
            throw BenchError("\(what): not done within \(seconds) s")
        }
        return result
    }
}
