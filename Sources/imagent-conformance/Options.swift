/// The driver's command line, as clients/conformance/README.md fixes it:
///
/// ```
/// DRIVER --socket PATH SCENARIO [--service NAME] [--messages N] [--size BYTES]
///        [--sessions K] [--session ID] [--timeout-ms MS]
/// ```
struct Options {
    var socket = ""
    var scenario = ""
    var service = "echo"
    var messages = 100
    var size = 64
    var sessions = 1
    var session: UInt64 = 0
    var timeoutMS = 120_000

    static let scenarios = ["echo", "large", "queue-full", "server-down", "sessions", "stream", "open", "attach", "bench"]
    static let usage = "usage: imagent-conformance --socket PATH SCENARIO [--service NAME] [--messages N] [--size BYTES] "
        + "[--sessions K] [--session ID] [--timeout-ms MS]\n  SCENARIO: \(scenarios.joined(separator: ", "))"

    struct Invalid: Error { var reason: String }

    init(_ arguments: [String]) throws(Invalid) {
        var rest = arguments[...]
        while let word = rest.popFirst() {
            guard word.hasPrefix("--") else {
                guard scenario.isEmpty else { throw Invalid(reason: "a second scenario: \(word)") }
                scenario = word
                continue
            }
            guard let value = rest.popFirst() else { throw Invalid(reason: "\(word) needs a value") }
            func number<N: FixedWidthInteger>(_ minimum: N) throws(Invalid) -> N {
                guard let parsed = N(value), parsed >= minimum else { throw Invalid(reason: "\(word) \(value): not a number >= \(minimum)") }
                return parsed
            }
            switch word {
            case "--socket": socket = value
            case "--service": service = value
            case "--messages": messages = try number(1)
            case "--size": size = try number(8)
            case "--sessions": sessions = try number(1)
            case "--session": session = try number(1)
            case "--timeout-ms": timeoutMS = try number(1)
            default: throw Invalid(reason: "unknown option \(word)")
            }
        }
        guard !socket.isEmpty else { throw Invalid(reason: "--socket is required") }
        guard Self.scenarios.contains(scenario) else { throw Invalid(reason: "unknown or missing scenario '\(scenario)'") }
        guard scenario != "attach" || session != 0 else { throw Invalid(reason: "attach needs --session ID") }
    }
}
