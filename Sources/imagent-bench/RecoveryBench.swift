#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import IMAgentTestKit
import NIOCore
import RefServer

struct RecoveryOptions: Sendable {
    var messages = 100_000
    var sessions = 10
    var size = 256
    var durability = "process"
    /// How the first daemon ends: "term" (SIGTERM, graceful) and/or "kill" (SIGKILL, a crash).
    var stops = ["term", "kill"]
}

/// `imagent-bench recovery`: queue messages in a daemon whose server is down,
/// stop it (SIGTERM or SIGKILL), start the reference server, start the daemon
/// again on the same store, and time spawn → READY=1, spawn → link connected,
/// spawn → every queued message acknowledged by the server (the daemon's
/// outbox, from STATUS every 50 ms, is empty).
func runRecoveryBench(_ options: RecoveryOptions) async -> Int32 {
    startWatchdog(seconds: 900 * options.stops.count)
    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
    print("\(grouped(options.messages)) messages of \(options.size) B on \(options.sessions) `sink` sessions queued while the "
          + "server is down (connection refused), durability \"\(options.durability)\"; then the daemon is stopped, the "
          + "reference server started, and the daemon started again on the same store")
    print("")
    print("| stop | queue ms | stop ms | store MiB | spawn → READY ms | spawn → connected ms | spawn → all acknowledged ms | CPU ms to all acknowledged | server got |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    var table = MarkdownTable([.text("durability"), .text("stop"), .number("spawn → READY ms"),
                               .number("spawn → all acknowledged ms"), .number("server got")])
    for stop in options.stops {
        do {
            let recovery = try await recoverOnce(options, stop: stop)
            print(recovery.row)
            table.add([options.durability] + recovery.summary)
        } catch {
            print("imagent-bench recovery: \(stop): \(error)")
            return 1
        }
    }
    print("load average \(loadAverage()) at the end")
    await printMarkdown(table)
    return 0
}

/// The full row of one stop's recovery, and BENCHMARKS.md's cells of it (stop, → READY, → all acknowledged, server got).
private func recoverOnce(_ options: RecoveryOptions, stop: String) async throws -> (row: String, summary: [String]) {
    // A bound socket that does not listen: connections to its port are refused until the server takes it.
    let reservation = try PortReservation()
    let address = "127.0.0.1:\(reservation.port)"
    let first = try await DaemonProcess(serverAddress: address, token: benchToken, durability: options.durability,
                                        maxSessions: 1_000)
    temporaryDirectories.append(first.directory)
    let clock = ContinuousClock()
    let queueStart = clock.now
    do {
        let socket = first.socketPath
        try await withDeadline(600, "queueing \(options.messages) messages") {
            try await queueMessages(socketPath: socket, options: options)
        }
    } catch {
        let log = first.log
        await first.stop()
        throw BenchError("\(error)\nimagentd's log (tail):\n\(String(log.suffix(2000)))")
    }
    let queued = (clock.now - queueStart).seconds * 1000
    let stopStart = clock.now
    if stop == "kill" { first.kill9() } else { await first.stop(keepDirectory: true) }
    let stopped = (clock.now - stopStart).seconds * 1000
    let storeBytes = first.storeFiles().reduce(0) { total, name in
        var status = stat()
        return total + (stat(first.directory + "/" + name, &status) == 0 ? Int(status.st_size) : 0)
    }

    reservation.release()
    let (server, serverDirectory) = try await startReferenceServer(port: reservation.port)
    defer { removeDirectory(serverDirectory) }
    let notifyDirectory = try makeTemporaryDirectory(prefix: "imagent-bench-notify")
    defer { removeDirectory(notifyDirectory) }
    let listener = try NotifyListener(path: notifyDirectory + "/notify")
    let second = try await DaemonProcess(serverAddress: address, token: benchToken, durability: options.durability,
                                         maxSessions: 1_000, notifySocket: listener.path, directory: first.directory,
                                         waitForSocket: false)
    do {
        var ready: ContinuousClock.Instant?
        var connected: ContinuousClock.Instant?
        let deadline = clock.now + .seconds(60)
        while ready == nil || connected == nil, clock.now < deadline, second.isRunning {
            guard let datagram = listener.next(milliseconds: 200) else { continue }
            for line in datagram.text.split(separator: "\n") {
                if line == "READY=1", ready == nil { ready = datagram.at }
                if line.hasPrefix("STATUS=connected to"), connected == nil { connected = datagram.at }
            }
        }
        guard let ready, let connected else { throw BenchError("no READY=1 or no link within 60 s") }
        let client = try await IPCClient.connect(socketPath: second.socketPath, clientName: "imagent-bench-recovery")
        var drained: ContinuousClock.Instant?
        var cpu = 0.0
        while drained == nil, clock.now < deadline + .seconds(540) {
            let status = try await client.status().filter { $0 != " " }
            if jsonNumber("outbox", in: status) == "0" {
                drained = clock.now
                cpu = cpuMilliseconds(of: second.pid)
            } else { try await Task.sleep(for: .milliseconds(50)) }
        }
        await client.close()
        guard let drained else { throw BenchError("the outbox did not drain within 10 minutes") }
        let received = Int(jsonNumber("messages_in", in: await server.execute(.stats)) ?? "") ?? -1
        let spawn = second.spawnedAt
        func ms(_ instant: ContinuousClock.Instant) -> String { format((instant - spawn).seconds * 1000, decimals: 1) }
        await second.stop()
        try? await server.stop()
        let signal = stop == "kill" ? "SIGKILL" : "SIGTERM"
        return ("| \(signal) | \(grouped(Int(queued))) | \(format(stopped, decimals: 1)) "
            + "| \(format(Double(storeBytes) / 1_048_576, decimals: 1)) | \(ms(ready)) | \(ms(connected)) | \(ms(drained)) "
            + "| \(format(cpu, decimals: 1)) | \(grouped(received)) |", [signal, ms(ready), ms(drained), grouped(received)])
    } catch {
        let log = second.log
        await second.stop()
        try? await server.stop()
        throw BenchError("\(error)\nimagentd's log (tail):\n\(String(log.suffix(2000)))")
    }
}

/// Opens the sessions and sends every message (256 waiting for ACCEPTED at most), then checks STATUS's outbox.
private func queueMessages(socketPath: String, options: RecoveryOptions) async throws {
    let client = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-recovery")
    let events = client.events
    Task { for try await _ in events {} }
    var sessions: [UInt64] = []
    for _ in 0..<options.sessions { sessions.append(try await client.open(service: "sink").session) }
    let payload = ByteBuffer(repeating: 0x5A, count: options.size)
    let targets = sessions
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<options.messages {
            if index >= 256 { try await group.next() }
            group.addTask { _ = try await client.send(session: targets[index % targets.count], payload: payload) }
        }
        try await group.waitForAll()
    }
    let status = try await client.status().filter { $0 != " " }
    await client.close()
    guard jsonNumber("outbox", in: status) == String(options.messages) else {
        throw BenchError("STATUS shows \(jsonNumber("outbox", in: status) ?? "?") queued messages, not \(options.messages)")
    }
}
