#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import NIOCore
import RefServer
import Synchronization

struct SoakOptions: Sendable {
    var minutes = 60
    /// Messages per second, summed over the clients.
    var rate = 100
    var clients = 4
    /// Each client closes its session and opens a new one after this many messages.
    var messagesPerSession = 500
    /// The reference server drops the link this often (the daemon reconnects).
    var dropEverySeconds = 300
    /// RSS may grow at most this much from the bound's start to the end.
    var maxGrowthMiB = 8.0
    var csvPath = "soak.csv"
}

/// Counters shared by the load tasks and the sampler.
private final class SoakCounters: Sendable {
    struct Counts {
        var sent = 0
        var echoed = 0
        var sessionsOpened = 0
        var errors = 0
        var lastError = ""
    }

    let counts = Mutex(Counts())

    func update(_ change: (inout Counts) -> Void) { counts.withLock { change(&$0) } }
    var snapshot: Counts { counts.withLock { $0 } }
}

/// `imagent-bench soak`: the daemon under a steady moderate load for a long
/// time (sessions opened and closed, the link dropped now and then), with its
/// RSS sampled every 10 s for the first five minutes and every minute after,
/// printed and written to a CSV. Exits 1 if RSS grew by more than the bound
/// between minute 10 (or the middle of a shorter run) and the end, or if the
/// load saw errors or lost echoes.
func runSoakBench(_ options: SoakOptions) async -> Int32 {
    startWatchdog(seconds: options.minutes * 60 + 300)
    let server: RefServer
    let serverDirectory: String
    do {
        (server, serverDirectory) = try await startReferenceServer()
    } catch {
        print("imagent-bench soak: cannot start the reference server: \(error)")
        return 1
    }
    defer { removeDirectory(serverDirectory) }
    let daemon: DaemonProcess
    do {
        daemon = try await DaemonProcess(serverAddress: server.address, token: benchToken, durability: "process", maxSessions: 1_000)
        temporaryDirectories.append(daemon.directory)
        try await waitForLink(daemon)
    } catch {
        print("imagent-bench soak: cannot start imagentd: \(error)")
        return 1
    }
    guard let csv = fopen(options.csvPath, "w") else {
        print("imagent-bench soak: cannot write \(options.csvPath)")
        await daemon.stop()
        return 1
    }
    fputs("elapsed_s,rss_kib,hwm_kib,sent,echoed,sessions_opened,drops,load1\n", csv)
    fflush(csv)

    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
    print("soak: \(options.minutes) min, \(options.rate) msg/s to `echo` from \(options.clients) clients, a new session every "
          + "\(options.messagesPerSession) messages per client, link dropped by the server every \(options.dropEverySeconds) s; "
          + "bound: RSS growth ≤ \(format(options.maxGrowthMiB, decimals: 1)) MiB from minute \(boundStartMinute(options)) to the end")
    print("")
    print("| elapsed | VmRSS | VmHWM | sent | echoed | sessions opened | drops | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")

    let counters = SoakCounters()
    let clock = ContinuousClock()
    let start = clock.now
    let end = start + .seconds(options.minutes * 60)
    let socket = daemon.socketPath
    let load = Task {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<options.clients {
                group.addTask {
                    await soakClient(socketPath: socket, interval: .seconds(Double(options.clients) / Double(options.rate)),
                                     messagesPerSession: options.messagesPerSession, until: end, counters: counters)
                }
            }
        }
    }

    var samples: [(elapsed: Int, rss: Int)] = []
    var drops = 0
    var nextDrop = start + .seconds(options.dropEverySeconds)
    var nextSample = start
    while clock.now < end {
        if clock.now >= nextDrop {
            _ = await server.execute(.drop)
            drops += 1
            nextDrop += .seconds(options.dropEverySeconds)
        }
        if clock.now >= nextSample {
            let elapsed = Int((clock.now - start).seconds.rounded())
            let memory = daemon.memory()
            let counts = counters.snapshot
            let load1 = loadAverage().split(separator: " ").first.map(String.init) ?? "?"
            samples.append((elapsed, memory.rss))
            print("| \(elapsed / 60) min \(elapsed % 60) s | \(mib(memory.rss)) | \(mib(memory.peak)) | \(grouped(counts.sent)) "
                  + "| \(grouped(counts.echoed)) | \(grouped(counts.sessionsOpened)) | \(drops) | \(load1) |")
            fputs("\(elapsed),\(memory.rss),\(memory.peak),\(counts.sent),\(counts.echoed),\(counts.sessionsOpened),\(drops),\(load1)\n", csv)
            fflush(nil)  // The CSV, and the table when stdout is a file: a long run shows its progress.
            nextSample += .seconds(elapsed < 300 ? 10 : 60)
            if !daemon.isRunning { break }
        }
        try? await Task.sleep(until: min(nextSample, nextDrop, end), clock: clock)
    }
    await load.value
    // Echoes still on their way: give them a few seconds.
    for _ in 0..<100 where counters.snapshot.echoed < counters.snapshot.sent {
        try? await Task.sleep(for: .milliseconds(100))
    }
    let final = daemon.memory()
    let counts = counters.snapshot
    let elapsed = Int((clock.now - start).seconds.rounded())
    fputs("\(elapsed),\(final.rss),\(final.peak),\(counts.sent),\(counts.echoed),\(counts.sessionsOpened),\(drops),"
          + "\(loadAverage().split(separator: " ").first ?? "?")\n", csv)
    fclose(csv)
    samples.append((elapsed, final.rss))

    let alive = daemon.isRunning
    await daemon.stop()
    try? await server.stop()

    let boundStart = boundStartMinute(options) * 60
    let base = samples.first(where: { $0.elapsed >= boundStart }) ?? samples[samples.count / 2]
    let growth = Double(final.rss - base.rss) / 1024
    print("")
    print("RSS \(mib(base.rss)) at \(base.elapsed) s, \(mib(final.rss)) at the end (\(elapsed) s): "
          + "growth \(format(growth, decimals: 1)) MiB (bound \(format(options.maxGrowthMiB, decimals: 1)) MiB); peak \(mib(final.peak))")
    print("messages: \(grouped(counts.sent)) sent, \(grouped(counts.echoed)) echoed; \(grouped(counts.sessionsOpened)) sessions opened; "
          + "\(drops) link drops; \(counts.errors) client errors\(counts.errors > 0 ? " (last: \(counts.lastError))" : "")")
    print("load average \(loadAverage()) at the end; samples in \(options.csvPath)")
    var failed = false
    if !alive { print("FAIL: imagentd exited during the soak"); failed = true }
    if growth > options.maxGrowthMiB { print("FAIL: RSS grew by more than the bound"); failed = true }
    if counts.echoed < counts.sent { print("FAIL: \(counts.sent - counts.echoed) messages not echoed"); failed = true }
    if counts.errors > 0 { print("FAIL: the load saw errors"); failed = true }
    if !failed { print("PASS") }
    return failed ? 1 : 0
}

/// Minute 10, or the middle of a run shorter than 20 minutes.
private func boundStartMinute(_ options: SoakOptions) -> Int {
    options.minutes >= 20 ? 10 : options.minutes / 2
}

/// One client: opens an `echo` session, sends one 256-byte message every
/// `interval`, acknowledges echoes, and after `messagesPerSession` waits for
/// the session's last echo (30 s at most), closes it and opens another, until
/// `end`. Reconnects to the daemon if the connection fails.
private func soakClient(socketPath: String, interval: Duration, messagesPerSession: Int,
                        until end: ContinuousClock.Instant, counters: SoakCounters) async {
    let payload = ByteBuffer(repeating: 0x5A, count: 256)
    let clock = ContinuousClock()
    var next = clock.now
    while clock.now < end {
        do {
            let client = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-soak")
            let events = client.events
            /// Echoes and the last echo's seq, per session.
            let echoes = Mutex<[UInt64: (count: Int, seq: UInt64)]>([:])
            let reader = Task {
                for try await event in events {
                    guard case .message(let message) = event else { continue }
                    counters.update { $0.echoed += 1 }
                    let count = echoes.withLock {
                        let count = ($0[message.session]?.count ?? 0) + 1
                        $0[message.session] = (count, message.seq)
                        return count
                    }
                    if count % 16 == 0 { try await client.ack(session: message.session, seq: message.seq) }
                }
            }
            defer { reader.cancel() }
            while clock.now < end {
                let session = try await client.open(service: "echo").session
                counters.update { $0.sessionsOpened += 1 }
                var sent = 0
                for _ in 0..<messagesPerSession where clock.now < end {
                    next += interval
                    try await Task.sleep(until: next, clock: clock)
                    _ = try await client.send(session: session, payload: payload)
                    sent += 1
                    counters.update { $0.sent += 1 }
                }
                let deadline = clock.now + .seconds(30)
                while echoes.withLock({ $0[session]?.count ?? 0 }) < sent, clock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                if let last = echoes.withLock({ $0.removeValue(forKey: session) }) {
                    try await client.ack(session: session, seq: last.seq)
                }
                try await client.close(session: session)
                next = max(next, clock.now)
            }
            await client.close()
        } catch {
            counters.update {
                $0.errors += 1
                $0.lastError = "\(error)"
            }
            try? await Task.sleep(for: .seconds(1))
            next = clock.now
        }
    }
}
