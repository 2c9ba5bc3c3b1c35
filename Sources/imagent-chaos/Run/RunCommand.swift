import ArgumentParser
import Foundation

/// `imagent-chaos run`: the suite itself.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the chaos suite: load through imagentd while the network and the processes fail.",
        discussion: """
            imagentd runs in one network namespace, imagent-refserver in another, joined by a veth pair \
            (10.232.0.0/16); imagent-loadgen processes in the root namespace stream echo messages through \
            the daemon's socket and check every one. Meanwhile: nftables random loss (30 %, 50 %) and a \
            partition, ip link flaps, a tc tbf thin pipe, 200–800 ms of delay with jitter through a userspace \
            proxy, refserver and daemon kill -9 and restart, loadgens killed and restarted and re-attaching. \
            At the end: a readable report on stderr and one JSON line on stdout; exit 0 only when nothing was \
            lost, duplicated or reordered and every loadgen passed. Without root (or where namespaces or \
            nftables cannot work) it says why and exits 0: skipped. Needs imagentd, imagent-refserver and \
            imagent-loadgen built beside it. With --upstream mqtt, mosquitto (persistence on) and \
            examples/mqtt-echo/echo.py run in the server's namespace instead of the reference server, the daemon \
            has protocol = "mqtt", and the server fault stops the broker with SIGTERM (mosquitto saves its \
            persistence file only then) rather than kill -9. With --broker ejabberd as well, ejabberd's mod_mqtt \
            is the broker (echo.py with a plain subscription, as ejabberd has no shared subscriptions); the short \
            mode is then about a minute, with a smaller load and shorter faults, and the server-side fault is the \
            echo backend's kill -9 and restart (ejabberd holds sessions in memory, so its own restart loses what \
            it had acknowledged).
            """)

    @Flag(help: "The CI size: every fault once, about 2–3 minutes (default).")
    var short = false

    @Flag(help: "The schedule repeated until --messages messages each way (default 1,000,000).")
    var long = false

    @Option(help: "Long mode: messages each way to run at least.")
    var messages: Int?

    @Option(help: "Seed of the delay proxy's draws.")
    var seed: UInt64 = 6

    @Option(name: .customLong("time-limit"), help: ArgumentHelp(
        "Hard limit for the whole run in seconds (default 600 short, 14400 long); then everything is killed and removed.",
        valueName: "seconds"))
    var timeLimit: Double?

    @Option(help: "What the daemon talks to: imlink (imagent-refserver) or mqtt (mosquitto and the paho echo backend).")
    var upstream: Upstream = .imlink

    @Option(help: "With --upstream mqtt: mosquitto, or ejabberd (mod_mqtt; a shorter short mode).")
    var broker: MQTTBroker = .mosquitto

    @Flag(help: "Keep the run directory (logs, stores, loadgen reports) instead of removing it.")
    var keep = false

    func validate() throws {
        guard !(short && long) else { throw ValidationError("--short or --long, not both") }
        if let messages, messages < 1 { throw ValidationError("--messages must be at least 1") }
        guard broker == .mosquitto || upstream == .mqtt else { throw ValidationError("--broker needs --upstream mqtt") }
        guard !(broker == .ejabberd && long) else { throw ValidationError("--broker ejabberd runs the short mode only") }
        if let timeLimit, timeLimit < 60 { throw ValidationError("--time-limit must be at least 60 s") }
    }

    func run() async throws {
        let plan = long ? ChaosPlan.long(messages: messages, seed: seed, timeLimitSeconds: timeLimit)
            : broker == .ejabberd ? ChaosPlan.shortEjabberd(seed: seed, timeLimitSeconds: timeLimit)
            : ChaosPlan.short(seed: seed, timeLimitSeconds: timeLimit)
        try await ScenarioRunner.run("imagent-chaos", timeLimitSeconds: { plan.timeLimitSeconds }) {
            try await ChaosRun(plan: plan, keepDirectory: keep, upstream: upstream, broker: broker).run()
        }
    }
}
