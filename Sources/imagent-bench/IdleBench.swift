#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import IMAgentTestKit
import RefServer

struct IdleOptions: Sendable {
    /// The measured window, after `settleSeconds` of quiet.
    var seconds = 120
    var settleSeconds = 5
    var heartbeatMin = 15
    var heartbeatMax = 300
    /// HEARTBEAT_MS the reference server announces: the ceiling of the daemon's interval.
    var serverHeartbeatMS = 300_000
}

/// `imagent-bench idle`: the daemon with its link up and one `echo` session
/// open (used once, its client still attached), left alone; prints its RSS and
/// PSS and every thread's context switches over the window (who wakes, and how
/// often), beside the frames the server received (the daemon's heartbeats) in
/// the same window.
func runIdleBench(_ options: IdleOptions) async -> Int32 {
    startWatchdog(seconds: options.seconds + options.settleSeconds + 120)
    let server: RefServer
    let serverDirectory: String
    do {
        (server, serverDirectory) = try await startReferenceServer(heartbeatMS: UInt32(options.serverHeartbeatMS))
    } catch {
        print("imagent-bench idle: cannot start the reference server: \(error)")
        return 1
    }
    defer { removeDirectory(serverDirectory) }
    var started: DaemonProcess?
    do {
        let daemon = try await DaemonProcess(serverAddress: server.address, token: benchToken, durability: "process", maxSessions: 100,
                                             settings: "[heartbeat]\nmin_seconds = \(options.heartbeatMin)\nmax_seconds = \(options.heartbeatMax)\n")
        temporaryDirectories.append(daemon.directory)
        started = daemon
        try await waitForLink(daemon)
        let before = try await heartbeatSeconds(daemon)
        let client = try await openIdleSession(daemon)
        try await Task.sleep(for: .seconds(options.settleSeconds))

        let framesBefore = await serverFramesIn(server)
        let start = ThreadSwitches(pid: daemon.pid)
        let cpuBefore = cpuMilliseconds(of: daemon.pid)
        let clock = ContinuousClock()
        let windowStart = clock.now
        try await Task.sleep(for: .seconds(options.seconds))
        let end = ThreadSwitches(pid: daemon.pid)
        let cpu = cpuMilliseconds(of: daemon.pid) - cpuBefore
        let window = (clock.now - windowStart).seconds
        let framesAfter = await serverFramesIn(server)
        let memory = daemon.memory()
        let pss = readFile("/proc/\(daemon.pid)/smaps_rollup").flatMap { kilobytes("Pss", in: $0) }
        let mappings = PSSBreakdown(smaps: readFile("/proc/\(daemon.pid)/smaps") ?? "")
        let executable = readLink("/proc/\(daemon.pid)/exe")
        let after = try await heartbeatSeconds(daemon)
        await client.close()

        let perMinute = 60 / window
        print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage())")
        print("idle imagentd, link up, one echo session open: [heartbeat] min_seconds = \(options.heartbeatMin), max_seconds = "
              + "\(options.heartbeatMax); server HEARTBEAT_MS \(options.serverHeartbeatMS); window \(format(window, decimals: 1)) s "
              + "after \(options.settleSeconds) s of quiet")
        print("heartbeat interval (STATUS): \(before) s before the window, \(after) s after it")
        print("frames the server received in the window (the daemon's PINGs): \(framesAfter - framesBefore)")
        print("VmRSS \(mib(memory.rss)), VmHWM \(mib(memory.peak)), PSS \(pss.map { "\($0) kB" } ?? "?"); "
              + "CPU time used in the window: \(format(cpu, decimals: 2)) ms")
        print("PSS by mapping: " + mappings.largest(8).map { "\($0.path.isEmpty ? "anonymous" : $0.path) \($0.kB) kB" }
            .joined(separator: ", "))
        print("")
        print("| thread | tid | voluntary | involuntary | per minute |")
        print("|---|---:|---:|---:|---:|")
        var total = 0
        for thread in end.since(start) {
            let switches = thread.voluntary + thread.nonvoluntary
            total += switches
            print("| \(thread.name) | \(thread.tid) | \(thread.voluntary) | \(thread.nonvoluntary) | \(format(Double(switches) * perMinute, decimals: 1)) |")
        }
        print("| all \(end.threads.count) threads | | | | \(format(Double(total) * perMinute, decimals: 1)) |")
        var table = MarkdownTable([.text(""), .number("idle daemon")])
        let threads = end.since(start)
        for thread in threads where thread.voluntary > 0 { table.add(["voluntary switches, `\(thread.name)`", String(thread.voluntary)]) }
        let quiet = threads.filter { $0.voluntary == 0 }.map { "`\($0.name)`" }
        if !quiet.isEmpty { table.add(["voluntary switches, \(quiet.joined(separator: ", "))", "0 each"]) }
        table.add(["all threads", "\(threads.reduce(0) { $0 + $1.voluntary }) in \(end.threads.count) threads"])
        let anonymous = DaemonProcess.statusKiB(of: daemon.pid, ["RssAnon"])[0]
        table.add(["PSS (`smaps_rollup`)", pss.map { "\(format(Double($0) / 1024, decimals: 1)) MB" } ?? "?"])
        let split = mappings.split(executable: executable)
        table.add(["of it: the executable, the shared libraries, heap and stacks",
                   [split.executable, split.libraries, split.anonymous].map { "\(format(Double($0) / 1024, decimals: 1))" }
                       .joined(separator: " + ") + " MB"])
        table.add(["anonymous (`RssAnon`)", "\(format(Double(anonymous) / 1024, decimals: 1)) MB"])
        await printMarkdown(table)
        await daemon.stop()
    } catch {
        print("imagent-bench idle: \(error)")
        await started?.stop()
        return 1
    }
    try? await server.stop()
    return 0
}

/// A client with one `echo` session, which has echoed one message (acknowledged).
private func openIdleSession(_ daemon: DaemonProcess) async throws -> IPCClient {
    let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "imagent-bench")
    let session = try await client.open(service: "echo").session
    try await client.send(session: session, text: "idle")
    for try await event in client.events {
        if case .message(let message) = event, message.session == session {
            try await client.ack(session: session, seq: message.seq)
            break
        }
    }
    return client
}

/// The figure of `name:` in a /proc file of `Name:   value kB` lines, in kB.
private func kilobytes(_ name: String, in text: String) -> Int? {
    for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
        return Int(line.dropFirst(name.count + 1).filter(\.isNumber))
    }
    return nil
}

/// `heartbeat_s` from the daemon's STATUS.
private func heartbeatSeconds(_ daemon: DaemonProcess) async throws -> String {
    let client = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "imagent-bench")
    let status = try await client.status().filter { $0 != " " }
    await client.close()
    return jsonNumber("heartbeat_s", in: status) ?? "?"
}

/// `frames_in` from the reference server's `stats`.
func serverFramesIn(_ server: RefServer) async -> Int {
    Int(jsonNumber("frames_in", in: await server.execute(.stats)) ?? "") ?? -1
}

/// The number after `"key":` in a line of JSON (no spaces), as text.
func jsonNumber(_ key: String, in json: String) -> String? {
    guard let range = json.firstRange(of: "\"\(key)\":") else { return nil }
    let value = json[range.upperBound...].prefix { $0.isNumber || $0 == "." || $0 == "-" }
    return value.isEmpty ? nil : String(value)
}

/// Where a symbolic link points ("" when it cannot be read).
private func readLink(_ path: String) -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return "" }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
