/// The subcommands, their options and their help: `imagent-bench SUBCOMMAND --help`
/// prints the subcommand's help and runs nothing; an option a subcommand does
/// not know is an error rather than silently ignored.
struct BenchCommand {
    let name: String
    /// The options with their defaults, as the usage line shows them.
    let synopsis: String
    /// Options that take no value.
    var flags: [String] = []
    /// What it measures and how, for `--help`.
    let summary: String

    /// Every `--name` in the synopsis.
    var options: [String] {
        synopsis.split(whereSeparator: { $0 == " " || $0 == "[" || $0 == "]" || $0 == "\n" || $0 == "|" })
            .filter { $0.hasPrefix("--") }.map(String.init)
    }

    var usage: String { "usage: imagent-bench \(name) \(synopsis)" }

    var help: String { usage + "\n\n" + summary }

    /// Nil if every argument after the subcommand is one of its options (with a value unless a flag); else the problem.
    func problem(with arguments: [String]) -> String? {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if flags.contains(argument) {
                index += 1
            } else if options.contains(argument) {
                guard index + 1 < arguments.count else { return "\(argument) needs a value" }
                index += 2
            } else {
                return "unknown option \(argument) for `\(name)`"
            }
        }
        return nil
    }
}

let benchCommands: [BenchCommand] = [
    BenchCommand(name: "codec", synopsis: "[--seconds 2.5]", summary: """
        IMLink/1 codec speed in this process: CRC-32C MB/s per input size, DATA frames encoded and
        decoded per second per payload size (best of five runs of about half a second).
        """),
    BenchCommand(name: "daemon", synopsis: """
        [--messages 10000] [--requests 1000] [--sizes 64,1024,65536]
                                    [--durability process,power] [--window 256] [--sessions 10000] [--time-limit 900]
                                    [--samples-csv latency.csv] [--scaling] [--counts 10000,100000,1000000]
        """, flags: ["--scaling"], summary: """
        imagentd (the release build beside this binary, a child process) against direct TCP to an
        in-process reference server: one-way and round-trip msg/s, p50/p99 latency one at a time, and
        imagentd's CPU (user + sys from /proc/PID/stat) in µs per message over each run, and the bytes it
        wrote to disk per payload byte (write_bytes of /proc/PID/io; see `compare --help` for what the
        kernel counts); RSS idle, with --sessions echo sessions open, and after the runs.
        --scaling: instead, one-way msg/s, CPU µs/msg and disk B/payload B over each count of --counts
        messages in turn (default 10,000, 100,000 and 1,000,000; --sizes defaults to 1024 here), both
        paths, and the ratio of the last count's rate to the first's: whether throughput decays with
        run length.
        """),
    BenchCommand(name: "compare", synopsis: """
        [--messages 20000] [--requests 1000] [--sizes 64,1024,65536] [--sessions 1,100]
                                     [--durability process|power] [--window 256] [--time-limit 1800]
                                     [--rows imagentd,bridge,mqtt,direct-mqtt,direct-tcp] [--tunings shipped,tuned]
                                     [--mqtt-backend bench|python] [--probe-seconds 2] [--probe-batch N]
        """, summary: """
        One workload through imagentd, through two bridged mosquitto brokers (as shipped and tuned)
        and straight to the reference server: msg/s, latency, CPU µs per message of imagentd (of both
        brokers for mosquitto) per run, ratios. A path that fails prints a FAILED row; the run goes on
        (a run in which no message completes for 60 s fails: the far side lost the rest).
        --rows measures only those paths (default all): imagentd (IMLink), bridge (mosquitto bridge),
        mqtt (imagentd over MQTT), direct-mqtt (one MQTT client straight to the upstream broker; CPU is
        that broker's), direct-tcp. --tunings: which bridges run (default both); the first one's
        upstream broker is the one the mqtt and direct-mqtt rows use. --mqtt-backend: who answers the
        mqtt row: the bench (default; the same process answers the direct MQTT client) or the Python
        example examples/mqtt-echo/echo.py.
        Disk B/payload B: the bytes the path's processes wrote to disk over the run (write_bytes of
        /proc/PID/io: imagentd's; both brokers' for the bridge, the upstream one's for the direct MQTT
        client) over the payload bytes carried: one way counts each payload once, round trip twice
        (up, and its echo down). The kernel counts write_bytes when a page of the page cache is
        dirtied, not when writeback reaches the disk, so the end of a run holds its writes without
        waiting for writeback; a page dirtied twice before writeback counts once, a partial page
        counts whole, bytes removed before writeback still count (cancelled_write_bytes is not
        subtracted), and the filesystem's journal writes count for no process.
        At --durability power, after each imagentd row (IMLink and MQTT), a disk probe (see
        `diskprobe`) runs --probe-seconds in that imagentd's store directory at the row's payload
        size, in batches of the daemon's own payloads per store commit over the one-way run (from
        METRICS: messages accepted ÷ commits), or --probe-batch; 16 if METRICS gives none. It prints
        the probe's payload MB/s, payloads/s and fdatasyncs/s, and imagentd's one-way payload bytes/s
        ÷ the probe's.
        """),
    BenchCommand(name: "diskprobe", synopsis: "[--size 65536] [--batch 16] [--seconds 3] [--dir .]", summary: """
        What the disk under --dir takes through the store's group-commit pattern at durability power,
        without a store: per batch, --batch payloads of --size bytes (B, KiB, MiB suffixes) each one
        pwrite appended to a payload file, fdatasync, then one 4 KiB page to a second file and
        fdatasync (the payload segment, then the WAL commit of the batch's rows). Every 16 MiB the
        payload file is renamed and written over from its start (its directory fsynced with the next
        batch), as the store reuses a freed segment file; the second one is written round a 4 MiB
        ring, as SQLite reuses its WAL. Prints
        payload MB/s, payloads/s and fdatasyncs/s (two per batch). Its files, private, are removed.
        """),
    BenchCommand(name: "idle", synopsis: """
        [--seconds 120] [--settle 5] [--heartbeat-min 15] [--heartbeat-max 300]
                                  [--server-heartbeat-ms 300000]
        """, summary: "Wake-ups and CPU of an idle daemon, per thread."),
    BenchCommand(name: "connections", synopsis: "[--clients 1000] [--sessions 1000] [--rounds 3]",
                 summary: "RSS per idle client connection and per idle session."),
    BenchCommand(name: "ready", synopsis: "[--runs 10]", summary: "Spawn → READY=1 and spawn → link connected."),
    BenchCommand(name: "recovery", synopsis: """
        [--messages 100000] [--sessions 10] [--size 256] [--durability process|power]
                                      [--stop term,kill]
        """, summary: "A restart with a queued outbox: spawn → READY, → connected, → every message acknowledged."),
    BenchCommand(name: "queue", synopsis: """
        [--bytes 1GiB] [--payload 16384] [--sessions 4] [--durability process|power]
                                   [--live-interval-ms 10] [--live-messages 10000] [--time-limit 3600]
        """, summary: """
        A long outage: with the reference server down (its port refuses connections), queues --bytes of
        --payload messages on --sessions `sink` sessions through imagentd; reports imagentd's VmRSS,
        RssAnon and VmHWM while queued and after a restart on the full store (server still down);
        then starts the server and reports the time to drain (link up → the server has every message),
        the drain's msg/s and MB/s against a live one-way run of --live-messages messages of the same
        payload afterwards, the daemon's CPU µs per drained message, and the p50/p99/max latency of
        echo messages sent one at a time (every --live-interval-ms) on another session during the drain,
        and of their first hop alone (send → ACCEPTED: the daemon stored the SEND).
        Sizes take B, KiB, MiB, GiB suffixes. Reconnect backoff is capped at 1 s for the run; the link is
        held down (DISCONNECT, when run as an admin such as root) while the server takes over the
        refused port, then asked up (CONNECT).
        """),
    BenchCommand(name: "store", synopsis: "[--durability process,power] [--sizes 64,1024] [--load-messages 100000]", summary: """
        The store (AgentStore, SQLite WAL, group commit) in this process, no daemon: appends to one
        session one at a time (each waits for its commit), 64 in flight and all at once, per durability
        and payload size: messages/s, commits/s, messages per commit; then --load-messages queued 1 KiB
        messages in ten sessions, and the time to open the store and load them (0 skips it).
        """),
    BenchCommand(name: "clients", synopsis: """
        [--messages 10000] [--sizes 64,1024] [--libraries swift,c,python]
                                     [--durability process|power] [--time-limit 900]
        """, summary: """
        The client libraries against each other: imagentd (the release build beside this binary) and an
        in-process reference server, then each library's conformance driver in turn in its `bench`
        scenario (clients/conformance/README.md) at each size: --messages sends to `sink` one at a time
        (each returns once ACCEPTED), then a tenth as many (at least 100) sequential round trips on `echo`
        (send, receive the echo, ack). One table: library × size → one-way msg/s, round-trip p50 and p99.
        Drivers: Swift imagent-conformance (beside this binary), C clients/c/build/imagent-conformance-c
        (make -C clients/c), Python clients/python/tests/conformance_driver.py (/usr/bin/python3); the C
        and Python ones are run from the checkout this binary was built from. A driver that fails or is
        missing prints a FAILED row, the run goes on, and it exits 1.
        """),
    BenchCommand(name: "soak", synopsis: """
        [--minutes 60] [--rate 100] [--clients 4] [--session-messages 500]
                                  [--drop-every 300] [--max-growth-mib 8] [--csv soak.csv]
        """, summary: "A long run under load with link drops; fails if RSS grows more than --max-growth-mib."),
]

/// Every subcommand's usage line.
let usage = benchCommands.map(\.usage).joined(separator: "\n")
    + "\n\nimagent-bench SUBCOMMAND --help explains one; BENCHMARKS.md has the results. --markdown (any subcommand"
    + "\nbut daemon, soak and diskprobe): at the end, the table BENCHMARKS.md shows, under a line with the date, commit and command."
