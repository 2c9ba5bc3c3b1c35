#if canImport(Glibc)
import Glibc
#endif
import RefServer

/// `imagent-bench daemon --scaling`: one-way runs of growing length on both
/// paths, so that a rate falling with the run's length shows.
func benchScaling(durability: String, server: RefServer, options: DaemonBenchOptions) async throws {
    let daemon = try await DaemonProcess(serverAddress: server.address, token: benchToken, durability: durability,
                                         maxSessions: 1_000)
    temporaryDirectories.append(daemon.directory)
    do {
        try await waitForLink(daemon)
        let (socket, pid, window) = (daemon.socketPath, daemon.pid, options.window)
        let (host, port) = (server.host, server.port)
        _ = try await withDeadline(60, "warm-up") {
            _ = try await runThroughDaemon(socketPath: socket, completion: .sink, size: 64, count: 1_000, window: window)
            return try await runDirect(host: host, port: port, token: benchToken, completion: .sink, size: 64, count: 1_000,
                                       window: window)
        }
        print("")
        print("### durability = \"\(durability)\", one-way (`sink`) runs of growing length, window \(window)")
        print("")
        print("| payload | messages | imagentd msg/s | imagentd CPU µs/msg | imagentd disk B/payload B | direct TCP msg/s "
              + "| imagentd ÷ direct | imagentd VmRSS after |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        var decay: [String] = []
        for size in options.sizes {
            let label = size % 1024 == 0 ? "\(size / 1024) KiB" : "\(size) B"
            var rates: [(daemon: Double, direct: Double)] = []
            for count in options.scalingCounts {
                // Generous: a debug daemon may manage a few thousand messages per second.
                let limit = 120 + count / 500
                let (viaDaemon, cost) = try await measureCost(of: [pid], messages: count, payloadBytes: count * size) {
                    try await withDeadline(limit, "\(grouped(count)) × \(label) through imagentd") {
                        try await runThroughDaemon(socketPath: socket, completion: .sink, size: size, count: count, window: window)
                    }
                }
                let rss = daemon.memory().rss
                let direct = try await withDeadline(limit, "\(grouped(count)) × \(label) direct") {
                    try await runDirect(host: host, port: port, token: benchToken, completion: .sink, size: size,
                                        count: count, window: window)
                }
                let rate = (Double(count) / viaDaemon.elapsed.seconds, Double(count) / direct.elapsed.seconds)
                rates.append(rate)
                print("| \(label) | \(grouped(count)) | \(grouped(Int(rate.0))) | \(microseconds(cost.cpuPerMessage)) | \(perPayloadByte(cost.diskBytesPerPayloadByte)) "
                      + "| \(grouped(Int(rate.1))) "
                      + "| \(format(rate.0 / rate.1, decimals: 2))× | \(mib(rss)) |")
            }
            if let first = rates.first, let last = rates.last, rates.count > 1 {
                decay.append("\(label), msg/s over \(grouped(options.scalingCounts.last!)) ÷ over \(grouped(options.scalingCounts.first!)) "
                             + "messages: imagentd \(format(last.daemon / first.daemon, decimals: 2))×, "
                             + "direct TCP \(format(last.direct / first.direct, decimals: 2))×")
            }
        }
        if !decay.isEmpty { print(""); decay.forEach { print($0) } }
    } catch {
        let log = daemon.log
        await daemon.stop()
        throw BenchError("\(error)\nimagentd log (tail):\n\(String(log.suffix(2000)))")
    }
    await daemon.stop()
}
