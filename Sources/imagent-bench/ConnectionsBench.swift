#if canImport(Glibc)
import Glibc
#endif
import AgentIPC
import RefServer

struct ConnectionsOptions: Sendable {
    /// Idle clients connected (HELLO said, nothing else).
    var clients = 1_000
    /// Idle `echo` sessions then opened, spread over those clients.
    var sessions = 1_000
    /// Rounds of the whole measurement, each with a new daemon.
    var rounds = 3
}

/// `imagent-bench connections`: the daemon's RSS with N idle clients
/// connected (each said HELLO and got WELCOME), then with M idle sessions
/// opened by them; KB per client connection and per session, over a few rounds.
func runConnectionsBench(_ options: ConnectionsOptions) async -> Int32 {
    startWatchdog(seconds: options.rounds * 300 + 60)
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    let needed = rlim_t(options.clients * 2 + 256)
    if limit.rlim_cur < needed {
        limit.rlim_cur = min(needed, limit.rlim_max)
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)  // The daemon inherits it.
    }
    let server: RefServer
    let serverDirectory: String
    do {
        (server, serverDirectory) = try await startReferenceServer()
    } catch {
        print("imagent-bench connections: cannot start the reference server: \(error)")
        return 1
    }
    defer { removeDirectory(serverDirectory) }
    print("machine: \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, load average \(loadAverage()) at start")
    print("imagentd RSS: link up and no client; then \(grouped(options.clients)) idle clients (HELLO/WELCOME only); then "
          + "\(grouped(options.sessions)) idle `echo` sessions opened by those clients in turn, 64 OPENs in flight; "
          + "each read 2 s after the step")
    print("")
    print("| round | idle | + clients | + sessions | bytes per client | bytes per session |")
    print("|---:|---:|---:|---:|---:|---:|")
    var perClient: [Double] = []
    var perSession: [Double] = []
    for round in 1...options.rounds {
        var started: DaemonProcess?
        do {
            let daemon = try await DaemonProcess(serverAddress: server.address, token: benchToken, durability: "process",
                                                 maxSessions: options.sessions + 100, maxClients: options.clients + 16)
            temporaryDirectories.append(daemon.directory)
            started = daemon
            try await waitForLink(daemon)
            try await Task.sleep(for: .seconds(2))
            let idle = daemon.memory().rss
            let socket = daemon.socketPath
            let clients = try await withDeadline(120, "connecting \(options.clients) clients") {
                try await connectClients(socketPath: socket, count: options.clients)
            }
            try await Task.sleep(for: .seconds(2))
            let withClients = daemon.memory().rss
            let sessions = options.sessions
            try await withDeadline(120, "opening \(sessions) sessions") {
                // 64 OPENs in flight at most, as in `daemon`: thousands at once would
                // measure the allocator's high-water mark of the burst, not the sessions.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<sessions {
                        if index >= 64 { try await group.next() }
                        let client = clients[index % clients.count]
                        group.addTask { _ = try await client.open(service: "echo") }
                    }
                    try await group.waitForAll()
                }
            }
            try await Task.sleep(for: .seconds(2))
            let withSessions = daemon.memory().rss
            let clientBytes = Double(withClients - idle) * 1024 / Double(options.clients)
            let sessionBytes = Double(withSessions - withClients) * 1024 / Double(max(1, sessions))
            perClient.append(clientBytes)
            perSession.append(sessionBytes)
            print("| \(round) | \(mib(idle)) | \(mib(withClients)) | \(mib(withSessions)) | \(grouped(Int(clientBytes))) "
                  + "| \(grouped(Int(sessionBytes))) |")
            for client in clients { await client.close() }
            await daemon.stop()
        } catch {
            print("imagent-bench connections: round \(round): \(error)")
            if let daemon = started { print("imagentd's log (tail):\n\(String(daemon.log.suffix(2000)))") }
            await started?.stop()
            return 1
        }
    }
    let median = { (values: [Double]) in values.sorted()[values.count / 2] }
    print("")
    print("median: \(grouped(Int(median(perClient)))) bytes per idle client connection, "
          + "\(grouped(Int(median(perSession)))) bytes per idle session")
    print("load average \(loadAverage()) at the end")
    /// "4,075 B (4,071–4,075)": the median of the rounds and their range.
    func spread(_ values: [Double]) -> String {
        let sorted = values.sorted().map { grouped(Int($0)) }
        return "\(sorted[sorted.count / 2]) B (\(sorted[0])–\(sorted[sorted.count - 1]))"
    }
    var table = MarkdownTable([.text("measure"), .number("median B (range over \(options.rounds) rounds)")])
    table.add(["RSS per idle client connection (\(grouped(options.clients)) clients)", spread(perClient)])
    table.add(["RSS per idle session (\(grouped(options.sessions)) sessions)", spread(perSession)])
    await printMarkdown(table)
    try? await server.stop()
    return 0
}

/// `count` clients, connected 64 at a time, each reading its events so nothing queues.
private func connectClients(socketPath: String, count: Int) async throws -> [IPCClient] {
    try await withThrowingTaskGroup(of: IPCClient.self) { group in
        var clients: [IPCClient] = []
        for index in 0..<count {
            if index >= 64, let client = try await group.next() { clients.append(client) }
            group.addTask {
                let client = try await IPCClient.connect(socketPath: socketPath, clientName: "imagent-bench-idle")
                let events = client.events
                Task { for try await _ in events {} }
                return client
            }
        }
        for try await client in group { clients.append(client) }
        return clients
    }
}
