#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import IMAgentTestKit
import NIOCore
import RefServer

struct QueueOptions: Sendable {
    var bytes = 1 << 30
    var payload = 16_384
    var sessions = 4
    var durability = "process"
    /// Pause between live echo messages during the drain.
    var liveIntervalMS = 10
    /// Messages in the live one-way run the drain is compared with.
    var liveMessages = 10_000
    var timeLimitSeconds = 3_600

    var messages: Int { bytes / payload }
}

/// `imagent-bench queue`: a long outage's backlog through imagentd — memory
/// while queued and after a restart, then the drain and live traffic beside it.
func runQueueBench(_ options: QueueOptions) async -> Int32 {
    startWatchdog(seconds: options.timeLimitSeconds)
    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start; "
          + "imagentd: \(DaemonProcess.binaryPath)")
    do {
        let ok = try await queueBench(options)
        print("load average \(loadAverage()) at the end")
        return ok ? 0 : 1
    } catch {
        print("imagent-bench queue: \(error)")
        return 1
    }
}

private func queueBench(_ options: QueueOptions) async throws -> Bool {
    let messages = options.messages
    let perSession = (messages + options.sessions - 1) / options.sessions
    // The server's port refuses connections until the server takes it over.
    let reservation = try PortReservation()
    let address = "127.0.0.1:\(reservation.port)"
    // Room for the whole backlog; a short backoff cap so that the link comes up soon after the server does.
    let limits = "outbox_messages = \(min(10_000_000, perSession + 1_000))"
    let settings = "[reconnect]\nbase_ms = 100\ncap_ms = 1000\n"
    func start(_ directory: String?) async throws -> DaemonProcess {
        try await DaemonProcess(serverAddress: address, token: benchToken, durability: options.durability, maxSessions: 1_000,
                                limits: limits, settings: settings, directory: directory)
    }
    var daemon = try await start(nil)
    let directory = daemon.directory
    temporaryDirectories.append(directory)
    var serverDirectory: String?
    defer { serverDirectory.map(removeDirectory) }
    var server: RefServer?
    do {
        let clock = ContinuousClock()
        let fields = ["VmRSS", "RssAnon", "VmHWM"]
        try await Task.sleep(for: .seconds(1))
        let idle = DaemonProcess.statusKiB(of: daemon.pid, fields)

        let queueStart = clock.now
        let socket = daemon.socketPath
        try await withDeadline(120 + messages / 100, "queueing \(grouped(messages)) messages") {
            try await queueBacklog(socketPath: socket, sessions: options.sessions, messages: messages, payload: options.payload)
        }
        let queueSeconds = (clock.now - queueStart).seconds
        // Past the daemon's return of free memory to the system (2 s after traffic stops).
        try await Task.sleep(for: .seconds(3))
        let queued = DaemonProcess.statusKiB(of: daemon.pid, fields)
        let storeBytes = fileBytes(directory, daemon.storeFiles())

        let stopStart = clock.now
        await daemon.stop(keepDirectory: true)
        let stopped = clock.now - stopStart
        daemon = try await start(directory)
        let answering = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "imagent-bench-queue")
        let backlog = try await answering.status().filter { $0 != " " }
        let startup = clock.now - daemon.spawnedAt
        await answering.close()
        try await Task.sleep(for: .seconds(3))
        let restarted = DaemonProcess.statusKiB(of: daemon.pid, fields)

        let live = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "imagent-bench-live")
        defer { Task { await live.close() } }
        let liveSession = try await live.open(service: "echo").session

        // No connect attempt while the port changes hands: one could pick the freed port as its own source
        // port and connect to itself (TCP simultaneous open), taking the port from the server. DISCONNECT
        // is for admins; another user runs without it and that small risk.
        let heldDown = (try? await live.disconnectLink()) != nil
        try await Task.sleep(for: .milliseconds(200))
        reservation.release()
        let started = try await startReferenceServer(port: reservation.port)
        (server, serverDirectory) = (started.server, started.directory)
        if heldDown { try await live.connectLink() }
        let (pid, interval) = (daemon.pid, options.liveIntervalMS)
        let result = try await withDeadline(120 + messages / 50, "draining \(grouped(messages)) messages") {
            try await measureDrain(server: started.server, daemonPID: pid, socketPath: socket, live: live,
                                   session: liveSession, queued: messages, intervalMS: interval)
        }
        let (count, size) = (options.liveMessages, options.payload)
        let (liveRun, liveCPU) = try await cpuPerMessage(of: [pid], messages: count) {
            try await withDeadline(120 + count / 100, "the live one-way run") {
                try await runThroughDaemon(socketPath: socket, completion: .sink, size: size, count: count, window: 256)
            }
        }
        try await Task.sleep(for: .seconds(3))
        let drained = DaemonProcess.statusKiB(of: daemon.pid, fields)

        let volume = bytesLabel(messages * options.payload)
        print("")
        print("### \(volume) queued: \(grouped(messages)) × \(bytesLabel(options.payload)) on \(options.sessions) `sink` sessions, "
              + "durability \"\(options.durability)\"")
        print("")
        print("queued in \(format(queueSeconds, decimals: 1)) s (\(grouped(Int(Double(messages) / queueSeconds))) msg/s); "
              + "store on disk \(mib(storeBytes / 1024)) (\(daemon.storeFiles().joined(separator: ", "))); STATUS after the restart: "
              + "outbox \(jsonNumber("outbox", in: backlog) ?? "?")")
        print("restart: SIGTERM → exit \(format(stopped.seconds * 1000, decimals: 0)) ms; spawn → STATUS answered "
              + "\(format(startup.seconds * 1000, decimals: 0)) ms")
        print("")
        print("| imagentd memory | VmRSS | RssAnon | VmHWM (peak) |")
        print("|---|---:|---:|---:|")
        func memoryRow(_ moment: String, _ values: [Int]) {
            print("| \(moment) | \(mib(values[0])) | \(mib(values[1])) | \(values.count > 2 ? mib(values[2]) : "") |")
        }
        memoryRow("idle, server down, nothing queued", idle)
        memoryRow("\(volume) queued, server down", queued)
        memoryRow("restarted on that store, server still down", restarted)
        memoryRow("during the drain (highest sample)", [result.peakRSS, result.peakAnon])
        memoryRow("drained, after the live run", drained)
        let drainRate = Double(messages) / result.drain.seconds
        let liveRate = Double(count) / liveRun.elapsed.seconds
        let latencies = result.latencies
        /// "p50 / p99 / max" of sorted milliseconds.
        func spread(_ sorted: [Double]) -> String {
            guard let last = sorted.last else { return "? / ? / ?" }
            return [50, 99].map { format(sorted[min(sorted.count - 1, sorted.count * $0 / 100)], decimals: 1) }
                .joined(separator: " / ") + " / " + format(last, decimals: 1)
        }
        print("")
        print("| drain | |")
        print("|---|---:|")
        print("| server up → link connected | \(format(result.connect.seconds, decimals: 2)) s |")
        print("| link connected → the server has every message | \(format(result.drain.seconds, decimals: 2)) s |")
        print("| drain rate | \(grouped(Int(drainRate))) msg/s, \(format(drainRate * Double(options.payload) / 1e6, decimals: 1)) MB/s |")
        print("| live one-way run of \(grouped(count)) × \(bytesLabel(options.payload)) afterwards | \(grouped(Int(liveRate))) msg/s |")
        print("| drain ÷ live | \(format(drainRate / liveRate, decimals: 2))× |")
        print("| imagentd CPU µs/msg: drain, live run | \(microseconds(result.cpuPerMessage)), \(microseconds(liveCPU)) |")
        print("| live echo on another session during the drain: \(grouped(latencies.count)) messages, p50 / p99 / max | "
              + "\(spread(latencies)) ms |")
        print("| of which send → ACCEPTED (the daemon's commit of the SEND), p50 / p99 / max | \(spread(result.acceptedLatencies)) ms |")
        let exact = result.received == result.expected
        print("| the server received (it refuses gaps and ignores duplicates) | \(grouped(result.received)) of \(grouped(result.expected))"
              + "\(exact ? "" : " MISMATCH") |")
        func mibs(_ kib: Int) -> String { format(Double(kib) / 1024, decimals: 1) }
        var table = MarkdownTable([.text(""), .number("figure")])
        table.add(["queueing (server down)", "\(format(queueSeconds, decimals: 1)) s, \(grouped(Int(Double(messages) / queueSeconds))) msg/s"])
        table.add(["RssAnon: queued; restarted; drain (peak); after",
                   "\(mibs(queued[1])); \(mibs(restarted[1])); \(mibs(result.peakAnon)); \(mibs(drained[1])) MiB"])
        table.add(["link connected → the server has every message", "\(format(result.drain.seconds, decimals: 2)) s"])
        table.add(["drain rate", "\(grouped(Int(drainRate))) msg/s, \(format(drainRate * Double(options.payload) / 1e6, decimals: 1)) MB/s"])
        table.add(["live one-way run of \(grouped(count)) × \(bytesLabel(options.payload)) afterwards", "\(grouped(Int(liveRate))) msg/s"])
        table.add(["drain ÷ live", ratioLabel(drainRate / liveRate)])
        table.add(["imagentd CPU µs/msg: drain; live run", "\(microseconds(result.cpuPerMessage)); \(microseconds(liveCPU))"])
        table.add(["live echoes during the drain: count; p50 / p99 / max", "\(grouped(latencies.count)); \(spread(latencies)) ms"])
        table.add(["of which send → ACCEPTED: p50 / p99 / max", "\(spread(result.acceptedLatencies)) ms"])
        table.add(["server received (expected)", "\(grouped(result.received)) (\(grouped(result.expected)))"])
        await printMarkdown(table)
        await daemon.stop()
        try? await server?.stop()
        return exact
    } catch {
        let log = daemon.log
        await daemon.stop()
        try? await server?.stop()
        throw BenchError("\(error)\nimagentd's log (tail):\n\(String(log.suffix(2000)))")
    }
}

/// Opens the `sink` sessions and sends every message, round robin, 256 waiting for ACCEPTED at most;
/// then checks that STATUS counts them all in the outbox.
private func queueBacklog(socketPath: String, sessions count: Int, messages: Int, payload size: Int) async throws {
    let client = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-queue")
    let events = client.events
    Task { for try await _ in events {} }
    var sessions: [UInt64] = []
    for _ in 0..<count { sessions.append(try await client.open(service: "sink").session) }
    let payload = ByteBuffer(repeating: 0x51, count: size)
    let targets = sessions
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<messages {
            if index >= 256 { try await group.next() }
            group.addTask { _ = try await client.send(session: targets[index % targets.count], payload: payload) }
        }
        try await group.waitForAll()
    }
    let status = try await client.status().filter { $0 != " " }
    await client.close()
    guard jsonNumber("outbox", in: status) == String(messages) else {
        throw BenchError("STATUS shows \(jsonNumber("outbox", in: status) ?? "?") queued messages, not \(messages)")
    }
}

/// The total size of `names` in `directory`.
func fileBytes(_ directory: String, _ names: [String]) -> Int {
    names.reduce(0) { total, name in
        var status = stat()
        return total + (stat(directory + "/" + name, &status) == 0 ? Int(status.st_size) : 0)
    }
}
