#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit
import RefServer

struct ReadyOptions: Sendable {
    var runs = 10
}

/// `imagent-bench ready`: how long the daemon takes from its spawn to
/// `READY=1` on `$NOTIFY_SOCKET` (IPC socket served), and to the
/// `STATUS=connected to …` it sends when the link to the loopback reference
/// server is up (HELLO and LOGIN done). Each run starts with a new, empty state directory.
func runReadyBench(_ options: ReadyOptions) async -> Int32 {
    startWatchdog(seconds: options.runs * 30 + 60)
    let server: RefServer
    let serverDirectory: String
    do {
        (server, serverDirectory) = try await startReferenceServer()
    } catch {
        print("imagent-bench ready: cannot start the reference server: \(error)")
        return 1
    }
    defer { removeDirectory(serverDirectory) }
    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
    print("spawn → READY=1 and spawn → link connected, \(options.runs) runs, new state directory each")
    var ready: [Double] = []
    var connected: [Double] = []
    var cpu: [Double] = []
    for run in 1...options.runs {
        do {
            let times = try await startOnce(serverAddress: server.address, directory: nil)
            print("run \(run): READY \(format(times.ready, decimals: 1)) ms, connected \(format(times.connected, decimals: 1)) ms, "
                  + "CPU \(format(times.cpu, decimals: 1)) ms")
            ready.append(times.ready)
            connected.append(times.connected)
            cpu.append(times.cpu)
        } catch {
            print("imagent-bench ready: run \(run): \(error)")
            return 1
        }
    }
    var table = MarkdownTable([.text("from spawn to"), .number("min ms"), .number("median ms"), .number("max ms")])
    table.add(spreadCells("READY=1", ready))
    table.add(spreadCells("link connected", connected))
    table.add(spreadCells("link connected, CPU time used by imagentd", cpu))
    print("\n" + table.text)
    print("load average \(loadAverage()) at the end")
    await printMarkdown(table)
    try? await server.stop()
    return 0
}

/// Starts the daemon with a notify socket in `directory` (nil: a new one),
/// waits for READY=1 and the link's "connected" status, stops it (keeping
/// the directory only when one was given) and returns both times in ms from
/// the spawn, and the CPU time the daemon had used when the link was up.
func startOnce(serverAddress: String, directory: String?, durability: String = "process") async throws
    -> (ready: Double, connected: Double, cpu: Double) {
    let notifyDirectory = try makeTemporaryDirectory(prefix: "imagent-bench-notify")
    defer { removeDirectory(notifyDirectory) }
    let listener = try NotifyListener(path: notifyDirectory + "/notify")
    let daemon = try await DaemonProcess(serverAddress: serverAddress, token: benchToken, durability: durability,
                                         maxSessions: 1_000, notifySocket: listener.path, directory: directory,
                                         waitForSocket: false)
    if directory == nil { temporaryDirectories.append(daemon.directory) }
    var ready: ContinuousClock.Instant?
    var connected: ContinuousClock.Instant?
    var cpu = 0.0
    let deadline = ContinuousClock.now + .seconds(20)
    while ready == nil || connected == nil, ContinuousClock.now < deadline {
        guard let datagram = listener.next(milliseconds: 200) else {
            if !daemon.isRunning { break }
            continue
        }
        for line in datagram.text.split(separator: "\n") {
            if line == "READY=1", ready == nil { ready = datagram.at }
            if line.hasPrefix("STATUS=connected to"), connected == nil {
                connected = datagram.at
                cpu = cpuMilliseconds(of: daemon.pid)
            }
        }
    }
    guard let ready, let connected else {
        let log = daemon.log
        await daemon.stop(keepDirectory: directory != nil)
        throw BenchError("no READY=1 or no link within 20 s; imagentd's log:\n\(String(log.suffix(2000)))")
    }
    await daemon.stop(keepDirectory: directory != nil)
    return ((ready - daemon.spawnedAt).seconds * 1000, (connected - daemon.spawnedAt).seconds * 1000, cpu)
}

/// [label, min, median, max] of values in ms.
func spreadCells(_ label: String, _ values: [Double]) -> [String] {
    let sorted = values.sorted()
    guard let first = sorted.first, let last = sorted.last else { return [label, "", "", ""] }
    return [label, format(first, decimals: 1), format(sorted[sorted.count / 2], decimals: 1), format(last, decimals: 1)]
}
