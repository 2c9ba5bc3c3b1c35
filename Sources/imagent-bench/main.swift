#if canImport(Glibc)
import Glibc
#endif

// Numbers to paste into BENCHMARKS.md.
//   imagent-bench codec [--seconds S]
//   imagent-bench daemon [--messages N] [--requests R] [--sizes 64,1024,65536]
//                        [--durability process,power] [--window W] [--sessions S] [--time-limit SECONDS]
//   imagent-bench compare [--messages N] [--requests R] [--sizes 64,1024,65536] [--sessions 1,100]
//                         [--durability power] [--window W] [--time-limit SECONDS]

let usage = """
    usage: imagent-bench codec [--seconds S]
           imagent-bench daemon [--messages N] [--requests R] [--sizes 64,1024,65536]
                                [--durability process,power] [--window W] [--sessions S] [--time-limit SECONDS]
           imagent-bench compare [--messages N] [--requests R] [--sizes 64,1024,65536] [--sessions 1,100]
                                 [--durability process|power] [--window W] [--time-limit SECONDS]
    """

let arguments = Array(CommandLine.arguments.dropFirst())

/// The value after `--name`, if given.
func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}

func integers(_ text: String) -> [Int]? {
    let values = text.split(separator: ",").map { Int($0) }
    return values.contains(nil) || values.isEmpty ? nil : values.compactMap { $0 }
}

switch arguments.first {
case "codec":
    runCodec(seconds: option("--seconds").flatMap(Double.init) ?? 2.5)
case "daemon":
    var options = DaemonBenchOptions()
    if let value = option("--messages") { options.messages = Int(value) ?? 0 }
    if let value = option("--requests") { options.requests = Int(value) ?? 0 }
    if let value = option("--window") { options.window = Int(value) ?? 0 }
    if let value = option("--sessions") { options.sessions = Int(value) ?? -1 }
    if let value = option("--time-limit") { options.timeLimitSeconds = Int(value) ?? 0 }
    if let value = option("--sizes") { options.sizes = integers(value) ?? [] }
    if let value = option("--durability") { options.durabilities = value.split(separator: ",").map(String.init) }
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
    guard options.messages > 0, options.requests > 0, options.window > 0, options.timeLimitSeconds > 0,
          !options.sizes.isEmpty, options.sizes.allSatisfy({ $0 > 0 }),
          !options.sessionCounts.isEmpty, options.sessionCounts.allSatisfy({ $0 > 0 }),
          options.durability == "process" || options.durability == "power"
    else {
        print(usage)
        exit(2)
    }
    exit(await runCompareBench(options))
default:
    print(usage)
    exit(2)
}
