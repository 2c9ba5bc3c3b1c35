// imagent-conformance: the Swift client's driver for the client conformance suite
// (clients/conformance/README.md). It runs one scenario on IPCClient and writes what
// happened as JSON lines; Tests/imagentCLITests/ConformanceTests.swift checks them.

#if canImport(Glibc)
import Glibc
#endif

let options: Options
do {
    options = try Options(Array(CommandLine.arguments.dropFirst()))
} catch {
    Output.note("\(error.reason)\n\(Options.usage)")
    exit(2)
}

let deadline = ContinuousClock.now + .milliseconds(options.timeoutMS)
do {
    switch options.scenario {
    case "sessions": try await SessionsScenario(options, deadline: deadline).run()
    case "open": try await runOpen(options)
    case "attach": try await runAttach(options)
    case "bench": try await runBench(options)
    default: try await StreamScenario(options, deadline: deadline).run()
    }
} catch {
    Output.note("\(error)")
    Output.line { json in
        json.field("scenario", options.scenario)
        json.field("error", "\(errorName(error)): \(error)")
    }
    exit(1)
}
exit(0)
