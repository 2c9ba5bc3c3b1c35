#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import AgentStore

// Numbers to paste into BENCHMARKS.md; the subcommands and their options are in Commands.swift.

// One line at a time also into a pipe or file (`| tee`), so a long run shows its rows as they come.
setvbuf(stdout, nil, _IOLBF, 0)

// `--markdown` (any subcommand) is read by Markdown.swift; the subcommands parse the rest.
let arguments = CommandLine.arguments.dropFirst().filter { $0 != "--markdown" }

/// The value after `--name`, if given.
func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}

func integers(_ text: String) -> [Int]? {
    let values = text.split(separator: ",").map { Int($0) }
    return values.contains(nil) || values.isEmpty ? nil : values.compactMap { $0 }
}

// `--help` anywhere prints the subcommand's help and runs nothing; an unknown option is an error.
if let name = arguments.first, let command = benchCommands.first(where: { $0.name == name }) {
    let rest = Array(arguments.dropFirst())
    if rest.contains("--help") || rest.contains("-h") {
        print(command.help)
        exit(0)
    }
    if let problem = command.problem(with: rest) {
        print("imagent-bench: \(problem)\n\(command.usage)")
        exit(2)
    }
} else if arguments.isEmpty || ["--help", "-h", "help"].contains(arguments[0]) {
    if arguments.count > 1, let command = benchCommands.first(where: { $0.name == arguments[1] }) {
        print(command.help)
    } else {
        print(usage)
    }
    exit(arguments.isEmpty ? 2 : 0)
}

switch arguments.first {
case "codec":
    await runCodec(seconds: option("--seconds").flatMap(Double.init) ?? 2.5)
case "daemon":
    var options = DaemonBenchOptions()
    if let value = option("--messages") { options.messages = Int(value) ?? 0 }
    if let value = option("--requests") { options.requests = Int(value) ?? 0 }
    if let value = option("--window") { options.window = Int(value) ?? 0 }
    if let value = option("--sessions") { options.sessions = Int(value) ?? -1 }
    if let value = option("--time-limit") { options.timeLimitSeconds = Int(value) ?? 0 }
    if let value = option("--sizes") { options.sizes = integers(value) ?? [] }
    if let value = option("--durability") { options.durabilities = value.split(separator: ",").map(String.init) }
    options.samplesCSV = option("--samples-csv")
    if arguments.contains("--scaling") {
        if option("--sizes") == nil { options.sizes = [1024] }
        if let value = option("--counts") { options.scalingCounts = integers(value) ?? [] }
        guard !options.scalingCounts.isEmpty, options.scalingCounts.allSatisfy({ $0 > 0 }) else {
            print(usage)
            exit(2)
        }
        options.scaling = true
    }
    guard options.messages > 0, options.requests > 0, options.window > 0, options.sessions >= 0,
          options.timeLimitSeconds > 0, !options.sizes.isEmpty, options.sizes.allSatisfy({ $0 > 0 }),
          !options.durabilities.isEmpty, options.durabilities.allSatisfy({ $0 == "process" || $0 == "power" })
    else {
        print(usage)
        exit(2)
    }
    exit(await runDaemonBench(options))
case "compare":
    var options = CompareBenchOptions()
    if let value = option("--messages") { options.messages = Int(value) ?? 0 }
    if let value = option("--requests") { options.requests = Int(value) ?? 0 }
    if let value = option("--window") { options.window = Int(value) ?? 0 }
    if let value = option("--time-limit") { options.timeLimitSeconds = Int(value) ?? 0 }
    if let value = option("--sizes") { options.sizes = integers(value) ?? [] }
    if let value = option("--sessions") { options.sessionCounts = integers(value) ?? [] }
    if let value = option("--durability") { options.durability = value }
    if let value = option("--probe-seconds") { options.probeSeconds = Double(value) ?? 0 }
    if let value = option("--probe-batch") { options.probeBatch = Int(value) ?? 0 }
    if let value = option("--rows") {
        let rows = value.split(separator: ",").map { CompareRow(rawValue: String($0)) }
        options.rows = rows.contains(nil) ? [] : Set(rows.compactMap { $0 })
    }
    if let value = option("--mqtt-backend") {
        guard let backend = MQTTUpstream.Backend(rawValue: value) else {
            print(usage)
            exit(2)
        }
        options.mqttBackend = backend
    }
    if let value = option("--tunings") {
        let tunings = value.split(separator: ",").map { MosquittoBridge.Tuning(option: String($0)) }
        options.tunings = tunings.contains(nil) ? [] : tunings.compactMap { $0 }
    }
    guard options.messages > 0, options.requests > 0, options.window > 0, options.timeLimitSeconds > 0,
          !options.rows.isEmpty, !options.tunings.isEmpty, !options.sizes.isEmpty, options.sizes.allSatisfy({ $0 > 0 }),
          !options.sessionCounts.isEmpty, options.sessionCounts.allSatisfy({ $0 > 0 }),
          options.durability == "process" || options.durability == "power", options.probeSeconds > 0, options.probeBatch ?? 1 > 0
    else {
        print(usage)
        exit(2)
    }
    exit(await runCompareBench(options))
case "diskprobe":
    var probe = DiskProbe(size: 65_536, batch: CompareBenchOptions.defaultProbeBatch, seconds: 3, directory: ".")
    if let value = option("--size") { probe.size = byteCount(value) ?? 0 }
    if let value = option("--batch") { probe.batch = Int(value) ?? 0 }
    if let value = option("--seconds") { probe.seconds = Double(value) ?? 0 }
    if let value = option("--dir") { probe.directory = value }
    guard probe.size > 0, probe.batch > 0, probe.seconds > 0 else {
        print(usage)
        exit(2)
    }
    exit(runDiskProbe(probe))
case "idle":
    var options = IdleOptions()
    if let value = option("--seconds") { options.seconds = Int(value) ?? 0 }
    if let value = option("--settle") { options.settleSeconds = Int(value) ?? -1 }
    if let value = option("--heartbeat-min") { options.heartbeatMin = Int(value) ?? 0 }
    if let value = option("--heartbeat-max") { options.heartbeatMax = Int(value) ?? 0 }
    if let value = option("--server-heartbeat-ms") { options.serverHeartbeatMS = Int(value) ?? 0 }
    guard options.seconds > 0, options.settleSeconds >= 0, options.heartbeatMin > 0,
          options.heartbeatMax >= options.heartbeatMin, options.serverHeartbeatMS > 0 else {
        print(usage)
        exit(2)
    }
    exit(await runIdleBench(options))
case "connections":
    var options = ConnectionsOptions()
    if let value = option("--clients") { options.clients = Int(value) ?? 0 }
    if let value = option("--sessions") { options.sessions = Int(value) ?? -1 }
    if let value = option("--rounds") { options.rounds = Int(value) ?? 0 }
    guard options.clients > 0, options.sessions >= 0, options.rounds > 0 else {
        print(usage)
        exit(2)
    }
    exit(await runConnectionsBench(options))
case "ready":
    var options = ReadyOptions()
    if let value = option("--runs") { options.runs = Int(value) ?? 0 }
    guard options.runs > 0 else {
        print(usage)
        exit(2)
    }
    exit(await runReadyBench(options))
case "recovery":
    var options = RecoveryOptions()
    if let value = option("--messages") { options.messages = Int(value) ?? 0 }
    if let value = option("--sessions") { options.sessions = Int(value) ?? 0 }
    if let value = option("--size") { options.size = Int(value) ?? 0 }
    if let value = option("--durability") { options.durability = value }
    if let value = option("--stop") { options.stops = value.split(separator: ",").map(String.init) }
    guard options.messages > 0, options.sessions > 0, options.size > 0,
          options.durability == "process" || options.durability == "power",
          !options.stops.isEmpty, options.stops.allSatisfy({ $0 == "term" || $0 == "kill" }) else {
        print(usage)
        exit(2)
    }
    exit(await runRecoveryBench(options))
case "clients":
    var options = ClientsBenchOptions()
    if let value = option("--messages") { options.messages = Int(value) ?? 0 }
    if let value = option("--sizes") { options.sizes = integers(value) ?? [] }
    if let value = option("--libraries") {
        let libraries = value.split(separator: ",").map { ClientLibrary(rawValue: String($0)) }
        options.libraries = libraries.contains(nil) ? [] : libraries.compactMap { $0 }
    }
    if let value = option("--durability") { options.durability = value }
    if let value = option("--time-limit") { options.timeLimitSeconds = Int(value) ?? 0 }
    guard options.messages > 0, !options.sizes.isEmpty, options.sizes.allSatisfy({ $0 >= 8 }), !options.libraries.isEmpty,
          options.durability == "process" || options.durability == "power", options.timeLimitSeconds > 0 else {
        print(usage)
        exit(2)
    }
    exit(await runClientsBench(options))
case "soak":
    var options = SoakOptions()
    if let value = option("--minutes") { options.minutes = Int(value) ?? 0 }
    if let value = option("--rate") { options.rate = Int(value) ?? 0 }
    if let value = option("--clients") { options.clients = Int(value) ?? 0 }
    if let value = option("--session-messages") { options.messagesPerSession = Int(value) ?? 0 }
    if let value = option("--drop-every") { options.dropEverySeconds = Int(value) ?? 0 }
    if let value = option("--max-growth-mib") { options.maxGrowthMiB = Double(value) ?? -1 }
    if let value = option("--csv") { options.csvPath = value }
    guard options.minutes > 0, options.rate > 0, options.clients > 0, options.messagesPerSession > 0,
          options.dropEverySeconds > 0, options.maxGrowthMiB >= 0 else {
        print(usage)
        exit(2)
    }
    exit(await runSoakBench(options))
case "store":
    var options = StoreBenchOptions()
    if let value = option("--durability") { options.durabilities = value.split(separator: ",").compactMap { Durability(rawValue: String($0)) } }
    if let value = option("--sizes") { options.sizes = integers(value) ?? [] }
    if let value = option("--load-messages") { options.loadMessages = Int(value) ?? -1 }
    guard !options.durabilities.isEmpty, option("--durability").map({ $0.split(separator: ",").count == options.durabilities.count }) ?? true,
          !options.sizes.isEmpty, options.sizes.allSatisfy({ $0 > 0 }), options.loadMessages >= 0 else {
        print(usage)
        exit(2)
    }
    exit(await runStoreBench(options))
case "queue":
    var options = QueueOptions()
    if let value = option("--bytes") { options.bytes = byteCount(value) ?? 0 }
    if let value = option("--payload") { options.payload = byteCount(value) ?? 0 }
    if let value = option("--sessions") { options.sessions = Int(value) ?? 0 }
    if let value = option("--durability") { options.durability = value }
    if let value = option("--live-interval-ms") { options.liveIntervalMS = Int(value) ?? -1 }
    if let value = option("--live-messages") { options.liveMessages = Int(value) ?? 0 }
    if let value = option("--time-limit") { options.timeLimitSeconds = Int(value) ?? 0 }
    guard options.payload > 0, options.payload <= 1 << 20, options.sessions > 0,
          options.bytes >= options.payload * options.sessions, options.liveIntervalMS >= 0, options.liveMessages > 0,
          options.timeLimitSeconds > 0, options.durability == "process" || options.durability == "power" else {
        print(usage)
        exit(2)
    }
    exit(await runQueueBench(options))
default:
    print(usage)
    exit(2)
}
